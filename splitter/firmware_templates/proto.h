/* splitter link protocol, device side (see docs/protocol.md). Static file, not templated. */
#ifndef SPLITTER_PROTO_H
#define SPLITTER_PROTO_H

#include <stdint.h>
#include <stddef.h>
#include "config.h"
#ifndef APP_MODE
#define APP_MODE 0
#endif

#define PROTO_SYNC0 0xA5u
#define PROTO_SYNC1 0x5Au
#define PROTO_MAX_PAYLOAD 1024u
/* TENSOR/RESULT chunk header: sub-model u8, tensor u8, plan tag u16, total u32, offset u32
 * (splitter.link.protocol.CHUNK); tensor = position in the sub-model's inputs (TENSOR) or in
 * the last sub-model's outputs (RESULT). */
#define PROTO_CHUNK_HEADER 12u
#define PROTO_CHUNK_SUB 0u
#define PROTO_CHUNK_TENSOR 1u
/* One TIMING record: sub-model u8, device u8, reserved u16, cycles u64 (little-endian) at these
 * offsets (splitter.link.protocol.TIMING; tests/test_runtime_host.py checks they agree). */
#define PROTO_TIMING_RECORD 12u
#define PROTO_TIMING_SUB 0u
#define PROTO_TIMING_DEV 1u
#define PROTO_TIMING_CYCLES 4u
#define PROTO_VERSION 2u

enum {
    FT_PING = 0x01, FT_PONG = 0x02, FT_TENSOR = 0x03, FT_RESULT = 0x04,
    FT_TIMING = 0x05, FT_ERROR = 0x06, FT_ACK = 0x07, FT_NACK = 0x08
};

enum { RX_OK = 1, RX_TIMEOUT = 0, RX_BAD = -1 };

enum {
    ERR_BAD_TENSOR = 1, ERR_LINK_TIMEOUT = 2, ERR_MODEL = 3, ERR_BAD_TYPE = 4, ERR_PLAN = 5
};

typedef struct {
    uint8_t type;
    uint8_t seq;
    uint16_t len;
    uint8_t payload[PROTO_MAX_PAYLOAD];
} frame_t;

uint32_t crc32_update(uint32_t crc, const uint8_t *data, size_t n);
uint32_t crc32(const uint8_t *data, size_t n);

/* Read one frame from link `l`; waits at most `timeout` ticks for its first byte. */
int proto_recv(int l, frame_t *f, uint64_t timeout);
/* Write one frame (payload = head then body, either may be empty); no acknowledgement. */
void proto_write(int l, uint8_t type, uint8_t seq, const uint8_t *head, uint16_t nhead,
                 const uint8_t *body, uint16_t nbody);
/* Send with stop-and-wait ARQ: retransmit on NACK or timeout, at most `tries` times; returns
 * the number of transmissions it took, -1 when none was acknowledged, -2 when the peer sent
 * an ERROR instead (stashed in proto_stash). */
int proto_send(int l, uint8_t type, const uint8_t *head, uint16_t nhead, const uint8_t *body,
               uint16_t nbody, int tries);
/* Handle a frame that arrived while not expected (ACK wait): re-ACK duplicates, answer PING. */
void proto_answer_stray(int l, const frame_t *f);
/* Acknowledge a data frame; returns 1 when it is new, 0 when it is a duplicate. */
int proto_accept(int l, const frame_t *f);
void proto_send_pong(int l);
/* An ERROR frame that arrived (and was ACKed) while we waited for an ACK; forwarded later. */
#define PROTO_STASH_MAX 224u
typedef struct {
    uint16_t len;
    uint8_t payload[PROTO_STASH_MAX];
} stash_t;
extern stash_t proto_stash;
extern volatile int proto_stashed;
void proto_reset_rx(int l);

#if defined(RESULT_ON_HEAD) && RESULT_ON_HEAD
/* Handle one frame waiting on the return link (runtime.c; --result-on head, on the head). */
void proto_side(void);
#endif
#endif
