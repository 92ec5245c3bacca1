/* splitter: what clock_init() (startup.c) reports about the real part's clock start-up.
 *
 * Every wait of the clock start-up is bounded (startup.c: clock_wait() polls at most a count
 * computed from the timeout and the clock it runs at, splitter/hardware/clocks.py WAITS).
 * splitter_clock_status is 0 when the planned clock tree runs, else the OR of these flags.
 * The emulator build (EMULATOR=1) has no clock_init(): the status stays 0. */
#ifndef SPLITTER_CLOCK_STATUS_H
#define SPLITTER_CLOCK_STATUS_H
#include <stdint.h>

/* The HSE did not become ready within 100 ms: it is switched off and the same clock is planned
 * from the internal oscillator (HSI / HSI16) instead; the link baud divisors still hold. */
#define SPLITTER_CLOCK_HSE_FALLBACK 1u
/* The PLL did not lock within 2 ms: clock_init() stopped before the switch, the part runs on
 * its oscillator (below the planned clock: baud divisors and link timeouts are off). */
#define SPLITTER_CLOCK_PLL_TIMEOUT 2u
/* Voltage scaling, over-drive / boost or the supply did not report ready within 1 s: stopped. */
#define SPLITTER_CLOCK_POWER_TIMEOUT 4u
/* The system clock switch (SWS) did not follow SW within 100 ms: stopped. */
#define SPLITTER_CLOCK_SWITCH_TIMEOUT 8u
/* The flash wait states did not read back within 2 ms: stopped before raising the clock. */
#define SPLITTER_CLOCK_FLASH_TIMEOUT 16u
/* The internal oscillator the PLL runs from (HSI16) did not start within 2 ms: stopped. */
#define SPLITTER_CLOCK_OSC_TIMEOUT 32u
/* With SPLITTER_CLOCK_HSE_FALLBACK: no PLL setting reaches the planned clock from the internal
 * oscillator, the part runs at the oscillator's own frequency (baud divisors are off). */
#define SPLITTER_CLOCK_SLOW 64u

extern volatile uint32_t splitter_clock_status;

#endif
