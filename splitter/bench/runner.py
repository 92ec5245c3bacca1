"""``splitter bench`` as a library call: repeated inferences, measured against the estimates.

Per run (one inference, sequential: the next input is sent after the previous result arrived):

* compute: the cycles every device reports per sub-model (TIMING records, docs/protocol.md);
  under QEMU these are SysTick ticks at the emulated 168 MHz (instruction counts x 0.168 with
  ``-icount shift=0``), on a real part core cycles at its clock;
* links: host -> first device is timed by the host from the first TIMING byte written to the
  last TENSOR chunk's ACK; last device -> host from the first frame (its TIMING) read to the last
  RESULT chunk; board-to-board links are timed by the proxy of :mod:`splitter.bench.faults`
  (first byte of the TIMING frame preceding a sub-model's input to the last byte of the ACK of
  its last TENSOR chunk). With real boards (``ports``) no proxy sits between boards, so
  board-to-board time is *derived*: ``latency - host links - sum(cycles / f)``, shared among the
  board links in proportion to their bytes (``measured_by: "derived"``);
* latency: host wall time from the first byte sent to the last result byte.

Throughput when inputs are pipelined: the host sends input ``k+1`` as soon as the first device
takes it (its ACKs arrive once it has forwarded input ``k``), a second thread collects results.
That is only safe when no device hosts two sub-models (one shared arena per device, and the
protocol has no "ready" message) and the first and last devices differ (one host link cannot
carry a send and a receive at once); otherwise the sequential throughput ``runs / sum(latency)``
is reported with the reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from splitter import protocol as P
from splitter.bench.estimate import HOST, estimate, find_target, link_transfers, submodel_costs
from splitter.bench.faults import (
    CountingTransport,
    FaultSpec,
    FrameEvent,
    LinkProxy,
    ProxiedEmulation,
)
from splitter.bench.stats import summary
from splitter.device.host import HostLink, Timing, receive_results, send_tensors, to_wire
from splitter.device.run import (
    _host_ports,
    boards_file_ports,
    check_pong,
    load_inputs,
    open_host_link,
    weight_server,
)
from splitter.errors import LinkError, SplitterError
from splitter.hardware.qemu import EMULATOR
from splitter.ir import TensorSpec
from splitter.manifest import PlanManifest, read_manifest, read_wiring
from splitter.protocol import plan_hash
from splitter.segments.server import WeightServer

EMULATED_CLOCK_HZ = float(EMULATOR.clock_hz)
BENCH_FILE = "bench.json"


@dataclass
class BenchConfig:
    """What ``splitter bench`` takes besides ``OUT``."""

    runs: int = 100
    emulate: bool = False
    ports: Mapping[str, str] = field(default_factory=dict)
    icount: bool = True
    timeout: float = 60.0
    target: str | Path | None = None
    seed: int = 0
    #: input array (the model input's shape); several inputs: ``--input`` arguments as
    #: ``splitter run`` takes them (``NAME=X.npy`` each, or one ``.npz``); default: seeded
    #: standard normal (seed ``seed + k`` for input ``k``)
    input_path: str | Path | Sequence[str] | None = None
    #: inferences run first and not counted (the first one pays for link start-up)
    warmup: int = 1
    pipeline: bool = True
    faults: dict[tuple[str, str], FaultSpec] = field(default_factory=dict)
    log: Callable[[str], None] | None = None
    #: progress: called with each step's description, and with (runs done, runs) per run
    on_step: Callable[[str], None] | None = None
    on_run: Callable[[int, int], None] | None = None


@dataclass
class RunSample:
    """One sequential inference: output bytes, cycles per (sub-model, device), times."""

    output: bytes
    timings: list[Timing]
    t0: float
    t_sent: float
    t_first_rx: float
    t1: float
    #: wall time spent serving LO-SC segment weights during this run (0 without segments)
    load_s: float = 0.0
    #: bytes on the host's links (both directions, :class:`CountingTransport`) while sending
    #: the input and while receiving the result (with one device first and last, one read may
    #: take the result's first bytes along with the input's last ACK; the sum stays exact);
    #: ``None`` when not counted or when segment weights shared the links
    in_wire: int | None = None
    out_wire: int | None = None

    @property
    def latency(self) -> float:
        """Host wall time of the inference (s)."""
        return self.t1 - self.t0


@dataclass
class Session:
    """Open host links (and the emulation's proxies) of one bench."""

    links: dict[str, HostLink]
    first: str
    last: str
    proxies: list[LinkProxy]
    note: str
    emulated: bool
    #: PIDs of the QEMUs this session started (empty with real boards)
    pids: list[int] = field(default_factory=list)
    #: the segment weight server of a segmented OUT (``splitter segment -o``), else None
    weights: WeightServer | None = None


def _many(value: Any) -> list[Any]:
    """``value`` as a list: one input's bytes / one output's size, or a sequence of them."""
    return [value] if isinstance(value, (bytes, int)) else list(value)


def one_run(
    s: Session, x: bytes | Sequence[bytes], nbytes: int | Sequence[int], timeout: float
) -> RunSample:
    """One sequential inference with the host-side timestamps and host link byte counts;
    ``x`` the input's wire bytes (one per input, plan.json order), ``nbytes`` the output's size
    (one per output); the sample's ``output`` is the outputs' bytes one after another."""
    c0 = _host_bytes(s)
    t0 = time.monotonic()
    loaded = 0.0 if s.weights is None else s.weights.seconds
    send_tensors(s.links[s.first], 0, _many(x))
    t_sent = time.monotonic()
    c1 = _host_bytes(s)
    watch = [ln for name, ln in s.links.items() if name != s.last]
    budget = 0.0 if s.weights is None else s.weights.budget_s
    parts, timings, t_first = receive_results(
        s.links[s.last], _many(nbytes), timeout + budget, watch
    )
    data = b"".join(parts)
    t1, c2 = time.monotonic(), _host_bytes(s)
    load = 0.0 if s.weights is None else s.weights.seconds - loaded
    sample = RunSample(data, timings, t0, t_sent, t_first, t1, load)
    if c0 is not None and c1 is not None and c2 is not None and s.weights is None:
        sample.in_wire, sample.out_wire = c1 - c0, c2 - c1
    return sample


def _host_bytes(s: Session) -> int | None:
    """Bytes written and read so far on every host link (``None``: not counted)."""
    total = 0
    for link in s.links.values():
        t = link.transport
        if not isinstance(t, CountingTransport):
            return None
        total += t.written + t.read_bytes
    return total


def pipelined(
    s: Session, x: bytes | Sequence[bytes], nbytes: int | Sequence[int], count: int, timeout: float
) -> dict[str, Any]:
    """Send ``count`` inputs back to back while a thread collects results; throughput
    (``x`` and ``nbytes`` as :func:`one_run` takes them)."""
    done: list[float] = []
    errors: list[BaseException] = []

    def collect() -> None:
        try:
            for _ in range(count):
                receive_results(s.links[s.last], _many(nbytes), timeout)
                done.append(time.monotonic())
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    t0 = time.monotonic()
    th = threading.Thread(target=collect, daemon=True)
    th.start()
    try:
        for _ in range(count):
            send_tensors(s.links[s.first], 0, _many(x))
    finally:
        th.join(timeout + 1.0)
    if errors:
        raise errors[0]
    if len(done) < count:
        raise LinkError(f"device {s.last}: pipelined results missing after {timeout:.0f} s")
    steady = (count - 1) / (done[-1] - done[0]) if count > 1 and done[-1] > done[0] else None
    return {
        "inputs": count,
        "seconds": done[-1] - t0,
        "per_s": count / (done[-1] - t0),
        "steady_per_s": steady,
    }


def pipeline_blocker(manifest: PlanManifest, wiring: Mapping[str, Any]) -> str | None:
    """Why inputs cannot be pipelined on this plan, or ``None`` when they can."""
    devs = [sub.device for sub in manifest.submodels]
    twice = sorted({d for d in devs if devs.count(d) > 1})
    if twice:
        return (
            f"device(s) {', '.join(twice)} host several sub-models in one arena and the protocol "
            "has no ready message, so a next input could overwrite a pending one"
        )
    if wiring["first_device"] == wiring["last_device"]:
        return "the first and last sub-models share one host link"
    return None


def link_seconds(
    events: Sequence[FrameEvent], sender: str, receiver: str, sub: int, t0: float, t1: float
) -> tuple[float, int] | None:
    """Transfer time and wire bytes of sub-model ``sub``'s input over a proxied link in a run.

    From the first byte of the TIMING frame preceding the first TENSOR chunk to the last byte of
    the ACK of the last chunk (both directions, retransmissions and ACKs counted in the bytes).
    """
    fwd = [e for e in events if t0 <= e.t_start <= t1 and e.sender == sender]
    chunks = [e for e in fwd if e.type == P.FrameType.TENSOR and e.submodel == sub]
    if not chunks:
        return None
    first = chunks[0]
    prior = [e for e in fwd if e.type == P.FrameType.TIMING and e.t_start <= first.t_start]
    start = prior[-1].t_start if prior else first.t_start
    last = chunks[-1]
    acks = [
        e
        for e in events
        if e.sender == receiver and e.type == P.FrameType.ACK and e.seq == last.seq
        if e.t_end >= last.t_end and e.t_start <= t1
    ]
    end = acks[0].t_end if acks else last.t_end
    wire = sum(
        e.wire_bytes
        for e in events
        if start <= e.t_start <= end and {e.sender, e.receiver} == {sender, receiver}
    )
    return end - start, wire


def open_session(
    stack: ExitStack, out_dir: Path, cfg: BenchConfig, manifest: PlanManifest
) -> Session:
    """Start the emulation (if asked), open and PING every host-facing board."""
    wiring = read_wiring(out_dir)
    ports: Mapping[str, str] = cfg.ports
    note, proxies, pids = "", list[LinkProxy](), list[int]()
    if cfg.emulate:
        emu = ProxiedEmulation(out_dir, icount=cfg.icount, faults=cfg.faults)
        stack.enter_context(emu)
        ports, note, proxies, pids = emu.endpoints, emu.note, emu.proxies, emu.pids
    if not cfg.emulate:
        ports = {**boards_file_ports(read_manifest(out_dir)), **ports}
    urls = _host_ports(wiring, ports)
    links = {
        n: stack.enter_context(open_host_link(u, n, int(wiring["baud"]), cfg.log))
        for n, u in urls.items()
    }
    expected = plan_hash(manifest.to_dict())
    for link in links.values():
        check_pong(link, expected, timeout=min(cfg.timeout, 15.0))
        link.transport = CountingTransport(link.transport)
    first, last = str(wiring["first_device"]), str(wiring["last_device"])
    weights = weight_server(out_dir, list(links.values()))
    return Session(links, first, last, proxies, note, cfg.emulate, pids, weights)


def bench_inputs(plan: PlanManifest, cfg: BenchConfig) -> list[np.ndarray]:
    """The arrays bench sends, one per model input in plan.json order: ``cfg.input_path``
    (:func:`splitter.device.run.load_inputs`), or seeded random ones (seed ``cfg.seed + k``)."""
    specs = plan.submodels[0].inputs
    if cfg.input_path is None:
        return [random_input(t, cfg.seed + k) for k, t in enumerate(specs)]
    given = cfg.input_path
    args = [str(given)] if isinstance(given, (str, Path)) else [str(a) for a in given]
    arrays = load_inputs(args, specs)
    return [arrays[t.name] for t in specs]


def random_input(spec: TensorSpec, seed: int) -> np.ndarray:
    """A seeded input of ``spec``: standard normal floats, or integers over the dtype's range."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(spec.dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, int(info.max) + 1, spec.shape).astype(dtype)
    return rng.standard_normal(spec.shape).astype(dtype)


def bench(out_dir: str | Path, cfg: BenchConfig | None = None) -> dict[str, Any]:
    """Run ``cfg.runs`` inferences; return the bench.json object (not yet written)."""
    cfg = cfg or BenchConfig()
    out = Path(out_dir)
    plan = read_manifest(out)
    wiring = read_wiring(out)
    target = find_target(plan, cfg.target)
    costs = submodel_costs(plan)
    est = estimate(plan, target, costs, emulated=cfg.emulate)
    x = [to_wire(a) for a in bench_inputs(plan, cfg)]
    out_bytes = [t.nbytes for t in plan.submodels[-1].outputs]
    blocker = pipeline_blocker(plan, wiring)
    step = cfg.on_step or (lambda _text: None)
    with ExitStack() as stack:
        step("booting the emulated boards" if cfg.emulate else "connecting to the boards")
        s = open_session(stack, out, cfg, plan)
        step(f"{cfg.warmup} warm-up run(s)")
        for _ in range(cfg.warmup):
            one_run(s, x, out_bytes, cfg.timeout)
        step(f"{cfg.runs} timed runs")
        samples = []
        for k in range(cfg.runs):
            samples.append(one_run(s, x, out_bytes, cfg.timeout))
            if cfg.on_run is not None:
                cfg.on_run(k + 1, cfg.runs)
        events = [e for p in s.proxies for e in p.snapshot()]
        step("measuring the throughput")
        throughput = _throughput(s, samples, x, out_bytes, cfg, blocker)
        faults = {p.name: {"corrupted": p.corrupted, "dropped": p.dropped} for p in s.proxies}
    _check_outputs(samples)
    result = assemble(plan, wiring, est, costs, samples, events, s, cfg)
    result["throughput"] = throughput
    result["proxies"] = faults
    result["target"] = str(target) if target else None
    return result


def _throughput(
    s: Session,
    samples: Sequence[RunSample],
    x: Sequence[bytes],
    nbytes: Sequence[int],
    cfg: BenchConfig,
    blocker: str | None,
) -> dict[str, Any]:
    total = sum(r.latency for r in samples)
    seq = {"mode": "sequential", "per_s": len(samples) / total if total else None}
    if blocker is not None or not cfg.pipeline or len(samples) < 2:
        why = blocker or ("--no-pipeline" if not cfg.pipeline else "fewer than 2 runs")
        return {**seq, "pipelined": None, "why_not_pipelined": why}
    try:
        pipe = pipelined(s, x, nbytes, len(samples), cfg.timeout)
    except SplitterError as exc:
        return {**seq, "pipelined": None, "why_not_pipelined": f"pipelined run failed: {exc}"}
    return {**seq, "mode": "pipelined", "pipelined": pipe, "per_s": pipe["per_s"]}


def _check_outputs(samples: Sequence[RunSample]) -> None:
    """Every run of the same input must give the same bytes (a flaky link would not)."""
    for k, r in enumerate(samples[1:], start=1):
        if r.output != samples[0].output:
            raise LinkError(f"run {k} returned a different output than run 0 for the same input")


def assemble(
    plan: PlanManifest,
    wiring: Mapping[str, Any],
    est: Mapping[str, Any],
    costs: Sequence[Any],
    samples: Sequence[RunSample],
    events: Sequence[FrameEvent],
    s: Session,
    cfg: BenchConfig,
) -> dict[str, Any]:
    """The bench.json object (see docs of ``splitter bench --json``)."""
    clock = _measuring_clocks(est, s.emulated)
    devices = _devices(wiring, costs, samples, clock)
    links = _links(plan, samples, events, s, devices, clock)
    latency = [r.latency for r in samples]
    return {
        "runs": len(samples),
        "emulated": s.emulated,
        "icount": bool(cfg.icount) if s.emulated else None,
        "note": s.note
        + (
            f"; cycles are SysTick ticks at the emulated {EMULATED_CLOCK_HZ / 1e6:g} MHz"
            if s.emulated
            else ""
        ),
        "model": plan.model.name,
        "devices": devices,
        "links": links,
        "latency_s": latency,
        "latency_summary": summary(latency),
        "load_s": [r.load_s for r in samples],
        "load_summary": summary([r.load_s for r in samples]) if s.weights else None,
        "estimate": dict(est),
    }


def _measuring_clocks(est: Mapping[str, Any], emulated: bool) -> dict[str, float]:
    """Clock the reported cycles count at: 168 MHz under QEMU, else the device's clock."""
    return {
        d["device"]: EMULATED_CLOCK_HZ if emulated else float(d["clock_hz"]) for d in est["devices"]
    }


def _devices(
    wiring: Mapping[str, Any],
    costs: Sequence[Any],
    samples: Sequence[RunSample],
    clock: Mapping[str, float],
) -> list[dict[str, Any]]:
    names = {int(d["index"]): str(d["name"]) for d in wiring["devices"]}
    out = []
    for d in wiring["devices"]:
        subs = []
        for c in costs:
            if c.device != d["name"]:
                continue
            cycles = [_cycles(r, c.index, names, c.device) for r in samples]
            subs.append(
                {
                    "index": c.index,
                    "cycles": cycles,
                    "macs": c.macs,
                    "macs_by_class": dict(sorted(c.macs_by_class.items())),
                }
            )
        out.append(
            {
                "device": d["name"],
                "part": d["part"],
                "clock_hz": clock.get(d["name"]),
                "submodels": subs,
            }
        )
    return out


def _cycles(r: RunSample, sub: int, names: Mapping[int, str], device: str) -> int:
    for t in r.timings:
        if t.submodel == sub:
            if names.get(t.device) != device:
                raise LinkError(
                    f"TIMING: sub-model {sub} reported by device index {t.device}, plan says "
                    f"{device}; rebuild the firmware"
                )
            return int(t.cycles)
    raise LinkError(f"TIMING: no cycles for sub-model {sub} (device {device}) in the result")


def _links(
    plan: PlanManifest,
    samples: Sequence[RunSample],
    events: Sequence[FrameEvent],
    s: Session,
    devices: Sequence[Mapping[str, Any]],
    clock: Mapping[str, float],
) -> list[dict[str, Any]]:
    links = []
    for t in link_transfers(plan):
        entry = {**t, "seconds": [], "wire_bytes": [], "measured_by": ""}
        for r in samples:
            secs, wire, how = _one_link(t, r, events, s)
            entry["seconds"].append(secs)
            entry["wire_bytes"].append(wire)
            entry["measured_by"] = how
        links.append(entry)
    _derive_board_links(links, samples, devices, clock)
    return links


def _one_link(
    t: Mapping[str, Any], r: RunSample, events: Sequence[FrameEvent], s: Session
) -> tuple[float | None, int | None, str]:
    if t["from"] == HOST:
        return r.t_sent - r.t0, r.in_wire, "host"
    if t["to"] == HOST:
        return r.t1 - r.t_first_rx, r.out_wire, "host"
    if s.proxies:
        got = link_seconds(events, t["from"], t["to"], int(t["submodel"]), r.t0, r.t1)
        if got is not None:
            return got[0], got[1], "proxy"
    return None, None, "derived"


def _derive_board_links(
    links: list[dict[str, Any]],
    samples: Sequence[RunSample],
    devices: Sequence[Mapping[str, Any]],
    clock: Mapping[str, float],
) -> None:
    """Fill board-to-board times nobody observed: the rest of the latency, split by bytes."""
    todo = [ln for ln in links if ln["measured_by"] == "derived"]
    if not todo:
        return
    total_bytes = sum(int(ln["bytes"]) for ln in todo) or 1
    for k, r in enumerate(samples):
        compute = sum(
            sub["cycles"][k] / clock[d["device"]] for d in devices for sub in d["submodels"]
        )
        known = sum(ln["seconds"][k] or 0.0 for ln in links if ln["measured_by"] != "derived")
        rest = max(0.0, r.latency - known - compute)
        for ln in todo:
            ln["seconds"][k] = rest * int(ln["bytes"]) / total_bytes
