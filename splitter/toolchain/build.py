"""Build the firmware projects with arm-none-eabi-gcc and compare the ELF with the plan.

Per device, the ELF's ``.weights`` section is the weights (FLASH estimate, must match exactly)
and ``.arena`` is the activation arena (RAM estimate, must match exactly); the rest of flash
(``.isr_vector``, ``.text``, ``.rodata``, ``.data`` load image) is code overhead and the rest of
RAM (``.data``, ``.bss``, the minimum stack) is runtime overhead, reported separately.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elftools.elf.elffile import ELFFile

from splitter.errors import InfeasibleError, InputFileError, ToolchainError, ValidationError
from splitter.hardware.qemu import EMULATOR
from splitter.inputs import read_input_text
from splitter.manifest import WIRING_FILE, PlanManifest, read_manifest, read_wiring
from splitter.outputs import contained

GCC = "arm-none-eabi-gcc"
TOOLCHAIN_INSTALL = (
    "apt-get install --no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi"
)
FLASH_CODE_SECTIONS = (".isr_vector", ".text", ".rodata", ".ARM.exidx", ".data")
RAM_RUNTIME_SECTIONS = (".data", ".bss")
MIN_STACK_BYTES = 2048


@dataclass(frozen=True)
class DeviceBuild:
    """Estimated and built sizes of one device (bytes)."""

    device: str
    part: str
    elf: Path
    weights_estimate: int
    weights_actual: int
    arena_estimate: int
    arena_actual: int
    code_bytes: int  # flash besides the weights
    runtime_ram_bytes: int  # RAM besides the arena: .data + .bss + minimum stack
    flash_capacity: int
    ram_capacity: int
    #: the user's budgets from plan.json (boards.toml ``flash`` / ``ram``; RAM within the
    #: arena's region) and the planner's code / runtime RAM estimates (0: not estimated)
    flash_budget: int = 0
    ram_budget: int = 0
    code_estimate: int = 0
    runtime_ram_estimate: int = 0
    boards_path: str = ""

    @property
    def flash_total(self) -> int:
        """Weights + code: what the part's flash must hold."""
        return self.weights_actual + self.code_bytes

    @property
    def ram_total(self) -> int:
        """Arena + runtime RAM (including the minimum stack)."""
        return self.arena_actual + self.runtime_ram_bytes


def require_toolchain() -> str:
    """Path of arm-none-eabi-gcc, or :class:`ToolchainError` with the install command."""
    path = shutil.which(GCC)
    if path is None or shutil.which("make") is None:
        raise ToolchainError(f"{GCC} (or make) not found; install it: {TOOLCHAIN_INSTALL}")
    return path


def run_make(device_dir: Path, *, emulator: bool = False, debug_dir: Path | None = None) -> Path:
    """``make [EMULATOR=1]`` in a device project; returns the ELF path. ``debug_dir`` is where
    the project will live when built in a staged copy (:func:`splitter.outputs.staged_copy`)."""
    require_toolchain()
    if not (device_dir / "Makefile").exists():
        raise InputFileError(f"{device_dir}/Makefile: missing; re-run `splitter compile`")
    args = ["make", "-s", "-C", str(device_dir), f"EMULATOR={int(emulator)}"]
    if debug_dir is not None:  # building in a staged copy: debug paths name the real OUT
        # make hands $(CC) to the shell: the paths are quoted, an OUT with spaces stays one word
        flag = shlex.quote(f"-fdebug-prefix-map={device_dir.resolve()}={debug_dir}")
        args.append(f"CC={GCC} {flag}")
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        overflow = next((ln for ln in err if "overflow" in ln.lower()), None)
        if overflow is not None:
            raise InfeasibleError(_overflow_message(device_dir, overflow, emulator))
        first = next((ln for ln in err if "error" in ln.lower()), err[-1] if err else "")
        raise ToolchainError(
            f"{device_dir}: make {'EMULATOR=1 ' if emulator else ''}failed: {first}"
        )
    return device_dir / "build" / ("emulator" if emulator else "part") / "firmware.elf"


def _overflow_message(device_dir: Path, line: str, emulator: bool) -> str:
    """The linker's overflow line, said per device with the fix."""
    what = line.split("error:")[-1].strip().strip("`'")
    if emulator:
        return (
            f"device {device_dir.name}: firmware does not fit the emulated {EMULATOR.chip} "
            f"({EMULATOR.flash[1] >> 20} MiB flash, {EMULATOR.ram[1] >> 10} KiB RAM): "
            f"{what}; emulate a plan with smaller devices"
        )
    return (
        f"device {device_dir.name}: firmware overflows its part: {what}; the code and stack "
        "need room besides the plan's weights and arena: plan with a reserve (e.g. ram = '-8 KiB')"
    )


def section_sizes(elf: Path) -> dict[str, int]:
    """Allocated section sizes of an ELF by name (pyelftools)."""
    with elf.open("rb") as fh:
        ef = ELFFile(fh)
        return {
            s.name: int(s["sh_size"])
            for s in ef.iter_sections()
            if int(s["sh_flags"]) & 0x2  # SHF_ALLOC
        }


def measure(
    device: dict[str, Any],
    elf: Path,
    capacities: tuple[int, int],
    budgets: dict[str, Any] | None = None,
) -> DeviceBuild:
    """Compare one device's ELF with its estimates (``wiring.json`` device entry) and, when
    given, the plan's budgets and code / runtime estimates (``budgets``)."""
    sizes = section_sizes(elf)
    code = sum(sizes.get(s, 0) for s in FLASH_CODE_SECTIONS)
    runtime = sum(sizes.get(s, 0) for s in RAM_RUNTIME_SECTIONS) + MIN_STACK_BYTES
    return DeviceBuild(
        device=device["name"],
        part=device["part"],
        elf=elf,
        weights_estimate=int(device["weights_bytes"]),
        weights_actual=sizes.get(".weights", 0),
        arena_estimate=int(device["arena_bytes"]),
        arena_actual=sizes.get(".arena", 0),
        code_bytes=code,
        runtime_ram_bytes=runtime,
        flash_capacity=capacities[0],
        ram_capacity=capacities[1],
        **(budgets or {}),
    )


#: ``FLASH (rx) : ORIGIN = ..., LENGTH = 1048576``: a memory region line of a linker script.
_REGION_RE = re.compile(r"^\s*(?P<name>FLASH|RAM)\b[^:]*:.*\bLENGTH\s*=\s*(?P<value>.*?)\s*$")
#: A LENGTH as ld reads it: decimal or ``0x`` hex, optionally ``K`` / ``M`` (GNU ld manual 3.6).
_LENGTH_RE = re.compile(r"(?P<num>0[xX][0-9a-fA-F]+|\d+)\s*(?P<unit>[KM]?)")


def _capacities(device_dir: Path, script: str = "part.ld") -> tuple[int, int]:
    """FLASH and RAM lengths from the device's linker script; an :class:`InputFileError` naming
    the region when the script (edited by hand?) does not state both as numbers."""
    path = device_dir / script
    text = read_input_text(path, "linker script")
    found: dict[str, int] = {}
    for line in text.splitlines():
        m = _REGION_RE.match(line)
        if not m:
            continue
        length = _LENGTH_RE.fullmatch(m["value"].rstrip(","))
        if length is None:
            raise InputFileError(
                f"{path}: MEMORY region {m['name']}: LENGTH = {m['value'][:40]!a} is not a number "
                "(bytes, 0x hex, or with K / M); regenerate it with `splitter compile`"
            )
        scale = {"": 1, "K": 1024, "M": 1024 * 1024}[length["unit"]]
        base = 16 if length["num"][:2] in ("0x", "0X") else 10
        found[m["name"]] = int(length["num"], base) * scale
    if set(found) != {"FLASH", "RAM"}:
        raise InputFileError(
            f"{path}: no 'FLASH ... LENGTH = <bytes>' and 'RAM ... LENGTH = <bytes>' lines "
            "(edited by hand?); regenerate it with `splitter compile`"
        )
    return found["FLASH"], found["RAM"]


def check(build: DeviceBuild) -> None:
    """Fail when the build disagrees with the estimate or overflows the part."""
    if build.weights_actual != build.weights_estimate:
        raise ValidationError(
            f"{build.elf}: .weights is {build.weights_actual} B but the plan estimates "
            f"{build.weights_estimate} B for device {build.device}; "
            "regenerate with `splitter compile`"
        )
    arena_rounded = (build.arena_estimate + 3) // 4 * 4
    if build.arena_actual != arena_rounded:
        raise ValidationError(
            f"{build.elf}: .arena is {build.arena_actual} B but the plan estimates "
            f"{build.arena_estimate} B for device {build.device}; "
            "regenerate with `splitter compile`"
        )
    over = _over_budget(build)
    if over:
        raise InfeasibleError(
            f"{build.boards_path}: device {build.device} ({build.part}): the image needs "
            f"{'; '.join(over)}; raise the device's budget in the boards file or re-run "
            "`splitter compile` with it (the plan counts the code and runtime)"
        )
    if build.flash_total > build.flash_capacity or build.ram_total > build.ram_capacity:
        raise InfeasibleError(
            f"device {build.device} ({build.part}): needs {build.flash_total} B flash / "
            f"{build.ram_total} B RAM (code and stack included), part has "
            f"{build.flash_capacity} / {build.ram_capacity} B; plan with a larger reserve"
        )


def _over_budget(build: DeviceBuild) -> list[str]:
    """What of the image exceeds the user's budget (``flash = ...`` / ``ram = ...``)."""
    out = []
    if build.flash_budget and build.flash_total > build.flash_budget:
        out.append(
            f"{build.flash_total} B flash (weights {build.weights_actual} + code "
            f"{build.code_bytes}), over its flash budget {build.flash_budget} B by "
            f"{build.flash_total - build.flash_budget} B"
        )
    if build.ram_budget and build.ram_total > build.ram_budget:
        out.append(
            f"{build.ram_total} B RAM (arena {build.arena_actual} + runtime "
            f"{build.runtime_ram_bytes}), over its RAM budget {build.ram_budget} B by "
            f"{build.ram_total - build.ram_budget} B"
        )
    return out


def plan_estimates(out_dir: Path) -> dict[str, tuple[int, int]]:
    """The planner's FLASH and RAM estimate per device name, from the plan manifest.

    ``FLASH_i = sum FLASH_j`` and ``RAM_i = max RAM_j`` over the layers of the sub-models on
    device ``i`` (SPEC.md (4), (5)), as the manifest records them per sub-model.
    """
    return read_manifest(out_dir).device_totals()


def user_budgets(manifest: PlanManifest) -> dict[str, tuple[int, int]]:
    """Per device name, the flash and RAM budgets of the boards file the plan names, read now
    (the user may have lowered them since compiling), RAM within the arena's region; empty
    when that file is gone (plan.json's budgets are used then)."""
    path = Path(manifest.boards_path)
    if not path.is_file():
        return {}
    from splitter.cost.code import arena_region
    from splitter.hardware.boards import load_boards

    return {
        d.name: (d.flash_bytes, min(d.ram_bytes, arena_region(d.part)[2]))
        for d in load_boards(path).devices
    }


def check_output(out_dir: Path) -> tuple[dict[str, Any], PlanManifest, dict[str, Path]]:
    """Everything ``build`` reads, checked before any ``make`` runs: ``wiring.json`` and
    ``plan.json`` (:func:`~splitter.manifest.read_wiring`, :func:`read_manifest`), every
    device directory inside ``OUT`` (:func:`~splitter.outputs.contained`) and every linker
    script's memory regions; returns the wiring, the plan and the device directories."""
    wiring = read_wiring(out_dir)
    manifest = read_manifest(out_dir)
    estimates = manifest.device_totals()
    wiring_path = Path(out_dir) / WIRING_FILE
    dirs = {}
    for dev in wiring["devices"]:
        if dev["name"] not in estimates:
            raise InputFileError(
                f"{wiring_path}: device {dev['name']} runs no sub-model of plan.json; "
                "re-run `splitter compile`"
            )
        dirs[dev["name"]] = contained(out_dir, f"firmware/{dev['name']}")
    for ddir in dirs.values():  # a broken linker script is named, not linked
        _capacities(ddir)
        if (ddir / "emulator.ld").exists():
            _capacities(ddir, "emulator.ld")
    return wiring, manifest, dirs


def build_all(
    out_dir: Path,
    *,
    emulator: bool = True,
    on_device: Callable[[str], None] | None = None,
    debug_root: Path | None = None,
) -> list[DeviceBuild]:
    """Build every device (and its emulator variant), measure each against the plan.

    The estimates are the planner's (:func:`plan_estimates`, from the plan manifest).
    Both manifests are validated first (:func:`~splitter.manifest.read_wiring`,
    :func:`~splitter.manifest.read_manifest`) and every device directory is resolved inside
    ``OUT`` (:func:`~splitter.outputs.contained`) before any ``make`` runs. ``on_device`` is
    called with each device's name before its build (progress); ``debug_root`` is the real
    ``OUT`` when ``out_dir`` is a staged copy of it (:func:`splitter.outputs.staged_copy`).
    """
    wiring, manifest, dirs = check_output(out_dir)
    estimates = manifest.device_totals()
    require_toolchain()
    user = user_budgets(manifest)
    builds = []
    for dev in wiring["devices"]:
        ddir = dirs[dev["name"]]
        if on_device is not None:
            on_device(dev["name"])
        debug = None if debug_root is None else debug_root / "firmware" / dev["name"]
        elf = run_make(ddir, debug_dir=debug)
        if emulator:
            run_make(ddir, emulator=True, debug_dir=debug)
        flash, ram = estimates[dev["name"]]
        entry = {**dev, "weights_bytes": flash, "arena_bytes": ram}
        planned = manifest.device(dev["name"])
        flash_budget, ram_budget = user.get(dev["name"], (planned.flash_budget, planned.ram_limit))
        budgets = {
            "flash_budget": flash_budget,
            "ram_budget": ram_budget,
            "code_estimate": planned.code_bytes,
            "runtime_ram_estimate": planned.runtime_ram_bytes,
            "boards_path": manifest.boards_path,
        }
        builds.append(measure(entry, elf, _capacities(ddir), budgets))
    return builds


def build_emulator_variants(
    out_dir: Path,
    *,
    on_device: Callable[[str], None] | None = None,
    debug_root: Path | None = None,
) -> dict[str, str | None]:
    """``make EMULATOR=1`` per device, building every variant that can be built.

    Returns device name -> None (built) or why not (the one-line error, e.g. the firmware does
    not fit the emulated part): a plan made for real parts need not fit the emulator.
    """
    wiring = read_wiring(out_dir)
    dirs = {d["name"]: contained(out_dir, f"firmware/{d['name']}") for d in wiring["devices"]}
    require_toolchain()
    status: dict[str, str | None] = {}
    for name, ddir in dirs.items():
        if on_device is not None:
            on_device(name)
        try:
            debug = None if debug_root is None else debug_root / "firmware" / name
            run_make(ddir, emulator=True, debug_dir=debug)
            status[name] = None
        except (InfeasibleError, ToolchainError) as exc:
            status[name] = " ".join(str(exc).split())
    return status
