"""Every "does not fit" message names a remedy of splitter's own that, applied, plans (issue 29).

Ten infeasible cases (flash, RAM, a block no board holds, a flash budget, a part too small, a
model on one board, layer profiles): each plan fails with one error naming the fix; the test
applies exactly that fix (an option, a boards-file change) and the plan then succeeds. Layers
are named with the numbers ``splitter inspect`` shows; no SPEC.md equation numbers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import splitter
from splitter.compile import CompileOptions
from splitter.errors import InfeasibleError

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


def _device(name: str, mcu: str, **budgets: str) -> str:
    extra = "".join(f'{k} = "{v}"\n' for k, v in budgets.items())
    return f'\n[[device]]\nname = "{name}"\nmcu = "{mcu}"\n{extra}'


@dataclass(frozen=True)
class Case:
    """A model on a boards file that does not plan; the remedy the message must name and how
    to apply it: options to add, or (old, new) replacements in the boards file."""

    model: str
    boards: str  # boards-file text, or a file under models/boards
    names: str  # the remedy text the message must contain
    options: dict[str, str] = field(default_factory=dict)
    edit: tuple[str, str] | None = None


PROFILE = "profiles/thesis_profiles.json#kws_cnn"
CASES = {
    "block-no-board-holds": Case(
        "long_skip.onnx", "long_skip4.toml", "--granularity auto", {"granularity": "auto"}
    ),
    "ram-pex": Case(
        "yamnet_256.onnx",
        "[link]\nbaud = 115200\n" + _device("h7", "STM32H743ZI"),
        "--partial-execution auto",
        {"partial_execution": "off"},
    ),
    "residual-block": Case(
        "resnet8.onnx",
        "[link]\nbaud = 115200\n"
        + _device("a", "STM32H743ZI", flash="200 KiB")
        + _device("b", "STM32H743ZI", flash="200 KiB"),
        "--granularity auto",
        {"granularity": "auto"},
    ),
    "flash-budget": Case(
        "tiny_cnn.onnx",
        "[link]\nbaud = 115200\n" + _device("a", "STM32F405RG", flash="60 KiB"),
        'flash = "100%"',
        edit=('flash = "60 KiB"', 'flash = "100%"'),
    ),
    "two-budgets": Case(
        "mobilenet_v1_025_64.onnx",
        "[link]\nbaud = 115200\n"
        + _device("a", "STM32F405RG", flash="700 KiB")
        + _device("b", "STM32F405RG", flash="700 KiB"),
        'flash = "100%"',
        edit=('flash = "700 KiB"', 'flash = "100%"'),
    ),
    "model-flash-one-board": Case(
        "mobilenet_v1_025.onnx",
        "[link]\nbaud = 115200\n" + _device("a", "STM32F405RG"),
        'mcu = "STM32F767ZI" for device a',  # 2 MiB of flash, less RAM than an H743's
        edit=('mcu = "STM32F405RG"', 'mcu = "STM32F767ZI"'),
    ),
    "model-ram-part": Case(
        "mobilenet_v1_025.onnx",
        "[link]\nbaud = 115200\n" + _device("a", "STM32F446RE") + _device("b", "STM32F401RE"),
        'mcu = "',
        edit=None,  # applied from the message (the part it names)
    ),
    "profile-flash-budget": Case(
        PROFILE,
        "[link]\nbaud = 115200\n" + _device("a", "STM32F401RE", flash="200 KiB"),
        'flash = "100%"',
        edit=('flash = "200 KiB"', 'flash = "100%"'),
    ),
    "profile-part": Case(
        PROFILE,
        "[link]\nbaud = 115200\n" + _device("a", "STM32G071RB"),
        'mcu = "',
        edit=None,
    ),
    "pex-blocks": Case(
        "pex_irb_48.onnx", "e2e_pex.toml", "--partial-execution auto", {"partial_execution": "off"}
    ),
}


def _boards_file(tmp_path: Path, case: Case, text: str | None = None) -> Path:
    if text is None:
        given = MODELS / "boards" / case.boards
        text = given.read_text() if given.suffix == ".toml" and given.is_file() else case.boards
    path = tmp_path / "boards.toml"
    path.write_text(text)
    return path


def _named_part(message: str) -> str:
    return message.split('mcu = "', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize("name", list(CASES))
def test_message_names_a_remedy_that_plans(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    model = MODELS / case.model if "#" not in case.model else f"{MODELS}/{case.model}"
    boards = _boards_file(tmp_path, case)
    apply_opts = dict(case.options)
    # the failing run: the options the remedy changes are at the values that fail
    failing = {k: v for k, v in apply_opts.items() if k == "partial_execution"}
    # layer splits off: they would plan the block cases by themselves (issue 27), and the
    # remedies named here are the others
    failing["split"] = "off"
    with pytest.raises(InfeasibleError) as info:
        splitter.plan(model, boards, CompileOptions(**failing))  # type: ignore[arg-type]
    message = str(info.value)
    assert case.names in message, message
    assert "constraint (" not in message and "eq." not in message, message
    # apply the remedy
    text = boards.read_text()
    if case.edit is not None:
        text = text.replace(*case.edit)
    elif 'mcu = "' in case.names:
        device = message.split("for device ", 1)[1].split(" ", 1)[0]
        old = text.split(f'name = "{device}"\nmcu = "', 1)[1].split('"', 1)[0]
        text = text.replace(
            f'name = "{device}"\nmcu = "{old}"',
            f'name = "{device}"\nmcu = "{_named_part(message)}"',
        )
    fixed = _boards_file(tmp_path, case, text)
    opts = {**apply_opts, "split": "off"}
    if opts.get("partial_execution") == "off":
        opts["partial_execution"] = "auto"
    result = splitter.plan(model, fixed, CompileOptions(**opts))  # type: ignore[arg-type]
    assert result.manifest.submodels


def test_layers_are_named_as_inspect_numbers_them(tmp_path: Path) -> None:
    """With PEX loops fused the planner's chain is shorter than inspect's (KWS DS-CNN: its
    loops fuse earlier layers); the error names conv5 as layer 13, as ``inspect`` does."""
    model = MODELS / "kws_ds_cnn.onnx"
    chain = splitter.load_chain(model)
    text = "[link]\nbaud = 115200\n" + _device("a", "STM32F405RG", ram="20 KiB")
    boards = _boards_file(tmp_path, CASES["flash-budget"], text)
    with pytest.raises(InfeasibleError) as info:
        splitter.plan(model, boards, CompileOptions(partial_execution="on"))
    message = str(info.value)
    found = re.findall(r"layers? (\d+)(?:-\d+)? \(([^).]*)", message)
    assert found, message
    for index, name in found:
        assert chain.layers[int(index)].name == name, message
    assert "layer 13 (conv5)" in message
