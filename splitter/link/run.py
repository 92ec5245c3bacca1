"""One inference over the boards of a compiled plan (``splitter run`` as a library call).

Reads the plan manifest ``OUT/plan.json`` (:func:`splitter.manifest.read_manifest`: the graph
input and output tensors, the original model) and ``OUT/firmware/wiring.json`` (which devices
face the host). Connects to every host-facing device, checks its PONG (device name, plan hash of
plan.json), sends the input to the first device and reads the RESULT of the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from splitter.errors import InputFileError, LinkError, ShapeError, ValidationError
from splitter.inputs import read_npy
from splitter.ir import TensorSpec
from splitter.link.emulator import Emulation
from splitter.link.host import HostLink, Timing, infer
from splitter.link.protocol import FIRMWARE_VERSION, PROTOCOL_VERSION, plan_hash
from splitter.link.segments import Load, WeightServer
from splitter.link.transport import open_transport
from splitter.manifest import PlanManifest, read_manifest, read_wiring

CHECK_TOLERANCE = 1e-4


@dataclass
class RunResult:
    """Output, the per sub-model cycles the firmware reported, wall time, emulation note.

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

    @property
    def load_s(self) -> float:
        """Wall time spent loading segment weights (part of ``seconds``)."""
        return sum(x.seconds for x in self.loads)


def load_input(path: Path, spec: TensorSpec) -> np.ndarray:
    """The ``.npy`` input, checked against the plan's input shape and dtype."""
    x = read_npy(path)
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
    """Inverse of :func:`splitter.link.host.to_wire` for a tensor of ``spec``'s dtype, shape."""
    wire = np.dtype(spec.dtype).newbyteorder("<")
    return np.frombuffer(data, dtype=wire).reshape(spec.shape).astype(np.dtype(spec.dtype))


def reference_output(
    manifest: PlanManifest, out_dir: Path, x: np.ndarray, model: Path | None = None
) -> np.ndarray:
    """The original model's output (``model``, else the manifest's model path): onnxruntime for
    ONNX, LiteRT for TFLite."""
    path = model or Path(manifest.model.path)
    if not path.is_file():
        raise InputFileError(
            f"{path}: the original model of {out_dir}/plan.json is gone; pass --model or --no-check"
        )
    suffix = path.suffix.lower()
    if suffix == ".tflite":
        from ai_edge_litert.interpreter import Interpreter

        interp = Interpreter(model_path=str(path))
        interp.allocate_tensors()
        interp.set_tensor(interp.get_input_details()[0]["index"], x)
        interp.invoke()
        return np.asarray(interp.get_tensor(interp.get_output_details()[0]["index"]))
    if suffix != ".onnx":
        raise InputFileError(f"{path}: the output check needs an .onnx or .tflite model")
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.asarray(sess.run(None, {name: x})[0])


def run(
    out_dir: Path,
    x: np.ndarray,
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
    a fresh emulation. ``on_step`` hears each step, ``on_bytes`` the tensor transfers
    (:attr:`HostLink.on_bytes`)."""
    step = on_step or (lambda _text: None)
    manifest = read_manifest(out_dir)
    wiring = read_wiring(out_dir)
    out_spec = manifest.output
    expected = plan_hash(manifest.to_dict())
    with ExitStack() as stack:
        note = ""
        if emulate:
            step("booting the emulated boards")
            emu = stack.enter_context(Emulation(out_dir, icount=icount))
            ports, note = emu.endpoints, emu.note
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
            x,
            out_spec.nbytes,
            timeout=timeout + (server.budget_s if server is not None else 0.0),
        )
    y = from_wire(res.data, out_spec)
    compute = compute_seconds(wiring, res.timings, emulated=emulate)
    loads = server.loads if server is not None else []
    return RunResult(y, res.timings, res.seconds, note, compute, list(loads))


def weight_server(out_dir: Path, links: list[HostLink]) -> WeightServer | None:
    """For a segmented ``OUT`` (``segments.json``), the server of its segments' weights,
    attached to the (one) device's host link; None otherwise."""
    from codegen.segments import read_segments

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


def output_tolerance(model: Path) -> float:
    """:data:`CHECK_TOLERANCE`, or for a QDQ ONNX model whose (first) output is written by a
    DequantizeLinear, one quantisation step of that output: the int8 kernels follow TFLite's
    integer arithmetic, onnxruntime rounds the float QDQ graph, and each requantising op may
    differ by one step (``splitter.importers.onnx_qdq``)."""
    if model.suffix.lower() != ".onnx" or not model.is_file():
        return CHECK_TOLERANCE
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(model), load_external_data=False).graph
    out = graph.output[0].name if graph.output else ""
    node = next((n for n in graph.node if out in n.output), None)
    if node is None or node.op_type != "DequantizeLinear":
        return CHECK_TOLERANCE
    scale = next((i for i in graph.initializer if i.name == node.input[1]), None)
    if scale is None:
        return CHECK_TOLERANCE
    return max(CHECK_TOLERANCE, 1.01 * float(np.max(numpy_helper.to_array(scale))))


def reference_runtime(manifest: PlanManifest, model: Path | None = None) -> str:
    """The runtime :func:`reference_output` uses for ``model`` (else the plan's model): LiteRT
    for TFLite, onnxruntime for ONNX."""
    path = model or Path(manifest.model.path)
    return "LiteRT" if path.suffix.lower() == ".tflite" else "onnxruntime"


def check_output(
    y: np.ndarray, ref: np.ndarray, tol: float = CHECK_TOLERANCE, runtime: str = "onnxruntime"
) -> float:
    """Max-abs difference to the reference (computed by ``runtime``); :class:`ValidationError`
    above ``tol``.

    A non-finite value (NaN, +-Inf) in the boards' output or the reference fails the check:
    ``|NaN - r| > tol`` is false, so without this a NaN result would pass as correct.
    """
    if y.size != ref.size:
        raise ValidationError(f"output has {y.size} values, {runtime} gives {ref.size}")
    _check_finite(y, "boards' output")
    _check_finite(ref, f"reference output ({runtime})")
    err = float(np.max(np.abs(y.ravel().astype(np.float64) - ref.ravel().astype(np.float64))))
    if err > tol:
        raise ValidationError(
            f"boards' output differs from {runtime} by {err:.3g} (max-abs) > {tol:g}; "
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
