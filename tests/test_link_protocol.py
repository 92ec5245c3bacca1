"""Link protocol: Python framing/CRC/chunking, and the C side (proto.c) against it on the host."""

from __future__ import annotations

import random
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from splitter import protocol as P

TEMPLATES = Path(__file__).resolve().parent.parent / "splitter" / "firmware_templates"

HARNESS_CONFIG = """
#include <stdint.h>
#define N_LINKS 1
#define DEVICE_INDEX 3u
#define FIRMWARE_VERSION 258u
#define DEVICE_NAME_LEN 5
#define N_SUBMODELS 2u
#define SEND_RETRIES 3
#define ACK_TIMEOUT_TICKS 100ull
#define BYTE_TIMEOUT_TICKS 100000ull
extern const uint8_t plan_hash[8];
extern const char device_name[DEVICE_NAME_LEN + 1];
"""

# Host stand-ins for the link (link.h) and the clock: bytes come from stdin, go to stdout;
# every read advances the clock by one tick, so an exhausted input is a timeout.
HARNESS_MAIN = r"""
#include <stdio.h>
#include "proto.h"
#include "link.h"
#include "timer.h"
const uint8_t plan_hash[8] = {1, 2, 3, 4, 5, 6, 7, 8};
const char device_name[DEVICE_NAME_LEN + 1] = "board";
static uint64_t now;
uint64_t timer_now(void) { return now; }
int link_read_byte(int l, uint64_t deadline) {
    (void)l;
    int c = getchar();
    now++;
    if (c == EOF) { now = deadline; return -1; }
    return c;
}
void link_write(int l, const uint8_t *data, uint32_t n) { (void)l; fwrite(data, 1, n, stdout); }
int main(void) {
    static frame_t f;
    for (;;) {
        int r = proto_recv(0, &f, 1000000);
        if (r == RX_TIMEOUT) break;
        if (r == RX_BAD) { proto_write(0, FT_NACK, f.seq, 0, 0, 0, 0); continue; }
        if (f.type == FT_PING) { proto_send_pong(0); continue; }
        /* echo: header part and body part, to exercise both pointers */
        uint16_t h = f.len / 2;
        proto_write(0, f.type, f.seq, f.payload, h, f.payload + h, (uint16_t)(f.len - h));
    }
    printf("%08x", (unsigned)crc32((const uint8_t *)"123456789", 9));
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """proto.c compiled for the host with gcc -Wall -Werror and the stand-ins above."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.fail("no host C compiler; install it: apt-get install --no-install-recommends gcc")
    d = tmp_path_factory.mktemp("proto")
    (d / "config.h").write_text(HARNESS_CONFIG)
    (d / "main.c").write_text(HARNESS_MAIN)
    exe = d / "harness"
    subprocess.run(
        [
            cc,
            "-std=c99",
            "-O1",
            "-Wall",
            "-Werror",
            "-fsanitize=address,undefined",
            f"-I{d}",
            f"-I{TEMPLATES}",
            str(d / "main.c"),
            str(TEMPLATES / "proto.c"),
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def test_crc32_is_zlib() -> None:
    assert P.crc32(b"123456789") == 0xCBF43926 == zlib.crc32(b"123456789")


def test_frame_layout() -> None:
    raw = P.encode_frame(P.FrameType.TENSOR, 7, b"\x01\x02")
    assert raw[:2] == b"\xa5\x5a"
    assert raw[2:6] == bytes([0x03, 7, 2, 0])
    assert raw[6:8] == b"\x01\x02"
    assert int.from_bytes(raw[8:], "little") == zlib.crc32(raw[2:8])
    assert len(raw) == P.OVERHEAD + 2


@settings(max_examples=50, deadline=None)
@given(
    frames=st.lists(
        st.tuples(st.integers(1, 8), st.integers(0, 255), st.binary(max_size=P.MAX_PAYLOAD)),
        max_size=5,
    ),
    noise=st.binary(max_size=20),
)
def test_decoder_round_trip(frames: list[tuple[int, int, bytes]], noise: bytes) -> None:
    stream = noise.replace(P.SYNC, b"") + b"".join(P.encode_frame(*f) for f in frames)
    dec = P.FrameDecoder()
    got = []
    for i in range(0, len(stream), 7):  # arbitrary split points
        got += list(dec.feed(stream[i : i + 7]))
    assert [(s, (f.type, f.seq, f.payload)) for s, f in got] == [("ok", f) for f in frames]


def test_decoder_reports_bad_crc_then_resyncs() -> None:
    bad = bytearray(P.encode_frame(P.FrameType.TIMING, 9, b"abcdef"))
    bad[8] ^= 0x40
    good = P.encode_frame(P.FrameType.ACK, 10)
    out = list(P.FrameDecoder().feed(bytes(bad) + good))
    assert out[0][0] == "bad" and out[0][1].seq == 9
    assert out[-1] == ("ok", P.Frame(P.FrameType.ACK, 10, b""))


def test_oversized_payload_is_rejected() -> None:
    with pytest.raises(ValueError, match="MAX_PAYLOAD"):
        P.encode_frame(P.FrameType.TENSOR, 0, bytes(P.MAX_PAYLOAD + 1))


def test_chunks_cover_the_tensor() -> None:
    data = bytes(random.Random(1).randbytes(3000))
    chunks = [P.decode_chunk(p) for p in P.chunk_payloads(4, data)]
    assert all(len(p) <= P.MAX_PAYLOAD for p in P.chunk_payloads(4, data))
    assert [c.offset for c in chunks] == [0, P.CHUNK_DATA, 2 * P.CHUNK_DATA]
    assert b"".join(c.data for c in chunks) == data
    assert {(c.submodel, c.total) for c in chunks} == {(4, 3000)}


def test_pong_and_timing_codecs() -> None:
    pong = P.Pong(1, 2, 3, "00112233aabbccdd", "board-x", 7)
    assert P.decode_pong(P.encode_pong(pong)) == pong
    payload = P.TIMING.pack(0, 1, 0, 2**40 + 5) + P.TIMING.pack(1, 0, 0, 7)
    assert P.decode_timing(payload) == [(0, 1, 2**40 + 5), (1, 0, 7)]


def test_plan_hash_ignores_its_own_key_and_key_order() -> None:
    a = {"x": 1, "y": [1, 2]}
    assert P.plan_hash(a) == P.plan_hash({"y": [1, 2], "x": 1, "plan_hash": "zz"})
    assert P.plan_hash(a) != P.plan_hash({"x": 2, "y": [1, 2]})
    # the solver's node count (run to run) does not change the plan it found
    assert P.plan_hash({**a, "nodes": 5}) == P.plan_hash({**a, "nodes": 7}) == P.plan_hash(a)
    assert len(P.plan_hash(a)) == 16


def test_c_side_matches_python(harness: Path) -> None:
    """proto.c decodes Python's frames (NACKs a corrupted one) and its frames decode here."""
    rng = random.Random(5)
    frames = [P.Frame(P.FrameType.TENSOR, k, rng.randbytes(n)) for k, n in enumerate((0, 1, 1024))]
    corrupt = bytearray(P.encode_frame(P.FrameType.TIMING, 99, b"xyz"))
    corrupt[-1] ^= 1
    stream = (
        b"\x00\xa5junk"
        + frames[0].encode()
        + bytes(corrupt)
        + frames[1].encode()
        + P.encode_frame(P.FrameType.PING, 0)
        + frames[2].encode()
    )
    out = subprocess.run([str(harness)], input=stream, capture_output=True, check=True).stdout
    decoded = list(P.FrameDecoder().feed(out[:-8]))
    assert all(s == "ok" for s, _ in decoded)
    got = [f for _, f in decoded]
    assert got[0] == frames[0]
    assert got[1] == P.Frame(P.FrameType.NACK, 99, b"")
    assert got[2] == frames[1]
    pong = P.decode_pong(got[3].payload)
    assert (pong.device_index, pong.device_name, pong.plan_hash) == (3, "board", "0102030405060708")
    assert pong.firmware_version == 258
    assert got[4] == frames[2]
    assert out[-8:] == b"cbf43926"
