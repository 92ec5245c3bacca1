"""Bytes on the wire of one tensor transfer and its time, as docs/protocol.md sends them.

The frame layout is read from :mod:`splitter.protocol` (a leaf module: the protocol's
constants, no other splitter import), so a change of the header or chunk layout follows here.
With ``O = protocol.OVERHEAD`` (sync 2 + type/seq/len 4 + CRC-32 4 = 10 bytes, docs/protocol.md
"Frame"), ``H = protocol.CHUNK.size`` (the TENSOR/RESULT chunk header, "Types"),
``D = protocol.CHUNK_DATA = MAX_PAYLOAD - H`` (data bytes per chunk) and ``T =
protocol.TIMING.size`` (one TIMING record), sending a ``B``-byte tensor whose TIMING frame
carries ``r`` records is, on a clean line:

* forward (sender -> receiver): one TIMING frame ``O + T*r`` ("TIMING precedes every
  TENSOR/RESULT transfer") and ``c = max(1, ceil(B / D))`` chunk frames of ``O + H + data``
  ("TENSOR ... chunks of at most 1024 - 12 = 1012 data bytes"; an empty tensor is one empty
  chunk), i.e. ``O + T*r + c*(O + H) + B``;
* back (receiver -> sender): one ACK (``O`` bytes, empty payload) per data frame, ``(1 + c)*O``
  ("Reliability": every TENSOR, RESULT, TIMING and ERROR frame is acknowledged);
* retransmissions: a budget ``rho`` (``[link] retransmit`` of the board file, default 0): the
  expected extra bytes as a fraction of the above, a frame and its ACK/NACK sent again.
  On a clean link nothing is sent again, so with ``rho = 0`` the prediction is the bytes a
  proxy on the link counts (``tests/test_wire_bytes.py``).

The ACKs travel on the other wire of the full-duplex pair, but the protocol is stop-and-wait
("Reliability": the sender waits for each ACK before the next frame), so they add to the time:

``seconds = (forward + back) * (1 + rho) * bits_per_byte / baud``

(``bits_per_byte = 10`` for 8N1: start + 8 data + stop). Device turn-around (CRC, copying) is
not modelled. Records: the host sends an empty TIMING (``r = 0``) before the input; the device
running sub-model ``k`` (counted from 0) sends ``k + 1`` records with its output (one per
sub-model so far, "TIMING"). PING/PONG happen once per session, not per inference, and are not
counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from splitter import protocol as P
from splitter.hardware.links import link_kind
from splitter.ir import LinkSpec


@dataclass(frozen=True)
class Wire:
    """One transfer: tensor bytes and the bytes the protocol puts on the wire for it."""

    payload: int  # B: the tensor's bytes
    forward: int  # TIMING + chunk frames, sender -> receiver
    back: int  # ACK frames, receiver -> sender
    retransmit: float = 0.0  # rho * (forward + back), the budget

    @property
    def clean(self) -> int:
        """``forward + back``: what a proxy counts on a clean line."""
        return self.forward + self.back

    @property
    def total(self) -> float:
        """``(forward + back) * (1 + rho)``: the bytes the time is computed from."""
        return self.clean + self.retransmit

    @property
    def overhead(self) -> float:
        """Bytes on the wire beyond the payload."""
        return self.total - self.payload

    def seconds(self, link: LinkSpec) -> float:
        """``total * bits_per_byte / baud`` (see the module docstring): the time the link's
        kind gives ``total`` bytes (:meth:`splitter.hardware.links.LinkKind.seconds`)."""
        return link_kind(link.kind).seconds(self.total, link)


def chunks(nbytes: int) -> int:
    """Chunk frames of a ``nbytes`` tensor: ``max(1, ceil(B / CHUNK_DATA))``."""
    return max(1, math.ceil(nbytes / P.CHUNK_DATA))


def wire(nbytes: int, records: int = 0, retransmit: float = 0.0) -> Wire:
    """The bytes on the wire of sending a ``nbytes`` tensor after ``records`` TIMING records.

    ``forward = O + T*r + c*(O + H) + B``, ``back = (1 + c)*O``, budget ``rho*(forward + back)``
    (module docstring, docs/protocol.md "Frame", "Types", "Reliability").
    """
    if nbytes < 0 or records < 0 or retransmit < 0:
        raise ValueError(f"wire({nbytes}, {records}, {retransmit}): negative argument")
    c = chunks(nbytes)
    forward = P.OVERHEAD + P.TIMING.size * records + c * (P.OVERHEAD + P.CHUNK.size) + nbytes
    back = (1 + c) * P.OVERHEAD
    return Wire(nbytes, forward, back, retransmit * (forward + back))


def payload_only(nbytes: int) -> Wire:
    """The thesis's link model (SPEC.md, Links): the tensor's bytes and nothing else."""
    return Wire(nbytes, nbytes, 0)


def record_seconds(link: LinkSpec) -> float:
    """Time of one TIMING record on the wire: ``T * (1 + rho) * bits_per_byte / baud``."""
    return link_kind(link.kind).seconds(P.TIMING.size * (1.0 + link.retransmit), link)


@dataclass(frozen=True)
class LinkModel:
    """How the planner costs a transfer.

    ``wire=False`` is the thesis's model (SPEC.md, Links): payload bytes only, and the host's
    input and output transfers left out; layer profiles (the thesis's reference cases) are
    planned with it, so their figures reproduce exactly. ``wire=True`` counts the bytes of
    :func:`wire`; with ``host_io`` the host's transfers of the ``input_bytes`` to the first
    sub-model and of the ``output_bytes`` back from the last are part of the latency, as the
    user waits for them (``splitter plan/compile --no-host-io`` leaves them out, as the thesis).
    """

    wire: bool = False
    host_io: bool = False
    input_bytes: int = 0
    output_bytes: int = 0
    #: ``--result-on head``: bytes of the result the tail sends back to the head over the
    #: return link (0: no return link)
    return_bytes: int = 0

    def transfer(self, nbytes: int, records: int, link: LinkSpec) -> Wire:
        """The :class:`Wire` of one transfer under this model."""
        return wire(nbytes, records, link.retransmit) if self.wire else payload_only(nbytes)

    @property
    def name(self) -> str:
        """``"wire"`` or ``"payload"`` (the thesis's), as plan.json records it."""
        return "wire" if self.wire else "payload"


#: The thesis's link model: payload only, no host transfers.
THESIS = LinkModel()
