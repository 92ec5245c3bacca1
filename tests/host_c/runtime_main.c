/* The generated tables of a device (what main.c.j2 renders) for the host build, sub-model
 * stand-ins, and a main that hands the link descriptors from argv to link_fake.c.
 *   sub-model 0: 1500 B from the host (link 0) -> y = 2 x (float) -> sub-model 1 on d2 (link 1);
 *                x[0] == -1 makes it fail (ERROR 3)
 *   sub-model 2: two inputs from d2 (link 1): x (64 B) and p (16 B, a pass-through tensor);
 *                two outputs as the RESULT to the host (link 0): y = x + 1 (float) and p, sent
 *                from where it was received (its input and output slots are one) */
#include <stdlib.h>

#include "config.h"
#include "proto.h"
#include "runtime.h"

extern int link_fd[N_LINKS];
extern uint64_t fake_cycles;

const uint8_t plan_hash[8] = {0x01u, 0x23u, 0x45u, 0x67u, 0x89u, 0xabu, 0xcdu, 0xefu};
const char device_name[DEVICE_NAME_LEN + 1] = "d1";
float model_arena[1024];

static int sm_00(float *arena) {
    if (arena[0] == -1.0f) return 1;
    for (int i = 0; i < 375; i++) arena[512 + i] = 2.0f * arena[i];
    fake_cycles = 0x100000005ull; /* above 32 bits: both halves of the record's u64 */
    return 0;
}

static int sm_02(float *arena) {
    for (int i = 0; i < 16; i++) arena[64 + i] = arena[i] + 1.0f;
    fake_cycles = 42u;
    return 0;
}

static const tensor_slot_t sm_00_in[1] = {{0u, 1500u}};
static const tensor_slot_t sm_00_out[1] = {{2048u, 1500u}};
static const tensor_slot_t sm_02_in[2] = {{0u, 64u}, {3584u, 16u}};
static const tensor_slot_t sm_02_out[2] = {{256u, 64u}, {3584u, 16u}};

const submodel_t submodels[N_SUBMODELS] = {
    {0u, 0u, 1u, FT_TENSOR, 1u, 1u, 1u, sm_00_in, sm_00_out, sm_00},
    {2u, 1u, 0u, FT_RESULT, 2u, 2u, 2u, sm_02_in, sm_02_out, sm_02},
};

const runtime_text_t runtime_text = {
    "d1: a sub-model returned an error",
    "d1: firmware is for plan 0123456789abcdef, the sender runs another plan",
    "d1: unexpected TENSOR (wrong sub-model, link or size)",
    "d1: unexpected frame type",
    {"d1: no answer from host on link 0", "d1: no answer from d2 on link 1"},
};

int main(int argc, char **argv) {
    if (argc != 1 + N_LINKS) return 2;
    for (int l = 0; l < N_LINKS; l++) link_fd[l] = atoi(argv[1 + l]);
    runtime_init();
    for (;;) runtime_poll();
}
