/* splitter link protocol, device side: CRC-32, framing, stop-and-wait ARQ (docs/protocol.md). */
#include "proto.h"
#include "link.h"
#include "timer.h"

/* CRC-32/IEEE (reflected 0xEDB88320, init/xorout 0xFFFFFFFF), nibble table: 64 bytes of flash. */
static const uint32_t crc_nibble[16] = {
    0x00000000u, 0x1DB71064u, 0x3B6E20C8u, 0x26D930ACu, 0x76DC4190u, 0x6B6B51F4u,
    0x4DB26158u, 0x5005713Cu, 0xEDB88320u, 0xF00F9344u, 0xD6D6A3E8u, 0xCB61B38Cu,
    0x9B64C2B0u, 0x86D3D2D4u, 0xA00AE278u, 0xBDBDF21Cu};

uint32_t crc32_update(uint32_t crc, const uint8_t *data, size_t n) {
    for (size_t i = 0; i < n; i++) {
        crc ^= data[i];
        crc = (crc >> 4) ^ crc_nibble[crc & 15u];
        crc = (crc >> 4) ^ crc_nibble[crc & 15u];
    }
    return crc;
}

uint32_t crc32(const uint8_t *data, size_t n) {
    return crc32_update(0xFFFFFFFFu, data, n) ^ 0xFFFFFFFFu;
}

static uint8_t tx_seq[N_LINKS];
static int16_t rx_seq[N_LINKS];

void proto_reset_rx(int l) { rx_seq[l] = -1; }

#if defined(RESULT_ON_HEAD) && RESULT_ON_HEAD
#if APP_MODE == 2
#include "splitter_port.h"
#endif
/* --result-on head, on the head: while it waits on another link (an ACK of the next board, a
 * frame's next byte) it keeps answering the return link, so the tail, sending a result, never
 * waits for a head that is itself waiting for the next board (runtime.c proto_side). */
static int read_byte(int l, uint64_t deadline) {
    while (l != RESULT_LINK && !link_rx_ready(l)) {
        if (timer_now() >= deadline) return -1;
        if (link_rx_ready(RESULT_LINK)) {
            proto_side();
        } else {
#if APP_MODE == 2
            splitter_port_wait(); /* library: the product's port yields */
#else
            link_idle((1u << l) | (1u << RESULT_LINK)); /* until a byte or a tick */
#endif
        }
    }
    return link_read_byte(l, deadline);
}
#else
static int read_byte(int l, uint64_t deadline) {
    return link_read_byte(l, deadline);
}
#endif

/* Read n bytes, each within BYTE_TIMEOUT_TICKS of the previous one: a frame whose length field
 * was corrupted upwards is abandoned as soon as the sender falls silent (it waits for an ACK),
 * so the receiver is resynchronised before the retransmission arrives. */
static int read_n(int l, uint8_t *dst, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        int c = read_byte(l, timer_now() + BYTE_TIMEOUT_TICKS);
        if (c < 0) return 0;
        dst[i] = (uint8_t)c;
    }
    return 1;
}

int proto_recv(int l, frame_t *f, uint64_t timeout) {
    uint64_t deadline = timer_now() + timeout;
    int c = read_byte(l, deadline);
    for (;;) {
        if (c < 0) return RX_TIMEOUT;
        if (c != PROTO_SYNC0) { c = read_byte(l, deadline); continue; }
        c = read_byte(l, timer_now() + BYTE_TIMEOUT_TICKS);
        if (c == PROTO_SYNC1) break;
    }
    uint8_t hdr[4];
    if (!read_n(l, hdr, 4)) return RX_TIMEOUT;
    f->type = hdr[0];
    f->seq = hdr[1];
    f->len = (uint16_t)(hdr[2] | (hdr[3] << 8));
    if (f->len > PROTO_MAX_PAYLOAD) return RX_TIMEOUT; /* noise: resync on the next call */
    uint8_t tail[4];
    if (!read_n(l, f->payload, f->len)) return RX_TIMEOUT;
    if (!read_n(l, tail, 4)) return RX_TIMEOUT;
    uint32_t want = (uint32_t)tail[0] | ((uint32_t)tail[1] << 8) | ((uint32_t)tail[2] << 16) |
                    ((uint32_t)tail[3] << 24);
    uint32_t crc = crc32_update(0xFFFFFFFFu, hdr, 4);
    crc = crc32_update(crc, f->payload, f->len) ^ 0xFFFFFFFFu;
    return crc == want ? RX_OK : RX_BAD;
}

void proto_write(int l, uint8_t type, uint8_t seq, const uint8_t *head, uint16_t nhead,
                 const uint8_t *body, uint16_t nbody) {
    uint16_t len = (uint16_t)(nhead + nbody);
    uint8_t hdr[6] = {PROTO_SYNC0, PROTO_SYNC1, type, seq, (uint8_t)(len & 0xFF),
                      (uint8_t)(len >> 8)};
    uint32_t crc = crc32_update(0xFFFFFFFFu, hdr + 2, 4);
    crc = crc32_update(crc, head, nhead);
    crc = crc32_update(crc, body, nbody) ^ 0xFFFFFFFFu;
    uint8_t tail[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16),
                       (uint8_t)(crc >> 24)};
    link_write(l, hdr, 6);
    link_write(l, head, nhead);
    link_write(l, body, nbody);
    link_write(l, tail, 4);
}

void proto_send_pong(int l) {
    uint8_t p[4 + 8 + 2 + DEVICE_NAME_LEN];
    p[0] = PROTO_VERSION;
    p[1] = DEVICE_INDEX;
    p[2] = N_SUBMODELS;
    p[3] = DEVICE_NAME_LEN;
    for (int i = 0; i < 8; i++) p[4 + i] = plan_hash[i];
    p[12] = (uint8_t)FIRMWARE_VERSION;
    p[13] = (uint8_t)(FIRMWARE_VERSION >> 8);
    for (int i = 0; i < DEVICE_NAME_LEN; i++) p[14 + i] = (uint8_t)device_name[i];
    proto_write(l, FT_PONG, 0, p, sizeof p, 0, 0);
}

int proto_accept(int l, const frame_t *f) {
    proto_write(l, FT_ACK, f->seq, 0, 0, 0, 0);
    if (rx_seq[l] == (int16_t)f->seq) return 0;
    rx_seq[l] = (int16_t)f->seq;
    return 1;
}

stash_t proto_stash;
volatile int proto_stashed;

void proto_answer_stray(int l, const frame_t *f) {
    if (f->type == FT_PING) { /* the peer (re)started: its sequence numbers start again */
        proto_reset_rx(l);
        proto_send_pong(l);
    } else if (f->type == FT_ERROR && rx_seq[l] != (int16_t)f->seq && !proto_stashed) {
        proto_write(l, FT_ACK, f->seq, 0, 0, 0, 0); /* keep it: the error must reach the host */
        rx_seq[l] = (int16_t)f->seq;
        proto_stash.len = f->len < PROTO_STASH_MAX ? f->len : (uint16_t)PROTO_STASH_MAX;
        for (uint16_t i = 0; i < proto_stash.len; i++) proto_stash.payload[i] = f->payload[i];
        proto_stashed = 1;
    } else if (f->type != FT_ACK && f->type != FT_NACK && f->type != FT_PONG &&
               rx_seq[l] == (int16_t)f->seq) {
        proto_write(l, FT_ACK, f->seq, 0, 0, 0, 0); /* our ACK was lost: repeat it */
    }
    /* a new data frame is left unacknowledged: its sender retransmits it later */
}

int proto_send(int l, uint8_t type, const uint8_t *head, uint16_t nhead, const uint8_t *body,
               uint16_t nbody, int tries) {
    static frame_t reply;
    uint8_t seq = ++tx_seq[l];
    for (int attempt = 1; attempt <= tries; attempt++) {
        proto_write(l, type, seq, head, nhead, body, nbody);
        uint64_t deadline = timer_now() + ACK_TIMEOUT_TICKS;
        for (;;) {
            uint64_t now = timer_now();
            if (now >= deadline) break;
            int r = proto_recv(l, &reply, deadline - now);
            if (r == RX_TIMEOUT) break;
            if (r == RX_BAD) continue;
            if (reply.type == FT_ACK && reply.seq == seq) return attempt;
            if (reply.type == FT_NACK && reply.seq == seq) break;
            proto_answer_stray(l, &reply);
#if !APP_MODE
            if (proto_stashed && type != FT_ERROR) return -2; /* the peer gave up: stop */
#endif
            /* standalone / library: an error report travelling to the head does not end this
             * transfer (it would cost the next inference too); splitter_poll passes it on */
        }
    }
    return -1;
}
