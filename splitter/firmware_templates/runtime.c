/* splitter firmware runtime (docs/protocol.md): receive -> run sub-model -> send, for every
 * hosted sub-model; errors travel towards the host on link 0. Static file: the per-device
 * tables (submodels, runtime_text) are generated in main.c. */
#include "runtime.h"
#include "link.h"
#include "proto.h"
#include "timer.h"
#include "watchdog.h"
#if APP_MODE
#include "splitter.h"
#endif

/* Chunk size per link: halved when a chunk needs retransmissions (a noisy line), doubled
 * after a chunk goes through at once; the receiver places chunks by offset, so any size works. */
#define MAX_CHUNK (PROTO_MAX_PAYLOAD - PROTO_CHUNK_HEADER)
#define MIN_CHUNK 32u

static uint8_t timing[MAX_TIMING_RECORDS * PROTO_TIMING_RECORD];
static uint32_t n_timing;
/* Per hosted sub-model, one word: the input tensor being received (they arrive in plan.json
 * order) in the top 8 bits and the highest byte of it received so far in the low 24 (tensors
 * are below 16 MiB: codegen/firmware.py MAX_TENSOR_BYTES), so the runtime RAM per hosted
 * sub-model stays 4 bytes. */
#define RX_TENSOR_SHIFT 24u
#define RX_BYTES_MASK 0x00FFFFFFu
static uint32_t rx_state[N_SUBMODELS];
static uint32_t chunk_size[N_LINKS];
static frame_t rx;

void board_init(void);

#if APP_MODE
/* Standalone and library mode (splitter.h): the application feeds the head and takes the
 * results; links facing the host (HOST_LINKS, the console) carry no frames. */
#define IS_HOST_LINK(l) ((HOST_LINKS >> (l)) & 1u)
#define PEER_UNKNOWN 0u
#define PEER_OK 1u
#define PEER_MISMATCH 2u
/* Boot handshake: PING every neighbour each PING_TICKS until its PONG carries our plan hash. */
#define PING_TICKS (ACK_TIMEOUT_TICKS / 2u)
/* First TIMING record of an inference: sub-model INFERENCE_TAG, cycles = inference number. */
#define INFERENCE_TAG 0xFFu
static splitter_status_t status;
static uint8_t peer[N_LINKS];
static uint64_t ping_at[N_LINKS];
static uint8_t pending, chain_mismatch, have_expect;
/* The records of the inference in hand carry its number: a tensor whose TIMING frame was lost
 * (a board reset between them) cannot be named, so it is dropped and counted lost. */
static uint8_t tagged;
static uint32_t next_inference, cur_inference, expect_inference;
static splitter_result_fn result_fn;
static void *result_user;
/* --result-on head (RESULT_LINK >= 0): the tail sends each result back to the head over the
 * return link RESULT_LINK; the head keeps it in result_buf (plan.c) and hands it to the same
 * callback. ret_* is the head's receive state of that link, apart from its own inference. */
#if RESULT_LINK >= 0 && RESULT_ON_HEAD
static uint32_t ret_state, ret_inference;
static uint8_t ret_tagged;
#endif
/* Startup clock status (startup.c defines it where the clock code reports; 0 = as planned). */
__attribute__((weak)) volatile uint32_t splitter_clock_status = 0;
static void app_error(uint8_t code, uint8_t arg, uint8_t link, const char *text);
#endif

static void put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Append (sub-model, device, cycles) to the record list; records past MAX_TIMING_RECORDS drop. */
static void add_timing(uint8_t sub, uint8_t dev, uint64_t cycles) {
    if (n_timing >= MAX_TIMING_RECORDS) return;
    uint8_t *p = timing + PROTO_TIMING_RECORD * n_timing++;
    for (uint32_t b = 0; b < PROTO_TIMING_RECORD; b++) p[b] = 0;
    p[PROTO_TIMING_SUB] = sub;
    p[PROTO_TIMING_DEV] = dev;
    put32(p + PROTO_TIMING_CYCLES, (uint32_t)cycles);
    put32(p + PROTO_TIMING_CYCLES + 4u, (uint32_t)(cycles >> 32));
}

/* Report an error towards the host: link 0 faces the host or the device feeding us. */
static void send_error(uint8_t code, uint8_t arg, const char *text) {
#if APP_MODE
    app_error(code, arg, code == ERR_LINK_TIMEOUT ? arg : 0xFFu, text);
#else
    uint8_t head[4] = {code, DEVICE_INDEX, arg, 0};
    uint16_t n = 0;
    while (text[n] && n < 200u) n++;
    (void)proto_send(0, FT_ERROR, head, 4, (const uint8_t *)text, n, SEND_RETRIES);
#endif
}

/* Tensor `t` of a hop: `n` bytes as TENSOR/RESULT chunks; 0, or proto_send's -1/-2. */
static int send_chunks(int l, uint8_t type, uint8_t sub, uint8_t t, const uint8_t *data,
                       uint32_t n) {
    uint8_t head[PROTO_CHUNK_HEADER];
    uint32_t off = 0;
    do {
        uint32_t cs = chunk_size[l] ? chunk_size[l] : MAX_CHUNK;
        uint32_t len = n - off < cs ? n - off : cs;
        head[PROTO_CHUNK_SUB] = sub;
        head[PROTO_CHUNK_TENSOR] = t;
        head[2] = (uint8_t)PLAN_TAG; head[3] = (uint8_t)(PLAN_TAG >> 8);
        put32(head + 4, n);
        put32(head + 8, off);
        int tries = len > MIN_CHUNK ? 2 : 2 * SEND_RETRIES;
        int r = proto_send(l, type, head, PROTO_CHUNK_HEADER, data + off, (uint16_t)len, tries);
        if (r == -2 || (r < 0 && len <= MIN_CHUNK)) return r;
        if (r < 0) {
            chunk_size[l] = len / 2u;
            continue;
        }
        off += len;
        chunk_size[l] = (r == 1 && 2u * cs <= MAX_CHUNK) ? 2u * cs : cs;
    } while (off < n);
    return 0;
}

/* The TIMING list, then every output tensor of `s` in order; 0, or proto_send's -1/-2. */
static int send_outputs(const submodel_t *s) {
    int l = s->out_link;
    int rt = proto_send(l, FT_TIMING, timing, (uint16_t)(PROTO_TIMING_RECORD * n_timing), 0, 0,
                        SEND_RETRIES);
    if (rt < 0) return rt;
    n_timing = 0;
    for (uint8_t t = 0; t < s->n_out; t++) {
        const uint8_t *data = (const uint8_t *)model_arena + s->out[t].offset;
        int r = send_chunks(l, s->out_type, s->next_index, t, data, s->out[t].bytes);
        if (r < 0) return r;
    }
    return 0;
}

#if APP_MODE
static int app_outputs(const submodel_t *s);
#endif

static void run_submodel(const submodel_t *s) {
    cycles_start();
    int rc = s->run(model_arena);
    uint64_t cycles = cycles_stop();
    add_timing(s->index, DEVICE_INDEX, cycles);
    if (rc != 0) {
        send_error(ERR_MODEL, s->index, runtime_text.model_error);
        return;
    }
#if APP_MODE
    if (app_outputs(s)) return;
#endif
    int r = send_outputs(s);
    n_timing = 0;
    if (r == -1) send_error(ERR_LINK_TIMEOUT, s->out_link, runtime_text.link_timeout[s->out_link]);
#if APP_MODE
    if (r < 0) status.lost++;
#endif
    /* r == -2: the peer reported an error, forwarded by the main loop */
}

#if APP_MODE
/* Standalone and library mode: the neighbours are this plan's firmware, which sends every
 * tensor in order from offset 0, so a chunk past what arrived is the rest of a tensor whose
 * start this board never saw (it was reset meanwhile, or the sender gave up mid-tensor):
 * taken and dropped, the inference is counted lost where it ends (SPLITTER_ERR_LOST). An
 * ERR_BAD_TENSOR per chunk would cost the sender a blocked transfer each (its ERROR is not
 * acknowledged while it sends), and the rest of the tensor minutes. */
#define ORPHAN_ACCEPTED 1
#else
#define ORPHAN_ACCEPTED 0 /* harness: the host hears of a tensor out of order (ERR_BAD_TENSOR) */
#endif

/* Input tensor `t` of hosted sub-model `i`: store the chunk; 1 when it was accepted.
 * Tensors arrive in order; tensor 0 at offset 0 starts a new set of inputs. A chunk of a
 * tensor already complete is a retransmission whose ACK was lost: accepted, nothing stored. */
static int take_chunk(uint32_t i, int l, uint8_t t, const uint8_t *p, uint32_t len) {
    const submodel_t *s = &submodels[i];
    uint32_t total = get32(p + 4);
    uint32_t off = get32(p + 8);
    if ((int)s->in_link != l || t >= s->n_in || total != s->in[t].bytes || off + len < off ||
        off + len > total) {
        return 0;
    }
    if (t == 0 && off == 0) rx_state[i] = 0;
    uint32_t receiving = rx_state[i] >> RX_TENSOR_SHIFT;
    uint32_t received = rx_state[i] & RX_BYTES_MASK;
    if (t < receiving) return 1;
    /* chunks come in order; a re-chunked retransmission may overlap what already arrived */
    if (t != receiving || off > received) return ORPHAN_ACCEPTED;
    if (off == 0) received = 0; /* a chunk at offset 0 restarts its tensor's count */
    uint8_t *dst = (uint8_t *)model_arena + s->in[t].offset + off;
    for (uint32_t k = 0; k < len; k++) dst[k] = p[PROTO_CHUNK_HEADER + k];
    if (off + len > received) received = off + len;
    if (received == total) {
        receiving++;
        received = 0;
    }
    if (receiving == s->n_in) {
        rx_state[i] = 0;
        run_submodel(s);
    } else {
        rx_state[i] = (receiving << RX_TENSOR_SHIFT) | received;
    }
    return 1;
}

static void on_chunk(int l, const frame_t *f) {
    const uint8_t *p = f->payload;
    uint32_t off = get32(p + 8);
    uint8_t sub = p[PROTO_CHUNK_SUB];
    if ((uint32_t)(p[2] | (p[3] << 8)) != PLAN_TAG) {
        if (off != 0) return; /* reported once, at the first chunk */
        send_error(ERR_PLAN, sub, runtime_text.plan_mismatch);
        return;
    }
    for (uint32_t i = 0; i < N_SUBMODELS; i++) {
        if (submodels[i].index != sub) continue;
        uint32_t len = (uint32_t)f->len - PROTO_CHUNK_HEADER;
        if (take_chunk(i, l, p[PROTO_CHUNK_TENSOR], p, len)) return;
        break;
    }
    send_error(ERR_BAD_TENSOR, sub, runtime_text.bad_tensor);
}

/* The received record list replaces ours (whole records only, at most MAX_TIMING_RECORDS). */
static void on_timing(const frame_t *f) {
    n_timing = 0;
    for (uint32_t k = 0; k + PROTO_TIMING_RECORD <= f->len && n_timing < MAX_TIMING_RECORDS;
         k += PROTO_TIMING_RECORD) {
        for (uint32_t b = 0; b < PROTO_TIMING_RECORD; b++) {
            timing[PROTO_TIMING_RECORD * n_timing + b] = f->payload[k + b];
        }
        n_timing++;
    }
#if APP_MODE
    tagged = n_timing > 0 && timing[PROTO_TIMING_SUB] == INFERENCE_TAG;
    if (tagged) cur_inference = get32(timing + PROTO_TIMING_CYCLES);
#endif
}

#if APP_MODE
static void on_pong(int l, const frame_t *f);
static void app_forward(const uint8_t *p, uint16_t n);
#endif

#if APP_MODE && RESULT_LINK >= 0 && RESULT_ON_HEAD
static void on_result_chunk(const frame_t *f);
#endif

static void on_frame(int l, const frame_t *f) {
    switch (f->type) {
    case FT_PING:
        proto_reset_rx(l);
        proto_send_pong(l);
        return;
#if APP_MODE
    case FT_PONG:
        on_pong(l, f);
        return;
    case FT_ACK: case FT_NACK:
        return;
#else
    case FT_ACK: case FT_NACK: case FT_PONG:
        return; /* stale answers to frames we no longer wait for */
#endif
    default:
        break;
    }
    if (!proto_accept(l, f)) return; /* duplicate after a lost ACK */
#if APP_MODE && RESULT_LINK >= 0 && RESULT_ON_HEAD
    if (l == RESULT_LINK) { /* the return link: results of the tail, nothing else */
        if (f->type == FT_TIMING) {
            ret_tagged = f->len >= PROTO_TIMING_RECORD && f->payload[PROTO_TIMING_SUB] == INFERENCE_TAG;
            if (ret_tagged) ret_inference = get32(f->payload + PROTO_TIMING_CYCLES);
        } else if (f->type == FT_RESULT && f->len >= PROTO_CHUNK_HEADER) {
            on_result_chunk(f);
        } else if (f->type == FT_ERROR) {
            app_forward(f->payload, f->len);
        }
        return;
    }
#endif
    if (f->type == FT_TENSOR && f->len >= PROTO_CHUNK_HEADER) {
        on_chunk(l, f);
    } else if (f->type == FT_TIMING) {
        on_timing(f);
    } else if (f->type == FT_ERROR && l != 0) {
#if APP_MODE
        app_forward(f->payload, f->len);
#else
        (void)proto_send(0, FT_ERROR, f->payload, f->len, 0, 0, SEND_RETRIES); /* to the host */
#endif
    } else if (f->type != FT_ERROR) {
        send_error(ERR_BAD_TYPE, f->type, runtime_text.bad_type);
    }
}

#if APP_MODE && RESULT_LINK >= 0 && RESULT_ON_HEAD
/* One frame of the return link, taken while the head waits on another link (proto.c): a
 * result chunk goes to result_buf, nothing touches the arena or the frame being handled. */
void proto_side(void) {
    static frame_t side;
    static uint8_t busy;
    if (busy) return;
    busy = 1;
    int r = proto_recv(RESULT_LINK, &side, BYTE_TIMEOUT_TICKS);
    if (r == RX_BAD) {
        proto_write(RESULT_LINK, FT_NACK, side.seq, 0, 0, 0, 0);
    } else if (r == RX_OK) {
        on_frame(RESULT_LINK, &side);
    }
    busy = 0;
}
#endif

void runtime_init(void) {
    timer_init();
    n_timing = 0;
    for (int l = 0; l < N_LINKS; l++) {
        proto_reset_rx(l);
        chunk_size[l] = 0;
    }
    for (uint32_t i = 0; i < N_SUBMODELS; i++) rx_state[i] = 0;
    link_init();
}

#if !APP_MODE
void runtime_poll(void) {
    int l = link_wait_any();
    int r = proto_recv(l, &rx, BYTE_TIMEOUT_TICKS);
    if (r == RX_BAD) {
        proto_write(l, FT_NACK, rx.seq, 0, 0, 0, 0);
    } else if (r == RX_OK) {
        on_frame(l, &rx);
    }
    if (proto_stashed) { /* an ERROR that arrived while we were sending: pass it on */
        proto_stashed = 0;
        (void)proto_send(0, FT_ERROR, proto_stash.payload, proto_stash.len, 0, 0, SEND_RETRIES);
    }
}

void runtime_main(void) {
#if !EMULATOR
    board_init();
#endif
    runtime_init();
    for (;;) {
        watchdog_kick(); /* an empty function without --watchdog-ms */
        runtime_poll();
    }
}
#endif

#if APP_MODE
/* ---- standalone and library mode: the API of splitter.h -------------------------------- */

/* Keep an error in the status: the board it happened on, the link, what and for which input. */
static void record(uint8_t code, uint8_t dev, uint8_t link, uint8_t arg, const uint8_t *text,
                   uint32_t n) {
    status.code = code;
    status.device = dev;
    status.link = link;
    status.arg = arg;
    status.inference = cur_inference;
    status.errors++;
    if (n > sizeof status.text - 1u) n = sizeof status.text - 1u;
    for (uint32_t k = 0; k < n; k++) status.text[k] = (char)text[k];
    status.text[n] = 0;
    if (code == ERR_PLAN) chain_mismatch = 1;
}

/* An error of this board: into the status, and upstream towards the head (link 0) unless this
 * is the head, whose application reads it with splitter_status(). ERROR payload: code, device,
 * arg, link (docs/protocol.md), then the text. */
static void app_error(uint8_t code, uint8_t arg, uint8_t link, const char *text) {
    uint16_t n = 0;
    while (text[n] && n < 200u) n++;
    record(code, DEVICE_INDEX, link, arg, (const uint8_t *)text, n);
    if (IS_HOST_LINK(0)) return;
    uint8_t head[4] = {code, DEVICE_INDEX, arg, link};
    (void)proto_send(0, FT_ERROR, head, 4, (const uint8_t *)text, n, SEND_RETRIES);
}

/* An ERROR frame from a board further down the chain: keep it, pass it towards the head. */
static void app_forward(const uint8_t *p, uint16_t n) {
    if (n < 4u) return;
    record(p[0], p[1], p[3], p[2], p + 4, n - 4u);
    if (!IS_HOST_LINK(0)) (void)proto_send(0, FT_ERROR, p, n, 0, 0, SEND_RETRIES);
}

/* PONG of the boot handshake: the neighbour's plan hash must be ours (payload bytes 4..11). */
static void on_pong(int l, const frame_t *f) {
    if (f->len < 12u || IS_HOST_LINK(l)) return;
    uint8_t same = 1;
    for (int i = 0; i < 8; i++) same &= (uint8_t)(f->payload[4 + i] == plan_hash[i]);
    if (same) {
        peer[l] = PEER_OK;
    } else if (peer[l] != PEER_MISMATCH) {
        peer[l] = PEER_MISMATCH;
        app_error(ERR_PLAN, f->payload[1], (uint8_t)l, runtime_text.peer_plan[l]);
    }
}

/* PING every neighbour that has not answered with our plan hash yet (every PING_TICKS). */
static void handshake(void) {
    uint64_t now = timer_now();
    uint8_t agreed = 1;
    for (int l = 0; l < N_LINKS; l++) {
        if (IS_HOST_LINK(l) || peer[l] == PEER_OK) continue;
        agreed = 0;
        if (now >= ping_at[l]) {
            proto_write(l, FT_PING, 0, 0, 0, 0, 0);
            ping_at[l] = now + PING_TICKS;
        }
    }
    status.agreed = agreed;
}

/* Result `inference` (n tensors at base + slot offsets) to the callback, after counting the
 * inferences missing before it (SPLITTER_ERR_LOST). */
static void deliver(uint32_t inference, uint32_t n, const tensor_slot_t *slot, const uint8_t *base) {
    splitter_result_t r;
    r.inference = inference;
    r.n_outputs = n;
    for (uint32_t t = 0; t < n; t++) {
        r.data[t] = base + slot[t].offset;
        r.bytes[t] = slot[t].bytes;
    }
    int32_t gap = (int32_t)(inference - expect_inference);
    expect_inference = inference + 1u;
    if (have_expect && gap > 0) {
        uint32_t own = cur_inference;
        status.lost += (uint32_t)gap;
        cur_inference = inference - (uint32_t)gap; /* the first one lost */
        app_error(SPLITTER_ERR_LOST, (uint8_t)gap, 0xFFu, runtime_text.lost);
        cur_inference = own;
    }
    have_expect = 1;
    if (result_fn) result_fn(&r, result_user);
}

#if RESULT_LINK >= 0 && RESULT_ON_HEAD
/* A RESULT chunk on the head's return link: into result_buf; the complete result (its tensors
 * arrive in order) to the callback, or dropped and left to the gap count when its TIMING frame
 * (the inference number) was lost. */
static void on_result_chunk(const frame_t *f) {
    const uint8_t *p = f->payload;
    uint8_t t = p[PROTO_CHUNK_TENSOR];
    uint32_t total = get32(p + 4), off = get32(p + 8), len = (uint32_t)f->len - PROTO_CHUNK_HEADER;
    if ((uint32_t)(p[2] | (p[3] << 8)) != PLAN_TAG || t >= N_RESULT ||
        total != result_slots[t].bytes || off + len < off || off + len > total) {
        if (off == 0) send_error(ERR_BAD_TENSOR, p[PROTO_CHUNK_SUB], runtime_text.bad_tensor);
        return;
    }
    if (t == 0 && off == 0) ret_state = 0;
    uint32_t receiving = ret_state >> RX_TENSOR_SHIFT, received = ret_state & RX_BYTES_MASK;
    if (t != receiving || off > received) return; /* out of order: the sender repeats it */
    uint8_t *dst = result_buf + result_slots[t].offset + off;
    for (uint32_t k = 0; k < len; k++) dst[k] = p[PROTO_CHUNK_HEADER + k];
    if (off + len > received) received = off + len;
    if (received == total) {
        receiving++;
        received = 0;
    }
    ret_state = (receiving << RX_TENSOR_SHIFT) | received;
    if (receiving < N_RESULT) return;
    ret_state = 0;
    if (ret_tagged) deliver(ret_inference, N_RESULT, result_slots, result_buf);
    ret_tagged = 0;
}
#endif

/* The last sub-model's outputs go to the result callback (or, --result-on head, back to the
 * head over the return link); outputs for a neighbour that runs another plan are dropped. 1
 * when handled here, 0 when they are to be sent on. */
static int app_outputs(const submodel_t *s) {
    status.done++;
    if (!tagged) { /* the board that ends the chain counts it in the gap it leaves */
        n_timing = 0;
        return 1;
    }
    tagged = 0;
    if (s->out_type == FT_RESULT && !(RESULT_LINK >= 0 && !RESULT_ON_HEAD)) {
        n_timing = 0;
        deliver(cur_inference, s->n_out, s->out, (const uint8_t *)model_arena);
        return 1;
    }
    if (peer[s->out_link] == PEER_MISMATCH) {
        n_timing = 0;
        status.lost++;
        return 1;
    }
    return 0;
}

/* The head runs sub-model 0 on a submitted input: inference number first in the records. */
static void head_run(void) {
    cur_inference = next_inference++;
    n_timing = 0;
    add_timing(INFERENCE_TAG, DEVICE_INDEX, cur_inference);
    tagged = 1;
    run_submodel(&submodels[0]);
}

void splitter_init(void) {
    runtime_init();
    splitter_status_t zero = {0};
    status = zero;
    status.link = 0xFFu;
    for (int l = 0; l < N_LINKS; l++) {
        peer[l] = PEER_UNKNOWN;
        ping_at[l] = 0;
    }
    pending = chain_mismatch = have_expect = tagged = 0;
#if RESULT_LINK >= 0 && RESULT_ON_HEAD
    ret_state = ret_inference = 0;
    ret_tagged = 0;
#endif
    next_inference = cur_inference = expect_inference = 0;
    status.clock = splitter_clock_status;
    if (status.clock != 0u) {
        app_error(SPLITTER_ERR_CLOCK, (uint8_t)status.clock, 0xFFu, runtime_text.clock);
    }
}

int splitter_poll(void) {
    int did = 0;
    watchdog_kick(); /* an empty function without --watchdog-ms */
    handshake();
    if (pending) {
        pending = 0;
        head_run();
        did = 1;
    }
    for (int l = 0; l < N_LINKS; l++) {
        if (IS_HOST_LINK(l) || !link_rx_ready(l)) continue;
        int r = proto_recv(l, &rx, BYTE_TIMEOUT_TICKS);
        if (r == RX_BAD) {
            proto_write(l, FT_NACK, rx.seq, 0, 0, 0, 0);
        } else if (r == RX_OK) {
            on_frame(l, &rx);
        }
        did = 1;
    }
    if (proto_stashed) { /* an ERROR that arrived while we were sending */
        proto_stashed = 0;
        app_forward(proto_stash.payload, proto_stash.len);
    }
    return did;
}

int splitter_is_head(void) { return submodels[0].index == 0u; }

int splitter_is_tail(void) { return submodels[N_SUBMODELS - 1u].out_type == FT_RESULT; }

uint32_t splitter_device_index(void) { return DEVICE_INDEX; }

uint32_t splitter_input_bytes(void) {
    uint32_t total = 0;
    if (!splitter_is_head()) return 0;
    for (uint32_t t = 0; t < submodels[0].n_in; t++) total += submodels[0].in[t].bytes;
    return total;
}

int splitter_ready(void) {
    if (!splitter_is_head() || pending || chain_mismatch) return 0;
    int l = submodels[0].out_link;
    return IS_HOST_LINK(l) || (l < N_LINKS && peer[l] == PEER_OK); /* one board: l faces the host */
}

int splitter_submit(const void *input, uint32_t bytes) {
    if (!splitter_is_head()) return SPLITTER_E_NOT_HEAD;
    if (bytes != splitter_input_bytes()) return SPLITTER_E_SIZE;
    if (chain_mismatch) return SPLITTER_E_PLAN;
    if (!splitter_ready()) return SPLITTER_BUSY;
    const uint8_t *src = (const uint8_t *)input;
    const submodel_t *s = &submodels[0];
    for (uint32_t t = 0; t < s->n_in; t++) {
        uint8_t *dst = (uint8_t *)model_arena + s->in[t].offset;
        for (uint32_t k = 0; k < s->in[t].bytes; k++) dst[k] = *src++;
    }
    pending = 1;
    return SPLITTER_OK;
}

void splitter_on_result(splitter_result_fn fn, void *user) {
    result_fn = fn;
    result_user = user;
}

const splitter_status_t *splitter_status(void) { return &status; }
#endif
