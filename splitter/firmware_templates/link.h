/* splitter firmware transport interface: byte links to the host and the neighbouring boards.
 * Static file. uart.c implements it over the part's USARTs; another transport (SPI, USB CDC,
 * a host-side fake for tests/test_runtime_host.py) is one new C file implementing these
 * functions; port.c implements them over the product's port (splitter_port.h) in library mode. proto.c and runtime.c call nothing else. Links are numbered 0..N_LINKS-1; link 0
 * leads towards the host (docs/protocol.md, Topology). */
#ifndef SPLITTER_LINK_H
#define SPLITTER_LINK_H
#include <stdint.h>

/* Bring up every link (clocks and pins are board_init's job); reception starts here. */
void link_init(void);
/* Next received byte of link `l` (0..255), waiting until timer_now() >= `deadline`; -1 then. */
int link_read_byte(int l, uint64_t deadline);
/* Index of a link with received bytes waiting, sleeping until there is one. */
int link_wait_any(void);
/* Send `n` bytes on link `l`; returns when they are handed to the hardware. */
void link_write(int l, const uint8_t *data, uint32_t n);
/* Standalone and library mode (splitter.h): 1 when link `l` has received bytes waiting. */
int link_rx_ready(int l);
/* Standalone mode: sleep until an interrupt (a received byte, the time base) unless a link of
 * the mask `links` (bit k = link k) has bytes waiting. */
void link_idle(uint32_t links);
#endif
