"""``splitter run``'s inputs and outputs for models with several of them (splitter/device/run.py,
splitter/cli/run_cmd.py): ``--input NAME=X.npy`` per input or one ``.npz``, one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from splitter.cli.run_cmd import check_output_path, save_outputs
from splitter.device.run import load_inputs
from splitter.errors import OutputError, ShapeError
from splitter.ir import TensorSpec

SPECS = (TensorSpec("img", (1, 2, 3)), TensorSpec("meta/x", (1, 4)))


def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {s.name: rng.standard_normal(s.shape).astype(np.float32) for s in SPECS}


def one_line(info: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(info.value)
    assert "\n" not in text
    return text


def test_inputs_by_name_in_any_order(tmp_path: Path) -> None:
    xs = arrays()
    np.save(tmp_path / "a.npy", xs["img"])
    np.save(tmp_path / "b.npy", xs["meta/x"])
    got = load_inputs([f"meta/x={tmp_path / 'b.npy'}", f"img={tmp_path / 'a.npy'}"], SPECS)
    assert list(got) == ["img", "meta/x"]  # plan order, whatever the command line's
    assert all(np.array_equal(got[k], xs[k]) for k in xs)


def test_inputs_from_one_npz(tmp_path: Path) -> None:
    xs = arrays(1)
    np.savez(tmp_path / "x.npz", **xs, extra=np.zeros(3))
    got = load_inputs([str(tmp_path / "x.npz")], SPECS)
    assert all(np.array_equal(got[k], xs[k]) for k in xs)


def test_one_input_model_keeps_the_plain_form(tmp_path: Path) -> None:
    x = arrays()["img"]
    np.save(tmp_path / "x.npy", x)
    assert np.array_equal(load_inputs([str(tmp_path / "x.npy")], SPECS[:1])["img"], x)


def test_input_errors_are_one_line(tmp_path: Path) -> None:
    xs = arrays()
    np.save(tmp_path / "a.npy", xs["img"])
    with pytest.raises(ShapeError) as info:  # a bare .npy for a two-input model
        load_inputs([str(tmp_path / "a.npy")], SPECS)
    assert "inputs img, meta/x" in one_line(info) and "img=X.npy" in str(info.value)
    with pytest.raises(ShapeError) as info:
        load_inputs([f"img={tmp_path / 'a.npy'}"], SPECS)
    assert "no --input for model input(s) meta/x" in one_line(info)
    with pytest.raises(ShapeError) as info:  # the wrong array for the name
        load_inputs([f"img={tmp_path / 'a.npy'}", f"meta/x={tmp_path / 'a.npy'}"], SPECS)
    assert "meta/x needs (1, 4)" in one_line(info)
    np.savez(tmp_path / "x.npz", img=xs["img"])
    with pytest.raises(ShapeError) as info:
        load_inputs([str(tmp_path / "x.npz")], SPECS)
    assert "no array 'meta/x' (holds img)" in one_line(info)


def test_several_outputs_are_saved_by_name(tmp_path: Path) -> None:
    ys = arrays(2)
    with pytest.raises(OutputError) as info:
        check_output_path(tmp_path / "y.npy", list(ys))
    assert "give --output Y.npz" in one_line(info)
    check_output_path(tmp_path / "y.npy", ["img"])
    save_outputs(tmp_path / "y.npz", ys)
    saved = np.load(tmp_path / "y.npz")
    assert sorted(saved.files) == sorted(ys) and np.array_equal(saved["meta/x"], ys["meta/x"])
