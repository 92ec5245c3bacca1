"""The board-to-board link as a peripheral kind: what splitter needs to know about one kind.

A link kind (UART today, :mod:`splitter.hardware.links.uart`) is one module here holding one
:class:`LinkKind` subclass: the rate limits and divisor checks of its peripheral, the time a byte
takes on the wire, the family tables it reads (a :class:`~splitter.hardware.families.Family`
lists its peripherals: base address, clock enable, IRQ, pins) and the firmware sources that
implement ``splitter/firmware_templates/link.h`` over it. The board file parser, the firmware
generator and the wire cost (:mod:`splitter.cost.wire`) ask the kind of the ``[link]``
(:attr:`splitter.ir.LinkSpec.kind`) through :func:`splitter.hardware.links.link_kind`; nothing
else is keyed by link kind (CONTRIBUTING.md, "Adding a link kind").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypeVar

if TYPE_CHECKING:  # the families import this package's kinds; no cycle at run time
    from splitter.hardware.clocks import ClockTree
    from splitter.hardware.families.base import Family
    from splitter.ir import LinkSpec


@dataclass(frozen=True)
class Baud:
    """A checked divisor of link peripheral ``usart``: ``brr`` for ``baud`` from a ``fck_hz``
    kernel clock (``over8``: with 8x oversampling, CR1.OVER8 = 1); ``actual`` is the rate it
    gives, ``error`` = ``actual / baud - 1``."""

    usart: str
    fck_hz: int
    baud: int
    brr: int
    actual: float
    error: float
    over8: bool = False


#: Every link kind class, in the order their modules defined them (:class:`LinkKind` appends on
#: subclassing; :mod:`splitter.hardware.links` imports every module of the package).
REGISTERED: list[type[LinkKind]] = []


_K = TypeVar("_K", bound="LinkKind")
_INSTANCES: dict[type, object] = {}


class LinkKind:
    """One kind of board-to-board (and host) link; subclasses set every constant and method."""

    #: the ``[link] kind`` value of the board file
    name: ClassVar[str]
    #: firmware sources implementing ``link.h`` over the peripheral (in
    #: ``splitter/firmware_templates/``), besides the kind-free runtime
    firmware_sources: ClassVar[tuple[str, ...]]
    #: largest rate a board file may give (far beyond any real part: keeps arithmetic finite)
    max_rate: ClassVar[int]
    #: default ``[link] bits_per_byte``: line bits per payload byte
    default_bits_per_byte: ClassVar[int]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            REGISTERED.append(cls)

    def __new__(cls: type[_K]) -> _K:
        """One instance per kind (a kind holds no state): ``Uart() is UART``."""
        if cls not in _INSTANCES:
            _INSTANCES[cls] = super().__new__(cls)
        return _INSTANCES[cls]  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<link kind {self.name}>"

    def seconds(self, nbytes: float, link: LinkSpec) -> float:
        """Time ``nbytes`` bytes take on the wire of ``link``: ``B * bits_per_byte / rate``
        (SPEC.md, Links)."""
        return nbytes * link.bits_per_byte / link.baud

    def peripherals(self, family: Family) -> tuple[str, ...]:
        """The family's peripherals of this kind the generator can drive, in table order."""
        raise NotImplementedError

    def check_peripheral(self, family: Family, name: str, part: str) -> None:
        """BoardFileError unless ``name`` is one of :meth:`peripherals` of ``family``."""
        raise NotImplementedError

    def divisor(self, family: Family, name: str, clock_hz: int, rate: int) -> int:
        """The rate register value of peripheral ``name`` for ``rate`` from ``clock_hz``
        (unchecked: the emulator's)."""
        raise NotImplementedError

    def check_rate(
        self,
        family: Family,
        name: str,
        tree: ClockTree,
        rate: int,
        where: str,
        key: str = "[link] baud",
    ) -> Baud:
        """The checked divisor of ``name`` at ``rate`` on the real part's clock ``tree``;
        BoardFileError naming ``where``, the peripheral's limit, the nearest valid rates and the
        boards-file ``key`` to set otherwise."""
        raise NotImplementedError
