"""Firmware code and runtime RAM per device, from the measured size table ``code_sizes.json``.

The table is measured from real arm-none-eabi-gcc builds by ``make code-sizes``
(:mod:`splitter.measure.code_table`, which says how); ``tests/test_code_table.py`` fails when
the sources it was measured from changed. For a device hosting ops ``O`` in ``s`` sub-models
over ``l`` links (SPEC.md's constraints (4) and (5) extended by what the firmware itself needs):

* ``code = runtime_code[part][l] + |union of closure(k) for the kernels k that O call|
  + sum_{o in O} op_bytes[core][key(o)] + s * per_submodel[core]
  + (s - s_l) * code_per_submodel[part]`` (the runtime's tables: ``s_l`` below);
* ``runtime RAM = runtime_ram[part][l] + ceil8((s - s_l) * ram_per_submodel[part])`` (``s_l``
  the sub-models the measured stub with ``l`` links hosts; ``ceil8`` rounds up to 8 bytes: a
  shift of ``d`` bytes in ``.bss`` moves every later 8-byte aligned object by at most
  ``ceil8(d)``) (``.data`` + ``.bss`` + the 2 KiB minimum stack);
* ``--app standalone`` / ``library`` (:class:`~splitter.ir.FirmwareUse`): ``runtime_code`` and
  ``runtime_ram`` are those of the mode's own stub for the device's role (head, middle, tail,
  alone, with or without a return link: ``runtime[part][app][role]``; the standalone
  image with its ``main()``, example application and console printing; the library's objects
  as the linker places them beside a user ``main()`` that calls the API, the user's own code
  excluded, with the 2 KiB minimum stack the runtime needs on the user's stack), the library
  has no clock code (no HSE fallback); the standalone head adds its compiled-in sample inputs
  (known bytes, :func:`app_sample_bytes`); with ``--result-on head`` the roles
  ``head_return`` / ``tail_return`` hold the return link (its USART and receive ring, the
  head's receive path) and the head adds a result buffer of the model's output bytes
  (``plan.c``);
* the arena lives in the part's first RAM region (``ram_regions``, the linker script's RAM),
  so the RAM a device offers is ``min(budget, region) - runtime RAM``.

An op key the table does not know (an op no model in ``models/`` uses) takes, for an int8 ->
int8 op of an NCHW (QDQ ONNX) graph, the figures of the same key under ``NHWC``: the int8
kernels are NHWC whatever the graph's layout, so it calls the same kernel (:func:`known_key`);
otherwise it counts every kernel of the core and the largest op bytes: an upper bound, never an
under-estimate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from splitter.cost.handlers import block_slice, q8_conv_kind
from splitter.hardware.families import family_for
from splitter.ir import Chain, FirmwareUse, Op, Part, TensorSpec

CODE_TABLE = Path(__file__).with_name("code_sizes.json")
#: op key of one compaction ``memmove`` after an operator-granularity layer
#: (``splitter/codegen/model_c.py``): its call bytes and the closure of ``memmove``
MOVE_KEY = "move"
#: op-key prefix of an op of a PEX row loop, and the key of one row loop's own code (its row
#: counters and window shifts; ``splitter/codegen/pex_rows.py``)
ROW_KEY_PREFIX = "pexrow:"
ROW_LOOP_KEY = "pexrow:loop"


@cache
def code_table() -> dict[str, Any]:
    """The measured table (``code_sizes.json``)."""
    data: dict[str, Any] = json.loads(CODE_TABLE.read_text("utf-8"))
    return data


def op_key(op: Op, chain: Chain) -> str:
    """``kind/layout/in>out`` of an op: its kind, the graph layout and the dtypes of its first
    input and output (a quantize from float32 and a requantize from int8 call other kernels).
    An int8 conv's kind carries its kernel family (``conv2d.depthwise``, ...:
    :func:`~splitter.cost.handlers.q8_conv_kind`), as each family links its own kernels. An op
    with a tensor of rank > 4 runs the rank-general path (``k_transpose_nd``), which no model
    of ``models/`` measures: ``.nd`` keeps it apart, so it gets the table's upper bound."""
    assert chain.graph is not None
    tensors = chain.graph.tensors
    kind = op.kind
    if kind == "conv2d":
        family = q8_conv_kind(op, [tensors[n] for n in op.inputs if n in tensors])
        kind = f"conv2d.{family}" if family else kind
    if kind == "slice" and block_slice(op, tensors) is not None:
        kind = "slice.part"  # k_slice_part, not the index gather and its offset maps
    if any(len(tensors[n].shape) > 4 for n in (*op.inputs, *op.outputs) if n in tensors):
        kind += ".nd"

    def dtype(name: str | None) -> str:
        spec = tensors.get(name) if name is not None else None
        return spec.dtype if spec is not None else "-"

    first_in = op.inputs[0] if op.inputs else None
    layout = chain.graph.layout
    if op.kind == "quantize" and op.attr("perm") is None:
        # a quantize inside a QDQ graph (after a float op) is the plain k_q_quantize call of a
        # TFLite QUANTIZE; only the graph input's (perm NCHW -> NHWC) also scatters channels
        layout = "NHWC"
    return f"{kind}/{layout}/{dtype(first_in)}>{dtype(op.outputs[0])}"


def layer_keys(chain: Chain, layers: Iterable[int]) -> list[str]:
    """The op keys of ``chain``'s layers ``layers`` (one per op, repeats kept). An op of a PEX
    loop calls other kernels (``splitter/codegen/pex.py``) than the table measured for its key, so
    it
    gets the key ``pex:<key>`` in a channel loop; in a row loop (``splitter/codegen/pex_rows.py``)
    every
    op is a per-row call of its kernel, key ``pexrow:<kind>/<layout>`` (an int8 conv's kind with
    its kernel family, as in :func:`op_key`: each family links its own kernel), and each row
    loop adds one :data:`ROW_LOOP_KEY` (its row counters and window shifts): all measured by
    the table on the models' loop chains. A layer of
    an operator-granularity chain then has one :data:`MOVE_KEY` per ``memmove`` of its
    compaction (:func:`compaction_moves`)."""
    keys = []
    for j in layers:
        layer = chain.layers[j]
        rowed = {name for loop in layer.loops if loop.by == "row" for name in loop.ops}
        looped = {name for loop in layer.loops for name in loop.ops}
        for op in layer.ops:
            if op.name in rowed:  # every op of a row loop is one kernel call per row
                keys.append(ROW_KEY_PREFIX + op_key(op, chain).rsplit("/", 1)[0])
            else:
                key = op_key(op, chain)
                keys.append(f"pex:{key}" if op.name in looped else key)
        keys.extend([ROW_LOOP_KEY] * sum(loop.by == "row" for loop in layer.loops))
        if chain.granularity == "op":
            keys.extend([MOVE_KEY] * compaction_moves(chain, j))
    return keys


def arena_itemsize(spec: TensorSpec) -> int:
    """Bytes per element in the firmware's arena: 1 for int8 (``kernels_q8.c``), else 4 (float32
    activations; ``splitter.codegen.model_c.float_itemsize`` is the generator's copy of this
    rule)."""
    return 1 if spec.dtype == "int8" else 4


def compaction_moves(chain: Chain, j: int) -> int:
    """The ``memmove`` calls the firmware makes after layer ``j`` of an operator-granularity
    chain: the compaction of :func:`splitter.cost.oparena.plan_op_layer` with the arena's
    element sizes, as ``splitter.codegen.model_c`` emits it."""
    from splitter.cost.oparena import plan_op_layer

    assert chain.graph is not None
    layer = chain.layers[j]
    before = [t.name for t in chain.layers[j - 1].boundary] if j else list(chain.graph.inputs)
    after = [t.name for t in layer.boundary]
    mem = plan_op_layer(layer.ops, before, after, chain.graph.tensors, arena_itemsize)
    return len(mem.moves)


def _core(part: Part) -> dict[str, Any]:
    core: dict[str, Any] = code_table()["cores"][family_for(part.family).core.key]
    return core


def _runtime_entry(part: Part) -> dict[str, Any]:
    """The part's measured runtime, else (an inline part) the first catalog part of its family."""
    table = code_table()["runtime"]
    if part.name in table:
        entry: dict[str, Any] = table[part.name]
        return entry
    from splitter.hardware.catalog import parts

    first = next(p for p in parts() if p.family == part.family)
    entry = table[first.name]
    return entry


#: roles of a device in ``--app standalone`` / ``library`` (``splitter.measure.code_table``)
APP_ROLES = ("single", "head", "middle", "tail", "head_return", "tail_return")


def device_role(head: bool, tail: bool, returns: bool) -> str:
    """A device's role in an app-mode chain: ``single`` (it runs the whole chain), ``head``,
    ``middle`` or ``tail``, ``_return`` with the return link of ``--result-on head``."""
    if head and tail:
        return "single"
    if head or tail:
        return ("head" if head else "tail") + ("_return" if returns else "")
    return "middle"


def _app_runtime(part: Part, app: str, role: str, what: str, pick: Any = max) -> int:
    """Runtime code or RAM of ``--app`` ``app`` for a device of ``role`` (``""``, or a role the
    part's USARTs do not allow: ``pick``, max or min, over the measured roles)."""
    entry: dict[str, dict[str, int]] = _runtime_entry(part)[app]
    if role in entry:  # a role the part cannot take (too few USARTs) is refused at compile
        return int(entry[role][what])
    return int(pick(int(fig[what]) for fig in entry.values()))


def _runtime(part: Part, links: int, what: str) -> int:
    """Harness runtime code or RAM for ``links`` links (beyond the measured 3: the last step
    repeated)."""
    rt = _runtime_entry(part)
    top = max(int(k) for k in rt if k.isdigit())
    if links <= top:
        return int(rt[str(max(links, 1))][what])
    if top == 1:
        return int(rt["1"][what])
    step = int(rt[str(top)][what]) - int(rt[str(top - 1)][what])
    return int(rt[str(top)][what]) + (links - top) * step


def known_key(key: str, table: Mapping[str, Any]) -> str:
    """``key``, or when ``table`` lacks it and it is an int8 -> int8 op of an NCHW graph, the
    same op's ``NHWC`` key (the one NHWC int8 kernel both call) if ``table`` has that."""
    if key in table or not key.endswith("/int8>int8") or "/NCHW/" not in key:
        return key
    nhwc = key.replace("/NCHW/", "/NHWC/", 1)
    return nhwc if nhwc in table else key


def kernel_bytes(part: Part, keys: Iterable[str]) -> int:
    """Bytes of the union of the kernel closures the ops ``keys`` call on ``part``'s core."""
    core = _core(part)
    kernels: set[str] = set()
    for key in set(keys):
        kernels.update(core["op_kernels"].get(known_key(key, core["op_kernels"]), core["kernels"]))
    symbols: dict[str, int] = {}
    for k in kernels:
        symbols.update(core["kernels"].get(k, {}))
    return sum(symbols.values())


def code_bytes(
    part: Part,
    keys: Sequence[str],
    submodels: int,
    links: int,
    hse: bool = False,
    app: str = "harness",
    role: str = "",
) -> int:
    """Flash besides the weights of a device in ``--app`` ``app`` (module docstring formula;
    in app modes the runtime of the device's ``role``, :func:`device_role`, ``""`` the largest;
    the standalone head's sample inputs are added by the caller, :func:`app_sample_bytes`)."""
    core = _core(part)
    ops = core["ops"]
    worst = max(ops.values(), default=0)
    model = sum(int(ops.get(known_key(k, ops), worst)) for k in keys)
    model += submodels * int(core["per_submodel"])
    stub = _stub_submodels(links, app)
    tables = (submodels - stub) * int(_runtime_entry(part).get("code_per_submodel", 0))
    # a board with an HSE also links the clock fallback to the internal oscillator (measured per
    # part on its HSE board by splitter.measure.code_table)
    # (a library has no clock code: the product's HAL starts the clocks)
    fallback = int(_runtime_entry(part)["hse_code"]) if hse and app != "library" else 0
    runtime = (
        _runtime(part, links, "code") if app == "harness" else _app_runtime(part, app, role, "code")
    )
    return runtime + kernel_bytes(part, keys) + model + tables + fallback


def runtime_ram_bytes(
    part: Part, submodels: int, links: int, app: str = "harness", role: str = ""
) -> int:
    """RAM besides the arena of a device in ``--app`` ``app`` (module docstring formula; in app
    modes of its ``role`` as :func:`code_bytes`; the head's result buffer of ``--result-on
    head`` is added by the caller)."""
    harness = app == "harness"
    base = _runtime(part, links, "ram") if harness else _app_runtime(part, app, role, "ram")
    per = int(_runtime_entry(part)["ram_per_submodel"])
    extra = (submodels - _stub_submodels(links, app)) * per
    return base + -(-extra // 8) * 8


def _stub_submodels(links: int, app: str) -> int:
    """``s_l`` of the module docstring: the sub-models the measured stub hosts (the app-mode
    stubs host one)."""
    if app != "harness":
        return 1
    return int(code_table()["stub_submodels"][str(min(max(links, 1), 3))])


def app_sample_bytes(use: FirmwareUse, input_bytes: int) -> int:
    """Flash of the standalone head's compiled-in sample inputs (``app_samples.c``): ``samples
    * input_bytes`` (every input of sub-model 0, as ``splitter_submit`` takes it); 0 in the
    other modes."""
    return use.samples * input_bytes if use.app == "standalone" else 0


def arena_region(part: Part) -> tuple[str, int, int]:
    """``(name, origin, bytes)`` of the RAM region the arena is linked into."""
    if part.ram_regions:
        return part.ram_regions[0]
    return ("RAM", 0x2000_0000, round(part.ram_kib * 1024))


@dataclass(frozen=True)
class Reserve:
    """What a device's firmware takes besides the plan's weights and arena (an upper bound
    over every assignment): flash for code, and the RAM limit with the runtime taken off."""

    flash: int  # code bytes
    ram_cap: int  # bytes of the arena's region
    ram: int  # runtime RAM bytes
    region: str  # region name

    def describe_ram(self) -> str:
        """``RAM region AXI_SRAM (512 KiB, where the arena is linked) less 6.9 KiB runtime``."""
        return (
            f"RAM region {self.region} ({self.ram_cap / 1024:g} KiB, where the arena is linked) "
            f"less {self.ram / 1024:.1f} KiB runtime (stack, link buffers)"
        )

    def describe_flash(self) -> str:
        """``flash budget less 21.3 KiB code``."""
        return f"flash budget less {self.flash / 1024:.1f} KiB code (runtime and kernels)"


def reserves(
    chain: Chain,
    parts: Sequence[Part],
    *,
    upper: bool = True,
    hse: Sequence[bool] | None = None,
    use: FirmwareUse | None = None,
    io_bytes: tuple[int, int] = (0, 0),
) -> list[Reserve]:
    """Per device, the code and runtime RAM a plan of ``chain`` on ``parts`` reserves.

    ``upper``: at most what any plan needs (every op of the model, ``d`` links, ``d``
    sub-models, ``d`` = number of devices), so a plan within it always links. Otherwise at
    least what any plan needs (the runtime with one link, no kernel, no op): a relaxation
    whose optimum, when it fits exactly, is the exact optimum. ``use``: the ``--app`` mode;
    ``io_bytes``: the model's input and output bytes (the standalone head's samples and the
    result buffer of ``--result-on head``, counted on every device in the upper bound).
    """
    use = use or FirmwareUse()
    keys = layer_keys(chain, range(len(chain.layers))) if upper else []
    d = len(parts) if upper else 1
    links = d + int(use.returns) if upper else 1
    samples = app_sample_bytes(use, io_bytes[0]) if upper else 0
    out = []
    for part, on_hse in zip(parts, hse or [False] * len(parts), strict=True):
        name, _origin, size = arena_region(part)
        result = io_bytes[1] + 4 if upper and use.returns else 0
        if not upper:
            flash = (
                _runtime(part, 1, "code")
                if use.app == "harness"
                else _app_runtime(part, use.app, "", "code", min)
            )
        else:
            flash = code_bytes(part, keys, d, links, on_hse, use.app) + samples
        out.append(
            Reserve(
                flash=flash,
                ram_cap=size,
                ram=runtime_ram_bytes(part, d, links, use.app) + result
                if upper or use.app == "harness"
                else _app_runtime(part, use.app, "", "ram", min),
                region=name,
            )
        )
    return out
