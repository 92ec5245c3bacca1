/* Library mode: the runtime's byte links (link.h) and time base (timer.h) over the product's port
 * (splitter_port.h: write bytes, bytes-received hook, millisecond clock). Static file.
 *
 * Reception: one ring of PORT_RING bytes per link, filled by splitter_port_received (from an
 * interrupt or a DMA callback: one producer) and drained by the runtime (one consumer); 32-bit
 * indices are read and written whole, so no lock is needed on a Cortex-M or a POSIX host.
 * Time: ticks = milliseconds * SPLITTER_TICKS_PER_MS, so the protocol's timeouts (config.h,
 * computed from the core clock) keep their meaning; the 32-bit millisecond count is extended to
 * 64 bits on each read. Sub-model cycles come from DWT CYCCNT where the core has it, else from
 * the millisecond clock. */
#include "config.h"
#include "link.h"
#include "splitter_port.h"
#include "timer.h"

#define PORT_RING 2048u
#define SPLITTER_TICKS_PER_MS ((uint64_t)(CORE_CLOCK_HZ / 1000u))

static volatile uint8_t ring[N_LINKS][PORT_RING];
static volatile uint32_t head[N_LINKS];
static volatile uint32_t tail[N_LINKS];

void splitter_port_received(int link, const uint8_t *data, uint32_t n) {
    if (link < 0 || link >= N_LINKS) return;
    uint32_t h = head[link];
    for (uint32_t i = 0; i < n && h - tail[link] < PORT_RING; i++) {
        ring[link][h & (PORT_RING - 1u)] = data[i];
        h++;
    }
    head[link] = h;
}

__attribute__((weak)) void splitter_port_wait(void) {}

void link_init(void) {
    for (int l = 0; l < N_LINKS; l++) tail[l] = head[l];
}

int link_rx_ready(int l) { return head[l] != tail[l]; }

int link_read_byte(int l, uint64_t deadline) {
    for (;;) {
        if (head[l] != tail[l]) {
            uint8_t c = ring[l][tail[l] & (PORT_RING - 1u)];
            tail[l]++;
            return c;
        }
        if (timer_now() >= deadline) return -1;
        splitter_port_wait();
    }
}

int link_wait_any(void) {
    for (;;) {
        for (int l = 0; l < N_LINKS; l++) {
            if (head[l] != tail[l]) return l;
        }
        splitter_port_wait();
    }
}

void link_write(int l, const uint8_t *data, uint32_t n) { splitter_port_write(l, data, n); }

/* ---- time ---------------------------------------------------------------------------- */
static uint32_t last_ms;
static uint64_t high_ms;

void timer_init(void) {
    last_ms = splitter_port_millis();
    high_ms = 0;
}

uint64_t timer_now(void) {
    uint32_t ms = splitter_port_millis();
    high_ms += (uint32_t)(ms - last_ms); /* unsigned difference: wraps of the 32-bit count */
    last_ms = ms;
    return high_ms * SPLITTER_TICKS_PER_MS;
}

#if HAS_DWT && defined(__arm__)
#define DEMCR (*(volatile uint32_t *)0xE000EDFCu)
#define DWT_CTRL (*(volatile uint32_t *)0xE0001000u)
#define DWT_CYCCNT (*(volatile uint32_t *)0xE0001004u)
static uint32_t dwt_start;

void cycles_start(void) {
    DEMCR |= 1u << 24; /* TRCENA */
    DWT_CTRL |= 1u;
    dwt_start = DWT_CYCCNT;
}

uint64_t cycles_stop(void) { return (uint32_t)(DWT_CYCCNT - dwt_start); }
#else
static uint64_t t_start;

void cycles_start(void) { t_start = timer_now(); }

uint64_t cycles_stop(void) { return timer_now() - t_start; }
#endif
