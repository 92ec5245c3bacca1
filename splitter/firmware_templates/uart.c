/* UART driver: F1/F2/F4 SR/DR layout or F0/F3/F7/G0/H7/L4 ISR/RDR/TDR layout (config.h); the
 * link.h transport of the firmware. Reception is interrupt driven into one ring buffer per link; the CPU sleeps with wfi while
 * it waits, so an idle emulated board costs ~0 % host CPU. */
#include "uart.h"
#include "config.h"
#include "timer.h"
#include "watchdog.h"

#define REG(base, off) (*(volatile uint32_t *)((base) + (off)))
#if USART_LAYOUT_SR_DR
#define R_SR 0x00u
#define R_RX 0x04u
#define R_TX 0x04u
#define R_BRR 0x08u
#define R_CR1 0x0Cu
#define CR1_UE (1u << 13)
#else
#define R_CR1 0x00u
#define R_BRR 0x0Cu
#define R_SR 0x1Cu
#define R_ICR 0x20u
#define R_RX 0x24u
#define R_TX 0x28u
#define CR1_UE (1u << 0)
#endif
#define CR1_RE (1u << 2)
#define CR1_TE (1u << 3)
#define CR1_RXNEIE (1u << 5)
#define SR_ORE (1u << 3)
#define SR_RXNE (1u << 5)
#define SR_TXE (1u << 7)
#define NVIC_ISER ((volatile uint32_t *)0xE000E100u)
#define RING 2048u

static volatile uint8_t ring[N_LINKS][RING];
static volatile uint32_t head[N_LINKS];
static volatile uint32_t tail[N_LINKS];

void link_init(void) {
    for (int l = 0; l < N_LINKS; l++) {
        uint32_t b = link_base[l];
        REG(b, R_CR1) = 0;
        REG(b, R_BRR) = link_brr[l];
        REG(b, R_CR1) = link_cr1[l] | CR1_RE | CR1_TE | CR1_RXNEIE; /* OVER8 only while UE = 0 */
        REG(b, R_CR1) |= CR1_UE;
        NVIC_ISER[link_irq[l] >> 5] = 1u << (link_irq[l] & 31u);
    }
}

void uart_irq(int l) {
    uint32_t b = link_base[l];
    uint32_t sr = REG(b, R_SR);
    while (sr & SR_RXNE) {
        uint8_t c = (uint8_t)REG(b, R_RX);
        uint32_t h = head[l];
        if (h - tail[l] < RING) {
            ring[l][h & (RING - 1u)] = c;
            head[l] = h + 1u;
        }
        sr = REG(b, R_SR);
    }
#if !USART_LAYOUT_SR_DR
    if (sr & SR_ORE) REG(b, R_ICR) = SR_ORE;
#endif
}

static inline void irq_off(void) { __asm volatile("cpsid i" ::: "memory"); }
static inline void irq_on(void) { __asm volatile("cpsie i" ::: "memory"); }

int link_read_byte(int l, uint64_t deadline) {
    for (;;) {
        watchdog_kick(); /* waiting is not hanging: SysTick's wrap wakes the wfi below */
        irq_off();
        if (head[l] != tail[l]) {
            uint8_t c = ring[l][tail[l] & (RING - 1u)];
            tail[l]++;
            irq_on();
            return c;
        }
        if (timer_now() >= deadline) {
            irq_on();
            return -1;
        }
        __asm volatile("wfi" ::: "memory"); /* a pending IRQ wakes us even while masked */
        irq_on();
    }
}

int link_wait_any(void) {
    for (;;) {
        watchdog_kick(); /* idle, waiting for the host or a neighbour */
        irq_off();
        for (int l = 0; l < N_LINKS; l++) {
            if (head[l] != tail[l]) {
                irq_on();
                return l;
            }
        }
        __asm volatile("wfi" ::: "memory");
        irq_on();
    }
}

void link_write(int l, const uint8_t *data, uint32_t n) {
    uint32_t b = link_base[l];
    for (uint32_t i = 0; i < n; i++) {
        while (!(REG(b, R_SR) & SR_TXE)) {
        }
        REG(b, R_TX) = data[i];
    }
}

int link_rx_ready(int l) { return head[l] != tail[l]; }

void link_idle(uint32_t links) {
    irq_off();
    for (int l = 0; l < N_LINKS; l++) {
        if (((links >> l) & 1u) && head[l] != tail[l]) {
            irq_on();
            return;
        }
    }
    __asm volatile("wfi" ::: "memory");
    irq_on();
}
