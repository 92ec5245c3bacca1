"""The splitter UART link protocol (host side); the normative description is docs/protocol.md.

A frame on the wire::

    A5 5A | type u8 | seq u8 | len u16 LE | payload (len bytes) | crc32 u32 LE

The CRC is CRC-32/IEEE (``zlib.crc32``: reflected polynomial 0xEDB88320, init and final XOR
0xFFFFFFFF) over ``type, seq, len, payload``. The C side (``splitter/firmware_templates/proto.c``)
must
compute the same numbers; ``tests/test_link_protocol.py`` checks it on the host.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

SYNC = b"\xa5\x5a"
HEADER = struct.Struct("<BBH")  # type, seq, len
CRC = struct.Struct("<I")
#: Largest payload of one frame (bytes); TENSOR/RESULT data is chunked to fit.
MAX_PAYLOAD = 1024
#: Bytes a frame adds around its payload: sync 2 + header 4 + crc 4.
OVERHEAD = len(SYNC) + HEADER.size + CRC.size
#: Version 2: byte 1 of the chunk header is the tensor index (version 1: flags, always 0).
PROTOCOL_VERSION = 2
#: Version of the generated firmware runtime (bump when runtime.c/proto.c behaviour changes).
FIRMWARE_VERSION = 3
#: TENSOR/RESULT chunk header: sub-model u8, tensor u8, plan tag u16, total u32, offset u32.
#: ``tensor`` is the tensor's position in the receiving sub-model's ``inputs`` (TENSOR) or in
#: the last sub-model's ``outputs`` (RESULT) of plan.json.
CHUNK = struct.Struct("<BBHII")
CHUNK_DATA = MAX_PAYLOAD - CHUNK.size
#: Most tensors one hop carries (the tensor index is one byte).
MAX_TENSORS = 255
#: PONG payload head: protocol u8, device index u8, sub-models u8, name length u8, plan hash 8,
#: firmware version u16 (splitter.codegen.firmware.FIRMWARE_VERSION); the name follows.
PONG = struct.Struct("<BBBB8sH")
#: One TIMING record: sub-model u8, device u8, reserved u16, cycles u64 (12 bytes; the C side's
#: ``PROTO_TIMING_*`` in splitter/firmware_templates/proto.h, checked by
#: tests/test_runtime_host.py).
TIMING = struct.Struct("<BBHQ")
PLAN_HASH_BYTES = 8


class FrameType(IntEnum):
    """Message types; every type except PING, PONG, ACK and NACK is acknowledged."""

    PING = 0x01
    PONG = 0x02
    TENSOR = 0x03
    RESULT = 0x04
    TIMING = 0x05
    ERROR = 0x06
    ACK = 0x07
    NACK = 0x08


UNACKED = frozenset({FrameType.PING, FrameType.PONG, FrameType.ACK, FrameType.NACK})


@dataclass(frozen=True)
class Frame:
    """One decoded frame."""

    type: int
    seq: int
    payload: bytes = b""

    def encode(self) -> bytes:
        """The bytes on the wire: sync, header, payload, CRC-32 of header + payload."""
        return encode_frame(self.type, self.seq, self.payload)

    @property
    def name(self) -> str:
        """The type's name, or ``0xNN`` for an unknown type."""
        try:
            return FrameType(self.type).name
        except ValueError:
            return f"0x{self.type:02x}"


@dataclass(frozen=True)
class Pong:
    """A decoded PONG: who answered and for which plan."""

    protocol: int
    device_index: int
    n_submodels: int
    plan_hash: str
    device_name: str
    firmware_version: int = 0


@dataclass(frozen=True)
class Chunk:
    """A decoded TENSOR/RESULT chunk: ``data`` goes at ``offset`` of a ``total``-byte tensor."""

    submodel: int
    total: int
    offset: int
    data: bytes
    tag: int = 0
    tensor: int = 0


def crc32(data: bytes) -> int:
    """CRC-32/IEEE 802.3 of ``data`` (same as ``zlib.crc32``)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_frame(ftype: int, seq: int, payload: bytes = b"") -> bytes:
    """Frame ``payload``: ``SYNC | type | seq | len | payload | crc32(type..payload)``."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds MAX_PAYLOAD={MAX_PAYLOAD}")
    body = HEADER.pack(ftype & 0xFF, seq & 0xFF, len(payload)) + payload
    return SYNC + body + CRC.pack(crc32(body))


class FrameDecoder:
    """Incremental decoder: feed bytes, get complete frames and CRC failures.

    Bytes before a sync word are skipped; a frame whose length exceeds :data:`MAX_PAYLOAD` is
    treated as noise (the decoder resynchronises one byte later). A frame with a bad CRC is
    reported as ``("bad", seq)`` so the receiver can NACK that sequence number.
    """

    def __init__(self) -> None:
        self._buf = bytearray()

    @property
    def pending(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> Iterator[tuple[str, Frame]]:
        """Yield ``("ok", frame)`` for every good frame and ``("bad", frame)`` for CRC errors."""
        self._buf += data
        while True:
            start = self._buf.find(SYNC)
            if start < 0:
                del self._buf[: max(0, len(self._buf) - 1)]
                return
            del self._buf[:start]
            if len(self._buf) < len(SYNC) + HEADER.size:
                return
            ftype, seq, length = HEADER.unpack_from(self._buf, len(SYNC))
            if length > MAX_PAYLOAD:
                del self._buf[:1]
                continue
            end = len(SYNC) + HEADER.size + length + CRC.size
            if len(self._buf) < end:
                return
            body = bytes(self._buf[len(SYNC) : end - CRC.size])
            (crc,) = CRC.unpack_from(self._buf, end - CRC.size)
            frame = Frame(ftype, seq, body[HEADER.size :])
            if crc == crc32(body):
                del self._buf[:end]
                yield "ok", frame
            else:
                del self._buf[:1]  # resync: the sync word may have been noise
                yield "bad", frame

    def drop_partial(self) -> Iterator[tuple[str, Frame]]:
        """Give up on a partial frame (the line went quiet): resync one byte further."""
        if self._buf:
            del self._buf[:1]
        return self.feed(b"")


def plan_tag(plan_hash_hex: str) -> int:
    """The chunk header's plan tag: the plan hash's first two bytes, little-endian."""
    return int.from_bytes(bytes.fromhex(plan_hash_hex)[:2], "little")


def chunk_payloads(submodel: int, data: bytes, tag: int = 0, tensor: int = 0) -> list[bytes]:
    """Split tensor ``tensor`` of a hop into TENSOR/RESULT payloads of at most
    :data:`MAX_PAYLOAD` bytes."""
    chunks = []
    for offset in range(0, max(len(data), 1), CHUNK_DATA):
        part = data[offset : offset + CHUNK_DATA]
        chunks.append(CHUNK.pack(submodel, tensor, tag, len(data), offset) + part)
    return chunks


def decode_chunk(payload: bytes) -> Chunk:
    """Decode a TENSOR/RESULT payload."""
    if len(payload) < CHUNK.size:
        raise ValueError(f"chunk payload of {len(payload)} bytes is shorter than its header")
    sub, tensor, tag, total, offset = CHUNK.unpack_from(payload)
    return Chunk(sub, total, offset, payload[CHUNK.size :], tag, tensor)


def decode_pong(payload: bytes) -> Pong:
    """Decode a PONG payload (see :data:`PONG`), name bytes follow the fixed head."""
    if len(payload) < PONG.size:
        raise ValueError(f"PONG payload of {len(payload)} bytes is too short")
    proto, dev, nsub, name_len, phash, fw = PONG.unpack_from(payload)
    name = payload[PONG.size : PONG.size + name_len].decode("utf-8", "replace")
    return Pong(proto, dev, nsub, phash.hex(), name, fw)


def encode_pong(pong: Pong) -> bytes:
    """Encode a PONG payload (the firmware's side; used by tests and the protocol docs)."""
    name = pong.device_name.encode()
    head = PONG.pack(
        pong.protocol,
        pong.device_index,
        pong.n_submodels,
        len(name),
        bytes.fromhex(pong.plan_hash),
        pong.firmware_version,
    )
    return head + name


def decode_timing(payload: bytes) -> list[tuple[int, int, int]]:
    """Decode a TIMING payload into ``(submodel, device, cycles)`` records."""
    if len(payload) % TIMING.size:
        raise ValueError(
            f"TIMING payload of {len(payload)} bytes is not a multiple of {TIMING.size}"
        )
    return [
        (sub, dev, cycles)
        for sub, dev, _res, cycles in (
            TIMING.unpack_from(payload, i) for i in range(0, len(payload), TIMING.size)
        )
    ]


def plan_hash(plan_json: Mapping[str, Any]) -> str:
    """The 8-byte plan hash (16 hex digits) a firmware reports in PONG.

    ``sha256(canonical JSON of plan.json without its "plan_hash" and "nodes" keys)[:8]``;
    canonical JSON is ``json.dumps(obj, sort_keys=True, separators=(",", ":"))``. The solver's
    node count says how the plan was found, not what it is, and varies from run to run (string
    hashing orders the search differently per process): left out, the same model and boards
    give the same hash, so the same firmware bytes.
    """
    obj = {k: v for k, v in plan_json.items() if k not in ("plan_hash", "nodes")}
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()[:PLAN_HASH_BYTES].hex()
