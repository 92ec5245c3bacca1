/* LO-SC segment loader: brings one segment's weights into RAM before the segment runs
 * (segments/firmware.py generates the segments; docs/protocol.md, "Segment weights").
 * Static file, copied into segmented firmware projects only.
 *
 * SEG_EXTFLASH (model.h) on the part: the weights file is linked into section .extflash, the
 * board's memory-mapped external flash (QSPI / OCTOSPI), and a segment is copied from there.
 * Otherwise (and always in the emulator, whose F405 has no external flash) the host streams
 * it: LOAD (segment, bytes) on link 0, then WEIGHTS chunks, acknowledged one by one. */
#include "config.h"
#include "model.h"
#include "proto.h"
#include "timer.h"

#define FT_LOAD 0x09u
#define FT_WEIGHTS 0x0Au
/* The host answers a LOAD at once; 5 s without a WEIGHTS frame means it is gone. */
#define SEG_WAIT_TICKS ((uint64_t)CORE_CLOCK_HZ * 5u)

static uint64_t seg_cycles;

/* Cycles spent loading since the last call: a segmented project's runtime.c takes them off
 * the sub-model's TIMING cycles (compute only; segments/firmware.py RUNTIME_PATCH); the host
 * times the loads itself (splitter.segments.server). */
uint64_t runtime_load_cycles(void) {
    uint64_t c = seg_cycles;
    seg_cycles = 0;
    return c;
}

void seg_move(unsigned char *a8, uint32_t src, uint32_t n) {
    uint32_t i = 0;
    if ((src & 3u) == 0) {
        uint32_t *d = (uint32_t *)(void *)a8;
        const uint32_t *s = (const uint32_t *)(const void *)(a8 + src);
        for (; i + 4u <= n; i += 4u) d[i / 4u] = s[i / 4u];
    }
    for (; i < n; i++) a8[i] = a8[src + i];
}

#if SEG_EXTFLASH && !EMULATOR
/* The weights file, linked at the external flash region's address (link_part.ld). */
__asm__(".section .extflash,\"a\"\n"
        ".balign 4\n"
        ".global seg_blob\n"
        "seg_blob:\n"
        ".incbin \"weights.bin\"\n"
        ".previous\n");
extern const uint8_t seg_blob[];

static int fetch(uint32_t k, uint8_t *dst, uint32_t blob_offset, uint32_t n) {
    (void)k;
    const uint8_t *src = seg_blob + blob_offset;
    for (uint32_t i = 0; i < n; i++) dst[i] = src[i];
    return 0;
}
#else
static frame_t seg_rx;

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* One received frame of the transfer: 1 data added, 0 nothing to do, -1 give up. */
static int on_weights(uint32_t k, uint8_t *dst, uint32_t n, uint32_t *got) {
    frame_t *f = &seg_rx;
    if (f->type == FT_PING) {
        proto_reset_rx(0);
        proto_send_pong(0);
        return 0;
    }
    if (f->type == FT_ACK || f->type == FT_NACK || f->type == FT_PONG) return 0;
    if (!proto_accept(0, f)) return 0; /* a retransmission after a lost ACK */
    if (f->type != FT_WEIGHTS || f->len < PROTO_CHUNK_HEADER) return -1;
    const uint8_t *p = f->payload;
    uint32_t total = get32(p + 4), off = get32(p + 8), len = f->len - PROTO_CHUNK_HEADER;
    if (p[0] != (uint8_t)k || total != n || off + len > n || off > *got) return -1;
    for (uint32_t i = 0; i < len; i++) dst[off + i] = p[PROTO_CHUNK_HEADER + i];
    if (off + len > *got) *got = off + len;
    return 1;
}

static int fetch(uint32_t k, uint8_t *dst, uint32_t blob_offset, uint32_t n) {
    uint8_t head[PROTO_CHUNK_HEADER];
    (void)blob_offset;
    head[0] = (uint8_t)k; head[1] = 0; head[2] = (uint8_t)PLAN_TAG; head[3] = (uint8_t)(PLAN_TAG >> 8);
    put32(head + 4, n);
    put32(head + 8, 0);
    if (proto_send(0, FT_LOAD, head, PROTO_CHUNK_HEADER, 0, 0, SEND_RETRIES) < 0) return -1;
    uint32_t got = 0;
    while (got < n) {
        int r = proto_recv(0, &seg_rx, SEG_WAIT_TICKS);
        if (r == RX_TIMEOUT) return -1;
        if (r == RX_BAD) {
            proto_write(0, FT_NACK, seg_rx.seq, 0, 0, 0, 0);
            continue;
        }
        if (on_weights(k, dst, n, &got) < 0) return -1;
    }
    return 0;
}
#endif

int seg_load(uint32_t k, uint8_t *dst, uint32_t blob_offset, uint32_t n) {
    uint64_t t0 = timer_now();
    int r = n ? fetch(k, dst, blob_offset, n) : 0;
    seg_cycles += timer_now() - t0;
    return r;
}
