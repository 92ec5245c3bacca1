"""Instructions per MAC of the float32 and int8 kernels on a Cortex-M4F (STM32F405) under QEMU.

Cross-compiles a bare-metal harness (vector table, FPU enable via CPACR, USART1 at 0x40011000
with the F4 SR/DR registers) together with ``splitter/firmware_templates/kernels``, runs it in
``qemu-system-arm -M netduinoplus2 -icount shift=0`` and reads SysTick tick counts printed per
kernel call. With ``-icount shift=0`` each instruction takes 1 ns of virtual time and SysTick runs
at the fixed 168 MHz core clock, so ``instructions = ticks / 0.168`` (see
``../shared/notes/emulated-stm32.md``); the harness subtracts the ticks of an empty
measurement. These are instruction counts, not cycles (no wait states or FPU latencies modelled).
The int8 rows are the issue-13 shapes for each variant of ``kernels_q8_opt.c`` (``_dsp`` with
the real SMLAD / SXTB16, ``_plain``) and the generic loops of ``kernels_q8.c`` they replace.

Usage: ``.venv/bin/python benchmarks/kernels.py [--no-networks]`` ->
``benchmarks/results/kernels.{md,json}`` (per kernel call) and, unless ``--no-networks``,
``benchmarks/results/kernels_networks.{md,json}``: whole-network instructions per MAC of the
four MLPerf Tiny models compiled, built and benched on one and on two emulated boards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from splitter.hardware.qemu import EMULATOR, bare_metal_linker, bare_metal_startup

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "splitter" / "firmware_templates" / "kernels"
RESULTS = ROOT / "benchmarks" / "results"
TICKS_PER_INSTRUCTION = EMULATOR.clock_hz / 1e9  # SysTick at the core clock / 1 GHz icount clock
CFLAGS = [
    "-mcpu=cortex-m4",
    "-mthumb",
    "-mfpu=fpv4-sp-d16",
    "-mfloat-abi=hard",
    "-O2",
    "-std=c99",
    "-Wall",
    "-Werror",
    "-ffreestanding",
    "-nostdlib",
    "-fno-tree-loop-distribute-patterns",
]


@dataclass(frozen=True)
class Case:
    """One kernel call: C statement, its MAC count and the op class it stands for."""

    name: str
    op_class: str
    macs: int
    call: str
    dtype: str = "float32"


def _conv(
    name: str,
    cls: str,
    c: int,
    h: int,
    w: int,
    o: int,
    k: tuple[int, int],
    s: int,
    p: int,
    g: int,
    act: str = "RELU",
) -> Case:
    """k_conv2d on a (c, h, w) input with a fused activation; MACs = O*OH*OW*(C/g)*kh*kw."""
    kh, kw = k
    oh, ow = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    macs = o * oh * ow * (c // g) * kh * kw
    params = (
        f"&(const k_window_params){{{c}, {h}, {w}, {o}, {oh}, {ow}, {kh}, {kw}, {s}, {s}, "
        f"{p}, {p}, {p}, {p}, 1, 1, {g}, 0, {{K_ACT_{act}, 0.0f, 0.0f}}}}"
    )
    call = f"k_conv2d({params}, xbuf, wbuf, wbuf, ybuf)"
    return Case(name, cls, macs, call)


CASES = [
    _conv("conv3x3 16->32 @16x16 pad1", "conv", 16, 16, 16, 32, (3, 3), 1, 1, 1),
    _conv("conv3x3 3->8 @32x32 s2 (first layer)", "conv", 3, 32, 32, 8, (3, 3), 2, 1, 1),
    _conv("conv10x4 28->30 @40x7 s1 (kws_cnn-like)", "conv", 28, 40, 7, 30, (10, 4), 1, 0, 1),
    _conv("pointwise 1x1 64->64 @16x8", "conv", 64, 16, 8, 64, (1, 1), 1, 0, 1),
    _conv("pointwise 1x1 16->32 @8x8", "conv", 16, 8, 8, 32, (1, 1), 1, 0, 1),
    _conv("depthwise3x3 64 @16x16 pad1", "depthwise", 64, 16, 16, 64, (3, 3), 1, 1, 64),
    _conv(
        "depthwise3x3 64 @16x16 pad1 relu6", "depthwise", 64, 16, 16, 64, (3, 3), 1, 1, 64, "RELU6"
    ),
    _conv(
        "depthwise3x3 64 @16x16 pad1 no act", "depthwise", 64, 16, 16, 64, (3, 3), 1, 1, 64, "NONE"
    ),
    _conv("depthwise3x3 32 @16x16 s2 pad1", "depthwise", 32, 16, 16, 32, (3, 3), 2, 1, 32),
    Case(
        "dense 1024->64",
        "dense",
        1024 * 64,
        "k_dense(&(const k_dense_params){1024, 64, {0, 0.0f, 0.0f}}, xbuf, wbuf, wbuf, ybuf)",
    ),
    Case(
        "dense 1920->16 (kws_cnn)",
        "dense",
        1920 * 16,
        "k_dense(&(const k_dense_params){1920, 16, {0, 0.0f, 0.0f}}, xbuf, wbuf, wbuf, ybuf)",
    ),
    Case(
        "plain dense loop 1024->64 (reference)",
        "reference",
        1024 * 64,
        "plain_dense(xbuf, 1024, wbuf, ybuf, 64)",
    ),
]


def _conv_nhwc(
    name: str, chw: tuple[int, int, int], o: int, k: int, s: int, p: int, g: int, nchw: bool = False
) -> Case:
    """The issue's comparison shapes: k_conv2d_nhwc (or its NCHW twin k_conv2d with the same
    record) on a (c, h, w) input, k x k kernel, fused ReLU as the rows above."""
    case = _conv(name, "depthwise" if g > 1 else "conv", *chw, o, (k, k), s, p, g)
    call = case.call if nchw else case.call.replace("k_conv2d(", "k_conv2d_nhwc(")
    return Case(name, case.op_class, case.macs, call)


def nhwc_cases() -> list[Case]:
    """Float NHWC rows (kernels_nhwc.c) for the shapes of issue 13, with the NCHW rows they are
    compared with; TFLite dense layers run the layout-free k_dense of the NCHW rows."""
    return [
        _conv_nhwc("NHWC conv3x3 16->32 @16x16 pad1", (16, 16, 16), 32, 3, 1, 1, 1),
        _conv_nhwc("NHWC pointwise 1x1 64->64 @16x8", (64, 16, 8), 64, 1, 1, 0, 1),
        _conv_nhwc("NHWC depthwise3x3 32 @16x16 pad1", (32, 16, 16), 32, 3, 1, 1, 32),
        _conv_nhwc("depthwise3x3 32 @16x16 pad1", (32, 16, 16), 32, 3, 1, 1, 32, nchw=True),
        _conv_nhwc("NHWC depthwise3x3 32 @16x16 s2 pad1", (32, 16, 16), 32, 3, 2, 1, 32),
        _conv_nhwc("NHWC conv3x3 3->8 @32x32 s2 (first layer)", (3, 32, 32), 8, 3, 2, 1, 1),
    ]


CASES += nhwc_cases()


def _q8_window(
    c: int, h: int, o: int, k: int, s: int, p: int, g: int, w: int = 0
) -> tuple[str, int]:
    """The ``k_window_params`` literal of an int8 conv on a square (or ``h x w``) NHWC input,
    no fused activation, and its MACs ``O*OH*OW*(C/g)*k*k``."""
    w = w or h
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    lit = (
        f"&(const k_window_params){{{c}, {h}, {w}, {o}, {oh}, {ow}, {k}, {k}, {s}, {s}, "
        f"{p}, {p}, {p}, {p}, 1, 1, {g}, 0, {{K_ACT_NONE, 0.0f, 0.0f}}}}"
    )
    return lit, o * oh * ow * (c // g) * k * k


#: int8 requantisation record of the benchmarks: in_zp -3, out_zp 5, ReLU clamp, per channel.
_Q8 = "&(const k_q_params){{-3, 5, 5, 127, {n}, {up}, qmult, qshift}}"


def _q8_cases() -> list[Case]:
    """The issue-13 shapes in int8: the tuned kernels (``_dsp``, ``_plain``) and the generic
    reference loops (``k_q_conv2d``, ``k_q_dense``) they replace."""
    cases = []
    shapes = [
        ("conv3x3 16->32 @16x16 pad1", "conv", (16, 16, 32, 3, 1, 1, 1), "conv"),
        ("pointwise 1x1 64->64 @16x8", "conv", (64, 16, 64, 1, 1, 0, 1, 8), "pointwise"),
        ("depthwise3x3 32 @16x16 pad1", "depthwise", (32, 16, 32, 3, 1, 1, 32), "depthwise"),
    ]
    for name, cls, shape, fam in shapes:
        lit, macs = _q8_window(*shape)
        q = _Q8.format(n=shape[2], up=0 if fam == "depthwise" else 1)
        for isa in ("dsp", "plain"):
            call = f"k_q_{fam}_{isa}({lit}, {q}, qx, qw, qb, qscratch, qy)"
            cases.append(Case(f"int8 {name} ({fam}_{isa})", cls, macs, call, "int8"))
        call = f"k_q_conv2d({lit}, {q}, qx, qw, qb, qy)"
        cases.append(Case(f"int8 {name} (generic k_q_conv2d)", cls, macs, call, "int8"))
    dense = "&(const k_dense_params){1024, 64, {0, 0.0f, 0.0f}}"
    q = _Q8.format(n=64, up=1)
    for fn in ("k_q_dense_dsp", "k_q_dense_plain", "k_q_dense"):
        label = f"int8 dense 1024->64 ({fn[4:] if fn != 'k_q_dense' else 'generic k_q_dense'})"
        cases.append(Case(label, "dense", 1024 * 64, f"{fn}({dense}, {q}, qx, qw, qb, qy)", "int8"))
    return cases


CASES += _q8_cases()

HARNESS = r"""
#include "kernels.h"
#include "kernels_nhwc.h"
#include "kernels_q8.h"
#include "kernels_q8_opt.h"
#define USART1_SR (*(volatile unsigned *)0x40011000u)
#define USART1_DR (*(volatile unsigned *)0x40011004u)
#define SYST_CSR (*(volatile unsigned *)0xE000E010u)
#define SYST_RVR (*(volatile unsigned *)0xE000E014u)
#define SYST_CVR (*(volatile unsigned *)0xE000E018u)

float xbuf[12288] __attribute__((aligned(8)));
float ybuf[12288] __attribute__((aligned(8)));
const float wbuf[65536] = {0.5f};
/* int8 operands: activations in the float buffers, weights and biases from wbuf's bytes. */
#define qx ((const int8_t *)xbuf)
#define qy ((int8_t *)ybuf)
#define qw ((const int8_t *)wbuf)
#define qb ((const int32_t *)wbuf)
int32_t qmult[64], qshift[64];
int8_t qscratch[4096] __attribute__((aligned(4)));

static void putc_(char c) { while (!(USART1_SR & 0x80u)) {} USART1_DR = (unsigned)c; }
static void puts_(const char *s) { while (*s) putc_(*s++); }
static void putu(unsigned v)
{
    char b[12]; int n = 0;
    do { b[n++] = (char)('0' + v % 10u); v /= 10u; } while (v);
    while (n) putc_(b[--n]);
}
static unsigned t0;
/* Restart SysTick (24-bit down-counter, processor clock, no interrupt); wait for the reload. */
static void start(void)
{
    SYST_CSR = 0; SYST_RVR = 0xFFFFFFu; SYST_CVR = 0; SYST_CSR = 5u;
    while (SYST_CVR == 0u) {}
    t0 = SYST_CVR;
}
static unsigned stop(void) { unsigned t = SYST_CVR; SYST_CSR = 0; return t0 - t; }

__attribute__((noinline)) void plain_dense(const float *x, int in, const float *w, float *y,
                                           int out)
{
    int o, i;
    for (o = 0; o < out; o++) {
        float a = 0.0f;
        for (i = 0; i < in; i++) a += w[o * in + i] * x[i];
        y[o] = a;
    }
}

static void report(const char *name, unsigned t)
{
    puts_(name); putc_(' '); putu(t); puts_("\r\n");
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
@CASES@
    puts_("@done\r\n");
    for (;;) {}
}

""" + bare_metal_startup("main")

LINKER = bare_metal_linker()


def build(work: Path) -> Path:
    """Write and cross-compile the harness; returns the ELF."""
    calls = "\n".join(
        f'    start(); {c.call}; t = stop(); report("{i}", t);' for i, c in enumerate(CASES)
    )
    (work / "bench.c").write_text(HARNESS.replace("@CASES@", calls))
    (work / "link.ld").write_text(LINKER)
    elf = work / "bench.elf"
    srcs = [str(work / "bench.c"), str(KERNELS / "kernels.c"), str(KERNELS / "k_libc.c")]
    srcs.append(str(KERNELS / "kernels_nhwc.c"))
    srcs += [str(KERNELS / "kernels_q8.c"), str(KERNELS / "kernels_q8_opt.c")]
    cmd = [
        "arm-none-eabi-gcc",
        *CFLAGS,
        f"-I{KERNELS}",
        "-T",
        str(work / "link.ld"),
        "-o",
        str(elf),
        *srcs,
        "-lgcc",
    ]
    subprocess.run(cmd, check=True)
    return elf


def run(elf: Path, timeout_s: float = 120.0) -> dict[str, int]:
    """Run the ELF in QEMU until ``@done``; returns ``{label: ticks}``."""
    cmd = [
        "qemu-system-arm",
        "-M",
        EMULATOR.machine,
        "-icount",
        "shift=0",
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-kernel",
        str(elf),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
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
    """Instructions per MAC of every case: ``(ticks - empty) / 0.168 / macs``."""
    with tempfile.TemporaryDirectory() as tmp:
        ticks = run(build(Path(tmp)))
    if "@empty" not in ticks or len(ticks) != len(CASES) + 1:
        sys.exit(f"benchmark run incomplete: got {ticks}")
    rows = []
    for i, case in enumerate(CASES):
        instr = (ticks[str(i)] - ticks["@empty"]) / TICKS_PER_INSTRUCTION
        rows.append(
            {
                **asdict(case),
                "ticks": ticks[str(i)],
                "instructions": round(instr),
                "instr_per_mac": round(instr / case.macs, 3),
            }
        )
    return rows


def load_note() -> str:
    """The host's load while measuring, for the record: -icount counts instructions, so the
    numbers do not depend on it (only the wall time does)."""
    one, _five, _fifteen = os.getloadavg()
    return (
        f"Host load average {one:.1f} on {os.cpu_count()} CPUs at the end of the run (shared "
        "machine); instruction counts under -icount do not depend on it."
    )


def write(rows: list[dict[str, object]]) -> None:
    """benchmarks/results/kernels.json and kernels.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    gcc = subprocess.run(["arm-none-eabi-gcc", "--version"], capture_output=True, text=True)
    qemu = subprocess.run(["qemu-system-arm", "--version"], capture_output=True, text=True)
    meta = {
        "gcc": gcc.stdout.splitlines()[0],
        "qemu": qemu.stdout.splitlines()[0],
        "cflags": " ".join(CFLAGS),
        "machine": f"{EMULATOR.machine} ({EMULATOR.chip}, Cortex-M4F)",
        "method": "SysTick ticks under -icount shift=0, instructions = ticks / 0.168",
    }
    (RESULTS / "kernels.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = [
        "# Kernel instructions per MAC (Cortex-M4F, QEMU -icount shift=0)",
        "",
        f"Generated by `benchmarks/kernels.py` on {time.strftime('%Y-%m-%d')}. {meta['gcc']};",
        f"{meta['qemu']}. {load_note()}",
        f"Flags: `{meta['cflags']}`. Instruction counts (not cycles): ticks / 0.168, empty",
        "measurement subtracted; float convolutions include their fused activation pass",
        "(ReLU unless the name says otherwise). int8 rows: per-channel requantisation, ReLU",
        "clamp, input zero point -3; `_dsp` / `_plain` are the two variants of",
        "kernels_q8_opt.c (the generator picks `_dsp` on M4/M7/M33, `_plain` on M0+; both",
        "measured here on the M4F), `generic` the reference loops of kernels_q8.c.",
        "",
    ]
    for dtype in ("float32", "int8"):
        lines += [
            f"## {dtype}",
            "",
            "| kernel | class | MACs | instructions | instr/MAC |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {r['name']} | {r['op_class']} | {r['macs']} | {r['instructions']} | "
            f"{r['instr_per_mac']:.2f} |"
            for r in rows
            if r["dtype"] == dtype
        ]
        lines.append("")
    (RESULTS / "kernels.md").write_text("\n".join(lines))


# --- whole networks: the MLPerf Tiny models on emulated boards ------------------------------

#: model -> its 2-board file (models/boards/): flash limits force the split
NETWORKS = {
    "mlperf_kws_ds_cnn_int8.tflite": "mlperf_kws2.toml",
    "mlperf_vww_mobilenet_v1_025_int8.tflite": "mlperf_vww2.toml",
    "mlperf_ic_resnet8_int8.tflite": "mlperf_ic2.toml",
    "mlperf_ad_autoencoder_int8.tflite": "mlperf_ad2.toml",
}
ONE_BOARD = """[link]
baud = 115200

[[device]]
name = "a"
mcu = "STM32F405RG"
"""


def _splitter(*args: str) -> str:
    """Run ``python -m splitter ARGS`` from the repository root; its stdout (exit 0 required)."""
    cmd = [sys.executable, "-m", "splitter", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:2])}: {proc.stderr.strip()}")
    return proc.stdout


def network_row(model: str, boards: Path, work: Path) -> dict[str, object]:
    """Compile, build and bench (QEMU, -icount) ``models/<model>`` on ``boards``: instructions
    per MAC of the whole network = sum over sub-models of (cycles / 0.168) / the plan's MACs
    (the firmware's cycle counter is SysTick at 168 MHz under -icount shift=0, as above)."""
    out = work / "out"
    _splitter("compile", str(ROOT / "models" / model), "--target", str(boards), "-o", str(out),
              "--force")  # fmt: skip
    _splitter("build", str(out), "--emulator")
    bench = json.loads(_splitter("bench", str(out), "--emulate", "-n", "1", "--json",
                                 "--no-pipeline", "--timeout", "300"))  # fmt: skip
    plan = json.loads((out / "plan.json").read_text())
    macs = sum(int(s["macs"]) for s in plan["submodels"])
    cycles = [int(sub["cycles"][0]) for d in bench["devices"] for sub in d["submodels"]]
    per_board = [sum(int(sub["cycles"][0]) for sub in d["submodels"]) for d in bench["devices"]]
    instr = sum(cycles) / TICKS_PER_INSTRUCTION
    return {
        "model": model,
        "boards": len(plan["submodels"]),
        "macs": macs,
        "instructions": round(instr),
        "instr_per_mac": round(instr / macs, 3),
        "cycles_per_submodel": cycles,
        "busiest_board_share": round(max(per_board) / sum(per_board), 3),
    }


def measure_networks() -> list[dict[str, object]]:
    """Every MLPerf Tiny model on one emulated F405 and split over two (its board file)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one.toml"
        one.write_text(ONE_BOARD)
        for i, (model, split) in enumerate(NETWORKS.items()):
            for j, boards in enumerate((one, ROOT / "models" / "boards" / split)):
                work = Path(tmp) / f"{i}-{j}"
                work.mkdir()
                rows.append(network_row(model, boards, work))
                print(f"{model} on {rows[-1]['boards']} board(s): {rows[-1]['instr_per_mac']}")
    return rows


def write_networks(rows: list[dict[str, object]]) -> None:
    """benchmarks/results/kernels_networks.json and kernels_networks.md."""
    (RESULTS / "kernels_networks.json").write_text(json.dumps({"rows": rows}, indent=2))
    lines = [
        "# MLPerf Tiny networks: instructions per MAC on emulated Cortex-M4F boards",
        "",
        f"Generated by `benchmarks/kernels.py` on {time.strftime('%Y-%m-%d')}: each int8 model of",
        "`models/mlperf_*.tflite` compiled, built and benched (`splitter bench --emulate -n 1`,",
        "QEMU netduinoplus2 with -icount shift=0) on one STM32F405 and split over two",
        "(`models/boards/mlperf_*2.toml`). Instructions = firmware SysTick cycles / 0.168, summed",
        "over the sub-models (the kernels and the runtime's per-layer work, not the links);",
        "MACs as the planner counts them. A split runs the same kernels, so the network's",
        "instructions per MAC do not change; the busiest board's share of them bounds the",
        "pipelined throughput gain (eq. 17).",
        load_note(),
        "",
        "| model | boards | MACs | instructions | instr/MAC | busiest board's share |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['model']} | {r['boards']} | {r['macs']} | {r['instructions']} | "
        f"{r['instr_per_mac']:.2f} | {r['busiest_board_share']:.0%} |"
        for r in rows
    ]
    (RESULTS / "kernels_networks.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    """Build, run, write the results and print the table."""
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm"):
        if shutil.which(tool) is None:
            sys.exit(
                f"{tool} missing: apt-get install -y --no-install-recommends "
                "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
            )
    rows = measure()
    write(rows)
    print((RESULTS / "kernels.md").read_text())
    if "--no-networks" not in sys.argv[1:]:
        write_networks(measure_networks())
        print((RESULTS / "kernels_networks.md").read_text())


if __name__ == "__main__":
    main()
