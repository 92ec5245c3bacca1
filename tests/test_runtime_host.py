"""The firmware runtime (runtime.c + proto.c) compiled for the host and driven over sockets.

``tests/host_c/`` holds what the generated project would add: the tables of a device (``d1``,
index 1: sub-model 0 from the host to ``d2``, sub-model 2 from ``d2`` to the host), a config.h,
a clock (microsecond ticks) and ``link_fake.c``, a ``link.h`` transport over one socket per link.
Sub-model 2 has two inputs and two outputs (one a pass-through tensor): a two-tensor
boundary from ``d2`` and a two-tensor RESULT. The test plays the host on link 0 and device
``d2`` on link 1 with the real ``HostLink``
(splitter/device/host.py) over ``SocketTransport``: framing, ACK/NACK and retransmission,
re-chunking on a bad line, TIMING records and the ERROR paths, compiled with ASan and UBSan.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from splitter import protocol as P
from splitter.device.host import (
    DeviceError,
    HostLink,
    SilentError,
    Timing,
    receive_results,
    send_tensor,
    send_tensors,
)
from splitter.device.transport import SocketTransport

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "splitter" / "firmware_templates"
HOST_C = Path(__file__).resolve().parent / "host_c"
PLAN_HASH = "0123456789abcdef"
TAG = P.plan_tag(PLAN_HASH)
#: the stand-in sub-models' cycle counts (runtime_main.c)
CYCLES_0, CYCLES_2 = 0x1_0000_0005, 42
N_IN, N_MID, N_OUT = 1500, 1500, 64
#: sub-model 2's pass-through tensor (its second input and output)
N_PASS = 16


@pytest.fixture(scope="module")
def runtime_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """runtime.c, proto.c and tests/host_c/*.c built with gcc -Wall -Wextra -Werror + sanitizers."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no host C compiler; install it: apt-get install --no-install-recommends gcc")
    exe = tmp_path_factory.mktemp("runtime") / "runtime"
    srcs = [*sorted(HOST_C.glob("*.c")), TEMPLATES / "runtime.c", TEMPLATES / "proto.c"]
    flags = ["-std=c99", "-O1", "-g", "-Wall", "-Wextra", "-Werror"]
    flags += ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
    subprocess.run(
        [cc, *flags, f"-I{HOST_C}", f"-I{TEMPLATES}", *map(str, srcs), "-o", str(exe)],
        check=True,
    )
    return exe


@dataclass
class Rig:
    """The running device and the two peers the test plays."""

    host: HostLink
    d2: HostLink
    host_sock: socket.socket
    d2_sock: socket.socket


@contextmanager
def device(exe: Path) -> Iterator[Rig]:
    """Start the runtime with a socket pair per link; it must exit cleanly when they close."""
    host_sock, host_end = socket.socketpair()
    d2_sock, d2_end = socket.socketpair()
    fds = (host_end.fileno(), d2_end.fileno())
    proc = subprocess.Popen(
        [str(exe), *map(str, fds)], pass_fds=fds, stderr=subprocess.PIPE, text=True
    )
    host_end.close()
    d2_end.close()
    host = HostLink(SocketTransport.from_socket(host_sock, "fd://link0"), "d1", ack_timeout=0.5)
    d2 = HostLink(SocketTransport.from_socket(d2_sock, "fd://link1"), "d1", ack_timeout=0.5)
    host.plan_tag = d2.plan_tag = TAG
    try:
        yield Rig(host, d2, host_sock, d2_sock)
    finally:
        host.close()
        d2.close()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        assert proc.returncode == 0, err
        assert "runtime error" not in err and "Sanitizer" not in err, err


def floats(n_bytes: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n_bytes // 4).astype("<f4")


def chunk(
    sub: int, data: bytes, lo: int, hi: int, tag: int = TAG, total: int = -1, tensor: int = 0
) -> bytes:
    """A TENSOR payload carrying ``data[lo:hi]`` of input ``tensor``."""
    size = len(data) if total < 0 else total
    return P.CHUNK.pack(sub, tensor, tag, size, lo) + data[lo:hi]


def receive_tensor(
    link: HostLink, sub: int, nbytes: int
) -> tuple[bytes, list[Timing], list[P.Chunk]]:
    """TIMING, then the TENSOR chunks of ``sub`` (see :func:`receive_chunks`)."""
    frame = link.receive(3.0)
    assert frame.type == P.FrameType.TIMING
    data, chunks = receive_chunks(link, sub, nbytes)
    return data, [Timing(*r) for r in P.decode_timing(frame.payload)], chunks


def receive_chunks(link: HostLink, sub: int, nbytes: int) -> tuple[bytes, list[P.Chunk]]:
    """TENSOR chunks for ``sub`` until ``nbytes`` arrived (in order, overlaps allowed)."""
    buf, got, chunks = bytearray(nbytes), 0, []
    while got < nbytes:
        frame = link.receive(3.0)
        c = P.decode_chunk(frame.payload)
        assert (frame.type, c.submodel, c.total, c.tag) == (P.FrameType.TENSOR, sub, nbytes, TAG)
        assert c.offset <= got
        buf[c.offset : c.offset + len(c.data)] = c.data
        got = max(got, c.offset + len(c.data))
        chunks.append(c)
    return bytes(buf), chunks


def test_timing_record_layout_matches_the_c_side() -> None:
    """proto.h's record and chunk constants are the host's struct sizes and offsets."""
    text = (TEMPLATES / "proto.h").read_text()
    defs = {k: int(v) for k, v in re.findall(r"#define (PROTO_\w+) (\d+)u", text)}
    assert defs["PROTO_TIMING_RECORD"] == P.TIMING.size == 12
    assert defs["PROTO_CHUNK_HEADER"] == P.CHUNK.size
    assert defs["PROTO_MAX_PAYLOAD"] == P.MAX_PAYLOAD
    rec = P.TIMING.pack(0xAB, 0xCD, 0, 0x1122334455667788)
    assert rec[defs["PROTO_TIMING_SUB"]] == 0xAB and rec[defs["PROTO_TIMING_DEV"]] == 0xCD
    at = defs["PROTO_TIMING_CYCLES"]
    assert int.from_bytes(rec[at : at + 8], "little") == 0x1122334455667788


def test_pong_and_nack(runtime_exe: Path) -> None:
    with device(runtime_exe) as rig:
        pong = rig.host.ping(timeout=3.0)
        assert (pong.device_index, pong.device_name, pong.plan_hash) == (1, "d1", PLAN_HASH)
        assert (pong.n_submodels, pong.firmware_version) == (2, P.FIRMWARE_VERSION)
        assert pong.protocol == P.PROTOCOL_VERSION == 2
        bad = bytearray(P.encode_frame(P.FrameType.TIMING, 77, b"x" * 12))
        bad[-2] ^= 0x10
        rig.host_sock.sendall(b"noise" + bytes(bad))
        got = rig.host._next_raw(time.monotonic() + 3.0)
        assert got == ("ok", P.Frame(P.FrameType.NACK, 77, b""))


def test_tensor_through_both_sub_models_with_timing(runtime_exe: Path) -> None:
    """Host -> sub-model 0 -> d2 (two chunks); d2 -> sub-model 2 (two input tensors) -> host
    (two output tensors, the second passed through unchanged), records in order."""
    x = floats(N_IN, 1)
    with device(runtime_exe) as rig:
        rig.host.ping(timeout=3.0)
        send_tensor(rig.host, 0, x.tobytes())
        mid, timings, chunks = receive_tensor(rig.d2, 1, N_MID)
        assert np.array_equal(np.frombuffer(mid, "<f4"), 2 * x)
        assert timings == [Timing(0, 1, CYCLES_0)]
        assert [len(c.data) for c in chunks] == [P.CHUNK_DATA, N_MID - P.CHUNK_DATA]
        z, p = floats(N_OUT, 2), floats(N_PASS, 3)
        records = b"".join(P.TIMING.pack(t.submodel, t.device, 0, t.cycles) for t in timings)
        rig.d2.send(P.FrameType.TIMING, records + P.TIMING.pack(1, 2, 0, 777))
        rig.d2.send(P.FrameType.TENSOR, chunk(2, z.tobytes(), 0, N_OUT))
        with pytest.raises(SilentError):  # one of two inputs: the sub-model waits
            rig.host.receive(0.3)
        rig.d2.send(P.FrameType.TENSOR, chunk(2, p.tobytes(), 0, N_PASS, tensor=1))
        (out, passed), got, _ = receive_results(rig.host, [N_OUT, N_PASS], timeout=5.0)
        assert np.array_equal(np.frombuffer(out, "<f4"), z + 1)
        assert passed == p.tobytes()
        assert got == [Timing(0, 1, CYCLES_0), Timing(1, 2, 777), Timing(2, 1, CYCLES_2)]


def test_input_tensors_arrive_in_plan_order(runtime_exe: Path) -> None:
    """Tensor 1 before tensor 0, or an index past the inputs: ERROR 1; tensor 0 at offset 0
    starts the set again, so a resent set runs the sub-model once with the new values."""
    z, p = floats(N_OUT, 4).tobytes(), floats(N_PASS, 5).tobytes()
    with device(runtime_exe) as rig:
        rig.d2.send(P.FrameType.TENSOR, chunk(2, p, 0, N_PASS, tensor=1))
        expect_error(rig.host, 1, 2, "d1: unexpected TENSOR")
        rig.d2.send(P.FrameType.TENSOR, chunk(2, z, 0, N_OUT, tensor=2))
        expect_error(rig.host, 1, 2, "d1: unexpected TENSOR")
        rig.d2.send(P.FrameType.TENSOR, chunk(2, z, 0, N_OUT))
        rig.d2.send(P.FrameType.TENSOR, chunk(2, p, 0, N_PASS, tensor=1, total=N_PASS + 4))
        expect_error(rig.host, 1, 2, "d1: unexpected TENSOR")  # wrong size of tensor 1
        z2 = floats(N_OUT, 6)
        send_tensors(rig.d2, 2, [z2.tobytes(), p])
        (out, passed), _, _ = receive_results(rig.host, [N_OUT, N_PASS], timeout=5.0)
        assert np.array_equal(np.frombuffer(out, "<f4"), z2 + 1) and passed == p


def test_unacked_chunk_is_retransmitted_then_halved(runtime_exe: Path) -> None:
    """d2 ignores the first chunk twice: the runtime re-sends it as a 506 B chunk, then doubles."""
    x = floats(N_IN, 3)
    with device(runtime_exe) as rig:
        rig.host.send(P.FrameType.TIMING, b"")
        rig.host.send(P.FrameType.TENSOR, chunk(0, x.tobytes(), 0, 1012))
        rig.host.send(P.FrameType.TENSOR, chunk(0, x.tobytes(), 1012, N_IN))
        frame = rig.d2.receive(3.0)
        assert frame.type == P.FrameType.TIMING
        seen = []
        deadline = time.monotonic() + 3.0
        while len(seen) < 2:  # both transmissions of the first chunk, left unacknowledged
            got = rig.d2._next_raw(deadline)
            assert got is not None
            if got[1].type == P.FrameType.TENSOR:
                seen.append(got[1])
        assert seen[0] == seen[1] and len(P.decode_chunk(seen[0].payload).data) == P.CHUNK_DATA
        mid, chunks = receive_chunks(rig.d2, 1, N_MID)
        assert np.array_equal(np.frombuffer(mid, "<f4"), 2 * x)
        assert [(c.offset, len(c.data)) for c in chunks] == [(0, 506), (506, N_MID - 506)]


def test_overlapping_and_duplicate_chunks_run_the_sub_model_once(runtime_exe: Path) -> None:
    """A re-chunked retransmission overlaps what arrived, a lost ACK repeats a frame: the input
    is complete only at its last byte, and the sub-model runs once."""
    x = floats(N_IN, 4).tobytes()
    with device(runtime_exe) as rig:
        rig.host.send(P.FrameType.TIMING, b"")
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 0, 506))
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 506, 1012))  # its ACK "lost": re-chunked
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 506, 759))
        again = P.Frame(P.FrameType.TENSOR, rig.host._tx_seq, chunk(0, x, 506, 759))
        rig.host_sock.sendall(again.encode())  # same seq: a duplicate after a lost ACK
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 759, 1012))
        with pytest.raises(SilentError):  # 1518 B of chunks arrived, but not byte 1012 on
            rig.d2.receive(0.4)
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 1012, N_IN))
        mid, timings, _ = receive_tensor(rig.d2, 1, N_MID)
        assert np.array_equal(np.frombuffer(mid, "<f4"), 2 * np.frombuffer(x, "<f4"))
        assert timings == [Timing(0, 1, CYCLES_0)]
        with pytest.raises(SilentError):  # ran once: nothing more follows
            rig.d2.receive(0.4)


def test_timing_list_is_capped_at_max_records(runtime_exe: Path) -> None:
    """MAX_TIMING_RECORDS = 4: a fifth received record and the device's own are dropped."""
    recs = [P.TIMING.pack(k, 9, 0, 1000 + k) for k in range(5)]
    with device(runtime_exe) as rig:
        rig.host.send(P.FrameType.TIMING, b"".join(recs) + b"\x01\x02\x03")
        x = floats(N_IN, 5).tobytes()
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 0, 1012))
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 1012, N_IN))
        _, timings, _ = receive_tensor(rig.d2, 1, N_MID)
        assert timings == [Timing(k, 9, 1000 + k) for k in range(4)]


def expect_error(link: HostLink, code: int, arg: int, text: str) -> None:
    with pytest.raises(DeviceError) as info:
        link.receive(5.0)
    assert text in str(info.value)
    assert f"(code {code}, device 1, arg {arg})" in str(info.value)


def test_errors_go_to_the_host(runtime_exe: Path) -> None:
    x = floats(N_IN, 6).tobytes()
    with device(runtime_exe) as rig:
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 0, 1012, tag=0xBEEF))
        expect_error(rig.host, 5, 0, "d1: firmware is for plan 0123456789abcdef")
        rig.host.send(P.FrameType.TENSOR, chunk(7, x, 0, 100))
        expect_error(rig.host, 1, 7, "d1: unexpected TENSOR")
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 0, 100, total=99))
        expect_error(rig.host, 1, 0, "d1: unexpected TENSOR")
        rig.host.send(P.FrameType.RESULT, b"")
        expect_error(rig.host, 4, P.FrameType.RESULT, "d1: unexpected frame type")
        bad = np.frombuffer(x, "<f4").copy()
        bad[0] = -1.0
        rig.host.send(P.FrameType.TENSOR, chunk(0, bad.tobytes(), 0, 1012))
        rig.host.send(P.FrameType.TENSOR, chunk(0, bad.tobytes(), 1012, N_IN))
        expect_error(rig.host, 3, 0, "d1: a sub-model returned an error")


def test_silent_peer_and_forwarded_error(runtime_exe: Path) -> None:
    """d2 never answers: after SEND_RETRIES tries of the TIMING, ERROR 2 names link 1. Then an
    ERROR from d2 on link 1 is forwarded to the host on link 0."""
    x = floats(N_IN, 7).tobytes()
    with device(runtime_exe) as rig:
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 0, 1012))
        rig.host.send(P.FrameType.TENSOR, chunk(0, x, 1012, N_IN))
        expect_error(rig.host, 2, 1, "d1: no answer from d2 on link 1")
        rig.d2_sock.recv(65536)  # the unanswered TIMING frames
        rig.d2.send(P.FrameType.ERROR, bytes([2, 2, 0, 0]) + b"d2: broken")
        with pytest.raises(DeviceError, match=r"d2: broken \(code 2, device 2, arg 0\)"):
            rig.host.receive(5.0)
