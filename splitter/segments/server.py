"""Host side of LO-SC segment loading: serve a segmented board the weights of each segment.

On the emulator (and on a board without external flash) the host stands in for external storage
(docs/protocol.md, "Segment weights"): before each segment the board sends ``LOAD`` (a chunk
header with ``sub-model`` = the segment, ``total`` = its weight bytes, no data); the host answers
with the bytes at the segment's offset of ``OUT/firmware/<device>/weights.bin`` as ``WEIGHTS``
chunks (the TENSOR chunk layout), each acknowledged. :class:`WeightServer` does that while the
host waits for the result (``HostLink.serve``) and records how long each load took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from splitter import protocol as P
from splitter.device.host import HostLink, MalformedFrameError
from splitter.errors import InputFileError

#: Frame types of segment loading (docs/protocol.md): board -> host, host -> board.
LOAD = 0x09
WEIGHTS = 0x0A


@dataclass(frozen=True)
class Load:
    """One segment load as the host served it."""

    segment: int
    bytes: int
    seconds: float


@dataclass
class WeightServer:
    """Answers ``LOAD`` frames from ``blob`` cut into ``segments`` (offset, bytes)."""

    blob: bytes
    segments: list[tuple[int, int]]
    loads: list[Load] = field(default_factory=list)
    #: seconds added to a result's deadline: the estimated streaming time of one inference
    #: (segments.json ``stream_s``: weights x bits per byte / baud; ``load_s`` before it, which
    #: is the external flash's read time when the board has one)
    budget_s: float = 0.0

    @classmethod
    def from_out(cls, out_dir: Path, record: dict[str, Any], device: str) -> WeightServer:
        """The server of a segmented ``OUT`` (``record`` = its segments.json)."""
        path = Path(out_dir) / "firmware" / device / str(record["blob"])
        try:
            blob = path.read_bytes()
        except OSError as exc:
            raise InputFileError(
                f"{path}: cannot read the segment weights ({exc.strerror}); "
                "re-run `splitter segment ... -o OUT`"
            ) from None
        if len(blob) != int(record["blob_bytes"]):
            raise InputFileError(
                f"{path}: {len(blob)} B, segments.json says {record['blob_bytes']} B; "
                "re-run `splitter segment ... -o OUT`"
            )
        rows = [(int(s["blob_offset"]), int(s["weights_bytes"])) for s in record["segments"]]
        budget = record.get("stream_s", record.get("load_s", 0.0))
        return cls(blob, rows, budget_s=float(budget))

    @property
    def seconds(self) -> float:
        """Wall time of every load served."""
        return sum(x.seconds for x in self.loads)

    def __call__(self, link: HostLink, frame: P.Frame) -> bool:
        """Serve ``frame`` when it is a LOAD (True); any other frame is not ours (False)."""
        if frame.type != LOAD:
            return False
        try:
            chunk = P.decode_chunk(frame.payload)
        except ValueError as exc:
            raise MalformedFrameError(f"{link.url}: device {link.device}: LOAD {exc}") from None
        k = chunk.submodel
        if k >= len(self.segments) or chunk.total != self.segments[k][1]:
            raise MalformedFrameError(
                f"{link.url}: device {link.device} asks for segment {k} of {chunk.total} B, "
                f"the plan has {len(self.segments)} segments; rebuild and flash it"
            )
        t0 = time.monotonic()
        send_weights(link, k, self.blob[self.segments[k][0] :][: chunk.total])
        self.loads.append(Load(k, chunk.total, time.monotonic() - t0))
        return True


def send_weights(link: HostLink, segment: int, data: bytes) -> None:
    """``data`` as WEIGHTS chunks of at most :data:`~splitter.protocol.CHUNK_DATA` bytes."""
    for off in range(0, len(data), P.CHUNK_DATA):
        part = data[off : off + P.CHUNK_DATA]
        link.send(WEIGHTS, P.CHUNK.pack(segment, 0, link.plan_tag, len(data), off) + part)
        if link.on_bytes is not None:
            link.on_bytes("load", off + len(part), len(data))
