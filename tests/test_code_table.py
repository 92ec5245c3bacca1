"""The code / runtime size table (splitter/cost/code_sizes.json) is fresh and complete.

The table is measured by ``make code-sizes`` (splitter/measure/code_table.py) from real
arm-none-eabi-gcc builds; its ``sources`` hash covers every file the figures depend on (the
firmware templates, the kernels, the C generator, the family facts and catalog) and the
compiler version. A change to any of them without regenerating the table fails here, naming
the command. Whether the figures are right is tests/test_firmware_fit.py's job (every plan
of every model on every board file against the real ELF).
"""

from __future__ import annotations

import pytest

from splitter.cost.code import code_table
from splitter.hardware.catalog import parts
from splitter.hardware.families import family_for
from splitter.measure.code_table import MAX_LINKS, sources_hash

pytestmark = [pytest.mark.toolchain]


def test_table_was_measured_from_the_current_sources() -> None:
    assert code_table()["sources"] == sources_hash(), (
        "splitter/cost/code_sizes.json is stale (kernels, templates, codegen, families or the "
        "compiler changed); regenerate it with `make code-sizes` and commit it"
    )


def test_every_catalog_family_and_core_is_in_the_table() -> None:
    table = code_table()
    for part in parts():
        runtime = table["runtime"][part.name]
        measured = [k for k in range(1, MAX_LINKS + 1) if str(k) in runtime]
        assert measured[:2] == [1, 2] and all(runtime[str(k)]["code"] > 0 for k in measured)
        # each further link adds a ring buffer and its state (uart.c), never less RAM
        ram = [runtime[str(k)]["ram"] for k in measured]
        assert ram == sorted(ram) and ram[0] > 2048  # the minimum stack alone is 2 KiB
        core = table["cores"][family_for(part.family).core.key]
        assert "k_conv2d" in core["kernels"] and core["op_kernels"]["conv2d/NCHW/float32>float32"]
        # --app standalone / library: the roles every part can take (a middle board needs two
        # USARTs beside the ST-LINK's); the standalone image holds more code than the library
        for app in ("standalone", "library"):
            assert {"single", "head", "tail"} <= set(runtime[app]), (part.name, app)
        assert runtime["standalone"]["head"]["code"] > runtime["library"]["head"]["code"]


@pytest.mark.parametrize("model", ["long_skip.onnx", "mlperf_ic_resnet8_int8.tflite"])
def test_op_granularity_layers_count_their_compaction_moves(model: str) -> None:
    """An operator-granularity layer's keys hold one ``move`` per ``memmove`` the generator
    emits after it (float and int8 arenas), and the table measured a move's bytes and the
    ``memmove`` closure it links (before, op-granularity code was under-estimated by 2.4 %)."""
    from pathlib import Path

    from splitter.codegen.model_c import generate_device_c
    from splitter.cost.code import MOVE_KEY, layer_keys
    from splitter.importers import load_chain

    chain = load_chain(Path(__file__).resolve().parents[1] / "models" / model, granularity="op")
    n = len(chain.layers)
    source = generate_device_c(chain, [(0, 0, n - 1)], "probe", core="cortex-m4").files["model.c"]
    moves = layer_keys(chain, range(n)).count(MOVE_KEY)
    assert moves == source.count("__builtin_memmove(") > 0
    for core in code_table()["cores"].values():
        assert core["ops"][MOVE_KEY] > 0 and core["op_kernels"][MOVE_KEY] == ["memmove"]
        assert "memmove" in core["kernels"]["memmove"]
