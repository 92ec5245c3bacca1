"""Write, verify and reset one board with pyOCD's Python API (``splitter flash --tool pyocd``).

``python -m splitter.deploy.pyocd_flash [--uid SN] --target T --base 0x08000000 FW.elf FW.bin``:

1. ``ConnectHelper.session_with_chosen_probe(unique_id=SN, target_override=T)`` opens the probe
   (an ST-LINK, CMSIS-DAP or J-Link; ``SN`` is its serial, the ``probe`` of boards.toml);
2. ``FileProgrammer(session).program(FW.elf)`` erases and writes the sectors the image covers;
3. the flash is read back from ``--base`` and compared with ``FW.bin`` (the image as
   ``objcopy -O binary`` lays it out): any difference is an error naming the first address;
4. ``session.target.reset()`` starts the firmware.

``T`` is pyOCD's target name: a built-in one where pyOCD has it (``stm32h743xx``,
``stm32f767zi``...), else the CMSIS-pack device name (``stm32f405rgtx``), which needs
``pyocd pack install <part>`` once (:func:`pyocd_target`). Exit code 0 on success, 1 with one
line on stderr otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: catalog part -> pyOCD built-in target (pyocd.target.TARGET keys, pyOCD 0.36+)
BUILTIN_TARGETS = {
    "STM32H743ZI": "stm32h743xx",
    "STM32H723ZG": "stm32h723xx",
    "STM32F767ZI": "stm32f767zi",
}


def pyocd_target(part: str) -> str:
    """pyOCD's target name for a part: built in, else the pack's ``<part>tx`` (LQFP package, as
    on the Nucleo boards; ``pyocd pack install <part>`` provides it)."""
    return BUILTIN_TARGETS.get(part.upper(), f"{part.lower()}tx")


def needs_pack(part: str) -> bool:
    """Whether pyOCD needs a CMSIS pack for the part (no built-in target)."""
    return part.upper() not in BUILTIN_TARGETS


def program(uid: str | None, target: str, base: int, elf: Path, binary: Path) -> None:
    """Steps 1-4 of the module docstring; raises RuntimeError on a verify mismatch."""
    from pyocd.core.helpers import ConnectHelper
    from pyocd.flash.file_programmer import FileProgrammer

    image = binary.read_bytes()
    session = ConnectHelper.session_with_chosen_probe(
        unique_id=uid, target_override=target, blocking=False
    )
    if session is None:
        raise RuntimeError(f"no probe {uid or ''} found; check the USB cable and the serial")
    with session:
        FileProgrammer(session).program(str(elf), file_format="elf")
        back = bytes(session.target.read_memory_block8(base, len(image)))
        if back != image:
            first = next(i for i, (a, b) in enumerate(zip(back, image, strict=True)) if a != b)
            raise RuntimeError(f"verify failed at 0x{base + first:08x}")
        session.target.reset()


def main(argv: list[str] | None = None) -> int:
    """Command line entry (module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m splitter.deploy.pyocd_flash")
    ap.add_argument("--uid")
    ap.add_argument("--target", required=True)
    ap.add_argument("--base", type=lambda s: int(s, 0), required=True)
    ap.add_argument("elf", type=Path)
    ap.add_argument("binary", type=Path)
    args = ap.parse_args(argv)
    try:
        program(args.uid, args.target, args.base, args.elf, args.binary)
    except Exception as exc:
        print(f"pyocd: {args.target}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
