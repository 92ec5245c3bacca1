"""Plans that fit always link: the planner's flash and RAM figures against real ELF files.

Over every model in ``models/`` and every board file in ``models/boards/``: every plan that says
it fits is compiled, as ``splitter compile`` makes it by default (super-node chain, partial
execution ``auto``: PEX channel loops when no plan fits without them) and, where a block fits
no board, with ``--granularity auto`` (the operator-granularity chain, cuts carrying several
tensors); each device's firmware is built with arm-none-eabi-gcc (the part build,
``make`` without ``EMULATOR``), and the ELF must match the plan: ``.weights`` and ``.arena``
exactly, the code (``.isr_vector``, ``.text``, ``.rodata``, ``.data``) within 2 % of the plan's
``code_bytes`` (``splitter/cost/code.py``), the runtime RAM (``.data``, ``.bss``, minimum
stack) equal to ``runtime_ram_bytes``, and weights + code and arena + runtime within the
user's budgets. Kernel objects are compiled once per CPU flag set and shared between the
device projects (the expensive part); one test per model so xdist spreads them.

Also: ``yamnet_256`` on one H743 is refused at plan time naming the arena's RAM region and its
size; ``splitter build`` fails (exit 2, one line) when an image exceeds the user's budget.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from splitter.compile import CompileOptions, compile_model
from splitter.errors import BoardFileError, SplitterError, UnsupportedOpError
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.ir import Boards, Chain, Plan
from splitter.manifest import read_manifest
from splitter.partition.granularity import auto_granularity
from splitter.partition.partial import plan_partial
from splitter.partition.planner import plan_chain
from splitter.toolchain.build import _capacities, measure, run_make

pytestmark = [pytest.mark.toolchain]

ROOT = Path(__file__).resolve().parents[1]
MODELS = sorted([*(ROOT / "models").glob("*.onnx"), *(ROOT / "models").glob("*.tflite")])
BOARDS = sorted((ROOT / "models" / "boards").glob("*.toml"))
#: bytes the runtime RAM estimate may exceed an image's (alignment of .bss, see below)
RUNTIME_RAM_SLACK = 64
CODE_TOLERANCE = 0.02


def _kernel_key(device_dir: Path) -> str:
    """The CPU flags of the part build and the kernel sources: what the kernel objects depend on."""
    text = (device_dir / "Makefile").read_text().split("ifeq ($(EMULATOR),0)", 1)[1]
    cpu = text.split("CPU := ", 1)[1].splitlines()[0]
    h = hashlib.sha256(cpu.encode())
    for p in sorted((device_dir / "kernels").glob("*")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _prime(device_dir: Path, cache: Path) -> None:
    """Copy cached kernel objects for this CPU into the project, newer than its sources."""
    src = cache / _kernel_key(device_dir)
    if not src.is_dir():
        return
    dst = device_dir / "build" / "part" / "kernels"
    dst.mkdir(parents=True, exist_ok=True)
    for obj in src.glob("*.o"):
        shutil.copy(obj, dst / obj.name)
        os.utime(dst / obj.name)


def _keep(device_dir: Path, cache: Path) -> None:
    dst = cache / _kernel_key(device_dir)
    if not dst.is_dir():
        shutil.copytree(device_dir / "build" / "part" / "kernels", dst)


def _plan(chain: Chain, boards: Boards) -> tuple[Chain, Plan] | None:
    """The plan ``splitter plan`` / ``compile`` (partial execution ``auto``) find, or None."""
    try:
        return plan_partial(chain, boards, "auto")
    except SplitterError:
        return None


def _device_images(granularity: str, chain: Chain, boards: Boards, plan: Plan) -> frozenset:
    """What decides each device's firmware image in ``plan``: its part, its layer ranges with
    their loops and how many peers it talks to (the host counted), as ``check_builds`` keys
    the built images, here read from the plan before anything is compiled."""
    subs = plan.submodels
    images = set()
    for d, device in enumerate(boards.devices):
        mine = [k for k, s in enumerate(subs) if s.device_index == d]
        if not mine:
            continue
        peers = {subs[k - 1].device_index if k > 0 else -1 for k in mine}
        peers |= {subs[k + 1].device_index if k + 1 < len(subs) else -1 for k in mine}
        ranges = tuple((subs[k].first, subs[k].last) for k in mine)
        loops = tuple(tuple(chain.layers[j].loops for j in range(a, b + 1)) for a, b in ranges)
        images.add((granularity, device.part.name, ranges, loops, len(peers)))
    return frozenset(images)


def fitting_plans(model: Path) -> list[tuple[Path, str, frozenset]]:
    """``(board file, granularity, device images)`` of every plan ``compile`` makes that fits
    ``model``: the defaults (super-node chain, PEX loops only when no plan fits without them),
    else ``--granularity auto`` when it switches to the op chain (a block no board holds
    whole)."""
    chain = load_chain(model)
    out = []
    for path in BOARDS:
        boards = load_boards(path)  # every shipped board file parses
        found = _plan(chain, boards)
        if found is not None:
            out.append((path, "supernode", _device_images("supernode", found[0], boards, found[1])))
            continue
        op = auto_granularity(chain, boards)
        found = _plan(op, boards) if op is not chain else None
        if found is not None:
            out.append((path, "auto", _device_images("auto", found[0], boards, found[1])))
    return out


def check_builds(out: Path, cache: Path, seen: set[tuple[object, ...]] | None = None) -> int:
    """Build every device of ``out`` (part only) and compare each ELF with plan.json; a device
    whose firmware another plan of the same model already built (same part, layers, sub-models
    and links: the same image up to names) is skipped. Returns the number of devices built."""
    manifest = read_manifest(out)
    links = manifest.links()
    built = 0
    for planned in manifest.devices:
        ranges = tuple((s.first, s.last) for s in manifest.submodels if s.device == planned.name)
        if not ranges:
            continue
        peers = links[planned.name]
        key = (
            manifest.model.path,
            manifest.model.granularity,
            planned.mcu,
            ranges,
            tuple(s.loops for s in manifest.submodels if s.device == planned.name),
            len(set(peers["receives_from"]) | set(peers["sends_to"])),
        )
        if seen is not None and key in seen:
            continue
        device_dir = out / "firmware" / planned.name
        _prime(device_dir, cache)
        elf = run_make(device_dir)
        _keep(device_dir, cache)
        entry = {"name": planned.name, "part": planned.mcu, "weights_bytes": planned.flash_used,
                 "arena_bytes": planned.ram_used}  # fmt: skip
        b = measure(entry, elf, _capacities(device_dir))
        where = f"{out.name} {b.device} ({b.part})"
        assert b.weights_actual == planned.flash_used, where
        assert b.arena_actual == (planned.ram_used + 3) // 4 * 4, where
        error = abs(b.code_bytes - planned.code_bytes) / b.code_bytes
        assert error <= CODE_TOLERANCE, (
            f"{where}: code {b.code_bytes} B, plan {planned.code_bytes} B"
        )
        # runtime RAM (.data + .bss + stack) is measured on a stub linking every kernel; an
        # image linking fewer may align its .bss a few bytes lower: never more than planned
        slack = planned.runtime_ram_bytes - b.runtime_ram_bytes
        assert 0 <= slack <= RUNTIME_RAM_SLACK, (where, slack)
        assert b.flash_total <= planned.flash_budget, where
        assert b.ram_total <= planned.ram_limit, where
        if seen is not None:
            seen.add(key)
        built += 1
    return built


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Kernel objects per CPU flag set, shared by every build of this module (per worker)."""
    return tmp_path_factory.mktemp("kernel-objects")


#: models of the sweep whose architecture another model already covers (MobileNet v1 0.25 at
#: 96x96 covers the same graph at 64x64 and the 0.30 / 0.35 widths): ``make test-all`` only
EXTENDED = {"mobilenet_v1_030.onnx", "mobilenet_v1_035.onnx", "mobilenet_v1_025_64.onnx"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [pytest.param(m, marks=pytest.mark.extended) if m.name in EXTENDED else m for m in MODELS],
    ids=[m.name for m in MODELS],
)
def test_every_plan_that_fits_links_within_its_figures(
    model: Path, kernel_cache: Path, tmp_path: Path
) -> None:
    seen: set[tuple[object, ...]] = set()
    built: set[object] = set()  # device images of the plans already compiled and built
    for boards, granularity, images in fitting_plans(model):
        if images <= built:
            continue  # every device of this plan links the same image as one already checked
        out = tmp_path / f"{model.stem}-{boards.stem}-{granularity}"
        opts = CompileOptions(validate=False, granularity=granularity)
        try:
            result = compile_model(model, boards, out, opts)
        except (BoardFileError, UnsupportedOpError):
            continue  # the boards cannot run firmware (e.g. a baud rate no USART divides)
        if not result.firmware.startswith("generated"):
            continue  # no kernels for the model (reported by compile); nothing to link
        check_builds(out, kernel_cache, seen)
        built |= images


def test_the_sweep_covers_plans_on_every_core() -> None:
    """The sweep is not empty: some plan of some model fits on an M0+, an M4F and an M7."""
    from splitter.hardware.families import family_for

    cores = set()
    for name in ("kws_cnn.onnx", "tiny_cnn_int8.tflite"):
        chain = load_chain(ROOT / "models" / name)
        for boards in BOARDS:
            parsed = load_boards(boards)
            try:
                plan = plan_chain(chain, parsed)
            except SplitterError:
                continue
            for sub in plan.submodels:
                part = parsed.devices[sub.device_index].part
                cores.add(family_for(part.family).core.key)
    assert cores == {"M0+", "M4F", "M7"}


def test_the_sweep_covers_partial_execution_and_op_granularity() -> None:
    """The sweep builds the plans the defaults make with PEX loops (pex_irb_48 on e2e_pex.toml:
    no plan without them) and ``--granularity auto``'s op chains (long_skip on long_skip4.toml:
    its 1 MB skip block fits no board whole)."""
    pex = ROOT / "models" / "pex_irb_48.onnx"
    e2e_pex = ROOT / "models" / "boards" / "e2e_pex.toml"
    assert (e2e_pex, "supernode") in [(b, g) for b, g, _ in fitting_plans(pex)]
    chain = load_chain(pex)
    looped, _ = plan_partial(chain, load_boards(e2e_pex), "auto")
    assert looped is not chain and any(layer.loops for layer in looped.layers)
    skip = ROOT / "models" / "long_skip.onnx"
    long_skip4 = ROOT / "models" / "boards" / "long_skip4.toml"
    assert (long_skip4, "auto") in [(b, g) for b, g, _ in fitting_plans(skip)]


def test_yamnet_on_one_h743_is_refused_naming_the_arena_region(tmp_path: Path) -> None:
    """The H743's arena links into the 512 KiB AXI SRAM (RM0433 section 2.3.2), not the 1 MiB
    of every bank together; yamnet_256's largest layer needs 576 KiB run op by op (partial
    execution off: with it, its layers need at most 294 KiB and one H743 hosts it)."""
    boards = tmp_path / "h7.toml"
    boards.write_text('[[device]]\nname = "h7"\nmcu = "STM32H743ZI"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "splitter", "plan", str(ROOT / "models" / "yamnet_256.onnx"),
         "--target", str(boards), "--partial-execution", "off"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert "needs 576.00 KiB of RAM" in line
    assert "RAM region AXI_SRAM (512 KiB, where the arena is linked)" in line


def test_build_fails_over_the_users_budget(tmp_path: Path, kernel_cache: Path) -> None:
    """A plan that fits builds within the budgets; once the user lowers device a's flash budget
    in boards.toml below its image (the part still has room), `splitter build` fails: exit 2,
    one line naming the boards file, the device, the budget and the excess."""
    boards = tmp_path / "boards.toml"
    text = (
        '[[device]]\nname = "a"\nmcu = "STM32F405RG"\nflash = "62 KiB"\n'
        '[[device]]\nname = "b"\nmcu = "STM32F405RG"\nflash = "84 KiB"\n'
    )
    boards.write_text(text)
    out = tmp_path / "out"
    compile_model(ROOT / "models" / "tiny_cnn.onnx", boards, out, CompileOptions(validate=False))
    check_builds(out, kernel_cache)  # as planned: within the budgets
    boards.write_text(text.replace('"62 KiB"', '"36 KiB"'))
    proc = subprocess.run(
        [sys.executable, "-m", "splitter", "build", str(out), "--no-emulator"],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"splitter: error: {boards}: device a (STM32F405RG): the image needs")
    assert "over its flash budget 36864 B by" in line and "RAM" not in line


@pytest.mark.slow
@pytest.mark.parametrize("result_on", ["tail", "head"])
def test_standalone_chain_links_within_its_figures(
    tmp_path: Path, kernel_cache: Path, result_on: str
) -> None:
    """``--app standalone`` (the example application, console printing, 5 compiled-in samples
    on the head) over two F405s, with the result on the tail or sent back to the head over a
    return link: every board's image matches plan.json as the harness's do (weights and arena
    exact, code within 2 %, runtime RAM never above the plan)."""
    import numpy as np

    boards = tmp_path / "boards.toml"
    boards.write_text(
        '[[device]]\nname = "a"\nmcu = "STM32F405RG"\n[[device]]\nname = "b"\nmcu = "STM32F405RG"\n'
    )
    np.save(tmp_path / "x.npy", np.zeros((5, 1, 1, 28, 28), np.float32))
    out = tmp_path / "out"
    opts = CompileOptions(
        validate=False, assignment=(0, 0, 1, 1, 1), app="standalone", result_on=result_on,
        input_files=(str(tmp_path / "x.npy"),),
    )  # fmt: skip
    compile_model(ROOT / "models" / "tiny_cnn.onnx", boards, out, opts)
    manifest = read_manifest(out)
    a = next(d for d in manifest.devices if d.name == "a")
    harness = compile_model(
        ROOT / "models" / "tiny_cnn.onnx", boards, tmp_path / "h",
        CompileOptions(validate=False, assignment=(0, 0, 1, 1, 1), firmware=False),
    ).manifest  # fmt: skip
    # the head's plan counts the samples (5 x 3136 B) besides a larger runtime
    assert a.code_bytes > next(d for d in harness.devices if d.name == "a").code_bytes + 5 * 3136
    assert check_builds(out, kernel_cache) == 2


@pytest.mark.slow
def test_library_links_within_its_figures(tmp_path: Path) -> None:
    """``--app library`` over two F405s: each board's ``libsplitter.a``, linked as a product
    links it beside a ``main()`` that calls the API (``code_table.LIBRARY_USER``; the product's
    own bytes are not the plan's and are taken off), places what plan.json says: ``.weights``
    exact, code within 2 %, runtime RAM (``.data`` + ``.bss`` without the arena, plus the 2 KiB
    of stack the runtime needs) never above the plan."""
    from splitter.measure.code_table import link_library
    from splitter.toolchain.build import FLASH_CODE_SECTIONS, MIN_STACK_BYTES, section_sizes

    boards = tmp_path / "boards.toml"
    boards.write_text(
        '[[device]]\nname = "a"\nmcu = "STM32F405RG"\n[[device]]\nname = "b"\nmcu = "STM32F405RG"\n'
    )
    opts = CompileOptions(validate=False, assignment=(0, 0, 1, 1, 1), app="library")
    out = compile_model(ROOT / "models" / "tiny_cnn.onnx", boards, tmp_path / "out", opts).out_dir
    for planned in read_manifest(out).devices:
        elf, own = link_library(out / "firmware" / planned.name)
        sizes = section_sizes(elf)
        assert sizes[".weights"] == planned.flash_used, planned.name
        code = sum(sizes.get(s, 0) for s in FLASH_CODE_SECTIONS) - own["code"]
        assert abs(code - planned.code_bytes) / code <= CODE_TOLERANCE, (code, planned)
        arena = symbol_sizes(elf)["model_arena"]
        assert arena == (planned.ram_used + 3) // 4 * 4, planned.name
        ram = sizes.get(".data", 0) + sizes.get(".bss", 0) - own["ram"] - arena + MIN_STACK_BYTES
        assert 0 <= planned.runtime_ram_bytes - ram <= RUNTIME_RAM_SLACK, (ram, planned)


def symbol_sizes(elf: Path) -> dict[str, int]:
    """Sizes of the objects of an ELF by name (pyelftools), wherever they are placed."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    with elf.open("rb") as fh:
        symtab = ELFFile(fh).get_section_by_name(".symtab")
        assert isinstance(symtab, SymbolTableSection)
        return {s.name: int(s["st_size"]) for s in symtab.iter_symbols() if s["st_size"]}
