"""The segment loader (firmware_templates/segments.c) compiled for the host and driven over sockets.

``tests/host_c_seg/`` holds a segmented device (``s1``: one sub-model of two segments whose
weights the host streams, seg_main.c); it is built with the runtime.c a segmented project gets
(``splitter.segments.firmware.segmented_runtime``), proto.c, segments.c and tests/host_c's socket
link and
microsecond clock, with ASan and UBSan. The test plays the host with the real ``HostLink`` and
``WeightServer``: LOAD / WEIGHTS (docs/protocol.md), a duplicate and a damaged WEIGHTS frame,
weights of the wrong segment, and the TIMING cycles without the loading.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from splitter import protocol as P
from splitter.device.host import DeviceError, HostLink, receive_result, send_tensor
from splitter.device.transport import SocketTransport
from splitter.segments.firmware import segmented_runtime
from splitter.segments.server import LOAD, WEIGHTS, WeightServer

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "splitter" / "firmware_templates"
HOST_C = Path(__file__).resolve().parent / "host_c"
HOST_C_SEG = Path(__file__).resolve().parent / "host_c_seg"
TAG = P.plan_tag("0123456789abcdef")
FAKE_CYCLES = 10**12  # seg_main.c's stand-in compute
SEGMENTS = [(0, 3000), (3000, 2000)]


@pytest.fixture(scope="module")
def seg_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """seg_main.c + the segmented runtime.c + proto.c + segments.c, gcc -Werror + sanitizers."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no host C compiler; install it: apt-get install --no-install-recommends gcc")
    d = tmp_path_factory.mktemp("segments")
    for p in [*HOST_C_SEG.glob("*.[ch]"), HOST_C / "link_fake.c", HOST_C / "timer_fake.c"]:
        shutil.copy(p, d)  # next to this device's config.h (1 link), not host_c's (2 links)
    (d / "runtime.c").write_text(segmented_runtime())
    srcs = [d / "seg_main.c", d / "link_fake.c", d / "timer_fake.c", d / "runtime.c"]
    srcs += [TEMPLATES / "proto.c", TEMPLATES / "segments.c", TEMPLATES / "watchdog.c"]
    flags = ["-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror"]
    flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    exe = d / "seg"
    subprocess.run(
        [cc, *flags, f"-I{d}", f"-I{TEMPLATES}", *map(str, srcs), "-o", str(exe)], check=True
    )
    return exe


@contextmanager
def device(exe: Path) -> Iterator[HostLink]:
    """Start the device on a socket pair; it must exit cleanly when the host closes."""
    host_sock, dev_end = socket.socketpair()
    fd = dev_end.fileno()
    proc = subprocess.Popen([str(exe), str(fd)], pass_fds=(fd,), stderr=subprocess.PIPE, text=True)
    dev_end.close()
    host = HostLink(SocketTransport.from_socket(host_sock, "fd://link0"), "s1", ack_timeout=0.5)
    host.plan_tag = TAG
    try:
        yield host
    finally:
        host.close()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert proc.returncode == 0, err
        assert "runtime error" not in err and "Sanitizer" not in err, err


def data(seed: int) -> tuple[np.ndarray, bytes]:
    """The input x (64 floats) and the weights file (segment 0: 750 floats, 1: 500 floats)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(64).astype("<f4")
    return x, rng.standard_normal(1250).astype("<f4").tobytes()


def expected(x: np.ndarray, blob: bytes) -> np.ndarray:
    w = np.frombuffer(blob, dtype="<f4")
    return (x + w[:64]) * w[750:814]


def test_streamed_weights_give_the_result_and_timing_leaves_loading_out(seg_exe: Path) -> None:
    x, blob = data(1)
    with device(seg_exe) as host:
        server = WeightServer(blob, SEGMENTS)
        host.serve = server
        send_tensor(host, 0, x.tobytes())
        out, timings, _ = receive_result(host, 256, 10.0)
    np.testing.assert_array_equal(np.frombuffer(out, dtype="<f4"), expected(x, blob))
    assert [(ld.segment, ld.bytes) for ld in server.loads] == [(0, 3000), (1, 2000)]
    # the runtime subtracts the microseconds spent loading from the stand-in's cycles
    assert len(timings) == 1 and FAKE_CYCLES - 10**7 < timings[0].cycles < FAKE_CYCLES


def _raw_replies(host: HostLink, timeout: float = 1.0) -> list[P.Frame]:
    """Frames the device sent within ``timeout`` (read below HostLink's ARQ)."""
    decoder, frames = P.FrameDecoder(), []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        frames += [f for status, f in decoder.feed(host.transport.read(64, 0.05)) if status == "ok"]
    return frames


def test_duplicate_and_damaged_weights_frames(seg_exe: Path) -> None:
    """A retransmitted WEIGHTS frame (same seq) is ACKed again and dropped; a damaged one is
    NACKed; the load then completes and the result is right."""
    x, blob = data(2)
    with device(seg_exe) as host:
        send_tensor(host, 0, x.tobytes())
        load = host.receive(3.0)
        assert load.type == LOAD and P.decode_chunk(load.payload).total == 3000
        first = P.CHUNK.pack(0, 0, TAG, 3000, 0) + blob[:1000]
        host.send(WEIGHTS, first)
        seq = host._tx_seq
        host.transport.write(P.Frame(WEIGHTS, seq, first).encode())  # our ACK "was lost"
        damaged = bytearray(P.Frame(WEIGHTS, seq + 1, first).encode())
        damaged[20] ^= 0xFF
        host.transport.write(bytes(damaged))
        replies = [(f.type, f.seq) for f in _raw_replies(host)]
        assert replies == [(P.FrameType.ACK, seq), (P.FrameType.NACK, seq + 1)]
        for off in (1000, 2000):
            host.send(WEIGHTS, P.CHUNK.pack(0, 0, TAG, 3000, off) + blob[off : off + 1000])
        host.serve = WeightServer(blob, SEGMENTS)
        out, _, _ = receive_result(host, 256, 10.0)
    np.testing.assert_array_equal(np.frombuffer(out, dtype="<f4"), expected(x, blob))


@pytest.mark.parametrize(
    "payload",
    [
        P.CHUNK.pack(1, 0, TAG, 3000, 0) + b"\0" * 8,  # another segment
        P.CHUNK.pack(0, 0, TAG, 2999, 0) + b"\0" * 8,  # another size
        P.CHUNK.pack(0, 0, TAG, 3000, 8) + b"\0" * 8,  # a gap
    ],
)
def test_wrong_weights_fail_the_submodel(seg_exe: Path, payload: bytes) -> None:
    x, _ = data(3)
    with device(seg_exe) as host:
        send_tensor(host, 0, x.tobytes())
        assert host.receive(3.0).type == LOAD
        host.send(WEIGHTS, payload)
        with pytest.raises(DeviceError, match="s1: a sub-model returned an error"):
            while True:
                host.receive(3.0)  # TIMING first, then the ERROR
