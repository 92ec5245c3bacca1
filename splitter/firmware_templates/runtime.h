/* splitter firmware runtime: the main loop, frame handling, chunked tensors and timing records
 * (docs/protocol.md). Static file, compiled for the part and, in tests/test_runtime_host.py, for
 * the host. The generated main.c defines only the tables declared here. */
#ifndef SPLITTER_RUNTIME_H
#define SPLITTER_RUNTIME_H
#include <stdint.h>
#include "config.h"
#ifndef APP_MODE
#define APP_MODE 0
#endif

/* One boundary tensor of a sub-model: `bytes` at model_arena + `offset` (bytes). */
typedef struct {
    uint32_t offset, bytes;
} tensor_slot_t;

/* A hosted sub-model: where its input and output tensors live in the arena (in plan.json's
 * order: TENSOR/RESULT chunk header's tensor index = position) and which links they use. A
 * pass-through tensor (received and forwarded unchanged) is an input and an output slot at the
 * same offset: it is sent from where it was received, never copied. */
typedef struct {
    uint8_t index;      /* plan sub-model index */
    uint8_t in_link;    /* link its inputs arrive on */
    uint8_t out_link;   /* link its outputs leave on */
    uint8_t out_type;   /* FT_TENSOR (to the next device) or FT_RESULT (to the host) */
    uint8_t next_index; /* sub-model the outputs feed (its own index for RESULT) */
    uint8_t n_in, n_out;
    const tensor_slot_t *in;  /* n_in input slots */
    const tensor_slot_t *out; /* n_out output slots */
    int (*run)(float *arena);
} submodel_t;

/* Error texts, each starting with the device name (generated in main.c). */
typedef struct {
    const char *model_error;   /* ERR_MODEL: a sub-model returned non-zero */
    const char *plan_mismatch; /* ERR_PLAN: a chunk's plan tag is not this firmware's */
    const char *bad_tensor;    /* ERR_BAD_TENSOR: wrong sub-model, link or size */
    const char *bad_type;      /* ERR_BAD_TYPE: unexpected frame type */
    const char *link_timeout[N_LINKS]; /* ERR_LINK_TIMEOUT, per link: who stopped answering */
#if APP_MODE
    const char *peer_plan[N_LINKS]; /* ERR_PLAN at the boot handshake, per link */
    const char *lost;               /* SPLITTER_ERR_LOST: results missing at the end */
    const char *clock;              /* SPLITTER_ERR_CLOCK: startup fell back */
#endif
} runtime_text_t;

extern const submodel_t submodels[N_SUBMODELS];
#ifndef RESULT_LINK
#define RESULT_LINK -1
#define RESULT_ON_HEAD 0
#endif
#if RESULT_LINK >= 0 && RESULT_ON_HEAD
/* --result-on head, on the head: where the tail's results arrive (plan.c). */
extern const tensor_slot_t result_slots[N_RESULT];
extern uint8_t result_buf[];
#endif
extern const runtime_text_t runtime_text;
/* The one arena shared by every hosted sub-model (model.c). */
extern float model_arena[];

/* APP_MODE (config.h): 0 harness (the host drives the chain; runtime_main owns main()),
 * 1 standalone, 2 library: the application drives it through splitter.h. */
#define APP_HARNESS 0
#define APP_STANDALONE 1
#define APP_LIBRARY 2

/* Reset the protocol state and bring up the links. */
void runtime_init(void);
#if !APP_MODE
/* Wait for a frame on any link and handle it (run a sub-model when its input is complete). */
void runtime_poll(void);
/* Board setup, runtime_init, then runtime_poll forever. */
void runtime_main(void);
#endif
#endif
