"""Library mode on the host: the same runtime with a POSIX port runs a 3-process chain.

``compile --app library`` writes, per board, the library sources (``mode_sources("library")``:
no main(), startup, clock or UART driver). Each is built for the host with gcc, ASan and UBSan,
together with ``tests/host_port/posix_port.c``: the port interface (``splitter_port.h``) over
one socket per link, a reader thread per link standing in for the UART interrupt, and a
superloop that calls only ``splitter.h``. Three processes connected by socket pairs run
tiny_cnn: the head submits the samples itself, the tail prints every result, which must equal
onnxruntime; a board built from another plan is refused at the boot handshake.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from test_e2e_support import MODELS, TOL

from splitter.codegen.firmware import mode_sources
from splitter.compile import CompileOptions, compile_model

HOST_PORT = Path(__file__).resolve().parent / "host_port"
KERNELS = Path(__file__).resolve().parent.parent / "splitter" / "firmware_templates" / "kernels"
BOARDS = "[link]\nbaud = 115200\n" + "".join(
    f'\n[[device]]\nname = "{n}"\nmcu = "STM32F405RG"\n' for n in ("a", "b", "c")
)
RUNS = 12


FLAGS = ["-std=c99", "-O1", "-g", "-Wall", "-Werror", "-DEMULATOR=1", "-pthread"]
FLAGS += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]


def host_cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no host C compiler; install it: apt-get install --no-install-recommends gcc")
    return cc


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The kernels (static files, the same in every project) compiled once for the host."""
    tmp = tmp_path_factory.mktemp("kernels")
    objs = []
    for src in sorted(KERNELS.glob("*.c")):
        obj = tmp / f"{src.stem}.o"
        subprocess.run(
            [host_cc(), *FLAGS, f"-I{KERNELS}", "-c", str(src), "-o", str(obj)], check=True
        )
        objs.append(obj)
    return objs


def build_board(project: Path, exe: Path, kernels: list[Path], *defines: str) -> Path:
    """The board's library sources (its kernels prebuilt) plus the POSIX port, for the host."""
    files = [str(p.relative_to(project)) for p in sorted(project.rglob("*.c"))]
    srcs = [project / f for f in mode_sources("library", files) if not f.startswith("kernels/")]
    assert not {"main.c", "startup.c", "uart.c", "timer.c"} & {p.name for p in srcs}
    inc = [f"-I{project}", f"-I{project / 'kernels'}"]
    port = str(HOST_PORT / "posix_port.c")
    objs = [*map(str, [*srcs, *kernels]), port]
    subprocess.run([host_cc(), *FLAGS, *defines, *inc, *objs, "-lm", "-o", str(exe)], check=True)
    return exe


def compile_library(tmp: Path, assignment: tuple[int, ...]) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "boards.toml").write_text(BOARDS)
    opts = CompileOptions(assignment=assignment, validate=False, force=True, app="library")
    res = compile_model(MODELS / "tiny_cnn.onnx", tmp / "boards.toml", tmp / "out", opts)
    assert res.firmware.startswith("generated"), res.firmware
    return res.out_dir


def run_chain(exes: list[Path], samples: Path, count: int) -> list[subprocess.Popen[str]]:
    """a -- b -- c over two socket pairs; a (head) feeds ``samples``, c prints results."""
    ab, ba = socket.socketpair()
    bc, cb = socket.socketpair()
    fds = [(-1, ab.fileno()), (ba.fileno(), bc.fileno()), (cb.fileno(), -1)]
    procs = []
    for exe, (l0, l1) in zip(exes, fds, strict=True):
        args = [str(exe), str(l0), str(l1), str(samples), str(count)]
        keep = tuple(f for f in (l0, l1) if f >= 0)
        procs.append(
            subprocess.Popen(
                args, pass_fds=keep, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    for s in (ab, ba, bc, cb):
        s.close()
    return procs


def finish(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[int, str, str]]:
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        assert "Sanitizer" not in e and "runtime error" not in e, e
        out.append((p.returncode, o, e))
    return out


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory, kernels: list[Path]) -> list[Path]:
    """tiny_cnn on a (layers 0-1), b (2), c (3-4), library mode; the three host executables."""
    tmp = tmp_path_factory.mktemp("chain")
    out = compile_library(tmp, (0, 0, 1, 2, 2))
    return [build_board(out / "firmware" / d, tmp / d, kernels) for d in "abc"]


@pytest.mark.slow
def test_three_process_chain_over_sockets_matches_onnxruntime(
    chain: list[Path], tmp_path: Path
) -> None:
    exes = chain
    x = np.random.default_rng(3).standard_normal((3, 1, 1, 28, 28)).astype(np.float32)
    (tmp_path / "x.bin").write_bytes(x.astype("<f4").tobytes())
    done = finish(run_chain(exes, tmp_path / "x.bin", RUNS))
    assert [rc for rc, _, _ in done] == [0, 0, 0], done
    lines = [ln.split() for ln in done[2][1].splitlines() if ln.startswith("result")]
    assert [int(ln[1]) for ln in lines] == list(range(RUNS))
    sess = ort.InferenceSession(str(MODELS / "tiny_cnn.onnx"))
    for _, k, hexed in lines:
        ref = np.asarray(sess.run(None, {"input": x[int(k) % len(x)]})[0])
        got = np.frombuffer(bytes.fromhex(hexed), "<f4").reshape(ref.shape)
        assert float(np.max(np.abs(got - ref))) <= TOL


@pytest.mark.slow
def test_board_of_another_plan_is_refused_through_the_api(
    chain: list[Path], kernels: list[Path], tmp_path: Path
) -> None:
    """b from another plan: a's status reports ERR_PLAN on its link 1 and a stops (exit 4)."""
    two = compile_library(tmp_path / "two", (0, 1, 1, 2, 2))
    exes = [chain[0], build_board(two / "firmware" / "b", tmp_path / "b", kernels), chain[2]]
    x = np.zeros((1, 1, 28, 28), np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    procs = run_chain(exes, tmp_path / "x.bin", 2)
    rc, _, err = procs[0].wait(timeout=60), "", procs[0].stderr.read() if procs[0].stderr else ""
    assert rc == 4, err
    assert "status 5 device 0 link 1: a: b on link 1 runs another plan" in err
    for p in procs[1:]:
        p.kill()
    finish(procs[1:])


@pytest.mark.slow
def test_startup_clock_fallback_is_reported_by_the_status(
    chain: list[Path], kernels: list[Path], tmp_path: Path
) -> None:
    """startup.c's splitter_clock_status (1: HSE did not start, HSI used) reaches
    splitter_status(): clock 1 and code 17 with the board's text; without it (the runtime's weak
    default) the status is clean."""
    out = compile_library(tmp_path, (0, 0, 1, 2, 2))
    exe = build_board(out / "firmware" / "a", tmp_path / "a", kernels, "-DCLOCK_STATUS=1")
    r = subprocess.run([str(exe), "-1", "-1", "/dev/null", "0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("status 17 clock 1: a: the clock fell back at startup")
    clean = subprocess.run([str(chain[0]), "-1", "-1", "/dev/null", "0"], capture_output=True)
    assert clean.stdout.startswith(b"status 0 clock 0: ")
