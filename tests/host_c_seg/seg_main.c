/* A segmented device for the host build (tests/test_segments_host.py): sub-model 0 takes 64
 * floats x from the host and runs two segments whose weights the host streams:
 *   segment 0: 3000 B = 750 floats w0, y = x + w0[0..63]
 *   segment 1: 2000 B = 500 floats w1, y = y * w1[0..63], moved down to offset 0 (seg_move)
 * and sends y (256 B) back as RESULT. Its stand-in compute is FAKE_CYCLES; the runtime takes
 * the loading ticks off. */
#include <stdlib.h>

#include "config.h"
#include "model.h"
#include "proto.h"
#include "runtime.h"

#define FAKE_CYCLES 1000000000000ull

extern int link_fd[N_LINKS];
extern uint64_t fake_cycles;

const uint8_t plan_hash[8] = {0x01u, 0x23u, 0x45u, 0x67u, 0x89u, 0xabu, 0xcdu, 0xefu};
const char device_name[DEVICE_NAME_LEN + 1] = "s1";
float model_arena[2048];

static int sm_00(float *arena) {
    uint8_t *a8 = (uint8_t *)arena;
    const float *w0 = (const float *)(a8 + 8192 - 3000);
    if (seg_load(0, a8 + 8192 - 3000, 0, 3000) != 0) return 1;
    for (int i = 0; i < 64; i++) arena[64 + i] = arena[i] + w0[i];
    const float *w1 = (const float *)(a8 + 8192 - 2000);
    if (seg_load(1, a8 + 8192 - 2000, 3000, 2000) != 0) return 1;
    for (int i = 0; i < 64; i++) arena[64 + i] *= w1[i];
    seg_move(a8, 256, 256);
    fake_cycles = FAKE_CYCLES;
    return 0;
}

static const tensor_slot_t sm_00_in[1] = {{0u, 256u}};
static const tensor_slot_t sm_00_out[1] = {{0u, 256u}};

const submodel_t submodels[N_SUBMODELS] = {
    {0u, 0u, 0u, FT_RESULT, 0u, 1u, 1u, sm_00_in, sm_00_out, sm_00},
};

const runtime_text_t runtime_text = {
    "s1: a sub-model returned an error",
    "s1: firmware is for plan 0123456789abcdef, the sender runs another plan",
    "s1: unexpected TENSOR (wrong sub-model, link or size)",
    "s1: unexpected frame type",
    {"s1: no answer from host on link 0"},
};

int main(int argc, char **argv) {
    if (argc != 1 + N_LINKS) return 2;
    for (int l = 0; l < N_LINKS; l++) link_fd[l] = atoi(argv[1 + l]);
    runtime_init();
    for (;;) runtime_poll();
}
