/* timer.h on the host: ticks are microseconds of CLOCK_MONOTONIC; a measurement returns the
 * cycle count the sub-model stand-in chose (fake_cycles), so TIMING records are exact. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "timer.h"

uint64_t fake_cycles;

void timer_init(void) {}

uint64_t timer_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void cycles_start(void) { fake_cycles = 0; }

uint64_t cycles_stop(void) { return fake_cycles; }
