"""One inference over the boards of a compiled plan (``splitter run`` as a library call).

Reads the plan manifest ``OUT/plan.json`` (:func:`splitter.manifest.read_manifest`: the graph
input and output tensors, the original model) and ``OUT/firmware/wiring.json`` (which devices
face the host). Connects to every host-facing device, checks its PONG (device name, plan hash of
plan.json), sends the input tensors to the first device and reads the RESULT tensors of the
last one (several for a model with several inputs / outputs, in plan.json's order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from splitter.device.host import HostLink, Timing, infer
from splitter.device.transport import open_transport
from splitter.errors import InputFileError, LinkError, ShapeError, ValidationError
from splitter.inputs import read_npy, read_npz
from splitter.ir import TensorSpec
from splitter.manifest import PlanManifest, read_manifest, read_wiring
from splitter.protocol import FIRMWARE_VERSION, PROTOCOL_VERSION, plan_hash
from splitter.segments.server import Load, WeightServer
from splitter.toolchain.emulator import Emulation

CHECK_TOLERANCE = 1e-4


@dataclass
class RunResult:
    """Output(s), the per sub-model cycles the firmware reported, wall time, emulation note.

    ``outputs`` holds every graph output by name in plan.json order, ``output`` the first.
    ``compute_s`` is ``sum(cycles_k / f_clk(device_k))`` with the device's core clock (168 MHz
    in the emulator, the part's reset clock on a board); the rest of ``seconds`` is link and
    host time.
    """

    output: np.ndarray
    timings: list[Timing] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""
    compute_s: float = 0.0
    #: LO-SC segment loads the host served (a segmented OUT, ``splitter segment -o``)
    loads: list[Load] = field(default_factory=list)
    outputs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def load_s(self) -> float:
        """Wall time spent loading segment weights (part of ``seconds``)."""
        return sum(x.seconds for x in self.loads)


def input_specs(manifest: PlanManifest) -> tuple[TensorSpec, ...]:
    """The graph inputs the host sends: the first sub-model's inputs, in plan.json order."""
    return manifest.submodels[0].inputs


def output_specs(manifest: PlanManifest) -> tuple[TensorSpec, ...]:
    """The graph outputs the host receives: the last sub-model's outputs, in plan.json order."""
    return manifest.submodels[-1].outputs


def load_inputs(args: Sequence[str], specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """The input arrays by name from ``--input`` arguments, each checked (:func:`load_input`).

    Each argument is ``X.npy`` (a model with one input), ``NAME=X.npy`` (input ``NAME``) or an
    ``.npz`` archive holding one array per input name; every model input must be given once.
    """
    names = [s.name for s in specs]
    paths: dict[str, Path] = {}
    for arg in args:
        name, sep, rest = arg.partition("=")
        if sep and name in names:
            paths[name] = Path(rest)
        elif Path(arg).suffix.lower() == ".npz":
            return _load_npz(Path(arg), specs)
        elif len(names) == 1 and not sep:
            paths[names[0]] = Path(arg)
        else:
            raise ShapeError(
                f"--input {arg}: the model has inputs {', '.join(names)}; give --input "
                f"{names[0]}=X.npy per input or one .npz keyed by input name"
            )
    missing = [n for n in names if n not in paths]
    if missing:
        raise ShapeError(
            f"no --input for model input(s) {', '.join(missing)}; give --input "
            f"{missing[0]}=X.npy or one .npz keyed by input name"
        )
    return {s.name: load_input(paths[s.name], s) for s in specs}


def _load_npz(path: Path, specs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """Every input of ``specs`` from the ``.npz`` archive ``path`` (keys = input names)."""
    arrays = read_npz(path, ".npz input")
    missing = [s.name for s in specs if s.name not in arrays]
    if missing:
        raise ShapeError(
            f"{path}: no array {missing[0]!r} (holds {', '.join(sorted(arrays)) or 'none'}); "
            f"save it with numpy.savez(path, **{{name: array}}) for inputs "
            f"{', '.join(s.name for s in specs)}"
        )
    return {s.name: _checked(path, arrays[s.name], s) for s in specs}


def load_input(path: Path, spec: TensorSpec) -> np.ndarray:
    """The ``.npy`` input, checked against the plan's input shape and dtype."""
    return _checked(path, read_npy(path), spec)


def _checked(path: Path, x: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """``x`` (read from ``path``) when its dtype and shape are ``spec``'s; else ShapeError."""
    if x.dtype != np.dtype(spec.dtype):
        raise ShapeError(
            f"{path}: dtype {x.dtype}, the model input {spec.name} needs {spec.dtype}; "
            f"convert it (x.astype('{spec.dtype}'))"
        )
    if tuple(x.shape) != spec.shape:
        raise ShapeError(
            f"{path}: shape {tuple(x.shape)}, the model input {spec.name} needs {spec.shape}"
        )
    return x


def check_pong(link: HostLink, expected_hash: str, timeout: float) -> None:
    """PING the device until it answers; its name and plan hash must match the plan."""
    pong = link.ping(timeout)
    if pong.protocol != PROTOCOL_VERSION:
        raise LinkError(
            f"device {link.device}: firmware speaks protocol {pong.protocol}, host "
            f"{PROTOCOL_VERSION}; rebuild and flash it"
        )
    if pong.firmware_version != FIRMWARE_VERSION:
        raise LinkError(
            f"device {link.device}: firmware version {pong.firmware_version}, this splitter "
            f"generates {FIRMWARE_VERSION}; rebuild and flash it (splitter build / flash)"
        )
    if pong.device_name != link.device:
        raise LinkError(
            f"{link.url}: expected device {link.device} but {pong.device_name!r} answered; "
            "check which port goes to which board"
        )
    if pong.plan_hash != expected_hash:
        raise LinkError(
            f"device {link.device}: firmware is for plan {pong.plan_hash}, plan.json is "
            f"{expected_hash}; rebuild and flash it (splitter build / flash)"
        )


def from_wire(data: bytes, spec: TensorSpec) -> np.ndarray:
    """Inverse of :func:`splitter.device.host.to_wire` for a tensor of ``spec``'s dtype, shape."""
    wire = np.dtype(spec.dtype).newbyteorder("<")
    return np.frombuffer(data, dtype=wire).reshape(spec.shape).astype(np.dtype(spec.dtype))


def reference_output(
    manifest: PlanManifest,
    out_dir: Path,
    x: np.ndarray | Mapping[str, np.ndarray],
    model: Path | None = None,
) -> np.ndarray:
    """The original model's (first) output: :func:`reference_outputs`' first array."""
    return next(iter(reference_outputs(manifest, out_dir, x, model).values()))


def reference_outputs(
    manifest: PlanManifest,
    out_dir: Path,
    x: np.ndarray | Mapping[str, np.ndarray],
    model: Path | None = None,
) -> dict[str, np.ndarray]:
    """The original model's outputs by plan.json output name (``model``, else the manifest's
    model path): onnxruntime for ONNX, LiteRT for TFLite with the built-in kernels and no
    default delegate (:class:`~splitter.slicing.validate.TfliteRunner`, the kernels compile's
    validation runs: XNNPACK's int8 requantisation may round one level off them). Several
    inputs are fed by name (by position in plan.json's order when the file's names differ);
    a single array is the model's one input. Outputs are matched by position in plan.json's
    order (the importers keep the model's order)."""
    path = model or Path(manifest.model.path)
    if not path.is_file():
        raise InputFileError(
            f"{path}: the original model of {out_dir}/plan.json is gone; pass --model or --no-check"
        )
    names = [t.name for t in output_specs(manifest)]
    suffix = path.suffix.lower()
    if suffix not in (".onnx", ".tflite"):
        raise InputFileError(f"{path}: the output check needs an .onnx or .tflite model")
    from splitter.slicing.validate import make_runner

    runner = make_runner(path, suffix)
    wanted = [t.name for t in runner.inputs]
    given = dict(x) if isinstance(x, Mapping) else {wanted[0]: x}
    if not set(wanted) <= set(given):  # names differ from plan.json's: match by position
        given = dict(zip(wanted, given.values(), strict=False))
    outs = runner.run(given)
    return dict(zip(names, (np.asarray(outs[o.name]) for o in runner.outputs), strict=False))


def run(
    out_dir: Path,
    x: np.ndarray | Mapping[str, np.ndarray],
    *,
    ports: Mapping[str, str] | None = None,
    emulate: bool = False,
    icount: bool = True,
    timeout: float = 60.0,
    log: Callable[[str], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    on_bytes: Callable[[str, int, int], None] | None = None,
) -> RunResult:
    """One inference: over ``ports`` (device name -> transport URL, see ``open_transport``) or
    a fresh emulation. ``x`` is the input array, or for several inputs the arrays by input name
    (:func:`load_inputs`). ``on_step`` hears each step, ``on_bytes`` the tensor transfers
    (:attr:`HostLink.on_bytes`)."""
    step = on_step or (lambda _text: None)
    manifest = read_manifest(out_dir)
    wiring = read_wiring(out_dir)
    specs = output_specs(manifest)
    xs = _ordered_inputs(manifest, x)
    expected = plan_hash(manifest.to_dict())
    with ExitStack() as stack:
        note = ""
        if emulate:
            step("booting the emulated boards")
            emu = stack.enter_context(Emulation(out_dir, icount=icount))
            ports, note = emu.endpoints, emu.note
        else:
            ports = {**boards_file_ports(manifest), **(ports or {})}
        urls = _host_ports(wiring, ports or {})
        links = [
            stack.enter_context(open_host_link(u, n, int(wiring["baud"]), log))
            for n, u in urls.items()
        ]
        step("checking the boards' firmware")
        for link in links:
            check_pong(link, expected, timeout=min(timeout, 15.0))
            link.on_bytes = on_bytes
        server = weight_server(out_dir, links)
        step("running one inference")
        res = infer(
            links,
            wiring["first_device"],
            wiring["last_device"],
            xs,
            [s.nbytes for s in specs],
            timeout=timeout + (server.budget_s if server is not None else 0.0),
        )
    ys = {s.name: from_wire(d, s) for s, d in zip(specs, res.tensors, strict=True)}
    compute = compute_seconds(wiring, res.timings, emulated=emulate)
    loads = server.loads if server is not None else []
    return RunResult(
        next(iter(ys.values())), res.timings, res.seconds, note, compute, list(loads), ys
    )


def _ordered_inputs(
    manifest: PlanManifest, x: np.ndarray | Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The input arrays in plan.json order; ShapeError naming a missing input."""
    specs = input_specs(manifest)
    if isinstance(x, np.ndarray):
        if len(specs) != 1:
            raise ShapeError(
                f"the model has inputs {', '.join(s.name for s in specs)}; pass the arrays "
                "by input name"
            )
        return [x]
    missing = [s.name for s in specs if s.name not in x]
    if missing:
        raise ShapeError(f"no array for model input(s) {', '.join(missing)}")
    return [x[s.name] for s in specs]


def weight_server(out_dir: Path, links: list[HostLink]) -> WeightServer | None:
    """For a segmented ``OUT`` (``segments.json``), the server of its segments' weights,
    attached to the (one) device's host link; None otherwise."""
    from splitter.segments.firmware import read_segments

    record = read_segments(out_dir)
    if record is None:
        return None
    server = WeightServer.from_out(out_dir, record, links[0].device)
    links[0].serve = server
    return server


def open_host_link(
    url: str, device: str, baud: int, log: Callable[[str], None] | None = None
) -> HostLink:
    """A :class:`HostLink` to ``device`` over the transport of ``url`` (``open_transport``)."""
    return HostLink(open_transport(url, baud=baud, peer=f"device {device}"), device, log=log)


def compute_seconds(wiring: Mapping[str, Any], timings: list[Timing], *, emulated: bool) -> float:
    """``sum_k cycles_k / f_clk(device_k)`` over the TIMING records."""
    key = "emulator" if emulated else "part"
    clocks = {d["index"]: float(d.get("clock_hz", {}).get(key, 0)) for d in wiring["devices"]}
    return sum(t.cycles / clocks[t.device] for t in timings if clocks.get(t.device))


def boards_file_ports(manifest: PlanManifest) -> dict[str, str]:
    """The ``port`` of each device of the boards file (recorded in plan.json): the default of
    ``--port`` for ``run`` and ``bench``, which a ``--port DEVICE=...`` overrides."""
    return {d.name: d.port for d in manifest.devices if d.port}


def _host_ports(wiring: Mapping[str, Any], ports: Mapping[str, str]) -> dict[str, str]:
    """URL per host-facing device; one unnamed port (key ``""``) fits a single such device."""
    facing = [
        d["name"] for d in wiring["devices"] if any(ln["peer_index"] < 0 for ln in d["links"])
    ]
    if "" in ports and len(facing) == 1:
        return {facing[0]: ports[""]}
    missing = [n for n in facing if n not in ports]
    if missing:
        raise LinkError(
            f"no port for host-facing device(s) {', '.join(missing)}; pass --port "
            f"{missing[0]}=/dev/ttyXXX (or --emulate)"
        )
    return {n: ports[n] for n in facing}


#: ``sup ||J_f(x)||_inf`` (max row sum of |Jacobian|) of the float ops onnxruntime leaves
#: between a DequantizeLinear and a QuantizeLinear: Softmax ``2 y_i (1 - y_i) <= 1/2``,
#: Sigmoid ``s (1 - s) <= 1/4``, Tanh ``1 - tanh^2 <= 1``.
FLOAT_OP_GAIN = {"Softmax": 0.5, "Sigmoid": 0.25, "Tanh": 1.0}


def output_tolerance(model: Path, output: int = 0) -> float:
    """:data:`CHECK_TOLERANCE`, or for a QDQ ONNX model whose output number ``output`` is
    written by a DequantizeLinear, one quantisation step ``s_out`` of that output: the int8
    kernels follow TFLite's integer arithmetic, onnxruntime rounds the float QDQ graph, and each
    requantising op may differ by one step (``splitter.importers.onnx_qdq``). When the output is
    quantised from a float op of :data:`FLOAT_OP_GAIN` (gain ``L``) that reads an int8 tensor of
    step ``s_in``, that tensor's one-step difference moves the float result by at most
    ``L * s_in`` (mean value theorem), so the bound is ``s_out + L * s_in``."""
    if model.suffix.lower() != ".onnx" or not model.is_file():
        return CHECK_TOLERANCE
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model), load_external_data=False).graph
    writer = {o: n for n in graph.node for o in n.output}
    inits = {i.name: i for i in graph.initializer}

    def scale_of(node: Any) -> float | None:
        init = inits.get(node.input[1]) if node is not None and len(node.input) > 1 else None
        return None if init is None else float(np.max(numpy_helper.to_array(init)))

    out = graph.output[output].name if output < len(graph.output) else ""
    node = writer.get(out)
    s_out = scale_of(node) if node is not None and node.op_type == "DequantizeLinear" else None
    if node is None or s_out is None:
        return CHECK_TOLERANCE
    q = writer.get(node.input[0])
    f = writer.get(q.input[0]) if q is not None and q.op_type == "QuantizeLinear" else None
    dq = writer.get(f.input[0]) if f is not None and f.op_type in FLOAT_OP_GAIN else None
    s_in = scale_of(dq) if dq is not None and dq.op_type == "DequantizeLinear" else None
    extra = 0.0 if f is None or s_in is None else FLOAT_OP_GAIN[f.op_type] * s_in
    return max(CHECK_TOLERANCE, 1.01 * (s_out + extra))


def reference_runtime(manifest: PlanManifest, model: Path | None = None) -> str:
    """The runtime :func:`reference_output` uses for ``model`` (else the plan's model): LiteRT
    for TFLite, onnxruntime for ONNX."""
    path = model or Path(manifest.model.path)
    return "LiteRT" if path.suffix.lower() == ".tflite" else "onnxruntime"


def check_output(
    y: np.ndarray,
    ref: np.ndarray,
    tol: float = CHECK_TOLERANCE,
    runtime: str = "onnxruntime",
    name: str = "",
) -> float:
    """Max-abs difference to the reference (computed by ``runtime``); :class:`ValidationError`
    above ``tol``.

    A non-finite value (NaN, +-Inf) in the boards' output or the reference fails the check:
    ``|NaN - r| > tol`` is false, so without this a NaN result would pass as correct.
    """
    what = f"output {name}" if name else "output"
    if y.size != ref.size:
        raise ValidationError(f"{what} has {y.size} values, {runtime} gives {ref.size}")
    _check_finite(y, f"boards' {what}")
    _check_finite(ref, f"reference {what} ({runtime})")
    if not y.size:
        return 0.0
    err = float(np.max(np.abs(y.ravel().astype(np.float64) - ref.ravel().astype(np.float64))))
    if err > tol:
        raise ValidationError(
            f"boards' {what} differs from {runtime} by {err:.3g} (max-abs) > {tol:g}; "
            "rebuild the firmware and check the plan"
        )
    return err


def _check_finite(x: np.ndarray, what: str) -> None:
    """:class:`ValidationError` naming how many values of ``x`` are NaN or infinite, and the
    first one's flat index."""
    bad = np.flatnonzero(~np.isfinite(x.ravel()))
    if bad.size:
        raise ValidationError(
            f"{what} has {bad.size} non-finite value(s) (NaN/Inf), the first at flat index "
            f"{int(bad[0])} ({x.ravel()[bad[0]]}); the check fails: rebuild the firmware and "
            "check the plan"
        )
