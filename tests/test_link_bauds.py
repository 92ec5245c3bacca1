"""Each link at its own rate (issue 38, part 3): ``[link] host_baud`` / ``board_baud`` /
``[[link.pair]]``.

The boards file's syntax and its refusals (one line naming the file, the link, the limit and a
rate that works; exit 2), the plan costing the host's transfers at the host rate and
board-to-board transfers at the board rate (and refusing board-to-board rates it cannot cost
exactly), plan.json recording every link's rate, the firmware's BRR per link with WIRING.md
and wiring.json listing it, and, marked slow, models/boards/tiny2_fast_links.toml compiled,
built with arm-none-eabi-gcc and run on QEMU (harness and standalone).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_plan_cli import run_cli

from splitter.cost.wire import LinkModel, wire
from splitter.errors import BoardFileError
from splitter.hardware.boards import load_boards
from splitter.hardware.links.uart import baud_valid, max_baud
from splitter.ir import Boards, LayerCost, LinkSpec, PairBaud
from splitter.manifest import read_manifest
from splitter.partition.problem import evaluate, make_problem

ROOT = Path(__file__).resolve().parents[1]
FAST = ROOT / "models" / "boards" / "tiny2_fast_links.toml"
TINY = ROOT / "models" / "tiny_cnn.onnx"
PROFILE = ROOT / "models" / "profiles" / "thesis_profiles.json#kws_cnn"


def _file(tmp_path: Path, link: str, devices: str = "", n: int = 2) -> Path:
    """A boards file: ``[link]`` body ``link``, then ``devices`` or ``n`` plain F405s a, b, c."""
    names = "abcd"[:n]
    body = devices or "".join(f'\n[[device]]\nname = "{x}"\nmcu = "STM32F405RG"\n' for x in names)
    path = tmp_path / "boards.toml"
    path.write_text(f"[link]\n{link}\n{body}")
    return path


def _refused(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> str:
    """``splitter plan`` on ``path``: exit 2, nothing on stdout, one line on stderr."""
    code, out, err = run_cli(capsys, "plan", str(PROFILE), "--target", str(path), *extra)
    assert (code, out) == (2, ""), (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(path) in err
    return err


# ------------------------------------------------------------------ syntax -------------------
def test_the_example_file_gives_each_link_its_rate() -> None:
    link = load_boards(FAST).link
    assert (link.baud, link.host_rate, link.board_rate) == (115200, 115200, 4_000_000)
    assert link.pair_rate("a", "b") == link.pair_rate("b", "a") == 4_000_000
    assert link.host == LinkSpec(115200) and link.between("b", "a") == LinkSpec(4_000_000)


def test_old_files_keep_one_rate_everywhere(tmp_path: Path) -> None:
    link = load_boards(_file(tmp_path, "baud = 921600")).link
    assert link.host_rate == link.board_rate == link.pair_rate("a", "b") == 921600
    assert (link.host_baud, link.board_baud, link.pairs) == (0, 0, ())


def test_pairs_override_board_baud_in_either_order(tmp_path: Path) -> None:
    text = (
        'board_baud = 2000000\n\n[[link.pair]]\ndevices = ["c", "a"]\nbaud = 3000000\n\n'
        '[[link.pair]]\ndevices = ["b", "c"]\nbaud = 1000000'
    )
    link = load_boards(_file(tmp_path, text, n=3)).link
    assert link.pairs == (PairBaud(("c", "a"), 3_000_000), PairBaud(("b", "c"), 1_000_000))
    assert link.pair_rate("a", "c") == 3_000_000 and link.pair_rate("c", "b") == 1_000_000
    assert link.pair_rate("a", "b") == 2_000_000 and link.host_rate == 115200


# ------------------------------------------------------------------ refusals -----------------
def test_board_baud_above_the_usart_limit_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F405 USART2 (the board-to-board link of a device without a board) on the 42 MHz APB1:
    at most 42 MHz / 8 = 5.25 Mbaud (8x oversampling, USARTDIV >= 16)."""
    assert max_baud("USART2", 42_000_000) == 5_250_000
    assert baud_valid("USART2", 42_000_000, 5_250_000) is not None
    assert baud_valid("USART2", 42_000_000, 12_000_000) is None
    err = _refused(capsys, _file(tmp_path, "host_baud = 115200\nboard_baud = 12000000"))
    assert "device 'a' board-to-board links (USART2)" in err
    assert "12000000 baud from its 42 MHz clock" in err and "its limit is 5250000 baud" in err
    assert "set [link] board_baud = 4000000" in err
    # the value it names works
    fixed = _file(tmp_path, "host_baud = 115200\nboard_baud = 4000000")
    code, _, _ = run_cli(capsys, "plan", str(PROFILE), "--target", str(fixed))
    assert code == 0


def test_pair_baud_above_the_usart_limit_is_refused_naming_the_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = 'board_baud = 4000000\n\n[[link.pair]]\ndevices = ["a", "b"]\nbaud = 6000000'
    err = _refused(capsys, _file(tmp_path, text))
    assert "device 'a' link to 'b' (USART2)" in err and "its limit is 5250000 baud" in err
    assert 'set baud of [[link.pair]] devices = ["a", "b"] = 4000000' in err


def test_host_baud_is_checked_against_the_host_usart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The host link is USART1 on the 84 MHz APB2: 10.5 Mbaud at most."""
    err = _refused(capsys, _file(tmp_path, "host_baud = 12000000\nboard_baud = 4000000"))
    assert "device 'a' host link (USART1)" in err and "its limit is 10500000 baud" in err
    assert "set [link] host_baud = 10000000" in err


def _nucleo(link: str) -> str:
    return link + "".join(
        f'\n[[device]]\nname = "{x}"\nboard = "nucleo-f446re"\n' for x in ("a", "b")
    )


def test_only_the_host_link_is_held_to_the_st_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NUCLEO-F446RE: ST-LINK/V2-1 (2 Mbaud on its virtual COM port). Board-to-board links are
    wired USART to USART: 4 Mbaud is fine there, not on the host link."""
    path = tmp_path / "boards.toml"
    path.write_text(_nucleo("[link]\nhost_baud = 4000000\nboard_baud = 115200\n"))
    err = _refused(capsys, path)
    assert "ST-LINK/V2-1 virtual COM port, which carries at most 2000000 baud" in err
    assert "set [link] host_baud <= 2000000" in err
    path.write_text(_nucleo("[link]\nhost_baud = 115200\nboard_baud = 4000000\n"))
    assert load_boards(path).link.board_rate == 4_000_000


@pytest.mark.parametrize(
    ("pair", "words"),
    [
        ('devices = ["a", "z"]\nbaud = 1000000', ["names device 'z'", "use two of a, b"]),
        ('devices = ["a", "a"]\nbaud = 1000000', ["pairs device 'a' with itself"]),
        ('devices = ["a"]\nbaud = 1000000', ["devices = ['a']", "name two devices"]),
        ('devices = ["a", "b"]', ["lacks baud", "add baud = 4000000"]),
        ('devices = ["a", "b"]\nbaud = 0', ["baud = 0", "must be an integer in 1.."]),
        ('devices = ["a", "b"]\nbaud = "fast"', ["baud = 'fast'", "integer"]),
        ('devices = ["a", "b"]\nbaud = 1000000\nrate = 3', ["unknown key(s) 'rate'"]),
    ],
)
def test_a_link_that_cannot_exist_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pair: str, words: list[str]
) -> None:
    err = _refused(capsys, _file(tmp_path, f"baud = 115200\n\n[[link.pair]]\n{pair}"))
    assert "[[link.pair]] #1" in err
    for w in words:
        assert w in err, err


def test_a_pair_given_twice_and_bad_rates_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twice = "".join(
        f'\n[[link.pair]]\ndevices = ["{a}", "{b}"]\nbaud = 1000000\n'
        for a, b in (("a", "b"), ("b", "a"))
    )
    err = _refused(capsys, _file(tmp_path, "baud = 115200\n" + twice))
    assert "[[link.pair]] #2 gives the link b-a a second baud" in err
    for bad in ("host_baud = -1", "board_baud = 1.5", "board_baud = true"):
        err = _refused(capsys, _file(tmp_path, bad))
        assert bad.split(" = ")[0] in err and "must be an integer in 1.." in err


def test_differing_board_to_board_rates_are_refused_at_plan_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The solvers cost ``OUT_j`` once per layer: two board-to-board rates would make it depend
    on the sender and the receiver (docs/guide/boards.md, "Link rates")."""
    text = 'board_baud = 4000000\n\n[[link.pair]]\ndevices = ["b", "c"]\nbaud = 2000000'
    err = _refused(capsys, _file(tmp_path, text, n=3))
    assert "link a-b runs at 4000000 baud but b-c at 2000000" in err
    assert "give every pair of devices the same baud" in err
    # the same rate in every pair is one rate: planned
    same = "".join(
        f'\n[[link.pair]]\ndevices = ["{a}", "{b}"]\nbaud = 2000000\n'
        for a, b in (("a", "b"), ("b", "c"), ("a", "c"))
    )
    code, _, err = run_cli(
        capsys, "plan", str(PROFILE), "--target", str(_file(tmp_path, same, n=3))
    )
    assert code == 0, err


# ------------------------------------------------------------------ the plan -----------------
def _costs() -> list[LayerCost]:
    """Three layers whose outputs are 3000, 2000 and 40 B."""
    return [LayerCost(macs=10**6, flash=1000, ram=1000, out_bytes=b) for b in (3000, 2000, 40)]


def test_the_plan_costs_host_and_board_links_at_their_rates() -> None:
    boards = load_boards(FAST)
    model = LinkModel(wire=True, host_io=True, input_bytes=3136, output_bytes=40)
    p = make_problem(_costs(), boards, link_model=model)
    ev = evaluate(p, (0, 0, 1))
    fast, slow = LinkSpec(4_000_000), LinkSpec(115200)
    assert ev.host_in_s == pytest.approx(wire(3136, 0).seconds(slow), rel=1e-12)
    assert ev.host_out_s == pytest.approx(wire(40, 2).seconds(slow), rel=1e-12)
    # sub-model 0's output (layer 1, 2000 B) with one TIMING record, at 4 Mbaud
    assert ev.sub_transfer[0] == pytest.approx(wire(2000, 1).seconds(fast), rel=1e-12)
    assert p.comm_list[1] == pytest.approx(wire(2000, 0).seconds(fast), rel=1e-12)
    # the same plan with one 115200-baud rate: host I/O the same, the hop 4e6 / 115200 slower
    uni = make_problem(_costs(), load_boards_text(FAST, "baud = 115200"), link_model=model)
    ev1 = evaluate(uni, (0, 0, 1))
    assert ev1.host_in_s == ev.host_in_s and ev1.host_out_s == ev.host_out_s
    assert ev1.sub_transfer[0] / ev.sub_transfer[0] == pytest.approx(4e6 / 115200, rel=1e-12)


def test_the_return_link_runs_at_the_board_rate() -> None:
    """``--result-on head``: the tail's result goes back to the head over a board-to-board
    link, with one TIMING record per sub-model and the inference tag."""
    model = LinkModel(wire=True, host_io=True, input_bytes=3136, output_bytes=40, return_bytes=40)
    ev = evaluate(make_problem(_costs(), load_boards(FAST), link_model=model), (0, 0, 1))
    assert ev.return_s == pytest.approx(wire(40, 3).seconds(LinkSpec(4_000_000)), rel=1e-12)


def load_boards_text(path: Path, link: str) -> Boards:
    """``path``'s devices with another ``[link]`` body."""
    from splitter.hardware.boards import boards_from_dict
    from splitter.inputs import parse_toml

    data = parse_toml(path.read_text(), str(path), error=BoardFileError)
    data["link"] = parse_toml(link, str(path), error=BoardFileError)
    return boards_from_dict(data, str(path))


def test_plan_json_records_every_link_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "plan", str(TINY), "--target", str(FAST), "--json")
    assert code == 0, err
    link = json.loads(out)["link"]
    assert link["baud"] == 115200 and link["board_baud"] == 4_000_000
    assert "host_baud" not in link  # the same as baud
    assert [(x["a"], x["b"], x["baud"], x["carries"]) for x in link["links"]] == [
        ("host", "a", 115200, "input"),
        ("a", "b", 4_000_000, "sub-model 0"),
        ("b", "host", 115200, "output"),
    ]
    (tmp_path / "plan.json").write_text(out)
    m = read_manifest(tmp_path)
    assert (m.host_rate, m.board_rate) == (115200, 4_000_000)
    assert (m.link_spec.host_rate, m.link_spec.board_rate) == (115200, 4_000_000)
    assert "a to b 4000000" in m.rates_text()
    code, text, _ = run_cli(capsys, "plan", str(TINY), "--target", str(FAST))
    assert "links: host link 115200 baud, board-to-board 4000000 baud" in text.replace("\n", " ")
    # one rate everywhere: nothing new in plan.json (earlier plans keep their hash)
    code, out, _ = run_cli(
        capsys, "plan", str(TINY), "--target", str(ROOT / "models/boards/e2e_tiny2.toml"), "--json"
    )
    assert set(json.loads(out)["link"]) == {"baud", "bits_per_byte", "model", "retransmit"}


# ------------------------------------------------------------------ firmware -----------------
def test_firmware_divides_each_usart_for_its_own_link(tmp_path: Path) -> None:
    """Head ``a`` and tail ``b``: each board's host link (USART1, 84 MHz) at 115200 (BRR 729),
    their link (USART2, 42 MHz) at 4 Mbaud: USARTDIV 21 with OVER8, BRR 0x12 (RM0090 30.3.4)."""
    from test_firmware_render import standin_model

    from splitter.codegen import firmware as F
    from splitter.hardware.catalog import get_part

    f405 = get_part("STM32F405RG")
    subs = {"a": [(0, 0, 64, 64, 64)], "b": [(1, 0, 64, 64, 64)]}
    devs = [
        F.DeviceSpec(n, i, f405, standin_model(subs[n]), 8, 128, subs[n])
        for i, n in enumerate(("a", "b"))
    ]
    link = load_boards(FAST).link
    ctx = F.build_plan_context(devs, [0, 1], "0123456789abcdef", link=link)
    assert ctx.baud == 115200
    by = {(d.name, ln.peer): ln for d in ctx.devices for ln in d.links}
    assert (by["a", "host"].baud, by["a", "host"].brr, by["a", "host"].over8) == (115200, 729, 0)
    for end in (("a", "b"), ("b", "a")):
        assert (by[end].baud, by[end].brr, by[end].over8, by[end].baud_error) == (
            4_000_000, 0x12, True, 0.0,
        )  # fmt: skip
    part = {d.name: d.targets[0] for d in ctx.devices}
    emu = {d.name: d.targets[1] for d in ctx.devices}
    assert [(u.name, u.brr, u.cr1) for u in part["a"].usarts] == [
        ("USART1", 729, 0),
        ("USART2", 0x12, 1 << 15),
    ]
    # the emulator's divisors from its own clock, each at its link's rate
    assert emu["a"].usarts[0].brr == round(emu["a"].core_clock_hz / 115200)
    assert emu["a"].usarts[1].brr == round(emu["a"].core_clock_hz / 4_000_000)
    fw = F.render_firmware(tmp_path, ctx)
    rows = [ln for ln in (fw / "WIRING.md").read_text().splitlines() if ln.startswith("| ")]
    assert (
        "| a | USART2 (PA2/PA3) | b | USART2 (PA2/PA3) | 4000000 | BRR 18 (OVER8), +0.00 % "
        "| BRR 18 (OVER8), +0.00 % | input of sub-model 1 |" in rows
    )
    assert any(r.startswith("| host |") and "| a | USART1" in r and "| 115200 |" in r for r in rows)
    wiring = json.loads((fw / "wiring.json").read_text())
    assert wiring["baud"] == 115200
    links = {(d["name"], ln["peer"]): ln for d in wiring["devices"] for ln in d["links"]}
    assert links["b", "a"]["baud"] == 4_000_000 and links["b", "a"]["over8"] is True
    assert links["b", "host"]["baud"] == 115200 and links["b", "host"]["brr"] == 729
    assert {w["baud"] for w in wiring["wires"]} == {115200, 4_000_000}


# ------------------------------------------------------------------ end to end ---------------
@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_fast_links_compile_build_and_run_emulated(tmp_path: Path) -> None:
    """models/boards/tiny2_fast_links.toml: the harness (``splitter run --emulate``, result
    within 1e-4 of onnxruntime) and the standalone chain (3 results on the tail's console,
    each within 1e-4 of onnxruntime on its sample). QEMU's USARTs do not pace bytes at the
    baud, so this shows the wiring and the divisors in the built images, not the speed."""
    import onnxruntime as ort
    from test_e2e_support import TOL, cli, qemu_pids

    from splitter.device.console import Console
    from splitter.toolchain import emulator as E

    rng = np.random.default_rng(38)
    x = rng.standard_normal((2, 1, 1, 28, 28)).astype(np.float32)
    sess = ort.InferenceSession(str(TINY))
    refs = [sess.run(None, {"input": s})[0] for s in x]
    np.save(tmp_path / "x0.npy", x[0])
    np.save(tmp_path / "xs.npy", x)
    harness, alone = tmp_path / "harness", tmp_path / "alone"
    steps = [
        ("compile", str(TINY), "--target", str(FAST), "-o", str(harness), "--no-validate"),
        ("compile", str(TINY), "--target", str(FAST), "-o", str(alone), "--no-validate",
         "--app", "standalone", "--input", str(tmp_path / "xs.npy")),
        ("build", str(harness)),
        ("build", str(alone)),
        ("run", str(harness), "--input", str(tmp_path / "x0.npy"), "--emulate",
         "--output", str(tmp_path / "y.npy")),
    ]  # fmt: skip
    for args in steps:
        proc = cli(*args, timeout=900)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - refs[0]))) <= TOL
    for out in (harness, alone):
        text = (out / "firmware" / "WIRING.md").read_text()
        assert "| 4000000 | BRR 18 (OVER8), +0.00 % | BRR 18 (OVER8), +0.00 % |" in text
    with E.Emulation(alone, icount=True) as emu, Console(emu.endpoints) as con:
        results = con.wait_results("b", 3, timeout=120)
    assert qemu_pids(str(alone)) == []
    assert [r.inference for r in results[:3]] == [0, 1, 2]
    for r in results[:3]:
        ref = refs[r.inference % 2]
        got = np.frombuffer(r.outputs[0], "<f4").reshape(ref.shape)
        assert float(np.max(np.abs(got - ref))) <= TOL and r.cls == int(np.argmax(ref))


def test_firmware_refuses_a_rate_naming_its_key() -> None:
    """Inline parts are checked when firmware is generated: the refusal names the key to set."""
    from test_firmware_render import standin_model

    from splitter.codegen import firmware as F
    from splitter.hardware.catalog import get_part

    subs = [(0, 0, 64, 64, 64)]
    dev = F.DeviceSpec("a", 0, get_part("STM32F405RG"), standin_model(subs), 8, 128, subs)
    with pytest.raises(BoardFileError) as info:
        F.build_plan_context([dev], [0], "0123456789abcdef", link=LinkSpec(host_baud=12_000_000))
    assert "device a link 0 (USART1)" in str(info.value)
    assert "its limit is 10500000 baud" in str(info.value)
    assert str(info.value).endswith("set [link] host_baud = 10000000")
