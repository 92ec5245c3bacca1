/* splitter embedded API: the one header a product includes, the same on every board of a chain.
 * Static file (generated projects copy it unchanged); docs/product.md explains the three modes.
 *
 * A model split over several boards runs as a pipeline: the head board (it runs sub-model 0)
 * takes each input from the application (splitter_submit), every board runs its sub-models as
 * their inputs arrive and forwards the outputs to the next board, and the board that ends the
 * chain hands each result to the application (the callback of splitter_on_result). With
 * compile --result-on head the tail instead sends each result back to the head over a return
 * link of its own (one more USART on each), and the head's callback gets it: the application
 * that feeds the chain also reads its results. (A chain of one board keeps them on it.) Every
 * board runs the same loop:
 *
 *     splitter_init();
 *     splitter_on_result(my_result, 0);          // board that ends the chain
 *     for (;;) {
 *         if (have_input && splitter_ready()) splitter_submit(x, sizeof x);   // head board
 *         splitter_poll();                       // every board: a superloop or an RTOS task
 *     }
 *
 * No function blocks forever: splitter_poll() handles what has arrived and returns; while it
 * runs a sub-model or sends its outputs it is bounded by the link timeouts (a dead neighbour
 * costs at most SEND_RETRIES acknowledgement timeouts, then the inference is reported lost).
 * The runtime never owns main() in library mode and allocates nothing: the model's arena is one
 * static array sized by the plan.
 *
 * Not reentrant: call every function from one task (or the superloop). The only function a
 * port may call from an interrupt is splitter_port_received() (splitter_port.h). */
#ifndef SPLITTER_H
#define SPLITTER_H
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of splitter_submit (and error codes of splitter_status_t.code). */
enum {
    SPLITTER_OK = 0,
    SPLITTER_BUSY = 1,             /* the pipeline has no room yet: poll, then submit again */
    SPLITTER_E_NOT_HEAD = -1,      /* this board does not run sub-model 0 */
    SPLITTER_E_SIZE = -2,          /* input size is not splitter_input_bytes() */
    SPLITTER_E_PLAN = -3           /* a board of the chain runs another plan: reflash it */
};

/* What happened (splitter_status_t.code): 0 = nothing yet. The first five are the link
 * protocol's ERROR codes (docs/protocol.md), the others are local to the API. */
enum {
    SPLITTER_ERR_NONE = 0,
    SPLITTER_ERR_BAD_TENSOR = 1,   /* a board got a tensor of the wrong size or sub-model */
    SPLITTER_ERR_LINK_TIMEOUT = 2, /* a neighbour did not acknowledge on `link` */
    SPLITTER_ERR_MODEL = 3,        /* a sub-model returned an error */
    SPLITTER_ERR_BAD_TYPE = 4,     /* an unexpected frame type arrived */
    SPLITTER_ERR_PLAN = 5,         /* the neighbour on `link` runs another plan (hash differs) */
    SPLITTER_ERR_LOST = 16,        /* inferences were lost (`lost` counts them in total) */
    SPLITTER_ERR_CLOCK = 17        /* startup: the clock fell back (splitter_clock_status) */
};

/* The last error this board saw or was told about, and counters since splitter_init(). */
typedef struct {
    int32_t code;        /* SPLITTER_ERR_* of the last error, 0 when none */
    uint8_t device;      /* plan index of the board it happened on */
    uint8_t link;        /* that board's link it concerns, 0xFF when none */
    uint8_t arg;         /* sub-model index, frame type or peer device, by code */
    uint8_t agreed;      /* 1 once every neighbour answered with this board's plan hash */
    uint32_t inference;  /* inference number it concerns (head's count from 0) */
    uint32_t errors;     /* errors seen (local and reported by other boards) */
    uint32_t lost;       /* inferences known lost: not sent on, or missing at the end */
    uint32_t done;       /* inferences this board ran its sub-models for */
    uint32_t clock;      /* splitter_clock_status of startup: 0 ok, 1 HSE -> HSI, 2 PLL */
    char text[96];       /* one line: the board's name, what happened and what to do */
} splitter_status_t;

/* One result, handed to the callback of the board that ends the chain (--result-on head: of the
 * head). The pointers are into the model's arena (the head's result buffer): valid until the
 * callback returns (copy what you keep). */
typedef struct {
    uint32_t inference;             /* head's inference number (0, 1, ...) */
    uint32_t n_outputs;             /* model outputs, in plan.json order */
    const void *data[8];            /* output t: int8 or float32 values, row-major */
    uint32_t bytes[8];
} splitter_result_t;

typedef void (*splitter_result_fn)(const splitter_result_t *result, void *user);

/* Reset the runtime and bring up its links; starts the plan-hash handshake with the
 * neighbours (finished by splitter_poll). Call once, after the clocks and the port are up. */
void splitter_init(void);
/* Handle whatever has arrived, run a sub-model whose input is complete, send its outputs;
 * returns 1 when it did work, 0 when there was nothing to do (a task may then sleep). */
int splitter_poll(void);
/* 1 when splitter_submit would accept an input now (head board only). */
int splitter_ready(void);
/* Head board: copy one input (every input tensor of sub-model 0, concatenated in plan.json
 * order) into the pipeline; it runs on the next splitter_poll. SPLITTER_OK, SPLITTER_BUSY, or a
 * negative SPLITTER_E_* code. */
int splitter_submit(const void *input, uint32_t bytes);
/* Bytes splitter_submit takes (0 on other boards). */
uint32_t splitter_input_bytes(void);
/* Register the result callback (the board that ends the chain, or the head with --result-on
 * head); `user` is passed back. */
void splitter_on_result(splitter_result_fn fn, void *user);
/* The last error and the counters; never NULL. */
const splitter_status_t *splitter_status(void);
/* This board's plan index, 1 when it runs sub-model 0 / the last sub-model. */
uint32_t splitter_device_index(void);
int splitter_is_head(void);
int splitter_is_tail(void);

#ifdef __cplusplus
}
#endif
#endif
