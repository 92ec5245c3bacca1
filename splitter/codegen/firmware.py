"""Firmware projects per device: wiring, a typed render context, and Jinja2 rendering.

``build_plan_context(...)`` turns the plan (sub-models in plan order with their devices), the
parts and the generated model C of every device (``splitter.codegen.model_c.GeneratedC``) into a
:class:`PlanContext`; every number a template prints is computed here. ``render_firmware(out_dir,
ctx)`` writes ``OUT/firmware/<device>/`` (main.c, plan.c, config.h, startup.c, the link
driver, the kernels, the model C, two linker scripts, a Makefile, a CMake project and
``compile_commands.json``: ``splitter.codegen.build_files``; in library mode no main.c, startup
or UART driver: :func:`mode_sources`), ``OUT/firmware/WIRING.md`` and
``OUT/firmware/wiring.json`` (read by ``splitter emulate``), atomically.

Wiring rule: every pair of endpoints that exchanges data (host, devices) gets one dedicated
full-duplex UART pair. A device's link 0 is the one its first sub-model's input arrives on (so
link 0 always leads towards the host, and errors travel on it); further links follow in plan
order. On the real board the host link uses the first USART of the board (or part) list, the
ST-LINK virtual COM port, and links to other devices the following ones in order
(``splitter.hardware.board_catalog.device_wiring``); in the emulator link ``k`` uses
:data:`splitter.hardware.qemu.EMULATOR`'s ``k``-th USART = the ``k``-th ``-serial`` of QEMU.
Register addresses, IRQs, pins and the clock tree come from the part's family
(``splitter/hardware/families.py``, ``clocks.py``); BRR from the USART's bus clock and the
link's own rate (:func:`link_rates`: the host link at ``[link] host_baud``, a board-to-board
link at its ``[[link.pair]]`` or ``board_baud`` rate, :class:`splitter.ir.LinkSpec`).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import jinja2

from splitter.codegen.build_files import build_context, compile_commands
from splitter.codegen.escape import register
from splitter.codegen.slots import SubModelSlots, TensorSlot
from splitter.codegen.watchdog import WatchdogContext, watchdog_context
from splitter.errors import BoardFileError, OutputError, UnsupportedOpError
from splitter.hardware.board_catalog import Wiring, device_wiring
from splitter.hardware.clocks import Step
from splitter.hardware.families import Family, RegWrite, family_for
from splitter.hardware.links import link_kind
from splitter.hardware.qemu import EMULATOR
from splitter.ir import Boards, Chain, LinkSpec, Part
from splitter.manifest import PlanManifest
from splitter.outputs import contained, crash_point, write_durable
from splitter.protocol import FIRMWARE_VERSION, MAX_TENSORS

TEMPLATES = Path(__file__).resolve().parent.parent / "firmware_templates"
#: The link kind the firmware drives (UART: the only one with a firmware driver today).
LINK = link_kind()
STATIC_FILES = (
    "proto.c",
    "proto.h",
    "runtime.c",
    "runtime.h",
    "link.h",
    "timer.c",
    "timer.h",
    *LINK.firmware_sources,
    "libc.c",
    "clock_status.h",
    "watchdog.c",
    "watchdog.h",
    "splitter.h",
    "splitter_port.h",
    "port.c",
    "app.h",
)
#: The build descriptions rendered from ``<name>.j2`` with the build facts of
#: ``splitter.codegen.build_files`` (the Makefile, the CMake project and its toolchain file).
BUILD_TEMPLATES = ("Makefile", "CMakeLists.txt", "arm-none-eabi.cmake")
#: ``compile --app``: harness (the host drives the chain: run, bench, validate), standalone (a
#: complete firmware per board fed by application functions) or library (no main(), startup,
#: clock or UART driver: a static library over the port interface, splitter_port.h).
APP_MODES = ("harness", "standalone", "library")
#: Files of a device project that only some modes use; every other file is used by all three.
MODE_ONLY: Mapping[str, tuple[str, ...]] = {
    "main.c": ("harness", "standalone"),  # owns main()
    "startup.c": ("harness", "standalone"),  # reset handler, vector table, clocks, pins
    # our driver of the link's peripheral (the USARTs: interrupt-driven rings)
    **dict.fromkeys(LINK.firmware_sources, ("harness", "standalone")),
    "timer.c": ("harness", "standalone"),  # SysTick (a product's HAL owns it)
    "libc.c": ("harness", "standalone"),  # memcpy/memset for -nostdlib links
    "part.ld": ("harness", "standalone"),
    "emulator.ld": ("harness", "standalone"),
    "app.c": ("standalone",),  # the example application: sample inputs in, results printed
    "app.h": ("standalone",),
    "app_samples.c": ("standalone",),
    "port.c": ("library",),  # link.h and timer.h over the product's port
    "splitter_port.h": ("library",),
}
#: Most model outputs a result callback carries (splitter.h splitter_result_t).
APP_MAX_OUTPUTS = 8
#: Sample inputs the standalone example compiles in when compile has no --input.
APP_DEFAULT_SAMPLES = 4
HOST = "host"
ACK_TIMEOUT_S = 0.25
BYTE_TIMEOUT_S = 0.05
SEND_RETRIES = 8
MIN_STACK_BYTES = 2048
MAX_TIMING_RECORDS = 32
#: Largest boundary tensor (bytes): runtime.c keeps a sub-model's receive progress in 24 bits.
MAX_TENSOR_BYTES = (1 << 24) - 1


def mode_sources(mode: str, files: Iterable[str]) -> list[str]:
    """The files of ``files`` (paths relative to a device project, e.g. ``"main.c"``,
    ``"kernels/kernels.c"``) that belong to ``--app`` ``mode``, in their order.

    Library mode leaves out what a product's HAL or RTOS owns (main(), startup and clocks, the
    USART driver, SysTick, libc helpers, linker scripts) and the standalone example; its static
    library is every ``.c`` this returns. Build files (Makefile, CMake) pass through.
    """
    if mode not in APP_MODES:
        raise ValueError(f"--app {mode!r}: choose one of {', '.join(APP_MODES)}")
    keep = []
    for f in files:
        path = Path(f)
        owner = MODE_ONLY.get(path.name, APP_MODES) if path.parent.name != "kernels" else APP_MODES
        if mode in owner:
            keep.append(f)
    return keep


@dataclass(frozen=True)
class AppOptions:
    """How the firmware is used (``compile --app`` and ``--result-on``) and, for the standalone
    example, the head board's compiled-in sample inputs (each: every input of sub-model 0 in
    wire order, ``splitter.device.host.to_wire``)."""

    mode: str = "harness"
    result_on: str = "tail"
    samples: tuple[bytes, ...] = ()


# ---------------------------------------------------------------- inputs -------------------
@dataclass(frozen=True)
class DeviceSpec:
    """One device of the plan and its generated model C (``codegen.model_c.GeneratedC``)."""

    name: str
    index: int
    part: Part
    files: Mapping[str, str]  # model C sources by file name (model.h, model.c)
    weights_bytes: int
    arena_bytes: int
    #: per hosted sub-model its tensor slots (``splitter.codegen.model_c.GeneratedC.slots``), or
    #: ``(index, input_offset, input_bytes, output_offset, output_bytes)`` for one in, one out
    submodels: Sequence[SubModelSlots | tuple[int, int, int, int, int]]
    clock_hz: float = 0.0  # the real board's clock (0: the part's catalog clock)
    board: str | None = None  # board definition (board_catalog.toml)
    watchdog_ms: int = 0  # compile --watchdog-ms (0: no watchdog)
    busy_s: float = 0.0  # the plan's longest sub-model run on the device (compute_s)


# ---------------------------------------------------------------- render context -----------
@dataclass(frozen=True)
class UsartContext:
    """One USART of one build target, with its baud-rate divisor ``BRR = round(f_clk / baud)``
    and the CR1 bits it needs besides RE/TE/RXNEIE/UE (OVER8, bit 15, for 8x oversampling)."""

    name: str
    base_hex: str
    irq: int
    brr: int
    cr1: int = 0


@dataclass(frozen=True)
class IrqHandler:
    """An interrupt handler serving the links whose USARTs share ``name``'s IRQ."""

    name: str
    irq: int
    links: tuple[int, ...]


@dataclass(frozen=True)
class TargetContext:
    """One build variant of a device: the part itself (EMULATOR=0) or QEMU's board (EMULATOR=1)."""

    emulator_flag: int
    description: str
    part_name: str
    cpu_flags: str
    ldscript: str
    build_dir: str
    core_clock_hz: int
    usart_layout_sr_dr: int
    has_fpu: int
    has_dwt: int
    ack_timeout_ticks: int
    byte_timeout_ticks: int
    flash_origin_hex: str
    flash_bytes: int
    ram_origin_hex: str
    ram_bytes: int
    min_stack_bytes: int
    usarts: tuple[UsartContext, ...]
    irq_handlers: tuple[IrqHandler, ...]
    irq_vectors: tuple[str, ...]
    n_vectors: int


@dataclass(frozen=True)
class LinkContext:
    """Link ``index`` of a device: its peer and the USART it uses on the part and in QEMU."""

    index: int
    peer: str
    peer_index: int  # -1 for the host
    usart: str
    pins: str
    emu_usart: str
    server: bool  # emulator: this side listens on the unix socket (the lower device index)
    timeout_message: str
    plan_message: str = ""  # standalone / library: the peer's plan hash differs (boot handshake)
    #: "r" for the return link of ``--result-on head`` (a second link between two neighbours
    #: has its own emulator socket), else ""
    channel: str = ""
    #: the link's rate (``[link] host_baud`` / ``board_baud`` / ``[[link.pair]]``) and, on the
    #: real part, its USART's divisor: BRR, 8x oversampling (CR1.OVER8) and the rate error
    baud: int = 115200
    brr: int = 0
    over8: bool = False
    baud_error: float = 0.0


@dataclass(frozen=True)
class SubModelContext:
    """A hosted sub-model: its tensors' arena slots (plan.json order; the chunk header's tensor
    index is the position), their total bytes, and the links its inputs/outputs use."""

    index: int
    function: str
    inputs: tuple[TensorSlot, ...]
    outputs: tuple[TensorSlot, ...]
    input_bytes: int
    output_bytes: int
    in_link: int
    out_link: int
    in_peer: str
    out_peer: str
    is_last: bool
    next_index: int


@dataclass(frozen=True)
class DeviceContext:
    """Everything the templates of one device print."""

    name: str
    index: int
    name_len: int
    part_name: str
    part_clock_note: str
    clock_steps: tuple[Step, ...]
    #: with an HSE: the steps that switch it off and the internal-oscillator tree clock_init()
    #: runs when it does not start (empty without an HSE); ``clock_fallback_slow``: that tree
    #: runs below the planned clock
    clock_hse_off: tuple[Step, ...]
    clock_fallback_steps: tuple[Step, ...]
    clock_fallback_slow: bool
    m7_caches: bool  # Cortex-M7: I- and D-cache enabled after the clock setup
    board_name: str  # "" without a board definition
    baud_notes: tuple[str, ...]  # per link on the real part: "USART3 BRR 1042: 115163 baud"
    board_init: tuple[RegWrite, ...]
    weights_bytes: int
    arena_bytes: int
    send_retries: int
    max_timing_records: int
    links: tuple[LinkContext, ...]
    submodels: tuple[SubModelContext, ...]
    targets: tuple[TargetContext, ...]
    files: Mapping[str, str]
    #: the board's external flash put in memory-mapped mode at boot (splitter/hardware/
    #: extflash.py): its steps and a one-line description; empty without one
    extflash_steps: tuple[Step, ...] = ()
    extflash_note: str = ""
    #: the independent watchdog (splitter/codegen/watchdog.py); None without --watchdog-ms
    watchdog: WatchdogContext | None = None
    host_links: int = 0  # bit k: link k faces the host (the console in standalone mode)
    console_link: int = -1  # standalone: the link results and errors are printed on
    is_head: bool = False  # runs sub-model 0
    is_tail: bool = False  # runs the last sub-model
    #: ``--result-on head``: the return link (the tail sends results on it, the head receives
    #: them on it), -1 without; on the head the result's slots in its result buffer (plan.c)
    result_link: int = -1
    result_slots: tuple[TensorSlot, ...] = ()

    @property
    def result_bytes(self) -> int:
        """Bytes of the head's result buffer (its last slot's end)."""
        last = self.result_slots[-1] if self.result_slots else None
        return last.offset + last.nbytes if last else 0


@dataclass(frozen=True)
class WireContext:
    """One physical UART pair of WIRING.md, its rate and each side's divisor (``a_brr`` /
    ``b_brr``: "BRR 21 (OVER8), +0.00 %", "-" for the host)."""

    a: str
    a_usart: str
    a_pins: str
    b: str
    b_usart: str
    b_pins: str
    carries: str
    baud: int = 115200
    a_brr: str = "-"
    b_brr: str = "-"


@dataclass(frozen=True)
class PlanContext:
    """The render context of a whole plan (see the module docstring)."""

    plan_hash: str
    plan_hash_bytes: tuple[str, ...]
    plan_tag: int  # first two bytes of the hash, little-endian (TENSOR chunk header)
    baud: int  # the host link's rate (the PC opens its serial ports at it)
    firmware_version: int
    first_device: str
    last_device: str
    devices: tuple[DeviceContext, ...]
    wires: tuple[WireContext, ...]
    emulated_as_f405: str  # the parts that run as the emulated chip with their own code
    emulated_as_f405_count: int
    emulator_machine: str  # splitter.hardware.qemu.EMULATOR, for the templates
    emulator_chip: str
    emulator_short: str
    app: str = "harness"  # compile --app (APP_MODES)
    app_mode: int = 0  # its index: config.h APP_MODE
    result_dtype: str = "float32"  # the last sub-model's first output (the example's scores)
    app_samples: tuple[bytes, ...] = ()  # standalone: the head's compiled-in inputs
    result_on: str = "tail"  # compile --result-on: the board whose application gets results


# ---------------------------------------------------------------- wiring -------------------
def device_links(sub_devices: Sequence[int], returns: bool = False) -> dict[int, list[int]]:
    """Peers of every device in link order (``-1`` = host) for sub-models on ``sub_devices``.

    Hops: host -> d(s0), d(s_k) -> d(s_k+1), d(s_last) -> host; each unordered endpoint pair is
    one link. A device's first link is the source of its first sub-model's input. With
    ``returns`` (``--result-on head``) and a tail that is not the head, the last hop is the
    return link d(s_last) -> d(s0) instead: a link of its own (its own USART pair, even when
    the two boards are neighbours already), the last link of both (:func:`return_link`).
    """
    ret = returns and sub_devices[0] != sub_devices[-1]
    hops = [(-1, sub_devices[0])]
    hops += list(itertools.pairwise(sub_devices))
    if not ret:
        hops.append((sub_devices[-1], -1))
    links: dict[int, list[int]] = {}
    for a, b in hops:
        for me, peer in ((b, a), (a, b)):  # receiver first: link 0 = first input's source
            if me >= 0 and peer not in links.setdefault(me, []):
                links[me].append(peer)
    if ret:
        links[sub_devices[-1]].append(sub_devices[0])
        links[sub_devices[0]].append(sub_devices[-1])
    return links


def return_link(index: int, sub_devices: Sequence[int], returns: bool) -> int:
    """The return link of device ``index`` (``--result-on head``: the tail sends each result on
    it, the head receives them on it; the last link of both, :func:`device_links`), or -1."""
    head, tail = sub_devices[0], sub_devices[-1]
    if not returns or head == tail or index not in (head, tail):
        return -1
    return len(device_links(sub_devices, returns)[index]) - 1


# ---------------------------------------------------------------- targets ------------------
def _target(
    *,
    emulator: bool,
    name: str,
    family: Family,
    fpu: str,
    usarts: Sequence[tuple[str, int]],
    clock_hz: int,
    flash: tuple[int, int],
    ram: tuple[int, int],
    bauds: Sequence[int],
    brrs: Sequence[tuple[int, int]] | None = None,
) -> TargetContext:
    """One build target; ticks = ``seconds * f_clk`` (SysTick counts core clock cycles).
    ``brrs`` are the checked divisors of the real part; the emulator's come from its clock and
    each link's rate (``bauds``, in link order)."""
    brr = (
        list(brrs)
        if brrs is not None
        else [(LINK.divisor(family, u, clock_hz, bauds[k]), 0) for k, (u, _) in enumerate(usarts)]
    )
    ctxs = tuple(
        UsartContext(u, f"0x{base:08X}", _irq(family, u, name), *brr[k])
        for k, (u, base) in enumerate(usarts)
    )
    handlers = _irq_handlers(ctxs)
    n_irq = max(u.irq for u in ctxs) + 1
    by_irq = {h.irq: h.name for h in handlers}
    layout = family.usart_layout
    return TargetContext(
        emulator_flag=int(emulator),
        description=f"{EMULATOR.title if emulator else name}: {family.core.name}, {clock_hz} Hz, "
        f"{layout} USARTs",
        part_name=f"{EMULATOR.chip} (QEMU {EMULATOR.machine})" if emulator else name,
        cpu_flags=family.cpu_flags(fpu),
        ldscript="emulator.ld" if emulator else "part.ld",
        build_dir="emulator" if emulator else "part",
        core_clock_hz=clock_hz,
        usart_layout_sr_dr=int(layout == "sr_dr"),
        has_fpu=int(fpu != ""),
        has_dwt=int(family.has_dwt),
        ack_timeout_ticks=int(ACK_TIMEOUT_S * clock_hz),
        byte_timeout_ticks=int(BYTE_TIMEOUT_S * clock_hz),
        flash_origin_hex=f"0x{flash[0]:08X}",
        flash_bytes=flash[1],
        ram_origin_hex=f"0x{ram[0]:08X}",
        ram_bytes=ram[1],
        min_stack_bytes=MIN_STACK_BYTES,
        usarts=ctxs,
        irq_handlers=handlers,
        irq_vectors=tuple(by_irq.get(i, "Default_Handler") for i in range(n_irq)),
        n_vectors=16 + n_irq,
    )


def _irq(family: Family, usart: str, part_name: str) -> int:
    family.check_usart(usart, part_name)
    return family.irq[usart]


def _irq_handlers(usarts: Sequence[UsartContext]) -> tuple[IrqHandler, ...]:
    by_irq: dict[int, list[int]] = {}
    for k, u in enumerate(usarts):
        by_irq.setdefault(u.irq, []).append(k)
    return tuple(IrqHandler(f"irq{irq}_Handler", irq, tuple(ls)) for irq, ls in by_irq.items())


def _part_ram(part: Part) -> tuple[int, int]:
    if part.ram_regions:
        _name, origin, size = part.ram_regions[0]
        return origin, size
    return 0x2000_0000, int(part.ram_kib * 1024)


# ---------------------------------------------------------------- context ------------------
def build_plan_context(
    devices: Sequence[DeviceSpec],
    sub_devices: Sequence[int],
    plan_hash: str,
    *,
    baud: int = 115200,
    app: AppOptions | None = None,
    result_dtype: str = "float32",
    link: LinkSpec | None = None,
) -> PlanContext:
    """The render context of a plan.

    ``sub_devices[k]`` is the device index of sub-model ``k`` (plan order); ``devices`` are the
    devices that host at least one sub-model (others get no firmware). ``plan_hash`` must be
    16 lowercase hex digits (its bytes are printed as C hex literals). ``link``: the boards
    file's links (each at its own rate); without, every link runs at ``baud``.
    """
    link = link or LinkSpec(baud=baud)
    if not re.fullmatch(r"[0-9a-f]{16}", plan_hash):
        raise ValueError(f"plan hash {plan_hash!a} is not 16 lowercase hex digits")
    app = app or AppOptions()
    returns = app.mode != "harness" and app.result_on == "head"
    links = device_links(sub_devices, returns)
    by_index = {d.index: d for d in devices}
    names = {d.index: d.name for d in devices} | {-1: HOST}
    results = _result_slots(devices, sub_devices) if returns else ()
    dev_ctx = tuple(
        _device_context(
            d,
            links[d.index],
            sub_devices,
            names,
            link_rates(link, d.name, links[d.index], names),
            return_link(d.index, sub_devices, returns),
        )
        for d in devices
        if d.index in links
    )
    dev_ctx = tuple(
        replace(d, result_slots=results) if d.result_link >= 0 and d.is_head else d for d in dev_ctx
    )
    others = sorted({d.part.name for d in devices if not EMULATOR.is_native(d.part)})
    return PlanContext(
        plan_hash=plan_hash,
        plan_hash_bytes=tuple(plan_hash[i : i + 2] for i in range(0, 16, 2)),
        plan_tag=int(plan_hash[2:4] + plan_hash[0:2], 16),
        baud=link.host_rate,
        firmware_version=FIRMWARE_VERSION,
        first_device=names[sub_devices[0]],
        last_device=names[sub_devices[-1]],
        devices=dev_ctx,
        wires=_wires(dev_ctx, by_index, sub_devices, names),
        emulated_as_f405=", ".join(others),
        emulated_as_f405_count=len(others),
        emulator_machine=EMULATOR.machine,
        emulator_chip=EMULATOR.chip,
        emulator_short=EMULATOR.short,
        app=app.mode,
        app_mode=APP_MODES.index(app.mode),
        result_dtype=result_dtype,
        app_samples=app.samples,
        result_on="head" if returns else "tail",
    )


def link_rates(
    link: LinkSpec, name: str, peers: Sequence[int], names: Mapping[int, str]
) -> tuple[tuple[int, str], ...]:
    """The baud of each link of device ``name`` (its ``peers`` in link order, ``-1`` the host)
    and the boards-file key that sets it: the host link at :attr:`LinkSpec.host_rate`, a link
    to a device at :meth:`LinkSpec.pair_rate`."""
    return tuple(
        (link.host_rate, link.rate_key(None))
        if p < 0
        else (link.pair_rate(name, names[p]), link.rate_key(name, names[p]))
        for p in peers
    )


def _result_slots(
    devices: Sequence[DeviceSpec], sub_devices: Sequence[int]
) -> tuple[TensorSlot, ...]:
    """The last sub-model's outputs packed into the head's result buffer (``--result-on head``),
    each at a 4-byte aligned offset (float32 results are read in place)."""
    last = len(sub_devices) - 1
    tail = next(d for d in devices if d.index == sub_devices[-1])
    rows = [SubModelSlots.of(r) for r in tail.submodels]
    outs = next(r for r in rows if r.index == last).outputs
    slots, offset = [], 0
    for t in outs:
        slots.append(TensorSlot(t.name, offset, t.nbytes))
        offset += (t.nbytes + 3) // 4 * 4
    return tuple(slots)


def _device_context(
    d: DeviceSpec,
    peers: Sequence[int],
    sub_devices: Sequence[int],
    names: Mapping[int, str],
    link_rates: Sequence[tuple[int, str]],
    result_link: int = -1,
) -> DeviceContext:
    family = family_for(d.part.family)
    wiring = device_wiring(
        d.part, d.board, d.clock_hz or d.part.clock_mhz * 1e6, f"device {d.name}"
    )
    usarts = _link_usarts(d.name, wiring, peers, names)
    if len(peers) > len(EMULATOR.usarts):
        raise BoardFileError(
            f"device {d.name}: needs {len(peers)} UART links, the emulator has "
            f"{len(EMULATOR.usarts)}; host fewer non-adjacent sub-models on it"
        )
    tree, rates = wiring.tree, [rate for rate, _key in link_rates]
    bauds = [
        LINK.check_rate(family, u, tree, rates[k], f"device {d.name} link {k} ({u})", key)
        for k, ((u, _), (_rate, key)) in enumerate(zip(usarts, link_rates, strict=True))
    ]
    link_ctx = tuple(
        LinkContext(
            index=k,
            peer=names[p],
            peer_index=p,
            usart=usarts[k][0],
            pins=wiring.pin_text(usarts[k][0]),
            emu_usart=EMULATOR.usarts[k][0],
            server=p >= 0 and d.index < p,
            timeout_message=f"{d.name}: no answer from {names[p]} on link {k} "
            f"({usarts[k][0]}) after {SEND_RETRIES} tries",
            plan_message=f"{d.name}: {names[p]} on link {k} runs another plan; flash every "
            "board from one OUT",
            channel="r" if k == result_link else "",
            baud=rates[k],
            brr=bauds[k].brr,
            over8=bauds[k].over8,
            baud_error=bauds[k].error,
        )
        for k, p in enumerate(peers)
    )
    subs = tuple(
        _sub_context(d, row, peers, sub_devices, names, result_link) for row in d.submodels
    )
    part_t = _target(
        emulator=False,
        name=d.part.name,
        family=family,
        fpu=d.part.fpu,
        usarts=usarts,
        clock_hz=tree.sysclk_hz,
        flash=(d.part.flash_origin, int(d.part.flash_kib * 1024)),
        ram=_part_ram(d.part),
        bauds=rates,
        brrs=[(b.brr, (1 << 15) if b.over8 else 0) for b in bauds],
    )
    emu_t = _target(
        emulator=True,
        name=d.part.name,
        family=EMULATOR.family,
        fpu=EMULATOR.fpu,
        usarts=EMULATOR.usarts[: len(peers)],
        clock_hz=EMULATOR.clock_hz,
        flash=EMULATOR.flash,
        ram=EMULATOR.ram,
        bauds=rates,
    )
    return DeviceContext(
        name=d.name,
        index=d.index,
        name_len=len(d.name.encode()),
        part_name=d.part.name,
        part_clock_note=tree.summary,
        clock_steps=tree.steps,
        clock_hse_off=tree.hse_off,
        clock_fallback_steps=tree.fallback.steps if tree.fallback else (),
        clock_fallback_slow=tree.fallback_slow,
        m7_caches=family.core.caches,
        board_name=wiring.board.name if wiring.board else "",
        baud_notes=tuple(
            f"link {k} {b.usart}: {b.fck_hz / 1e6:g} MHz, BRR {b.brr}"
            f"{' (OVER8)' if b.over8 else ''}, {b.actual:.0f} baud ({100 * b.error:+.2f} %)"
            for k, b in enumerate(bauds)
        ),
        board_init=family.board_init_writes([u for u, _ in usarts], wiring.pins),
        weights_bytes=d.weights_bytes,
        arena_bytes=d.arena_bytes,
        send_retries=SEND_RETRIES,
        max_timing_records=MAX_TIMING_RECORDS,
        links=link_ctx,
        submodels=subs,
        targets=(part_t, emu_t),
        files=dict(d.files),
        **_extflash(wiring, tree.bus_hz["AHB"]),
        watchdog=watchdog_context(
            d.name,
            d.part.name,
            family,
            d.watchdog_ms,
            clock_hz=tree.sysclk_hz,
            baud=min(rates),
            busy_s=d.busy_s,
        ),
        host_links=sum(1 << k for k, p in enumerate(peers) if p < 0),
        console_link=next((k for k, p in enumerate(peers) if p < 0), -1),
        is_head=any(s.index == 0 for s in subs),
        is_tail=any(s.is_last for s in subs),
        result_link=result_link,
    )


def _extflash(wiring: Wiring, hclk_hz: int) -> dict[str, Any]:
    """``extflash_steps`` / ``extflash_note`` of a device on a board with external flash."""
    from splitter.hardware.extflash import init_steps, timing

    spec = wiring.board.extflash if wiring.board else None
    if spec is None:
        return {}
    t = timing(spec, hclk_hz)
    note = (
        f"{spec.chip} on {spec.name}, {spec.size >> 20} MiB memory-mapped at "
        f"0x{spec.origin:08X}, {t.qspi_hz / 1e6:g} MHz, read 0x{spec.read_cmd:02X} 1-4-4"
    )
    return {"extflash_steps": init_steps(spec, hclk_hz), "extflash_note": note}


def _link_usarts(
    name: str, wiring: Wiring, peers: Sequence[int], names: Mapping[int, str]
) -> tuple[tuple[str, int], ...]:
    """The real board's USART per link: the host link on the first (the ST-LINK virtual COM
    port), links to devices on the following ones in order; BoardFileError naming both links
    when two would have to share one USART."""
    vcp, rest = wiring.usarts[0], list(wiring.usarts[1:])
    out: list[tuple[str, int]] = []
    holder: dict[str, int] = {}
    for k, p in enumerate(peers):
        if p < 0:
            out.append(vcp)
        elif rest:
            out.append(rest.pop(0))
        else:
            last = out[-1] if out and out[-1] != vcp else wiring.usarts[-1]
            other = holder.get(last[0], 0)
            board = wiring.board.name if wiring.board else "the part"
            raise BoardFileError(
                f"device {name}: link {k} (to {names[p]}) and link {other} "
                f"(to {names[peers[other]]}) would share {last[0]}: {board} routes "
                f"{len(wiring.usarts)} USARTs ({', '.join(u for u, _ in wiring.usarts)}, the "
                "first for the host); host fewer non-adjacent sub-models on it"
            )
        holder[out[-1][0]] = k
    return tuple(out)


def _sub_context(
    d: DeviceSpec,
    row: SubModelSlots | tuple[int, int, int, int, int],
    peers: Sequence[int],
    sub_devices: Sequence[int],
    names: Mapping[int, str],
    result_link: int = -1,
) -> SubModelContext:
    slots = SubModelSlots.of(row)
    k = slots.index
    if sub_devices[k] != d.index:
        raise ValueError(f"sub-model {k} is on device {sub_devices[k]}, not {d.name}")
    if max(len(slots.inputs), len(slots.outputs)) > MAX_TENSORS or not slots.outputs:
        raise UnsupportedOpError(
            f"device {d.name}: sub-model {k} has {len(slots.inputs)} inputs and "
            f"{len(slots.outputs)} outputs; the link carries 1 to {MAX_TENSORS} tensors per hop; "
            "choose other cuts"
        )
    big = next((t for t in (*slots.inputs, *slots.outputs) if t.nbytes > MAX_TENSOR_BYTES), None)
    if big is not None:
        raise UnsupportedOpError(
            f"device {d.name}: sub-model {k} carries tensor {big.name!r} of {big.nbytes} B, "
            f"above the {MAX_TENSOR_BYTES} B the firmware receives; choose other cuts"
        )
    src = sub_devices[k - 1] if k > 0 else -1
    last = k == len(sub_devices) - 1
    dst = -1 if last else sub_devices[k + 1]
    out_link = peers.index(dst) if dst >= 0 or result_link < 0 else result_link
    if last and result_link >= 0:  # --result-on head: the result goes back over the return link
        dst = sub_devices[0]
    return SubModelContext(
        index=k,
        function=f"sm_{k:02d}",
        inputs=slots.inputs,
        outputs=slots.outputs,
        input_bytes=sum(t.nbytes for t in slots.inputs),
        output_bytes=sum(t.nbytes for t in slots.outputs),
        in_link=peers.index(src),
        out_link=out_link,
        in_peer=names[src],
        out_peer=names[dst],
        is_last=last,
        next_index=k if last else k + 1,
    )


def _wires(
    devs: Sequence[DeviceContext],
    by_index: Mapping[int, DeviceSpec],
    sub_devices: Sequence[int],
    names: Mapping[int, str],
) -> tuple[WireContext, ...]:
    """One row per UART pair; the host (or the lower device index) is side ``a``."""
    ctx = {d.index: d for d in devs}
    rows: list[WireContext] = []
    for d in devs:
        for ln in d.links:
            if ln.peer_index >= 0 and ln.peer_index < d.index:
                continue
            other = ctx.get(ln.peer_index)
            back = (
                next(x for x in other.links if (x.peer_index, x.channel) == (d.index, ln.channel))
                if other
                else None
            )
            carries = (
                "result (return link, --result-on head)"
                if ln.channel
                else _carries(d.index, ln.peer_index, sub_devices)
            )
            if ln.peer_index < 0:
                host = (
                    f"USB cable to the {d.board_name} ST-LINK (virtual COM port)"
                    if d.board_name
                    else "USB-serial adapter (a Nucleo's ST-LINK virtual COM port)"
                )
                rows.append(
                    WireContext(
                        HOST, host, "-", d.name, ln.usart, ln.pins, carries, ln.baud, "-",
                        _brr_text(ln),
                    )
                )  # fmt: skip
            else:
                assert back is not None and other is not None
                rows.append(
                    WireContext(
                        d.name, ln.usart, ln.pins, other.name, back.usart, back.pins, carries,
                        ln.baud, _brr_text(ln), _brr_text(back),
                    )
                )  # fmt: skip
    return tuple(rows)


def _brr_text(ln: LinkContext) -> str:
    """``"BRR 21 (OVER8), +0.00 %"``: a link's divisor on the real part (WIRING.md)."""
    return f"BRR {ln.brr}{' (OVER8)' if ln.over8 else ''}, {100 * ln.baud_error:+.2f} %"


def _carries(a: int, b: int, sub_devices: Sequence[int]) -> str:
    ends = [-1, *sub_devices, -1]
    flows = [
        f"input of sub-model {k}" if k < len(sub_devices) else "result"
        for k in range(len(ends) - 1)
        if {ends[k], ends[k + 1]} == {a, b}
    ]
    return "; ".join(flows)


# ---------------------------------------------------------------- rendering ----------------
@functools.cache
def _env() -> jinja2.Environment:
    """The one template environment (cached: parsing the templates costs ~0.1 s per compile)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    # c_string, c_comment, ld_comment, make_comment, md (splitter.codegen.escape)
    return register(env)


def render_device(env: jinja2.Environment, plan: PlanContext, dev: DeviceContext) -> dict[str, str]:
    """All files of one device's project by relative path (``compile_commands.json`` aside: it
    needs the project's final directory, :func:`render_firmware` adds it)."""
    files = {
        "config.h": env.get_template("config.h.j2").render(plan=plan, device=dev),
        "plan.c": env.get_template("plan.c.j2").render(plan=plan, device=dev),
        "main.c": env.get_template("main.c.j2").render(plan=plan, device=dev),
        "app.c": env.get_template("app.c.j2").render(plan=plan, device=dev),
        "app_samples.c": app_samples_c(plan.app_samples if dev.is_head else ()),
        "startup.c": env.get_template("startup.c.j2").render(plan=plan, device=dev),
    }
    for t in dev.targets:
        files[t.ldscript] = env.get_template("link.ld.j2").render(t=t)
    for name in STATIC_FILES:
        files[name] = (TEMPLATES / name).read_text()
    for p in sorted((TEMPLATES / "kernels").glob("*.[ch]")):
        files[f"kernels/{p.name}"] = p.read_text()
    files.update(dev.files)
    files = {k: files[k] for k in mode_sources(plan.app, files)}
    build = build_context(dev.name, files)
    for name in BUILD_TEMPLATES:
        if name not in dev.files:  # a caller's own build file (segments.build's extflash) stays
            files[name] = env.get_template(f"{name}.j2").render(plan=plan, device=dev, build=build)
    return files


def app_samples_c(samples: Sequence[bytes]) -> str:
    """``app_samples.c``: the standalone example's inputs, ``app_n_samples`` of
    ``app_sample_bytes`` bytes each, back to back in flash (the head board; empty elsewhere)."""
    n = len(samples[0]) if samples else 0
    rows = [
        ", ".join(f"0x{b:02x}" for b in s[i : i + 16]) for s in samples for i in range(0, n, 16)
    ]
    body = ",\n    ".join(rows) if rows else "0"
    return (
        "/* Generated by splitter: the standalone example's sample inputs (compile --input), "
        "in wire order. */\n#include <stdint.h>\n\n"
        f"const uint32_t app_n_samples = {len(samples)}u;\n"
        f"const uint32_t app_sample_bytes = {n}u;\n"
        "const uint8_t app_samples[] __attribute__((aligned(4))) = {\n    " + body + "\n};\n"
    )


def device_compile_commands(directory: Path, dev: DeviceContext, files: Iterable[str]) -> str:
    """``compile_commands.json`` of the part build (``make``, EMULATOR=0) of a project in
    ``directory`` (absolute) whose files are ``files``."""
    part = dev.targets[0]
    entries = compile_commands(
        directory,
        part.cpu_flags,
        part.emulator_flag,
        part.build_dir,
        build_context(dev.name, files).sources,
    )
    return json.dumps(entries, indent=2) + "\n"


def wiring_json(plan: PlanContext) -> dict[str, object]:
    """What ``splitter emulate`` / ``run`` read: devices, links (each with its ``baud``, ``brr``,
    ``over8`` and ``baud_error``), sub-model placement, and WIRING.md's rows (``wires``)."""
    return {
        "plan_hash": plan.plan_hash,
        "baud": plan.baud,
        "first_device": plan.first_device,
        "last_device": plan.last_device,
        "emulated_as_f405": plan.emulated_as_f405,
        "devices": [
            {
                "name": d.name,
                "index": d.index,
                "part": d.part_name,
                "clock_hz": {
                    ("emulator" if t.emulator_flag else "part"): t.core_clock_hz for t in d.targets
                },
                "weights_bytes": d.weights_bytes,
                "arena_bytes": d.arena_bytes,
                "links": [asdict(ln) for ln in d.links],
                "submodels": [asdict(s) for s in d.submodels],
            }
            for d in plan.devices
        ],
        "wires": [asdict(w) for w in plan.wires],
    }


def render_firmware(
    out_dir: str | Path, plan: PlanContext, *, final_dir: str | Path | None = None
) -> Path:
    """Write ``out_dir/firmware`` (every device project, WIRING.md, wiring.json) atomically.

    Everything is rendered in memory first; a template error leaves no half-written project.
    ``final_dir``: where ``out_dir`` will end up when it is a temporary directory (compile's
    output is swapped into place), for the absolute paths of ``compile_commands.json``.
    Returns the firmware directory.
    """
    env = _env()
    final = Path(final_dir if final_dir is not None else out_dir).resolve() / "firmware"
    rendered = {}
    for d in plan.devices:
        files = render_device(env, plan, d)
        files["compile_commands.json"] = device_compile_commands(final / d.name, d, files)
        rendered.update({f"{d.name}/{k}": v for k, v in files.items()})
    rendered["WIRING.md"] = env.get_template("WIRING.md.j2").render(plan=plan)
    rendered["wiring.json"] = json.dumps(wiring_json(plan), indent=2) + "\n"
    out = Path(out_dir)
    final = out / "firmware"
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".firmware-", dir=out))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it 0700; the rest of OUT is not
        for rel, text in rendered.items():
            path = contained(tmp, rel)  # a device name is a directory name: never outside
            path.parent.mkdir(parents=True, exist_ok=True)
            write_durable(path, text.encode("utf-8"))
        if final.exists():
            crash_point()
            shutil.rmtree(final)
        crash_point()
        os.replace(tmp, final)
    except OSError as exc:
        raise OutputError(
            f"{final}: cannot write the firmware projects ({exc}); check the path"
        ) from None
    return final


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---------------------------------------------------------------- pipeline entry -----------
def check_watchdog(boards: Boards, manifest: PlanManifest, watchdog_ms: int) -> None:
    """BoardFileError unless every device that hosts a sub-model can keep a ``watchdog_ms``
    watchdog (``splitter.codegen.watchdog``): compile's early check, before the slow steps."""
    if not watchdog_ms:
        return
    for index, device in enumerate(boards.devices):
        hosted = [s for s in manifest.submodels if s.device_index == index]
        if hosted:
            clock = device.clock_hz or device.part.clock_mhz * 1e6
            tree = device_wiring(device.part, device.board, clock, f"device {device.name}").tree
            family = family_for(device.part.family)
            watchdog_context(
                device.name,
                device.part.name,
                family,
                watchdog_ms,
                clock_hz=tree.sysclk_hz,
                baud=_slowest(boards.link),
                busy_s=max(s.compute_s for s in hosted),
            )


def _slowest(link: LinkSpec) -> int:
    """The lowest rate of any link (the watchdog's longest frame write)."""
    return min(link.host_rate, link.board_rate, *(p.baud for p in link.pairs))


def generate_firmware(
    out_dir: str | Path,
    chain: Chain,
    boards: Boards,
    manifest: PlanManifest,
    *,
    final_dir: str | Path | None = None,
    watchdog_ms: int = 0,
    app: AppOptions | None = None,
) -> PlanContext:
    """Generate the model C of every device and render ``out_dir/firmware`` (compile's hook).

    ``chain`` is the costed chain of the loaded model; ``manifest`` is the plan (``plan.json``):
    each device runs its sub-models' layer ranges, and the manifest's hash
    (``splitter.protocol.plan_hash``) goes into every firmware and comes back in PONG.
    ``final_dir``: where ``out_dir`` ends up (:func:`render_firmware`); ``watchdog_ms``:
    ``compile --watchdog-ms`` (0: none).
    """
    from splitter.codegen.model_c import generate_device_c
    from splitter.protocol import plan_hash

    specs = []
    for index, device in enumerate(boards.devices):
        hosted = [s for s in manifest.submodels if s.device_index == index]
        if not hosted:
            continue
        ranges = [(s.index, s.first, s.last) for s in hosted]
        io = {s.index: ([t.name for t in s.inputs], [t.name for t in s.outputs]) for s in hosted}
        core = family_for(device.part.family).core.name
        gen = generate_device_c(chain, ranges, device.name, core=core, boundaries=io)
        specs.append(
            DeviceSpec(
                device.name,
                index,
                device.part,
                gen.files,
                gen.weights_bytes,
                gen.arena_bytes,
                gen.slots,
                device.clock_hz,
                device.board,
                watchdog_ms,
                max(s.compute_s for s in hosted),
            )
        )
    sub_devices = [s.device_index for s in manifest.submodels]
    plan_tag = plan_hash(manifest.to_dict())
    app = app or AppOptions()
    check_app(manifest, app)
    check_return_link(boards, manifest, app)
    if app.mode == "standalone" and not app.samples:
        app = replace(app, samples=default_samples(manifest))
    result_dtype = manifest.submodels[-1].outputs[0].dtype
    ctx = build_plan_context(
        specs, sub_devices, plan_tag, app=app, result_dtype=result_dtype, link=boards.link
    )
    render_firmware(out_dir, ctx, final_dir=final_dir)
    return ctx


def check_app(manifest: PlanManifest, app: AppOptions) -> None:
    """Refuse an ``--app`` / ``--result-on`` the plan cannot support (BoardFileError, one line
    naming the device and the fix). Called before anything is written."""
    if app.mode not in APP_MODES:
        raise BoardFileError(f"--app {app.mode!r}: choose one of {', '.join(APP_MODES)}")
    subs = manifest.submodels
    head = subs[0].device
    if app.result_on not in ("head", "tail"):
        raise BoardFileError(f"--result-on {app.result_on!r}: choose head or tail")
    if app.mode == "harness":
        if app.result_on == "head":
            raise BoardFileError(
                f"device {head}: --result-on head returns results to the head's application, "
                "the harness sends them to the PC; use --app standalone or --app library"
            )
        return
    hosted: dict[str, list[int]] = {}
    for s in subs:
        hosted.setdefault(s.device, []).append(s.index)
    twice = next(((d, ks) for d, ks in hosted.items() if len(ks) > 1), None)
    if twice is not None:
        d, ks = twice
        raise BoardFileError(
            f"device {d}: hosts sub-models {', '.join(map(str, ks))} in one arena, so in --app "
            f"{app.mode} a next input would overwrite a pending one; plan one contiguous part per "
            "device (e.g. --objective throughput, or less flash on it) or use --app harness"
        )
    if app.mode == "standalone":
        _check_app_flash(manifest, app)
    if len(subs[-1].outputs) > APP_MAX_OUTPUTS:
        raise BoardFileError(
            f"device {subs[-1].device}: the model has {len(subs[-1].outputs)} outputs, a "
            f"result carries at most {APP_MAX_OUTPUTS} in --app {app.mode}; use --app harness"
        )


def check_return_link(boards: Boards, manifest: PlanManifest, app: AppOptions) -> None:
    """``--result-on head``: the head and the tail each need a USART of their own for the return
    link (:func:`device_links`), on the part (its board's routed USARTs) and in the emulator;
    BoardFileError naming the device and the fix otherwise. A one-board chain (head = tail)
    needs none: its results stay on the board, as with ``--result-on tail``."""
    subs = [s.device_index for s in manifest.submodels]
    if app.mode == "harness" or app.result_on != "head" or subs[0] == subs[-1]:
        return
    links = device_links(subs, returns=True)
    for index in (subs[0], subs[-1]):
        device = boards.devices[index]
        clock = device.clock_hz or device.part.clock_mhz * 1e6
        wiring = device_wiring(device.part, device.board, clock, f"device {device.name}")
        have = min(len(wiring.usarts), len(EMULATOR.usarts))
        if len(links[index]) > have:
            where = wiring.board.name if wiring.board else device.part.name
            other = boards.devices[subs[-1] if index == subs[0] else subs[0]].name
            raise BoardFileError(
                f"device {device.name}: --result-on head needs a USART for the return link "
                f"to {other}, but {where} has {have} ({', '.join(u for u, _ in wiring.usarts)}) "
                f"and the chain uses them all; use --result-on tail, or a part with another "
                "USART for it"
            )


def _check_app_flash(manifest: PlanManifest, app: AppOptions) -> None:
    """The plan counts the standalone image (``splitter.cost.code``: the mode's runtime and, on
    the head, its compiled-in samples); refuse, naming the device, a plan whose weights and code
    exceed a flash budget (a plan made for another ``--app``)."""
    head = manifest.submodels[0].device
    nbytes = sum(t.nbytes for t in manifest.submodels[0].inputs)
    samples = sum(map(len, app.samples)) or APP_DEFAULT_SAMPLES * nbytes
    for d in manifest.devices:
        if not any(s.device == d.name for s in manifest.submodels):
            continue
        need = d.flash_used + d.code_bytes
        if need > d.flash_budget:
            what = f"{samples} B of sample inputs to " if d.name == head else ""
            raise BoardFileError(
                f"device {d.name}: --app standalone adds {what}its code, {need} B in all, above "
                f"its {d.flash_budget} B of flash; pass fewer --input samples, give it more "
                "flash or use --app library"
            )


def default_samples(manifest: PlanManifest, count: int = APP_DEFAULT_SAMPLES) -> tuple[bytes, ...]:
    """Sample inputs for the standalone example when compile has no ``--input``: seeded
    (``numpy.random.default_rng(0)``) standard normal floats, or integers over their full
    range, in wire order (every input of sub-model 0 concatenated)."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        parts = []
        for t in manifest.submodels[0].inputs:
            dt = np.dtype(t.dtype)
            if dt.kind == "f":
                x = rng.standard_normal(t.shape).astype(dt)
            else:
                info = np.iinfo(dt)
                x = rng.integers(info.min, info.max, size=t.shape, endpoint=True).astype(dt)
            parts.append(np.ascontiguousarray(x).astype(dt.newbyteorder("<")).tobytes())
        out.append(b"".join(parts))
    return tuple(out)
