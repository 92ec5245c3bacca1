"""Regenerate ``splitter/cost/code_sizes.json``: firmware code and runtime RAM from real builds.

``make code-sizes`` (``python -m splitter.measure.code_table``) builds with arm-none-eabi-gcc, with
the generated projects' own Makefile and flags, and measures:

* ``runtime[part][links]``: flash code (``.isr_vector``, ``.text``, ``.rodata``, ``.data``
  load image) and RAM (``.data`` + ``.bss`` + the minimum stack) of a device project whose model
  is a stub (``sm_NN`` returning 0), per catalog part (each has its own clock setup) and 1-3
  links (hosting ``stub_submodels[links]`` sub-models), plus the RAM and the code (its
  entries in plan.c's tables) each further hosted sub-model adds; ``runtime[part][app][role]``
  the same per role of a device (head, middle, tail, ...: :data:`APP_ROLES`) for ``--app
  standalone`` (the stub image with its example application) and
  ``library`` (what ``libsplitter.a`` places beside a product's ``main()``, the product's own
  code excluded: :func:`library_figures`);
* ``cores[core].kernels[k]``: per global kernel function ``k`` of
  ``splitter/firmware_templates/kernels``,
  the functions and constants (``name -> bytes``, ELF symbol sizes) that linking the runtime
  with ``-Wl,--undefined=k --gc-sections`` adds: its closure, libgcc included, so the code of
  a set of kernels is the size of the union of their closures;
* ``cores[core].ops[key]``: the bytes of ``model.c`` per op (``kind/layout/in>out`` dtypes: the call
  and its ``static const`` parameter record), a least-squares fit over every layer of every
  model in ``models/`` compiled one layer per function, and ``per_submodel`` (the function's
  own prologue); ``cores[core].op_kernels[key]``: the kernel functions such an op calls.

``sources`` is the SHA-256 of every input of these figures (templates, kernels, the C
generator, the family facts, the compiler version); ``tests/test_code_table.py`` recomputes it
and fails when the table is stale.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from splitter.cost.code import (
    CODE_TABLE,
    MOVE_KEY,
    ROW_KEY_PREFIX,
    layer_keys,
)
from splitter.errors import BoardFileError
from splitter.hardware.board_catalog import boards
from splitter.hardware.catalog import parts
from splitter.hardware.families import family_for
from splitter.ir import Chain, Graph, Part
from splitter.toolchain.build import FLASH_CODE_SECTIONS, GCC, MIN_STACK_BYTES, section_sizes

ROOT = Path(__file__).resolve().parent.parent.parent
#: Files whose content decides the figures (globs relative to the repository root).
SOURCE_GLOBS = (
    "splitter/firmware_templates/*.c",
    "splitter/firmware_templates/*.h",
    "splitter/firmware_templates/*.j2",
    "splitter/firmware_templates/kernels/*",
    "splitter/codegen/*.py",
    "splitter/codegen/ops/*.py",
    "splitter/segments/firmware.py",
    "splitter/hardware/families/*.py",
    "splitter/hardware/cores.py",
    "splitter/hardware/catalog.toml",
)
MAX_LINKS = 3
MODELS = ROOT / "models"


def source_files(globs: tuple[str, ...] = SOURCE_GLOBS) -> list[Path]:
    """Every file ``globs`` (default :data:`SOURCE_GLOBS`) names, sorted."""
    return sorted({p for g in globs for p in ROOT.glob(g) if p.is_file()})


def gcc_version() -> str:
    """First line of ``arm-none-eabi-gcc --version``."""
    out = subprocess.run([GCC, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0]


def sources_hash(globs: tuple[str, ...] = SOURCE_GLOBS) -> str:
    """SHA-256 over the :func:`source_files` of ``globs`` (path and bytes) and the compiler
    version (also the kernel cost table's, :mod:`splitter.measure.kernel_table`)."""
    h = hashlib.sha256(gcc_version().encode())
    for p in source_files(globs):
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


# --------------------------------------------------------------------- stub projects ---------
def _stub_files(n_sub: int) -> dict[str, str]:
    """``model.h`` / ``model.c`` of a model whose sub-models do nothing (the runtime alone)."""
    decls = "".join(f"int sm_{k:02d}(float *arena);\n" for k in range(n_sub))
    defs = "".join(
        f"int sm_{k:02d}(float *arena) {{ (void)arena; return 0; }}\n" for k in range(n_sub)
    )
    header = f"#ifndef MODEL_H\n#define MODEL_H\nextern float model_arena[];\n{decls}#endif\n"
    source = f'#include "model.h"\nfloat model_arena[2] __attribute__((aligned(8)));\n{defs}'
    return {"model.h": header, "model.c": source}


#: per link count: a sub-model device sequence whose device 0 has that many links and hosts
#: one sub-model (3 links: two), and one with ``_EXTRA`` more sub-models than the 2-link one
_SEQUENCES = {1: [0], 2: [0, 1], 3: [0, 1, 0, 2]}
_EXTRA_SUB = [0, 1, 0, 1, 0]
#: sub-models ``_EXTRA_SUB`` adds: two, so that one sub-model's 4-byte state is not hidden by
#: the 8-byte alignment of a later ``.bss`` object (one extra measured 0 bytes on the F405)
_EXTRA = 2


def render_stub(
    part: Part,
    seq: Sequence[int],
    where: Path,
    kernels: bool = True,
    board: str | None = None,
    app: str = "harness",
    result_on: str = "tail",
) -> Path:
    """Write the stub project of device 0 of the sub-model device sequence ``seq`` into
    ``where`` (device 0 on ``board`` when given; ``app``: its ``--app`` mode, the standalone
    head without sample inputs); its directory."""
    from splitter.codegen.firmware import (
        AppOptions,
        DeviceSpec,
        _env,
        build_plan_context,
        render_device,
    )

    specs = []
    for dev in sorted(set(seq)):
        mine = [k for k, d in enumerate(seq) if d == dev]
        rows = [(k, 0, 4, 0, 4) for k in mine]
        stub = _stub_files(len(seq))
        on = board if dev == 0 else None
        specs.append(DeviceSpec(f"d{dev}", dev, part, stub, 0, 8, rows, board=on))
    ctx = build_plan_context(specs, seq, "0" * 16, app=AppOptions(app, result_on))
    dev0 = ctx.devices[0]
    for rel, text in render_device(_env(), ctx, dev0).items():
        if rel.startswith("kernels/") and not kernels:
            continue  # the runtime alone: nothing calls a kernel
        path = where / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return where


def make_part(project: Path) -> Path:
    """``make`` the part build of a project; the ELF (library mode: ``libsplitter.a``)."""
    subprocess.run(["make", "-s", "-j2", "-C", str(project), "EMULATOR=0"], check=True,
                   capture_output=True)  # fmt: skip
    elf = project / "build" / "part" / "firmware.elf"
    return elf if elf.exists() else project / "build" / "part" / "libsplitter.a"


#: The product side of a library measurement: the port and a function calling every API
#: function, so ``--gc-sections`` keeps what a product links; its own bytes are taken off.
LIBRARY_USER = r"""
#include "splitter.h"
#include "splitter_port.h"
void splitter_port_write(int link, const uint8_t *d, uint32_t n) { (void)link; (void)d; (void)n; }
uint32_t splitter_port_millis(void) { return 0; }
static void on_result(const splitter_result_t *r, void *u) { (void)r; (void)u; }
void library_user(void) {
    static uint8_t x[4];
    splitter_init();
    splitter_on_result(on_result, 0);
    if (splitter_ready()) (void)splitter_submit(x, splitter_input_bytes());
    (void)splitter_poll();
    (void)splitter_status();
    (void)splitter_is_tail();
    (void)splitter_device_index();
}
"""


def library_figures(project: Path) -> dict[str, int]:
    """Code and RAM a library-mode project places in a product: its ``libsplitter.a`` linked
    (:func:`link_library`), the product's own sections and the stub's ``sm_NN`` taken off; RAM
    with the 2 KiB minimum stack the runtime needs on the product's stack, and without the
    stub's 8-byte ``model_arena``."""
    elf, own = link_library(project)
    sizes = section_sizes(elf)
    code = sum(sizes.get(s, 0) for s in FLASH_CODE_SECTIONS) - own["code"] - _stub_sm_bytes(elf)
    ram = sizes.get(".data", 0) + sizes.get(".bss", 0) - own["ram"] - 8 + MIN_STACK_BYTES
    return {"code": code, "ram": ram}


def link_library(project: Path) -> tuple[Path, dict[str, int]]:
    """``make`` a library-mode project and link its ``libsplitter.a`` beside
    :data:`LIBRARY_USER` as a product would (``--gc-sections``, newlib and libgcc for what the
    runtime calls); the ELF and the user object's own bytes (:func:`_object_sizes`)."""
    lib = make_part(project)
    cpu = _make_var(project, "CPU").split()
    user = project / "library_user.c"
    user.write_text(LIBRARY_USER)
    obj, elf = project / "library_user.o", project / "library.elf"
    flags = [*cpu, "-O2", "-ffunction-sections", "-fdata-sections", f"-I{project}"]
    subprocess.run([GCC, *flags, "-c", str(user), "-o", str(obj)], check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([GCC, *cpu, "-nostdlib", "-Wl,--gc-sections", "-Wl,-e,library_user",
                    str(obj), str(lib), "-lc", "-lgcc", "-o", str(elf)], check=True,
                   capture_output=True)  # fmt: skip
    return elf, _object_sizes(obj)


def _object_sizes(obj: Path) -> dict[str, int]:
    """Flash and RAM bytes of an object's own sections (``.text*``, ``.rodata*``; ``.data*``,
    ``.bss*``)."""
    code = ram = 0
    with obj.open("rb") as fh:
        for sec in ELFFile(fh).iter_sections():
            n = int(sec["sh_size"])
            if sec.name.startswith((".text", ".rodata", ".data")):
                code += n
            if sec.name.startswith((".data", ".bss")):
                ram += n
    return {"code": code, "ram": ram}


#: ``--app standalone`` / ``library`` (one sub-model per device, so a device's role decides its
#: links and what its runtime keeps): the sub-model device sequence whose device 0 has the
#: role, and whether results return to the head (``--result-on head``)
APP_ROLES: dict[str, tuple[list[int], bool]] = {
    "single": ([0], False),  # head and tail: one link, to the console
    "head": ([0, 1], False),  # console, next board
    "middle": ([1, 0, 2], False),  # previous, next board
    "tail": ([1, 0], False),  # previous board, console
    "head_return": ([0, 1], True),  # console, next board, the return link
    "tail_return": ([1, 0], True),  # previous board, the return link
}


def mode_figures(part: Part, tmp: Path, app: str) -> dict[str, Any]:
    """Runtime code and RAM of ``part`` in ``--app`` ``app`` per role of a device
    (:data:`APP_ROLES`; standalone: its stub image, the example application and console
    printing included; library: :func:`library_figures`). The stub's 4-byte result buffer of
    ``head_return`` is taken off (the plan counts the model's, ``splitter.cost.code``)."""
    out: dict[str, Any] = {}
    for role, (seq, returns) in APP_ROLES.items():
        where = tmp / f"{part.name}-{app}-{role}"
        try:
            stub = render_stub(
                part, seq, where, kernels=False, app=app, result_on="head" if returns else "tail"
            )
        except BoardFileError:
            continue  # the part (its board) routes fewer USARTs than the role needs
        fig = library_figures(stub) if app == "library" else image_figures(stub)
        if role == "head_return":
            fig["ram"] -= 4
        out[role] = fig
    return out


def image_figures(project: Path) -> dict[str, int]:
    """Code (the stub's ``sm_NN`` taken off) and RAM (with the minimum stack) of a project's
    part image."""
    elf = make_part(project)
    sizes = section_sizes(elf)
    return {
        "code": sum(sizes.get(s, 0) for s in FLASH_CODE_SECTIONS) - _stub_sm_bytes(elf),
        "ram": sizes.get(".data", 0) + sizes.get(".bss", 0) + MIN_STACK_BYTES,
    }


def _stub_sm_bytes(elf: Path) -> int:
    return sum(size for name, size in flash_symbols(elf).items() if name.startswith("sm_"))


def runtime_figures(part: Part, tmp: Path) -> dict[str, Any]:
    """Runtime code and RAM of ``part`` for 1..3 links (stub projects without kernels)."""
    out: dict[str, Any] = {}
    for links in range(1, MAX_LINKS + 1):
        where = tmp / f"{part.name}-{links}"
        try:
            stub = render_stub(part, _SEQUENCES[links], where, kernels=False)
        except BoardFileError:
            break  # the part (its board) routes fewer USARTs: no plan gives it more links
        elf = make_part(stub)
        sizes = section_sizes(elf)
        out[str(links)] = {
            "code": sum(sizes.get(s, 0) for s in FLASH_CODE_SECTIONS) - _stub_sm_bytes(elf),
            "ram": sizes.get(".data", 0) + sizes.get(".bss", 0) + MIN_STACK_BYTES,
        }
    stub = render_stub(part, _EXTRA_SUB, tmp / f"{part.name}-x", kernels=False)
    elf = make_part(stub)
    two = section_sizes(elf)
    base = out["2"]["ram"] - MIN_STACK_BYTES
    out["ram_per_submodel"] = -(-(two.get(".data", 0) + two.get(".bss", 0) - base) // _EXTRA)
    code = sum(two.get(s, 0) for s in FLASH_CODE_SECTIONS) - _stub_sm_bytes(elf)
    # its entries in plan.c's tables
    out["code_per_submodel"] = -(-(code - out["2"]["code"]) // _EXTRA)
    hse_board = next((b.name for b in boards().values() if b.part == part.name and b.hse), None)
    if hse_board is not None:
        # the clock start-up of a board with an HSE also holds the fallback to the internal
        # oscillator when the HSE never starts (splitter.hardware.clocks): one link, on its board
        stub = render_stub(part, _SEQUENCES[1], tmp / f"{part.name}-hse", False, hse_board)
        elf = make_part(stub)
        sizes = section_sizes(elf)
        code = sum(sizes.get(s, 0) for s in FLASH_CODE_SECTIONS) - _stub_sm_bytes(elf)
        out["hse_code"] = code - out["1"]["code"]
    for app in ("standalone", "library"):
        out[app] = mode_figures(part, tmp, app)
    return out


# --------------------------------------------------------------------- kernels ---------------
def flash_symbols(elf: Path) -> dict[str, int]:
    """Functions and objects in flash (address below 0x20000000) with their sizes; symbols
    that overlap (libgcc's aliases such as ``__aeabi_dadd`` / ``__adddf3``) are one entry,
    named by the alphabetically first, sized by their union."""
    spans = []
    with elf.open("rb") as fh:
        symtab = ELFFile(fh).get_section_by_name(".symtab")
        assert isinstance(symtab, SymbolTableSection)
        for sym in symtab.iter_symbols():
            kind, addr, size = sym["st_info"]["type"], sym["st_value"] & ~1, sym["st_size"]
            if kind in ("STT_FUNC", "STT_OBJECT") and size and addr < 0x2000_0000:
                spans.append((addr, addr + int(size), sym.name))
    out: dict[str, int] = {}
    group: list[tuple[int, int, str]] = []
    for span in sorted(spans):
        if group and span[0] < max(end for _, end, _ in group):
            group.append(span)
            continue
        _flush(group, out)
        group = [span]
    _flush(group, out)
    return out


def _flush(group: list[tuple[int, int, str]], out: dict[str, int]) -> None:
    if group:
        out[min(name for _, _, name in group)] = max(e for _, e, _ in group) - group[0][0]


def _link(project: Path, objects: Sequence[Path], elf: Path, undefined: Iterable[str]) -> Path:
    cpu = _make_var(project, "CPU")
    args = [GCC, *cpu.split(), "-nostdlib", f"-T{project / 'part.ld'}", "-Wl,--gc-sections"]
    args += [f"-Wl,--undefined={u}" for u in undefined]
    subprocess.run([*args, *map(str, objects), "-lgcc", "-o", str(elf)], check=True,
                   capture_output=True)  # fmt: skip
    return elf


def _make_var(project: Path, name: str) -> str:
    text = (project / "Makefile").read_text().replace("\\\n", " ")
    m = re.search(rf"^{name} := (.*)$", text, re.M)
    assert m is not None, f"{name} not in the Makefile"
    return m.group(1)


def kernel_closures(project: Path) -> dict[str, dict[str, int]]:
    """Per global kernel function: the symbols linking it adds to the runtime."""
    build = project / "build" / "part"
    objects = sorted(build.glob("*.o")) + sorted((build / "kernels").glob("*.o"))
    base = flash_symbols(_link(project, objects, build / "base.elf", ()))
    out = {}
    for name in sorted(_kernel_functions(build / "kernels")):
        syms = flash_symbols(_link(project, objects, build / "k.elf", (name,)))
        out[name] = {s: n for s, n in sorted(syms.items()) if s not in base}
    return out


def _kernel_functions(kernel_dir: Path) -> set[str]:
    names: set[str] = set()
    for obj in kernel_dir.glob("*.o"):
        with obj.open("rb") as fh:
            symtab = ELFFile(fh).get_section_by_name(".symtab")
            assert isinstance(symtab, SymbolTableSection)
            for sym in symtab.iter_symbols():
                info = sym["st_info"]
                if (
                    info["type"] == "STT_FUNC"
                    and info["bind"] in ("STB_GLOBAL", "STB_WEAK")  # k_libc.c's memmove ...
                    and sym["st_shndx"] != "SHN_UNDEF"
                ):
                    names.add(sym.name)
    return names


# --------------------------------------------------------------------- model.c per op --------
def _chains() -> list[Chain]:
    """Costed chains of every model in ``models/`` the C generator handles, of those with
    PEX loops their chain with the loops (:func:`splitter.cost.pex_chain.partial_chain`), and
    of those with a super-node their operator-granularity chain (its compaction ``memmove`` s:
    :data:`~splitter.cost.code.MOVE_KEY`)."""
    from splitter.cost.pex_chain import partial_chain
    from splitter.graph.chain import build_chain
    from splitter.importers import load_model

    chains = []
    for path in sorted([*MODELS.glob("*.onnx"), *MODELS.glob("*.tflite")]):
        try:
            graph = load_model(path).graph
            chain = build_chain(graph)
            looped = partial_chain(chain)  # its PEX loop ops are measured too (``pex:`` keys)
        except Exception:
            continue
        chains.extend([chain] if looped is chain else [chain, looped])
        chains.extend(_split_chain(graph, chains))
        if any(layer.kind == "super" for layer in chain.layers):
            try:
                chains.append(build_chain(graph, granularity="op"))
            except Exception:
                continue
    return chains


def _split_chain(graph: Graph, chains: list[Chain]) -> list[Chain]:
    """Op chains of ``graph`` with an op split in two (:mod:`splitter.graph.split`): its
    heaviest splittable op when no chain so far has a concat of its layout and dtype, its
    heaviest grouped / depthwise conv when none has a slice of them (the slices of its input
    channels): a layer split's concat and input slice are then measured for every model kind
    that can be split."""
    from splitter.graph.split import conv_groups, splittable_ops

    ops = splittable_ops(graph)
    grouped = [o for o in ops if conv_groups(o) > 1]
    out = []
    for kind, pool in (("concat", ops), ("slice", grouped)):
        if not pool:
            continue
        op = max(pool, key=lambda o: sum(int(w.nbytes) for w in o.weights.values()))
        if (graph.layout, graph.tensors[op.outputs[0]].dtype) not in _kinds_of(chains, kind):
            out.extend(_split_in_two(graph, op))
            chains = [*chains, *out]
    return out


def _kinds_of(chains: Sequence[Chain], kind: str) -> set[tuple[str, str]]:
    """``(layout, output dtype)`` of every ``kind`` op of ``chains``."""
    return {
        (c.graph.layout, c.graph.tensors[o.outputs[0]].dtype)
        for c in chains
        if c.graph is not None
        for layer in c.layers
        for o in layer.ops
        if o.kind == kind
    }


def _split_in_two(graph: Graph, op: Any) -> list[Chain]:
    from splitter.graph.chain import build_chain
    from splitter.graph.split import layer_split, split_graph

    try:
        return [build_chain(split_graph(graph, [layer_split(op, 2)]), granularity="op")]
    except Exception:
        return []


_WEIGHTS = re.compile(r"(WEIGHTS = )\{.*?\n\};", re.S)


def layer_functions(
    chain: Chain, project: Path, name: str, core: str, *, whole: bool = False
) -> tuple[dict[int, tuple[int, set[str]]], str]:
    """Compile ``chain``'s model C for ``core`` (gcc ``-mcpu``: it picks the int8 kernel
    variants), one layer per function (``whole``: all in one, as a device runs them), with the
    project's flags; per layer function the bytes
    of its code plus the constants it references, and the kernels it calls; and the C source."""
    from splitter.codegen.model_c import generate_device_c
    from splitter.errors import UnsupportedOpError

    n = len(chain.layers)
    ranges = [(0, 1, n - 1)] if whole else [(j - 1, j, j) for j in range(1, n)]
    try:
        gen = generate_device_c(chain, ranges, "probe", core=core)
    except UnsupportedOpError:
        return {}, ""
    src = project / f"{name}.c"
    src.write_text(_WEIGHTS.sub(r"\1{0};", gen.files["model.c"]))
    (project / "model.h").write_text(gen.files["model.h"])
    obj = project / f"{name}.o"
    cflags = _make_var(project, "CFLAGS").replace("$(CPU)", _make_var(project, "CPU"))
    cflags = cflags.replace("$(EMULATOR)", "0")
    subprocess.run([GCC, *cflags.split(), "-c", str(src), "-o", str(obj)], check=True,
                   capture_output=True, cwd=project)  # fmt: skip
    (project / "model.h").write_text(_stub_files(len(ranges))["model.h"])
    return _function_bytes(obj), gen.files["model.c"]


#: ``R_ARM_ABS32``: a literal-pool word holding an address; its addend is the word itself (REL)
R_ARM_ABS32 = 2


def _function_bytes(obj: Path) -> dict[int, tuple[int, set[str]]]:
    """Per layer function ``sm_NN`` of ``obj``: the bytes of its code plus the read-only data it
    references, and the kernels it calls. A ``.rodata*`` section several functions share (gcc's
    anonymous ``.rodata`` holds the initialisers of local structs, e.g. a row loop's
    ``k_window_params``) is split into objects at the offsets the functions reference
    (:func:`_rodata_objects`), so each function is charged its own objects, not the section."""
    with obj.open("rb") as fh:
        ef = ELFFile(fh)
        symtab = ef.get_section_by_name(".symtab")
        assert isinstance(symtab, SymbolTableSection)
        syms = list(symtab.iter_symbols())
        refs: dict[int, set[tuple[str, int | None]]] = {}
        out_kernels: dict[int, set[str]] = {}
        code_bytes: dict[int, int] = {}
        for sec in ef.iter_sections():
            m = re.fullmatch(r"\.rel\.text\.sm_(\d+)", sec.name)
            if not m or not isinstance(sec, RelocationSection):
                continue
            text = ef.get_section_by_name(f".text.sm_{m[1]}")
            assert text is not None
            code = text.data()
            mine: set[tuple[str, int | None]] = set()
            kernels: set[str] = set()
            for rel in sec.iter_relocations():
                sym = syms[rel["r_info_sym"]]
                if sym["st_shndx"] == "SHN_UNDEF":
                    if sym.name.startswith("k_"):
                        kernels.add(sym.name)
                    continue
                target = ef.get_section(sym["st_shndx"])
                if not target.name.startswith(".rodata"):
                    continue
                offset = None  # unknown: the whole section
                if rel["r_info_type"] == R_ARM_ABS32:
                    at = rel["r_offset"]
                    offset = int(sym["st_value"]) + int.from_bytes(code[at : at + 4], "little")
                mine.add((target.name, offset))
            refs[int(m[1])] = mine
            out_kernels[int(m[1])] = kernels
            code_bytes[int(m[1])] = len(code)
        objects = _rodata_objects(ef, refs.values())
        return {
            j: (
                code_bytes[j] + sum(objects[r] for r in mine),
                out_kernels[j],
            )
            for j, mine in refs.items()
        }


def _rodata_objects(
    ef: ELFFile, refs: Iterable[set[tuple[str, int | None]]]
) -> dict[tuple[str, int | None], int]:
    """Bytes of each referenced read-only object ``(section, offset)``: from its offset to the
    next referenced offset of the section (or its end); ``offset None`` is the whole section."""
    offsets: dict[str, set[int]] = {}
    for mine in refs:
        for name, offset in mine:
            if offset is not None:
                offsets.setdefault(name, set()).add(offset)
    sizes: dict[tuple[str, int | None], int] = {}
    for mine in refs:
        for name, offset in mine:
            total = _section_size(ef, name)
            if offset is None:
                sizes[(name, None)] = total
                continue
            later = [o for o in offsets[name] if o > offset]
            sizes[(name, offset)] = (min(later) if later else total) - offset
    return sizes


def _section_size(ef: ELFFile, name: str) -> int:
    section = ef.get_section_by_name(name)
    assert section is not None, name
    return int(section["sh_size"])


_CALL = re.compile(r"\b(k_\w+)\(")


def op_calls(chain: Chain, source: str) -> dict[int, list[tuple[str, set[str]]]]:
    """Per layer function of ``source`` (``sm_NN`` runs layer ``NN + 1``): each op's key and
    the kernels its block calls (the emitters open every op's block with ``/* name: ...``)."""
    from splitter.codegen.escape import c_comment

    out: dict[int, list[tuple[str, set[str]]]] = {}
    for m in re.finditer(r"^int sm_(\d+)\(float \*arena\)\n\{\n(.*?)^\}", source, re.S | re.M):
        j = int(m[1]) + 1
        keys = layer_keys(chain, [j])  # ``pex:<key>`` for an op of a PEX loop, then the moves
        n = len(chain.layers[j].ops)
        ops = [
            (f"/* {c_comment(op.name)}: ", key)
            for op, key in zip(chain.layers[j].ops, keys[:n], strict=True)
        ]
        rows: list[tuple[str, set[str]]] = [(key, set()) for _, key in ops]
        moves = keys[n:].count(MOVE_KEY)
        assert m[2].count("__builtin_memmove(") == moves, f"layer {j}: moves"
        current = -1
        for line in m[2].splitlines():
            for i, (tag, _key) in enumerate(ops):
                if tag in line:
                    current = i
            if current >= 0:
                rows[current][1].update(_CALL.findall(line))
        extra = [(key, {"memmove"} if key == MOVE_KEY else set()) for key in keys[n:]]
        out[int(m[1])] = rows + extra
    return out


def op_figures(project: Path, chains: Sequence[Chain], core: str) -> dict[str, Any]:
    """Least-squares bytes per op key and per sub-model function; kernels per op key (model C
    generated for ``core``, gcc ``-mcpu``). The op keys are fitted on the super-node chains
    (PEX loop chains included); the keys only operator-granularity chains have (one compaction
    move, :data:`MOVE_KEY`, and a layer split's input slices and concats) then on what those
    chains' layer functions add to these figures (:func:`_op_chain_figures`)."""
    rows: list[tuple[list[str], int]] = []
    op_rows: list[tuple[list[str], int]] = []
    kernels: dict[str, set[str]] = {}
    for c, chain in enumerate(chains):
        measured, source = layer_functions(chain, project, f"m{c}", core)
        calls = op_calls(chain, source)
        for k, (size, _kernels) in measured.items():
            (op_rows if chain.granularity == "op" else rows).append(
                ([key for key, _ in calls[k]], size)
            )
            for key, called in calls[k]:
                kernels.setdefault(key, set()).update(called)
    rowed = [
        (layer_keys(chain, range(1, len(chain.layers))), size)
        for c, chain in enumerate(chains)
        if any(loop.by == "row" for layer in chain.layers for loop in layer.loops)
        for size, _ in layer_functions(chain, project, f"w{c}", core, whole=True)[0].values()
    ]
    rows = [(keys, size) for keys, size in rows if not any(_is_row(k) for k in keys)]
    names = sorted({key for keys, _ in rows for key in keys})
    a = np.array([[1.0] + [keys.count(n) for n in names] for keys, _ in rows])
    b = np.array([size for _, size in rows], dtype=float)
    coef = np.linalg.lstsq(a, b, rcond=None)[0]
    ops = {n: max(0, round(float(x))) for n, x in zip(names, coef[1:], strict=True)}
    per_submodel = max(0, round(float(coef[0])))
    ops.update(_row_loop_figures(rowed, ops, per_submodel))
    ops.update(_op_chain_figures(op_rows, ops, per_submodel))
    return {
        "per_submodel": per_submodel,
        "ops": dict(sorted(ops.items())),
        "op_kernels": {k: sorted(v) for k, v in sorted(kernels.items())},
    }


def _is_row(key: str) -> bool:
    return key.startswith(ROW_KEY_PREFIX)


def _row_loop_figures(
    rowed: Sequence[tuple[list[str], int]], ops: dict[str, int], per_submodel: int
) -> dict[str, int]:
    """Bytes of the row-loop keys (``pexrow:`` op keys and :data:`ROW_LOOP_KEY`), fitted after
    the other op figures are fixed, on what the whole-chain functions of the models with row
    loops (one function, as a device runs a sub-model: a row loop's ops share its registers and
    literal pool) add to them (non-negative least squares on the residuals), so the few row
    loops of ``models/`` move no other figure."""
    fitted = [
        (keys, size - per_submodel - sum(ops[k] for k in keys if not _is_row(k)))
        for keys, size in rowed
        if all(k in ops for k in keys if not _is_row(k))
    ]
    return _residual_fit(fitted, sorted({k for keys, _ in fitted for k in keys if _is_row(k)}))


def _op_chain_figures(
    op_rows: Sequence[tuple[list[str], int]], ops: dict[str, int], per_submodel: int
) -> dict[str, int]:
    """Bytes of the op keys only the operator-granularity chains have: :data:`MOVE_KEY` (one
    compaction ``memmove``), and a layer split's ``slice.part`` and ``concat`` keys of a
    layout and dtype no super-node chain has (``models/`` has no such op), fitted after the
    other figures are fixed on what those chains' layer functions add to them (non-negative
    least squares on the residuals). Without them such a key took the table's largest op
    figure (an unknown key's upper bound): 407 B for an input slice's ~60 B call on the M4F,
    2.9 % of ``dw_wide.onnx``'s input-slice board."""
    fitted = [
        (keys, size - per_submodel - sum(ops.get(k, 0) for k in keys))
        for keys, size in op_rows
        if not any(_is_row(k) for k in keys)
    ]
    return _residual_fit(fitted, sorted({k for keys, _ in fitted for k in keys if k not in ops}))


def _residual_fit(fitted: Sequence[tuple[list[str], float]], names: list[str]) -> dict[str, int]:
    """Bytes per key of ``names`` (each row: its keys, the bytes the fixed figures leave):
    least squares with a negative figure fixed at 0 and the rest refitted."""
    if not names or not fitted:
        return {}
    a = np.array([[keys.count(n) for n in names] for keys, _ in fitted], dtype=float)
    b = np.array([r for _, r in fitted], dtype=float)
    free = list(range(len(names)))
    coef = np.zeros(len(names))
    while free:  # non-negative least squares: a negative figure is fixed at 0, the rest refitted
        coef[:] = 0.0
        coef[free] = np.linalg.lstsq(a[:, free], b, rcond=None)[0]
        worst = min(free, key=lambda i: coef[i])
        if coef[worst] >= 0:
            break
        free.remove(worst)
    return {n: round(float(x)) for n, x in zip(names, coef, strict=True)}


# --------------------------------------------------------------------- the table -------------
def representative_parts() -> dict[str, Part]:
    """The first catalog part of every family."""
    out: dict[str, Part] = {}
    for part in parts():
        out.setdefault(part.family, part)
    return out


def build_table() -> dict[str, Any]:
    """Measure everything (module docstring); the JSON object."""
    chains = _chains()
    table: dict[str, Any] = {"sources": sources_hash(), "compiler": gcc_version()}
    table["stub_submodels"] = {str(k): seq.count(0) for k, seq in _SEQUENCES.items()}
    table["runtime"], table["cores"] = {}, {}
    with tempfile.TemporaryDirectory(prefix="splitter-code-") as tmp_name:
        tmp = Path(tmp_name)
        for part in parts():
            print(f"runtime {part.name}", file=sys.stderr)
            table["runtime"][part.name] = runtime_figures(part, tmp)
        for family, part in sorted(representative_parts().items()):
            core = family_for(family).core.key
            if core in table["cores"]:
                continue
            print(f"kernels and ops on {core}", file=sys.stderr)
            project = tmp / f"{family}-kernels"
            make_part(render_stub(part, _SEQUENCES[1], project))
            table["cores"][core] = {
                "family": family,
                "kernels": kernel_closures(project),
                **op_figures(project, chains, family_for(family).core.name),
            }
    return table


def main() -> None:
    """Write :data:`splitter.cost.code.CODE_TABLE`."""
    table = build_table()
    CODE_TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {CODE_TABLE}", file=sys.stderr)


if __name__ == "__main__":
    main()
