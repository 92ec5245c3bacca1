"""End to end on emulated boards: compile (real pipeline), build (arm-none-eabi-gcc), emulate
(QEMU netduinoplus2, real sockets), run; fault injection; no stray QEMU processes."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from splitter.device.host import HostLink, infer
from splitter.device.run import check_pong
from splitter.errors import LinkError, ToolchainError
from splitter.manifest import read_manifest
from splitter.protocol import plan_hash
from splitter.toolchain import build as B
from splitter.toolchain import emulator as E

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "tiny_cnn.onnx"
SPLITTER = [sys.executable, "-m", "splitter"]
BOARDS = """
[link]
baud = 115200

[[device]]
name = "a"
mcu = "STM32F405RG"

[[device]]
name = "b"
mcu = "STM32L412KB"  # 40 KiB of SRAM: layer 2's 28.8 KiB arena and the runtime (8.7 KiB)
"""
pytestmark = [pytest.mark.slow, pytest.mark.toolchain, pytest.mark.qemu]


def compile_out(tmp: Path, pattern: str) -> Path:
    """The real pipeline: compile_model (plan.json, sub-models) and the firmware generator.

    ``pattern`` "aba": layers 0-1 on a, layer 2 on b, the rest on a; "ab": layers 0-2 on a, the
    rest on b (tiny_cnn's chain length may change with the importer, the pattern does not).
    """
    from splitter.codegen.firmware import generate_firmware
    from splitter.compile import CompileOptions, compile_model
    from splitter.importers import load_chain

    n = len(load_chain(MODEL))
    assert n >= 4
    head = {"aba": (0, 0, 1), "ab": (0, 0, 0)}[pattern]
    assignment = head + (head[0] if pattern == "aba" else 1,) * (n - 3)

    boards = tmp / "boards.toml"
    boards.write_text(BOARDS)
    opts = CompileOptions(assignment=assignment, validate=False, force=True)
    res = compile_model(MODEL, boards, tmp / "out", opts)
    if not (res.out_dir / "firmware" / "wiring.json").exists():  # compile's hook not wired yet
        generate_firmware(res.out_dir, res.chain, res.boards, res.manifest)
    return res.out_dir


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SPLITTER, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def gone(pids: list[int]) -> bool:
    """No process with these PIDs is left (reaped), or the PID now belongs to something else."""
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except FileNotFoundError:
            continue
        if b"qemu-system-arm" in cmd:
            return False
    return True


@pytest.fixture(scope="module")
def aba(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_cnn as A (layers 0-1) on a, B (layer 2) on b, C (the rest) on a; built."""
    out = compile_out(tmp_path_factory.mktemp("aba"), "aba")
    r = cli("build", str(out))
    assert r.returncode == 0, r.stderr
    assert "weights and arena equal the plan's estimates" in r.stdout
    return out


@pytest.fixture(scope="module")
def x_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("x") / "x.npy"
    np.save(path, np.random.default_rng(7).standard_normal((1, 1, 28, 28)).astype(np.float32))
    return path


def reference(x_file: Path) -> np.ndarray:
    x = np.load(x_file)
    return np.asarray(ort.InferenceSession(str(MODEL)).run(None, {"input": x})[0])


def test_run_emulated_matches_onnxruntime(aba: Path, x_file: Path, tmp_path: Path) -> None:
    y_file = tmp_path / "y.npy"
    r = cli(
        "run",
        str(aba),
        "--input",
        str(x_file),
        "--emulate",
        "--output",
        str(y_file),
    )  # the original model for the check comes from plan.json's model_path
    assert r.returncode == 0, r.stderr
    assert "STM32L412KB emulated as an F405 with the plan's own code" in r.stdout
    assert "check: max-abs difference to onnxruntime" in r.stdout
    assert "s (cycles / core clock), links and host" in r.stdout
    y = np.load(y_file)
    assert y.shape == (1, 10)
    assert float(np.max(np.abs(y - reference(x_file)))) <= 1e-4


def run_once(out: Path, x: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]], list[int]]:
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    with E.Emulation(out, icount=True) as emu:
        links = [HostLink(u, n) for n, u in emu.endpoints.items()]
        try:
            for ln in links:
                check_pong(ln, plan_hash(read_manifest(out).to_dict()), 10)
            res = infer(links, wiring["first_device"], wiring["last_device"], x, 40, timeout=30)
        finally:
            for ln in links:
                ln.close()
        pids = emu.pids
    y = np.frombuffer(res.data, "<f4").reshape(1, 10)
    return y, [(t.submodel, t.device, t.cycles) for t in res.timings], pids


def test_icount_cycles_identical_on_two_runs(aba: Path, x_file: Path) -> None:
    x = np.load(x_file)
    y1, t1, pids1 = run_once(aba, x)
    y2, t2, pids2 = run_once(aba, x)
    assert [(s, d) for s, d, _ in t1] == [(0, 0), (1, 1), (2, 0)]
    assert all(c > 0 for _, _, c in t1)
    assert t1 == t2
    assert np.array_equal(y1, y2)
    assert gone(pids1 + pids2)


def test_emulate_command_then_run_over_port(aba: Path, x_file: Path) -> None:
    proc = subprocess.Popen(
        [*SPLITTER, "emulate", str(aba)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        # Ctrl-C as a terminal gives it, even when the runner was started with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert "emulated as an F405" in lines[0]
        endpoint = lines[1].split()[1]
        pids = [int(ln.rsplit("pid=", 1)[1]) for ln in lines[1:3]]
        assert lines[1].startswith("a: socket://127.0.0.1:")
        r = cli(
            "run",
            str(aba),
            "--input",
            str(x_file),
            "--port",
            f"a={endpoint}",
            "--model",
            str(MODEL),
            "--verbose",
        )
        assert r.returncode == 0, r.stderr
        assert "-> a TENSOR" in r.stderr and "<- a RESULT" in r.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)  # generous: a loaded machine once needed more than 20 s
    assert gone(pids)


def test_plan_hash_mismatch_names_the_device(aba: Path, x_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(aba, other)
    plan = json.loads((other / "plan.json").read_text())
    plan["objective"] = "throughput"  # any change: the firmware was built for another plan
    (other / "plan.json").write_text(json.dumps(plan))
    r = cli("run", str(other), "--input", str(x_file), "--emulate", "--no-check")
    assert r.returncode == 2 and "plan.json: edited since splitter wrote it" in r.stderr
    r = cli("run", str(other), "--input", str(x_file), "--emulate", "--no-check", "--allow-edited")
    assert r.returncode == 2
    assert "device a: firmware is for plan" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_wrong_input_shape_is_one_line(aba: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((1, 28, 28), np.float32))
    r = cli("run", str(aba), "--input", str(bad), "--emulate")
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"splitter: error: {bad}: shape (1, 28, 28), the model input input needs (1, 1, 28, 28)"
    )


def test_silent_middle_board_is_named(aba: Path, x_file: Path) -> None:
    """b dies after boot: a gives up after its retries and reports it; the host names b."""
    with E.Emulation(aba) as emu:
        with HostLink(emu.endpoints["a"], "a") as link:
            link.ping(10)
            emu.devices[1].process.kill()
            t0 = time.monotonic()
            with pytest.raises(LinkError, match=r"a: no answer from b on link 1"):
                infer([link], "a", "a", np.load(x_file), 40, timeout=30)
            assert time.monotonic() - t0 < 20
        pids = emu.pids
    assert gone(pids)


def test_silent_host_facing_board_is_named(aba: Path, x_file: Path) -> None:
    emu = E.Emulation(aba)
    with emu, HostLink(emu.endpoints["a"], "a", ack_timeout=0.5, retries=3) as link:
        link.ping(10)
        emu.devices[0].process.kill()
        with pytest.raises(LinkError, match=r"device a"):
            infer([link], "a", "a", np.load(x_file), 40, timeout=10)
    assert gone(emu.pids)


class CorruptingProxy:
    """TCP proxy flipping one bit in ~``rate`` of the bytes (seeded), both directions."""

    def __init__(self, target: str, rate: float, seed: int) -> None:
        host, port = target.removeprefix("socket://").rsplit(":", 1)
        self.target = (host, int(port))
        self.rng = random.Random(seed)
        self.rate = rate
        self.corrupted = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"socket://127.0.0.1:{self.server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        client, _ = self.server.accept()
        upstream = socket.create_connection(self.target)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        self._pump(upstream, client)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(4096):
                buf = bytearray(data)
                for i in range(len(buf)):
                    if self.rng.random() < self.rate:
                        buf[i] ^= 1 << self.rng.randrange(8)
                        self.corrupted += 1
                dst.sendall(bytes(buf))
        except OSError:
            pass


def test_corrupted_host_link_recovers_by_retransmission(aba: Path, x_file: Path) -> None:
    x = np.load(x_file)
    with E.Emulation(aba) as emu:
        proxy = CorruptingProxy(emu.endpoints["a"], rate=0.01, seed=1)
        with HostLink(proxy.url, "a", ack_timeout=0.3) as link:
            link.ping(10)
            res = infer([link], "a", "a", x, 40, timeout=60)
    y = np.frombuffer(res.data, "<f4").reshape(1, 10)
    assert proxy.corrupted > 5
    assert float(np.max(np.abs(y - reference(x_file)))) <= 1e-4


def test_two_host_links(tmp_path: Path, x_file: Path) -> None:
    """Adjacent split a -> b: the host feeds a and reads the result from b (two endpoints)."""
    out = compile_out(tmp_path, "ab")
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    assert (wiring["first_device"], wiring["last_device"]) == ("a", "b")
    r = cli("run", str(out), "--input", str(x_file), "--emulate", "--model", str(MODEL))
    assert r.returncode == 0, r.stderr
    assert "sub-model 1 on device 1" in r.stdout


def test_missing_qemu_gives_the_install_command(aba: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(E.shutil, "which", lambda name: None)
    with pytest.raises(
        ToolchainError,
        match=r"apt-get install --no-install-recommends "
        r"qemu-system-arm",
    ):
        E.Emulation(aba).__enter__()


def test_missing_toolchain_gives_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(B.shutil, "which", lambda name: None)
    with pytest.raises(ToolchainError, match=r"gcc-arm-none-eabi libnewlib-arm-none-eabi"):
        B.require_toolchain()


def test_no_qemu_left_behind() -> None:
    """Every test above killed what it started (checked by PID there; here by name, ours only)."""
    mine = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"qemu-system-arm" in cmd and b"splitter-emu-" in cmd and ppid == os.getpid():
                mine.append(d.name)
    assert mine == []


class BitFlipper:
    """Fault function flipping one bit in ~``rate`` of the bytes (seeded)."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rng, self.rate, self.count = random.Random(seed), rate, 0
        self.lock = threading.Lock()

    def __call__(self, src: str, dst: str, data: bytes) -> bytes:
        buf = bytearray(data)
        with self.lock:
            for i in range(len(buf)):
                if self.rng.random() < self.rate:
                    buf[i] ^= 1 << self.rng.randrange(8)
                    self.count += 1
        return bytes(buf)


class FrameDropper:
    """Fault function dropping the ``n``-th frame sent from ``src`` (whole, by its length)."""

    def __init__(self, src: str, n: int) -> None:
        self.src, self.n, self.seen, self.dropped = src, n, 0, b""
        self.buf = bytearray()

    def __call__(self, src: str, dst: str, data: bytes) -> bytes:
        if src != self.src:
            return data
        self.buf += data
        out = bytearray()
        while len(self.buf) >= 6:
            if self.buf[:2] != b"\xa5\x5a":
                out.append(self.buf.pop(0))
                continue
            end = 6 + int.from_bytes(self.buf[4:6], "little") + 4
            if len(self.buf) < end:
                break
            frame, self.buf = bytes(self.buf[:end]), self.buf[end:]
            self.seen += 1
            if self.seen == self.n:
                self.dropped = frame
            else:
                out += frame
        return bytes(out)


def test_corrupted_board_link_recovers(aba: Path, x_file: Path) -> None:
    x = np.load(x_file)
    flipper = BitFlipper(0.004, seed=3)
    with E.Emulation(aba, link_fault=flipper) as emu, HostLink(emu.endpoints["a"], "a") as link:
        link.ping(10)
        res = infer([link], "a", "a", x, 40, timeout=120)
    assert flipper.count > 5
    y = np.frombuffer(res.data, "<f4").reshape(1, 10)
    assert float(np.max(np.abs(y - reference(x_file)))) <= 1e-4
    assert gone(emu.pids)


def test_dropped_board_frame_is_retransmitted(aba: Path, x_file: Path) -> None:
    dropper = FrameDropper("a", n=3)  # a -> b: TIMING, TENSOR chunk 0, chunk 1 (dropped)
    with E.Emulation(aba, link_fault=dropper) as emu, HostLink(emu.endpoints["a"], "a") as link:
        link.ping(10)
        res = infer([link], "a", "a", np.load(x_file), 40, timeout=60)
    assert dropper.dropped[2] == 0x03  # a TENSOR frame was lost on the way
    y = np.frombuffer(res.data, "<f4").reshape(1, 10)
    assert float(np.max(np.abs(y - reference(x_file)))) <= 1e-4


def test_middle_board_with_another_plan_is_named(aba: Path, x_file: Path, tmp_path: Path) -> None:
    """b (not host-facing, so never PINGed) runs firmware of another plan: it refuses the
    TENSOR by its plan tag and the error reaches the host through a."""
    other = tmp_path / "other"
    shutil.copytree(aba, other)
    config = other / "firmware" / "b" / "config.h"
    text = config.read_text()
    tag = int(text.split("#define PLAN_TAG ", 1)[1].split("u", 1)[0])
    config.write_text(text.replace(f"#define PLAN_TAG {tag}u", f"#define PLAN_TAG {tag ^ 1}u"))
    B.run_make(other / "firmware" / "b", emulator=True)
    with E.Emulation(other) as emu, HostLink(emu.endpoints["a"], "a") as link:
        check_pong(link, plan_hash(read_manifest(other).to_dict()), 10)
        with pytest.raises(LinkError, match=r"b: firmware is for plan .* rebuild and flash"):
            infer([link], "a", "a", np.load(x_file), 40, timeout=30)


def test_killed_host_process_leaves_no_qemu(aba: Path) -> None:
    """Even SIGKILL of the process that started the emulation takes its QEMUs with it."""
    code = (
        "import sys, time\n"
        "from splitter.toolchain.emulator import Emulation\n"
        "emu = Emulation(sys.argv[1]).__enter__()\n"
        "print(' '.join(map(str, emu.pids)), flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(aba)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and not gone(pids)
    proc.kill()
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not gone(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(pids)
