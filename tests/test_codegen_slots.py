"""Arena slots of a sub-model's boundary tensors (codegen/model_c.py, codegen/slots.py).

Several outputs of the last layer stay where its plan leaves them; a pass-through tensor (an
input that is also an output) gets one block above the ping-pong arena, is received and sent
from there and, when it is also the chain's input of the sub-model, read there by the first
layer: checked by running the generated C on the host against the same sub-model without it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from test_codegen_model_c import small_chain
from test_codegen_support import compile_host, planner

from splitter.codegen.model_c import GeneratedC, generate_device_c
from splitter.codegen.slots import SubModelSlots, TensorSlot
from splitter.errors import UnsupportedOpError
from splitter.importers import load_chain

MODELS = Path(__file__).resolve().parent.parent / "models"

#: runs sm_00 with its input read at argv[1] (byte offset) and writes out_bytes from argv[2]
MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
int main(int argc, char **argv)
{
    unsigned in_off = (unsigned)atoi(argv[1]), in_n = (unsigned)atoi(argv[2]);
    unsigned out_off = (unsigned)atoi(argv[3]), out_n = (unsigned)atoi(argv[4]);
    FILE *f;
    (void)argc;
    memset(model_arena, 0xff, MODEL_ARENA_BYTES); /* NaN poison: stale reads show up */
    f = fopen(argv[5], "rb");
    if (!f || fread((char *)model_arena + in_off, 1, in_n, f) != in_n) return 3;
    fclose(f);
    if (sm_00(model_arena) != 0) return 4;
    f = fopen(argv[6], "wb");
    if (!f || fwrite((char *)model_arena + out_off, 1, out_n, f) != out_n) return 5;
    if (fwrite((char *)model_arena + in_off, 1, in_n, f) != in_n) return 6;
    fclose(f);
    return 0;
}
"""


def run_c(gen: GeneratedC, x: np.ndarray, work: Path) -> tuple[np.ndarray, bytes]:
    """Build ``gen`` with :data:`MAIN` on the host and run sub-model 0 on ``x``: its main output
    and the bytes of its input slot after the run."""
    res = compile_host({**gen.files, "main.c": MAIN}, work, work / "prog")
    assert res.returncode == 0, res.stderr[-3000:]
    slots = gen.slots[0]
    x_in, y = slots.inputs[0], slots.outputs[0]
    (work / "in.bin").write_bytes(x.astype("<f4").tobytes())
    args = [str(v) for v in (x_in.offset, x_in.nbytes, y.offset, y.nbytes)]
    subprocess.run([str(work / "prog"), *args, str(work / "in.bin"), str(work / "out.bin")],
                   check=True)  # fmt: skip
    data = (work / "out.bin").read_bytes()
    return np.frombuffer(data[: y.nbytes], "<f4"), data[y.nbytes :]


def test_rows_become_one_slot_each() -> None:
    assert SubModelSlots.of((3, 0, 8, 16, 4)) == SubModelSlots(
        3, (TensorSlot("", 0, 8),), (TensorSlot("", 16, 4),)
    )


def test_pass_through_input_is_read_and_forwarded_in_place(tmp_path: Path) -> None:
    chain = small_chain()
    x_name, out_name = chain.layers[1].input.name, chain.layers[2].output.name
    plain = generate_device_c(chain, [(0, 1, 2)], "d", planner=planner())
    io = {0: ([x_name], [out_name, x_name])}
    passing = generate_device_c(chain, [(0, 1, 2)], "d", planner=planner(), boundaries=io)
    slots = passing.slots[0]
    x_bytes = chain.layers[1].input.nbytes
    assert slots.inputs[0] == slots.outputs[1] == TensorSlot(x_name, plain.arena_bytes, x_bytes)
    assert slots.outputs[0].offset == plain.slots[0].outputs[0].offset
    assert passing.arena_bytes == plain.arena_bytes + x_bytes
    assert f"#define MODEL_ARENA_BYTES {passing.arena_bytes}u" in passing.files["model.h"]
    x = np.random.default_rng(1).standard_normal(chain.layers[1].input.shape).astype(np.float32)
    y_plain, _ = run_c(plain, x, tmp_path / "plain")
    y_pass, forwarded = run_c(passing, x, tmp_path / "pass")
    assert np.array_equal(y_pass, y_plain) and np.all(np.isfinite(y_plain))
    assert forwarded == x.astype("<f4").tobytes()  # untouched by the sub-model: sent as is


def test_two_outputs_of_the_last_layer_get_their_own_slots() -> None:
    chain = load_chain(MODELS / "two_heads.onnx")
    n = len(chain) - 1
    gen = generate_device_c(chain, [(1, n, n)], "b")
    (s,) = gen.slots
    assert [t.name for t in s.outputs] == ["classes/out", "box/out"]
    assert [t.nbytes for t in s.outputs] == [40, 16]
    (_a0, a1), (b0, b1) = sorted((t.offset, t.offset + t.nbytes) for t in s.outputs)
    assert a1 <= b0 and b1 <= gen.arena_bytes
    assert s.inputs == (TensorSlot("flatten/out", 0, chain.layers[n].input.nbytes),)


def test_a_tensor_the_chain_does_not_carry_is_one_line() -> None:
    chain = small_chain()
    x_name, out_name = chain.layers[1].input.name, chain.layers[2].output.name
    io = {0: ([x_name, "input_2"], [out_name])}
    with pytest.raises(UnsupportedOpError) as info:
        generate_device_c(chain, [(0, 1, 2)], "d", planner=planner(), boundaries=io)
    assert "reads tensor 'input_2'" in str(info.value) and "\n" not in str(info.value)
