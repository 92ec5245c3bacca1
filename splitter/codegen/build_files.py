"""How a device project is built, in one place: the compiler and linker flags, which sources
each app mode compiles, and ``compile_commands.json``.

Three build descriptions print these facts and none repeats them: the Makefile
(``firmware_templates/Makefile.j2``), the CMake project (``CMakeLists.txt.j2`` with the
toolchain file ``arm-none-eabi.cmake.j2``; CubeMX exports CMake projects, STM32CubeIDE and VS
Code open them) and the JSON compilation database (:func:`compile_commands`, the clang format:
https://clang.llvm.org/docs/JSONCompilationDatabase.html) that clangd and VS Code read without a
build. The CPU flags and the linker script of each build variant come from the render context's
targets (``TargetContext.cpu_flags`` / ``ldscript``: the part, or QEMU's board with
``EMULATOR=1``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

COMPILER = "arm-none-eabi-gcc"
OBJCOPY = "arm-none-eabi-objcopy"
#: C flags besides the CPU's and ``-DEMULATOR``: C99 without libc, every warning an error;
#: ``-fno-tree-loop-distribute-patterns`` stops gcc from turning the kernels' loops into calls to
#: memset / memcpy (``libc.c`` has the few the runtime needs); one section per function and
#: object so ``--gc-sections`` drops what is unused.
C_FLAGS = (
    "-std=c99",
    "-O2",
    "-g",
    "-Wall",
    "-Werror",
    "-ffreestanding",
    "-fno-common",
    "-fno-tree-loop-distribute-patterns",
    "-ffunction-sections",
    "-fdata-sections",
)
#: Include directories, relative to the project.
INCLUDE_DIRS = (".", "kernels")
#: Linker flags besides the CPU's, the linker script and the map file.
LINK_FLAGS = ("-nostdlib", "-Wl,--gc-sections")
#: Libraries (``-l``): libgcc for the soft-float and 64-bit division helpers.
LINK_LIBS = ("gcc",)
#: App modes (``compile --app``) whose sources :func:`mode_sources` knows.
MODES = ("harness", "standalone", "library")
#: What ``library`` mode leaves to the user's project: ``main()``, the reset handler, vector
#: table and clock start-up, and the UART driver (the user's HAL or RTOS owns the UARTs).
LIBRARY_EXCLUDES = ("main.c", "startup.c", "uart.c")


def mode_sources(mode: str, files: Iterable[str]) -> tuple[str, ...]:
    """The C sources of ``files`` (project-relative paths) that ``mode`` compiles, sorted as
    make's ``$(sort ...)`` sorts them (byte order), so every build links them in one order.

    ``harness`` and ``standalone`` compile every source; ``library`` leaves out
    :data:`LIBRARY_EXCLUDES`. Private stand-in for ``splitter.codegen.firmware.mode_sources``
    (issue 24, engineer ``api``), same signature: switch the callers to it once it lands.
    """
    if mode not in MODES:
        raise ValueError(f"app mode {mode!r} is not one of {', '.join(MODES)}")
    sources = sorted(f for f in files if f.endswith(".c"))
    if mode == "library":
        return tuple(f for f in sources if f not in LIBRARY_EXCLUDES)
    return tuple(sources)


@dataclass(frozen=True)
class BuildContext:
    """What the build templates print, each a space-separated string (Makefile and CMake lists
    both split on spaces)."""

    compiler: str
    objcopy: str
    cflags: str
    include_flags: str
    include_dirs: str
    link_flags: str
    link_libs: str  # ``-lgcc``
    link_lib_names: str  # ``gcc`` (CMake's target_link_libraries)
    sources: tuple[str, ...]  # every C source, link order
    library_sources: tuple[str, ...]
    library_target: str  # ``splitter_<device>``: the CMake library target


def cmake_name(text: str) -> str:
    """``text`` as a CMake target or project name: characters outside ``[A-Za-z0-9_]`` become
    ``_`` (device names are ``[a-z0-9_-]``; ``-`` is legal in target names but not in C or
    in the variable names CubeMX projects derive from them)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def build_context(device_name: str, files: Iterable[str]) -> BuildContext:
    """The build facts of one device project whose files are ``files``."""
    names = tuple(files)
    return BuildContext(
        compiler=COMPILER,
        objcopy=OBJCOPY,
        cflags=" ".join(C_FLAGS),
        include_flags=" ".join(f"-I{d}" for d in INCLUDE_DIRS),
        include_dirs=" ".join(INCLUDE_DIRS),
        link_flags=" ".join(LINK_FLAGS),
        link_libs=" ".join(f"-l{lib}" for lib in LINK_LIBS),
        link_lib_names=" ".join(LINK_LIBS),
        sources=mode_sources("harness", names),
        library_sources=mode_sources("library", names),
        library_target=f"splitter_{cmake_name(device_name)}",
    )


def compile_flags(cpu_flags: str, emulator: int) -> list[str]:
    """The compiler arguments of one source (the Makefile's ``CFLAGS``): CPU, :data:`C_FLAGS`,
    ``-DEMULATOR``, the include directories."""
    return [
        *cpu_flags.split(),
        *C_FLAGS,
        f"-DEMULATOR={emulator}",
        *(f"-I{d}" for d in INCLUDE_DIRS),
    ]


def compile_commands(
    directory: Path, cpu_flags: str, emulator: int, build_dir: str, sources: Sequence[str]
) -> list[dict[str, object]]:
    """One JSON compilation database entry per source, as ``make`` compiles it in
    ``directory`` (absolute): ``arguments`` = compiler, :func:`compile_flags`, ``-c``, the
    source, ``-o build/<variant>/<source>.o``."""
    return [
        {
            "directory": str(directory),
            "arguments": [
                COMPILER,
                *compile_flags(cpu_flags, emulator),
                "-c",
                src,
                "-o",
                f"build/{build_dir}/{src[:-2]}.o",
            ],
            "file": src,
            "output": f"build/{build_dir}/{src[:-2]}.o",
        }
        for src in sources
    ]
