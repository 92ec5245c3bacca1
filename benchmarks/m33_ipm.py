"""Instructions per MAC of the int8 ``_dsp`` kernels built for the Cortex-M33, on QEMU's
mps2-an505, against the same kernels built for the Cortex-M4 on QEMU's mps2-an386.

Why: the kernel cost table (``splitter/cost/kernel_costs.json``) measures its builds on the
emulated STM32F405 (Cortex-M4F); the Cortex-M33 parts (STM32U5, L5) reuse its ``M4F.dsp``
figures (``Core.measured_as`` in ``splitter/hardware/cores.py``). This benchmark checks that
choice: it cross-compiles ``splitter/firmware_templates/kernels`` (the issue-13 int8 shapes of
``benchmarks/kernels.py``, ``_dsp`` and ``_plain`` variants) with ``-mcpu=cortex-m33
-mfpu=fpv5-sp-d16`` and with ``-mcpu=cortex-m4 -mfpu=fpv4-sp-d16``, runs each on an Arm MPS2 FPGA
image QEMU models (AN505: Cortex-M33 with the DSP extension and FPU; AN386: Cortex-M4) with
``-icount shift=0`` and counts instructions with SysTick.

Method: with ``-icount shift=0`` every instruction takes 1 ns of virtual time and SysTick (core
clock source) counts the board's fixed clock; the ticks per instruction are calibrated on each
machine with a loop of exactly two instructions (``subs``, ``bne``) run 4,000,000 times, the
cost of an empty measurement is subtracted. Output through Arm semihosting (``BKPT 0xAB``).
After each call the harness prints a digest of the output bytes; the M33 and M4 builds must
agree bit for bit (the run fails otherwise), and ``tests/test_kernels_q8_opt.py`` checks the
same C against the generic kernels and LiteRT on the host.

What QEMU models and what not: the M33's Armv8-M Mainline instruction set with the DSP
extension (SMLAD, SXTB16...) and the FPU, executed one instruction per tick: these are
instruction counts. It does not model the pipeline (the M33's three stages against the M4's
three; branch and load timing), wait states, caches or TrustZone timing; the code runs in
Secure state from the AN505's SSRAM. Cycles need the CPI model of ``splitter.cost.cpi``.

Usage: ``.venv/bin/python benchmarks/m33_ipm.py`` -> ``benchmarks/results/m33_ipm.{md,json}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels import _q8_cases

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "splitter" / "firmware_templates" / "kernels"
RESULTS = ROOT / "benchmarks" / "results"
CALIBRATION_LOOPS = 4_000_000


@dataclass(frozen=True)
class Machine:
    """One QEMU MPS2 machine: its core flags and memory map (code and data SRAM)."""

    machine: str
    core: str
    flags: tuple[str, ...]
    code: int
    data: int


#: AN505 (Arm AN505, QEMU hw/arm/mps2-tz.c): secure code SSRAM at 0x1000_0000 (reset VTOR_S),
#: secure data SSRAM at 0x3800_0000. AN386 (Arm AN386, hw/arm/mps2.c): code at 0, data at
#: 0x2000_0000.
MACHINES = (
    Machine("mps2-an505", "cortex-m33",
            ("-mcpu=cortex-m33", "-mfpu=fpv5-sp-d16"), 0x1000_0000, 0x3800_0000),
    Machine("mps2-an386", "cortex-m4",
            ("-mcpu=cortex-m4", "-mfpu=fpv4-sp-d16"), 0x0000_0000, 0x2000_0000),
)  # fmt: skip

HARNESS = r"""
#include <stdint.h>
#include "kernels.h"
#include "kernels_q8.h"
#include "kernels_q8_opt.h"
#define SYST_CSR (*(volatile unsigned *)0xE000E010u)
#define SYST_RVR (*(volatile unsigned *)0xE000E014u)
#define SYST_CVR (*(volatile unsigned *)0xE000E018u)

float xbuf[12288] __attribute__((aligned(8)));
float ybuf[12288] __attribute__((aligned(8)));
const float wbuf[65536] = {0.5f};
#define qx ((const int8_t *)xbuf)
#define qy ((int8_t *)ybuf)
#define qw ((const int8_t *)wbuf)
#define qb ((const int32_t *)wbuf)
int32_t qmult[64], qshift[64];
int8_t qscratch[4096] __attribute__((aligned(4)));

static int semihost(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
static char line[64];
static void report(const char *name, unsigned v)
{
    char b[12]; int n = 0, k = 0;
    while (name[k]) { line[k] = name[k]; k++; }
    line[k++] = ' ';
    do { b[n++] = (char)('0' + v % 10u); v /= 10u; } while (v);
    while (n) line[k++] = b[--n];
    line[k++] = '\n'; line[k] = 0;
    semihost(0x04, line); /* SYS_WRITE0 */
}
static unsigned t0;
static void start(void)
{
    SYST_CSR = 0; SYST_RVR = 0xFFFFFFu; SYST_CVR = 0; SYST_CSR = 5u;
    while (SYST_CVR == 0u) {}
    t0 = SYST_CVR;
}
static unsigned stop(void) { unsigned t = SYST_CVR; SYST_CSR = 0; return t0 - t; }
/* FNV-1a of the output bytes: the M33 and M4 builds must compute the same bits. */
static unsigned digest(void)
{
    unsigned h = 2166136261u, i;
    for (i = 0; i < sizeof(ybuf); i++) h = (h ^ ((const uint8_t *)ybuf)[i]) * 16777619u;
    return h;
}
__attribute__((noinline)) static void spin(unsigned n)
{
    __asm__ volatile("1: subs %0, %0, #1\n bne 1b" : "+r"(n) : : "cc");
}

int main(void)
{
    unsigned t, i;
    for (i = 0; i < 12288u; i++) xbuf[i] = (float)(i % 7u) * 0.25f - 0.5f;
    for (i = 0; i < 64u; i++) {
        qmult[i] = 1518500250 + (int32_t)i * 977;
        qshift[i] = -7 - (int32_t)(i % 3u);
    }
    start(); t = stop(); report("@empty", t);
    start(); spin(@LOOPS@u); t = stop(); report("@spin", t);
@CASES@
    report("@done", 0);
    static const unsigned exit_block[2] = {0x20026u, 0u}; /* ADP_Stopped_ApplicationExit */
    semihost(0x18, exit_block);
    for (;;) {}
}

extern unsigned _sidata, _sdata, _edata, _sbss, _ebss, _estack;
void reset_handler(void)
{
    unsigned *s = &_sidata, *d = &_sdata;
    while (d < &_edata) *d++ = *s++;
    for (d = &_sbss; d < &_ebss;) *d++ = 0;
    *(volatile unsigned *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10/CP11 full */
    __asm volatile("dsb\n isb");
    main();
}
void default_handler(void) { for (;;) {} }
__attribute__((section(".isr_vector"), used)) void (*const vectors[16])(void) = {
    (void (*)(void))&_estack, reset_handler, default_handler, default_handler,
    default_handler, default_handler, default_handler, 0, 0, 0, 0, default_handler,
    default_handler, 0, default_handler, default_handler,
};
"""

LINKER = """
MEMORY {{ CODE (rx) : ORIGIN = {code:#x}, LENGTH = 1024K
         RAM (rwx) : ORIGIN = {data:#x}, LENGTH = 512K }}
_estack = ORIGIN(RAM) + LENGTH(RAM);
SECTIONS {{
  .isr_vector : {{ KEEP(*(.isr_vector)) }} > CODE
  .text : {{ *(.text*) *(.rodata*) . = ALIGN(4); }} > CODE
  _sidata = LOADADDR(.data);
  .data : {{ _sdata = .; *(.data*) . = ALIGN(4); _edata = .; }} > RAM AT> CODE
  .bss (NOLOAD) : {{ _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; }} > RAM
}}
"""


def build(m: Machine, work: Path) -> Path:
    """Cross-compile the harness and the int8 kernels for ``m``; the ELF."""
    cases = _q8_cases()
    calls = "\n".join(
        f'    start(); {c.call}; t = stop(); report("{i}", t); report("#{i}", digest());'
        for i, c in enumerate(cases)
    )
    src = HARNESS.replace("@CASES@", calls).replace("@LOOPS@", str(CALIBRATION_LOOPS))
    (work / "bench.c").write_text(src)
    (work / "link.ld").write_text(LINKER.format(code=m.code, data=m.data))
    elf = work / f"{m.machine}.elf"
    cmd = ["arm-none-eabi-gcc", *m.flags, "-mthumb", "-mfloat-abi=hard", "-O2", "-std=c99",
           "-Wall", "-Werror", "-ffreestanding", "-nostdlib",
           "-fno-tree-loop-distribute-patterns", f"-I{KERNELS}", "-T", str(work / "link.ld"),
           "-o", str(elf), str(work / "bench.c"), str(KERNELS / "kernels_q8.c"),
           str(KERNELS / "kernels_q8_opt.c"), str(KERNELS / "kernels.c"),
           str(KERNELS / "k_libc.c"), "-lgcc"]  # fmt: skip
    subprocess.run(cmd, check=True)
    return elf


def run(m: Machine, elf: Path, timeout_s: float = 300.0) -> dict[str, int]:
    """Run ``elf`` on ``m`` until ``@done``: ``{label: ticks}``."""
    cmd = ["qemu-system-arm", "-M", m.machine, "-icount", "shift=0", "-display", "none",
           "-monitor", "none", "-serial", "none", "-semihosting-config",
           "enable=on,target=native", "-kernel", str(elf)]  # fmt: skip
    proc = subprocess.Popen(  # semihosting writes to QEMU's stderr
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
    )
    ticks: dict[str, int] = {}
    deadline = time.monotonic() + timeout_s
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            label, _, value = line.strip().partition(" ")
            if label == "@done" or time.monotonic() > deadline:
                break
            if value.isdigit():
                ticks[label] = int(value)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return ticks


def measure() -> list[dict[str, object]]:
    """Per case and machine: instructions = (ticks - empty) / (ticks per instruction)."""
    cases = _q8_cases()
    per: dict[str, dict[str, float]] = {}
    digests: dict[str, list[int]] = {}
    for m in MACHINES:
        with tempfile.TemporaryDirectory() as tmp:
            ticks = run(m, build(m, Path(tmp)))
        if len(ticks) != 2 * len(cases) + 2:
            sys.exit(f"{m.machine}: run incomplete, got {ticks}")
        digests[m.core] = [ticks[f"#{i}"] for i in range(len(cases))]
        per_instr = (ticks["@spin"] - ticks["@empty"]) / (2 * CALIBRATION_LOOPS)
        per[m.core] = {
            str(i): (ticks[str(i)] - ticks["@empty"]) / per_instr for i in range(len(cases))
        }
        per[m.core]["@ticks_per_instruction"] = per_instr
    if digests["cortex-m33"] != digests["cortex-m4"]:
        sys.exit(f"the M33 and M4 builds computed different outputs: {digests}")
    rows: list[dict[str, object]] = []
    for i, c in enumerate(cases):
        m33, m4 = per["cortex-m33"][str(i)], per["cortex-m4"][str(i)]
        rows.append(
            {
                "case": c.name,
                "macs": c.macs,
                "m33_instructions": round(m33),
                "m4_instructions": round(m4),
                "m33_instr_per_mac": round(m33 / c.macs, 3),
                "m4_instr_per_mac": round(m4 / c.macs, 3),
                "m33_over_m4": round(m33 / m4, 4),
                "same_output_bits": True,
            }
        )
    rows.append({"calibration": {k: v["@ticks_per_instruction"] for k, v in per.items()}})
    return rows


def write(rows: list[dict[str, object]]) -> None:
    """benchmarks/results/m33_ipm.json and .md."""
    gcc = subprocess.run(["arm-none-eabi-gcc", "--version"], capture_output=True, text=True)
    qemu = subprocess.run(["qemu-system-arm", "--version"], capture_output=True, text=True)
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "gcc": gcc.stdout.splitlines()[0],
        "qemu": qemu.stdout.splitlines()[0],
        "method": "SysTick under -icount shift=0, calibrated with a 2-instruction loop",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "m33_ipm.json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# int8 kernel instructions per MAC: Cortex-M33 (mps2-an505) vs Cortex-M4 (mps2-an386)",
        "",
        f"Generated by `benchmarks/m33_ipm.py` on {meta['date']}. {meta['gcc']}; {meta['qemu']}.",
        "Instruction counts (QEMU -icount shift=0), not cycles; see the script's docstring for",
        "what QEMU models.",
        "",
        "| kernel call | MACs | M33 instr/MAC | M4 instr/MAC | M33 / M4 |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "case" in r:
            lines.append(
                f"| {r['case']} | {r['macs']} | {r['m33_instr_per_mac']} | "
                f"{r['m4_instr_per_mac']} | {r['m33_over_m4']} |"
            )
    (RESULTS / "m33_ipm.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    rows = measure()
    write(rows)
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
