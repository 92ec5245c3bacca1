/* Time base and cycle counting: SysTick (everywhere) and DWT CYCCNT (M3/M4/M7 when it counts). */
#ifndef SPLITTER_TIMER_H
#define SPLITTER_TIMER_H
#include <stdint.h>

void timer_init(void);
/* Ticks of the core clock since boot (SysTick, 24-bit counter extended by its wrap interrupt). */
uint64_t timer_now(void);
/* Start a cycle measurement: restarts SysTick so its wraps land at the same point every run. */
void cycles_start(void);
/* Cycles since cycles_start(). */
uint64_t cycles_stop(void);
#endif
