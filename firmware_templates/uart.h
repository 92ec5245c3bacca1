/* Interrupt-driven UART driver for both STM32 USART register layouts. */
#ifndef SPLITTER_UART_H
#define SPLITTER_UART_H
#include <stdint.h>

void uart_init(void);
/* Next received byte of link `l`, sleeping (wfi) until one arrives; -1 once `deadline` passed. */
int uart_getc(int l, uint64_t deadline);
/* Index of a link with received bytes waiting, sleeping until there is one. */
int uart_wait_any(void);
void uart_write(int l, const uint8_t *data, uint32_t n);
void uart_irq(int l);
#endif
