"""Small models built with onnx.helper and cut-point helpers shared by the slicing tests.

Not a test module of its own (it defines no test); the slicing, validation and compile tests
import it.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from splitter.ir import TensorSpec
from splitter.slicing.boundaries import Cut


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def residual_cnn(seed: int = 0, ir_version: int = 8, opset: int = 13) -> onnx.ModelProto:
    """conv-relu | conv + skip add (a branch) - relu | global pool - flatten - gemm.

    Single-entry cut points (tensors): ``x``, ``r1``, ``a1``, ``g``, ``f``, ``y``.
    """
    rng = np.random.default_rng(seed)
    inits = [
        _init("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3),
        _init("b1", rng.standard_normal(8) * 0.1),
        _init("w2", rng.standard_normal((8, 8, 3, 3)) * 0.2),
        _init("b2", rng.standard_normal(8) * 0.1),
        _init("wf", rng.standard_normal((4, 8)) * 0.5),
        _init("bf", rng.standard_normal(4) * 0.1),
        _init("unused", np.ones(3)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s1"], name="add1"),
        helper.make_node("Relu", ["s1"], ["a1"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["a1"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "residual_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=inits,
    )
    if ir_version < 4:  # IR < 4 lists every initializer among the graph inputs
        graph.input.extend(
            helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits
        )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)],
        producer_name="test",
        ir_version=ir_version,
    )
    helper.set_model_props(model, {"author": "tests", "input_note": "standard normal"})
    return model


#: (name, shape) of the single-entry cut tensors of :func:`residual_cnn`, in order.
RESIDUAL_CUTS = [
    ("x", (1, 3, 8, 8)),
    ("r1", (1, 8, 8, 8)),
    ("a1", (1, 8, 8, 8)),
    ("g", (1, 8, 1, 1)),
    ("f", (1, 8)),
    ("y", (1, 4)),
]


def cuts_between(
    points: list[tuple[str, tuple[int, ...]]],
    devices: list[int],
    dtype: str = "float32",
) -> list[Cut]:
    """Consecutive cuts between ``points``; sub-model ``k`` runs on ``devices[k]``."""
    cuts = []
    for k, ((a, sa), (b, sb)) in enumerate(itertools.pairwise(points)):
        cuts.append(
            Cut(
                index=k,
                device=f"dev{devices[k]}",
                device_index=devices[k],
                first=k,
                last=k,
                inputs=(TensorSpec(a, sa, dtype),),
                outputs=(TensorSpec(b, sb, dtype),),
            )
        )
    return cuts


def tflite_cut_points(subgraph) -> list[int]:  # type: ignore[no-untyped-def]
    """Tensor indices where exactly one activation is live between two operators."""
    ops = subgraph.operators
    first_in = int(subgraph.inputs[0])
    producer = {int(t): i for i, op in enumerate(ops) for t in op.outputs}
    last_use: dict[int, int] = {}
    for i, op in enumerate(ops):
        for t in op.inputs:
            if int(t) >= 0 and (int(t) in producer or int(t) == first_in):
                last_use[int(t)] = i
    points = [first_in]
    for k in range(len(ops) - 1):
        live = [t for t, use in last_use.items() if use > k and producer.get(t, -1) <= k]
        if len(live) == 1 and live[0] != points[-1]:
            points.append(live[0])
    points.append(int(subgraph.outputs[0]))
    return points


def boards_toml(devices: list[tuple[str, float, float, float, float]], baud: int) -> str:
    """boards.toml text for inline parts ``(name, flash_bytes, ram_bytes, clock_mhz, cpm)``."""
    lines = ["[link]", f"baud = {baud}", ""]
    for name, flash, ram, clock, cpm in devices:
        lines += [
            "[[device]]",
            f'name = "{name}"',
            f'part = {{ name = "{name.upper()}", flash_kib = {flash / 1024:.4f}, '
            f'ram_kib = {ram / 1024:.4f}, clock_mhz = {clock}, cpm = {cpm}, family = "F4" }}',
            "",
        ]
    return "\n".join(lines)


def sized_boards(chain, kind: str) -> str:  # type: ignore[no-untyped-def]
    """Board files sized to a chain so that the optimal plan must split it.

    ``"fastslow"``: a fast device holding a quarter of the weights and a slow one holding all,
    over a fast link, so latency-optimal plans alternate (a device runs non-adjacent
    sub-models). ``"three"``: three equal devices each holding ~40 % of the weights (>= 3
    sub-models whenever the layers allow it). Each budget also holds the firmware's code and
    runtime RAM (the planner's upper bound, splitter/cost/code.py) for a model.
    """
    costs = chain.costs
    total = sum(c.flash for c in costs)
    biggest = max(c.flash for c in costs)
    d = 2 if kind == "fastslow" else 3
    code, runtime = firmware_reserve(chain, d)
    ram = max(c.ram for c in costs) * 1.1 + 1024 + runtime
    if kind == "fastslow":
        fast = max(0.25 * total, biggest * 1.01) + code
        slow = 2 * total + code
        return boards_toml([("fast", fast, ram, 480, 1), ("slow", slow, ram, 16, 10)], 10**7)
    share = max(0.4 * total, biggest * 1.01) + code
    devices = [(f"m{k}", share, ram, 80 + 40 * k, 6) for k in range(3)]
    return boards_toml(devices, 921600)


def firmware_reserve(chain, devices: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Upper bound of the firmware code and runtime RAM of an F4 device hosting any part of
    ``chain`` (``(0, 0)`` for a layer profile: no firmware)."""
    if chain.graph is None:
        return 0, 0
    from splitter.cost.code import code_bytes, layer_keys, runtime_ram_bytes
    from splitter.hardware.catalog import get_part

    part = get_part("STM32F405RG")
    keys = layer_keys(chain, range(len(chain.layers)))
    return code_bytes(part, keys, devices, devices), runtime_ram_bytes(part, devices, devices)


def ensure_model(name: str):  # type: ignore[no-untyped-def]
    """``models/<name>.onnx``, built by ``models/build.py`` when missing (e.g. MobileNetV2)."""
    import importlib.util
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("models_build", root / "models" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["models_build"] = module  # dataclasses in build.py look their module up
    spec.loader.exec_module(module)
    return module.ensure_model(name)


def can_force_split(chain, devices: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether :func:`sized_boards` can force a split: the weights besides the largest layer
    exceed what the firmware of a split device may need beyond that of one device hosting
    everything (more links and sub-models; tiny models such as sine_float cannot be forced), and
    the largest layer, sized in with 1 % to spare, leaves some weights out (not long_skip)."""
    costs = chain.costs
    rest = sum(c.flash for c in costs) - max(c.flash for c in costs)
    if max(c.flash for c in costs) * 1.01 >= sum(c.flash for c in costs):
        return False
    if chain.graph is None:
        return True
    from splitter.cost.code import code_bytes, layer_keys
    from splitter.hardware.catalog import get_part

    part = get_part("STM32F405RG")
    keys = layer_keys(chain, range(len(chain.layers)))
    slack = code_bytes(part, keys, devices, devices) - code_bytes(part, keys, 1, 1)
    return rest > slack
