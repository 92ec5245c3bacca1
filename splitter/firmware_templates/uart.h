/* Interrupt-driven UART driver for both STM32 USART register layouts; implements link.h. */
#ifndef SPLITTER_UART_H
#define SPLITTER_UART_H
#include "link.h"

/* Receive interrupt of link `l` (called from the USART IRQ handlers of startup.c). */
void uart_irq(int l);
#endif
