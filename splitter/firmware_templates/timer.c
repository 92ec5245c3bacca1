/* SysTick time base and per-sub-model cycle measurement (docs/protocol.md, "Timing"). */
#include "timer.h"
#include "config.h"

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
#define SYST_RELOAD 0x00FFFFFFu

static volatile uint32_t g_wraps;
static uint64_t g_base;
static uint64_t g_start;
static int g_use_dwt;
static uint32_t g_dwt_start;

void SysTick_Handler(void) { g_wraps++; }

void timer_init(void) {
    SYST_RVR = SYST_RELOAD;
    SYST_CVR = 0;
    SYST_CSR = 7u; /* processor clock, interrupt on wrap, enable */
#if HAS_DWT
    DEMCR |= 1u << 24; /* TRCENA */
    DWT_CYCCNT = 0;
    DWT_CTRL |= 1u;
    uint32_t a = DWT_CYCCNT;
    for (volatile int i = 0; i < 8; i++) {
    }
    g_use_dwt = DWT_CYCCNT != a; /* QEMU does not model CYCCNT: it stays 0 */
#endif
}

uint64_t timer_now(void) {
    uint32_t w, v;
    do {
        w = g_wraps;
        v = SYST_CVR;
    } while (w != g_wraps);
    return g_base + (uint64_t)w * (SYST_RELOAD + 1u) + (SYST_RELOAD - v);
}

void cycles_start(void) {
    if (g_use_dwt) {
        g_dwt_start = DWT_CYCCNT;
        return;
    }
    uint64_t now = timer_now();
    SYST_CSR = 0;
    SYST_CVR = 0;
    g_wraps = 0;
    g_base = now;
    SYST_CSR = 7u;
    while (SYST_CVR == 0) {
    }
    g_start = timer_now();
}

uint64_t cycles_stop(void) {
    if (g_use_dwt) return (uint32_t)(DWT_CYCCNT - g_dwt_start);
    return timer_now() - g_start;
}
