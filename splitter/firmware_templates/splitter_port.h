/* splitter port interface (library mode): the three things the runtime needs from a board, which
 * a product implements with its HAL (HAL_UART_Transmit / HAL_UART_Receive_IT + HAL_GetTick) or
 * its RTOS drivers. Static file; docs/product.md has a HAL example.
 *
 * Links are numbered as in the plan (WIRING.md, config.h SPLITTER_LINK_*): link k is the UART
 * to the neighbour named in config.h. A link facing the host (the console) is never used by
 * the runtime in standalone and library mode.
 *
 * port.c turns these into the runtime's byte links: a receive ring of PORT_RING bytes per
 * link filled by splitter_port_received(), and ticks of SPLITTER_TICKS_PER_MS per
 * millisecond for the protocol's timeouts. */
#ifndef SPLITTER_PORT_H
#define SPLITTER_PORT_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Implemented by the product ------------------------------------------------------------- */

/* Send `n` bytes on link `link`; may return once they are queued (DMA, interrupt) as long as
 * the bytes go out in order. Called from splitter_poll's task. */
void splitter_port_write(int link, const uint8_t *data, uint32_t n);
/* Milliseconds since some fixed point (HAL_GetTick, xTaskGetTickCount * portTICK_PERIOD_MS);
 * wraps after 49 days, which the runtime tolerates. */
uint32_t splitter_port_millis(void);

/* Optional (a weak default does nothing): called while the runtime waits for a byte or an
 * acknowledgement, at most one byte timeout at a time; an RTOS port yields here (osDelay(1),
 * taskYIELD), a bare-metal one may __WFI(). */
void splitter_port_wait(void);

/* Implemented by the runtime, called by the product ------------------------------------- */

/* Hand bytes received on link `link` to the runtime; callable from the UART interrupt or a
 * DMA half/full-transfer callback. Bytes beyond a full ring are dropped (the protocol's
 * CRC and retransmission recover). */
void splitter_port_received(int link, const uint8_t *data, uint32_t n);

#ifdef __cplusplus
}
#endif
#endif
