/* Independent watchdog (IWDG): the start sequence of RM0090 21.3.2 / 21.4 (the same IWDG on
 * every family here): KR = 0xCCCC starts the counter (and the LSI), KR = 0x5555 unlocks PR and
 * RLR, then PR and RLR, wait until SR's update flags (PVU, RVU, WVU) clear, KR = 0xAAAA reloads.
 * The emulator build has no watchdog (board_init() does not run there; QEMU's F405 has no IWDG
 * model), so both functions are empty in it, as when WATCHDOG_MS is 0. */
#include "watchdog.h"
#include "config.h"

#if WATCHDOG_MS && !EMULATOR
#define IWDG(off) (*(volatile uint32_t *)(IWDG_BASE + (off)))
#define IWDG_KR 0x00u
#define IWDG_PR 0x04u
#define IWDG_RLR 0x08u
#define IWDG_SR 0x0Cu
#define IWDG_SR_UPDATING 0x7u /* PVU | RVU | WVU (WVU reads 0 where there is no window) */

void watchdog_start(void) {
    IWDG(IWDG_KR) = 0xCCCCu;
    IWDG(IWDG_KR) = 0x5555u;
    IWDG(IWDG_PR) = IWDG_PR_VALUE;
    IWDG(IWDG_RLR) = IWDG_RLR_VALUE;
    for (uint32_t n = 0; (IWDG(IWDG_SR) & IWDG_SR_UPDATING) != 0u && n < IWDG_SR_SPINS; n++) {
    }
    IWDG(IWDG_KR) = 0xAAAAu;
}

void watchdog_kick(void) { IWDG(IWDG_KR) = 0xAAAAu; }
#else
void watchdog_start(void) {}
void watchdog_kick(void) {}
#endif
