"""Prove that the chain of sub-models computes what the original model computes.

The original model and the sub-models run in the real runtimes (onnxruntime for ONNX, LiteRT for
TFLite) on ``>= 8`` seeded random inputs in the model's input range plus any user-given arrays;
sub-model ``k + 1`` is fed the outputs of sub-model ``k`` (by tensor name, by position when a
pass-through sub-model renamed it). Per graph output, over all samples (``a`` = original,
``b`` = chain, element-wise, in float64):

* ``max_abs = max |a - b|``
* ``max_rel = max |a - b| / max(|a|, 1e-12)``
* ``rmse = sqrt(mean((a - b)^2))``, ``mae = mean |a - b|``
* ``l2r = ||a - b|| / ||a||`` (relative L2 error; 0 when both are zero, inf when only ``a`` is)
* ``cosine = <a, b> / (||a|| ||b||)`` (1 when both are zero), as vendor validate tools report
  (ST Edge AI ``validate``: L2r, MAE, RMSE, COS, max-abs).

With a labelled set (``--data x.npz``, :func:`labelled_accuracy`) the top-1 accuracy of the
original and of the chain of sub-models, their agreement and the chain's confusion matrix.

Pass (issue 4): float outputs ``max_abs <= 1e-5``; integer (quantised) outputs bit-exact.

The reference is the normalised model the importer returned (:class:`~splitter.importers.
LoadedModel`: ``--input-shape`` written in, constants folded into initializers). Once per
validation that model is itself compared, on the same samples and with the same rule, with the
file it came from (:func:`normalisation_stats`), so the importer's folding is validated too.
A failure is a :class:`~splitter.errors.ValidationError`, never a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from splitter.errors import InputFileError, ValidationError
from splitter.importers import LoadedModel
from splitter.inputs import read_npy
from splitter.ir import TensorSpec

#: Default number of seeded random input samples (issue 4: at least 8).
DEFAULT_SAMPLES = 8
DEFAULT_SEED = 0
#: Pass threshold for float outputs (issue 4).
FLOAT_MAX_ABS = 1e-5
_REL_EPS = 1e-12


class Runner(Protocol):
    """A loaded model that maps named input arrays to named output arrays."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs by name for ``feeds`` (inputs by name)."""
        ...


class OnnxRunner:
    """An onnxruntime CPU session, one thread (deterministic and fair on a shared machine).

    Graph optimisations off (``ORT_DISABLE_ALL``) on both sides: onnxruntime's fusions (even the
    "basic" ones: Conv + BatchNormalization folding, Conv + Add + Relu into FusedConv) round
    differently when a cut separates the fused nodes, which showed up as 3.4e-5 max-abs on
    MobileNetV2's logits, an artefact of the runtime rather than of the split. With the same
    unfused kernels on both sides a correct float split is bit-exact.
    """

    def __init__(self, model: bytes | str | Path, probes: Sequence[str] = ()) -> None:
        import onnxruntime as ort

        self.probes = tuple(probes)
        if self.probes:
            model = _with_extra_outputs(model, self.probes)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        source = model if isinstance(model, bytes) else str(model)
        self.session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
        self.inputs = tuple(_ort_spec(v) for v in self.session.get_inputs())
        outputs = tuple(_ort_spec(v) for v in self.session.get_outputs())
        self.outputs = outputs[: len(outputs) - len(self.probes)]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Outputs (and probed intermediate tensors) by name."""
        names = [t.name for t in self.outputs] + list(self.probes)
        values = self.session.run(names, {t.name: feeds[t.name] for t in self.inputs})
        return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}


class TfliteRunner:
    """A LiteRT interpreter (``ai_edge_litert.interpreter.Interpreter``), one thread.

    Built-in kernels without the default XNNPACK delegate, on both sides: the same kernels the
    TFLite reference path uses, no delegate partitioning that could differ between the original
    and a sub-model.
    """

    def __init__(self, model: bytes | str | Path, probes: Sequence[str] = ()) -> None:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        source = (
            {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
        )
        self.interpreter = Interpreter(
            **source,
            num_threads=1,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            experimental_preserve_all_tensors=bool(probes),
        )
        self.interpreter.allocate_tensors()
        self._probes = _litert_probe_indices(self.interpreter, probes)
        self._in = self.interpreter.get_input_details()
        self._out = self.interpreter.get_output_details()
        self.inputs = tuple(_litert_spec(d) for d in self._in)
        self.outputs = tuple(_litert_spec(d) for d in self._out)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        self._fit([np.shape(feeds[spec.name]) for spec in self.inputs])
        for detail, spec in zip(self._in, self.inputs, strict=True):
            self.interpreter.set_tensor(detail["index"], feeds[spec.name])
        self.interpreter.invoke()
        out = {
            spec.name: np.array(self.interpreter.get_tensor(d["index"]))
            for d, spec in zip(self._out, self.outputs, strict=True)
        }
        for name, index in self._probes.items():
            out[name] = np.array(self.interpreter.get_tensor(index))
        return out

    def _fit(self, shapes: Sequence[tuple[int, ...]]) -> None:
        """Resize the inputs to ``shapes`` when they differ from the model's stored shapes (the
        model file run against its normalised form, whose ``--input-shape`` may differ)."""
        if all(tuple(s) == spec.shape for s, spec in zip(shapes, self.inputs, strict=True)):
            return
        for detail, shape in zip(self._in, shapes, strict=True):
            self.interpreter.resize_tensor_input(detail["index"], list(shape))
        self.interpreter.allocate_tensors()
        self._in = self.interpreter.get_input_details()
        self._out = self.interpreter.get_output_details()
        self.inputs = tuple(_litert_spec(d) for d in self._in)
        self.outputs = tuple(_litert_spec(d) for d in self._out)


def _with_extra_outputs(model: bytes | str | Path, names: Sequence[str]) -> bytes:
    """The ONNX model with ``names`` appended to its graph outputs (types left to the runtime)."""
    import onnx

    proto = onnx.load_from_string(model) if isinstance(model, bytes) else onnx.load(str(model))
    known = {v.name for v in proto.graph.output}
    for name in names:
        if name not in known:
            proto.graph.output.append(onnx.ValueInfoProto(name=name))
    return bytes(proto.SerializeToString())


def _litert_probe_indices(interpreter: Any, names: Sequence[str]) -> dict[str, int]:
    """Tensor index of each probed name, names made unique as the importer does."""
    if not names:
        return {}
    details = sorted(interpreter.get_tensor_details(), key=lambda d: d["index"])
    raw = [str(d["name"]) for d in details]
    counts = {n: raw.count(n) for n in set(raw)}
    unique = {
        (n if counts[n] == 1 and n else f"{n}:{d['index']}"): int(d["index"])
        for n, d in zip(raw, details, strict=True)
    }
    return {name: unique[name] for name in names if name in unique}


def make_runner(model: bytes | str | Path, suffix: str, probes: Sequence[str] = ()) -> Runner:
    """A runner for an ``.onnx`` or ``.tflite`` model given as bytes or a path.

    ``probes`` are intermediate tensors the runner also returns (the original model's values at
    the cut points, to locate the first sub-model that diverges).
    """
    try:
        if suffix == ".onnx":
            return OnnxRunner(model, probes)
        return TfliteRunner(model, probes)
    except Exception as exc:
        what = "runtime" if suffix == ".onnx" else "LiteRT"
        raise ValidationError(
            f"{model if not isinstance(model, bytes) else 'sub-model'}: the {what} cannot load "
            f"it ({' '.join(str(exc).split())[:200]}); the cut produced an invalid model"
        ) from exc


@dataclass(frozen=True)
class OutputStats:
    """Error of one graph output over all samples (formulas in the module docstring)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    rmse: float
    cosine: float
    exact: bool
    passed: bool
    #: max_abs per sample, in sample order
    per_sample_max_abs: tuple[float, ...] = ()
    mae: float = 0.0
    l2r: float = 0.0
    #: for a boundary tensor: the index of the sub-model that produces it
    submodel: int | None = None


@dataclass(frozen=True)
class ValidationReport:
    """The outcome of :func:`validate_chain`."""

    passed: bool
    runtime: str
    samples: tuple[str, ...]  # "random:<seed>:<i>" or "file:<path>[<i>]"
    outputs: tuple[OutputStats, ...]
    submodels: tuple[str, ...] = ()
    tolerance: Mapping[str, Any] = field(default_factory=dict)
    #: each sub-model's output (but the last's) against the original's tensor of that name
    boundaries: tuple[OutputStats, ...] = ()
    #: the normalised model's outputs against the model file's (empty: the bytes are the file's)
    normalisation: tuple[OutputStats, ...] = ()
    #: accuracy on a labelled set (:func:`labelled_accuracy`), when one was given
    labelled: Mapping[str, Any] | None = None
    #: ``--quantize``: the quantised model against the float one
    #: (:func:`splitter.slicing.quantize.quantization_cost`)
    quantization: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``OUT/validation.json``)."""
        quant = {} if self.quantization is None else {"quantization": dict(self.quantization)}
        return {
            **quant,
            "passed": self.passed,
            "runtime": self.runtime,
            "tolerance": dict(self.tolerance),
            "samples": list(self.samples),
            "submodels": list(self.submodels),
            "outputs": [_stats_dict(s) for s in self.outputs],
            "boundaries": [_stats_dict(s) for s in self.boundaries],
            "normalisation": [_stats_dict(s) for s in self.normalisation],
            **({} if self.labelled is None else {"labelled": dict(self.labelled)}),
        }

    def summary(self) -> str:
        """One line: pass/fail and the worst output."""
        worst = max(self.outputs, key=lambda s: s.max_abs)
        verdict = "passed" if self.passed else "FAILED"
        line = (
            f"sub-model files validated against the whole model: {verdict} on "
            f"{len(self.samples)} inputs (the firmware's C is checked by `splitter run`): "
            f"worst output '{worst.name}' "
            f"max-abs {worst.max_abs:.3g}, max-rel {worst.max_rel:.3g}, rmse {worst.rmse:.3g}, "
            f"mae {worst.mae:.3g}, l2r {worst.l2r:.3g}, cosine {worst.cosine:.9f}"
        )
        lab = self.labelled
        if lab is not None:
            line += (
                f"; accuracy on {lab['samples']} labelled inputs: split {lab['accuracy_split']:.4f}"
                f", original {lab['accuracy_original']:.4f}"
            )
        return line


def _stats_dict(s: OutputStats) -> dict[str, Any]:
    return {
        "name": s.name,
        "dtype": s.dtype,
        "shape": list(s.shape),
        "max_abs": s.max_abs,
        "max_rel": s.max_rel,
        "rmse": s.rmse,
        "cosine": s.cosine,
        "l2r": s.l2r,
        "mae": s.mae,
        "exact": s.exact,
        "passed": s.passed,
        "per_sample_max_abs": list(s.per_sample_max_abs),
        **({} if s.submodel is None else {"submodel": s.submodel}),
    }


# --- inputs -----------------------------------------------------------------------------


def random_inputs(
    specs: Sequence[TensorSpec],
    count: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    float_range: tuple[float, float] | None = None,
) -> list[dict[str, np.ndarray]]:
    """``count`` seeded samples in each input's range.

    Integer inputs span their full range (int8: -128..127); float inputs are standard normal,
    or uniform on ``float_range`` when the model's metadata gives one.
    """
    rng = np.random.default_rng(seed)
    return [{s.name: _random_tensor(rng, s, float_range) for s in specs} for _ in range(count)]


def _random_tensor(
    rng: np.random.Generator, spec: TensorSpec, float_range: tuple[float, float] | None
) -> np.ndarray:
    dtype = np.dtype(spec.dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=spec.shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        low, high = (info.min, info.max) if info.bits <= 16 else (0, 9)
        return rng.integers(low, high, size=spec.shape, endpoint=True, dtype=dtype)
    if float_range is not None:
        return rng.uniform(float_range[0], float_range[1], size=spec.shape).astype(dtype)
    return rng.standard_normal(size=spec.shape).astype(dtype)


#: Model metadata keys that give the float input range as ``"low,high"``.
INPUT_RANGE_KEYS = ("splitter.input_range", "input_range")


def float_range_from_metadata(
    metadata: Mapping[str, str], where: str = "model"
) -> tuple[float, float] | None:
    """The float input range a model's metadata states (``input_range = "0,1"``), if any."""
    for key in INPUT_RANGE_KEYS:
        if key in metadata:
            text = metadata[key].strip().strip("[]()")
            try:
                low, high = (float(v) for v in text.split(","))
            except ValueError:
                low, high = 0.0, -1.0
            if not low < high:
                raise InputFileError(
                    f"{where}: metadata {key}='{metadata[key]}' is not 'low,high' with low < high; "
                    "fix the model's metadata"
                )
            return low, high
    return None


def load_input_file(path: str | Path, spec: TensorSpec) -> list[np.ndarray]:
    """Samples from a ``.npy`` file: one array of ``spec``'s shape, or a stack of them.

    A stack is ``(N, *shape)``, or ``(N, *shape[1:])`` when the model's batch dimension is 1.
    The dtype must be ``spec.dtype`` exactly (no silent cast that would hide a scaling bug).
    """
    return samples_of(path, read_npy(path), spec)


def samples_of(path: str | Path, array: np.ndarray, spec: TensorSpec) -> list[np.ndarray]:
    """The samples of input ``spec`` in ``array`` (read from ``path``): :func:`load_input_file`."""
    if array.dtype != np.dtype(spec.dtype):
        raise InputFileError(
            f"{path}: input '{spec.name}' needs dtype {spec.dtype}, the file has {array.dtype}; "
            f"save it with array.astype('{spec.dtype}')"
        )
    shape = tuple(spec.shape)
    if array.shape == shape:
        return [array]
    if array.ndim == len(shape) + 1 and array.shape[1:] == shape:
        return [a for a in array]
    if shape and shape[0] == 1 and array.shape[1:] == shape[1:] and array.ndim == len(shape):
        return [a[None, ...] for a in array]
    raise InputFileError(
        f"{path}: input '{spec.name}' needs shape {list(shape)} (or a stack of them), "
        f"the file has {list(array.shape)}; reshape the array"
    )


def load_input_samples(
    args: Sequence[str | Path], specs: Sequence[TensorSpec]
) -> list[dict[str, np.ndarray]]:
    """Input samples (arrays by input name) from ``--input`` arguments (docs/guide/inputs.md).

    Each argument is ``X.npy`` (the model's one input), ``NAME=X.npy`` (input ``NAME``; every
    input once) or ``X.npz`` holding one array per input name. An array is one sample or a stack
    (:func:`load_input_file`); every input of one set must have the same number of samples.
    Several ``X.npy`` of a single-input model, or several ``.npz``, add up. Errors are one line
    naming the file, the input and the fix (InputFileError).
    """
    names = [s.name for s in specs]
    by_name = {s.name: s for s in specs}
    samples: list[dict[str, np.ndarray]] = []
    named: dict[str, list[np.ndarray]] = {}
    for arg in map(str, args):
        name, sep, rest = arg.partition("=")
        if sep and name in by_name:
            if name in named:
                raise InputFileError(f"--input {arg}: input '{name}' is given twice; give it once")
            named[name] = load_input_file(rest, by_name[name])
        elif Path(arg).suffix.lower() == ".npz":
            samples += _npz_samples(Path(arg), specs)
        elif len(specs) == 1:
            samples += [{names[0]: x} for x in load_input_file(arg, specs[0])]
        else:
            raise InputFileError(
                f"--input {arg}: the model has inputs {', '.join(names)}; give --input "
                f"{names[0]}=X.npy for each input, or one .npz keyed by input name"
            )
    if named:
        samples += _zip_inputs(named, specs, "--input NAME=X.npy")
    return samples


def _npz_samples(path: Path, specs: Sequence[TensorSpec]) -> list[dict[str, np.ndarray]]:
    """The samples of an ``.npz`` of inputs by name (:func:`load_input_samples`)."""
    from splitter.inputs import read_npz

    arrays = read_npz(path, ".npz input")
    names = ", ".join(s.name for s in specs)
    for s in specs:
        if s.name not in arrays:
            raise InputFileError(
                f"{path}: input '{s.name}' is missing (the file holds "
                f"{', '.join(sorted(arrays)) or 'nothing'}); save it with "
                f"numpy.savez(path, **{{name: array}}) for inputs {names}"
            )
    per = {s.name: samples_of(f"{path}[{s.name}]", arrays[s.name], s) for s in specs}
    return _zip_inputs(per, specs, str(path))


def _zip_inputs(
    per: Mapping[str, list[np.ndarray]], specs: Sequence[TensorSpec], where: str
) -> list[dict[str, np.ndarray]]:
    """Sample ``i`` of every input together; all inputs given, with as many samples each."""
    missing = [s.name for s in specs if s.name not in per]
    if missing:
        raise InputFileError(
            f"{where}: no input '{missing[0]}'; give --input {missing[0]}=X.npy too (every "
            f"input of {', '.join(s.name for s in specs)} once)"
        )
    counts = {name: len(v) for name, v in per.items()}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in counts.items())
        raise InputFileError(
            f"{where}: the inputs hold different numbers of samples ({listed}); give each input "
            "the same number"
        )
    n = next(iter(counts.values()))
    return [{s.name: per[s.name][i] for s in specs} for i in range(n)]


# --- running and comparing --------------------------------------------------------------


def run_chain(runners: Sequence[Runner], feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run sub-models in order, each fed by name from what came before (or by position)."""
    return run_chain_steps(runners, feeds)[-1]


def run_chain_steps(
    runners: Sequence[Runner], feeds: Mapping[str, np.ndarray]
) -> list[dict[str, np.ndarray]]:
    """:func:`run_chain`, also returning what sub-model ``k`` wrote: entry ``k`` maps each of
    its outputs to its value (a tensor passed through several sub-models is checked at each
    hop); the last entry is the whole environment, as :func:`run_chain` returns it.

    Sub-model ``k`` reads every input by name from the previous sub-model's outputs when it
    has it (several tensors per cut), else from anything before, else by position."""
    env: dict[str, np.ndarray] = dict(feeds)
    previous: dict[str, np.ndarray] = dict(feeds)
    steps: list[dict[str, np.ndarray]] = []
    for runner in runners:
        order = list(previous.values())
        sub_feeds = {}
        for pos, spec in enumerate(runner.inputs):
            if spec.name in previous:
                sub_feeds[spec.name] = previous[spec.name]
            else:
                sub_feeds[spec.name] = env[spec.name] if spec.name in env else order[pos]
        out = runner.run(sub_feeds)
        previous = {t.name: out[t.name] for t in runner.outputs}
        env.update(out)
        steps.append(previous)
    steps.append(env | previous)
    return steps


def compare(name: str, refs: Sequence[np.ndarray], gots: Sequence[np.ndarray]) -> OutputStats:
    """Error statistics of one output over all samples (formulas: module docstring)."""
    a = np.concatenate([np.asarray(r, np.float64).ravel() for r in refs])
    b = np.concatenate([np.asarray(g, np.float64).ravel() for g in gots])
    diff = np.abs(a - b)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(np.dot(a, b) / norm) if norm > 0 else float(np.array_equal(a, b))
    exact = all(np.array_equal(r, g) for r, g in zip(refs, gots, strict=True))
    is_int = np.issubdtype(np.asarray(refs[0]).dtype, np.integer)
    max_abs = float(diff.max()) if diff.size else 0.0
    err, ref = float(np.linalg.norm(a - b)), float(np.linalg.norm(a))
    return OutputStats(
        name=name,
        dtype=str(np.asarray(refs[0]).dtype),
        shape=tuple(np.asarray(refs[0]).shape),
        max_abs=max_abs,
        max_rel=float((diff / np.maximum(np.abs(a), _REL_EPS)).max()) if diff.size else 0.0,
        rmse=float(np.sqrt(np.mean((a - b) ** 2))) if diff.size else 0.0,
        cosine=cosine,
        exact=exact,
        passed=exact if is_int else bool(np.isfinite(max_abs) and max_abs <= FLOAT_MAX_ABS),
        per_sample_max_abs=tuple(
            float(np.max(np.abs(np.asarray(r, np.float64) - np.asarray(g, np.float64)), initial=0))
            for r, g in zip(refs, gots, strict=True)
        ),
        mae=float(diff.mean()) if diff.size else 0.0,
        l2r=err / ref if ref > 0 else (0.0 if err == 0 else float("inf")),
    )


def validate_chain(
    original: Runner,
    submodels: Sequence[Runner],
    samples: Sequence[Mapping[str, np.ndarray]],
    labels: Sequence[str],
    *,
    runtime: str = "",
    submodel_names: Sequence[str] = (),
) -> ValidationReport:
    """Compare the original's outputs with the chain's on every sample.

    When ``original`` was made with the boundary tensors as probes (:func:`make_runner`), every
    sub-model's output is also compared with the original's value of that tensor, so a failure
    names the first sub-model that diverges.
    """
    probes = boundary_probes(submodels)
    refs: dict[str, list[np.ndarray]] = {t.name: [] for t in original.outputs}
    gots: dict[str, list[np.ndarray]] = {t.name: [] for t in original.outputs}
    bref: dict[tuple[str, int], list[np.ndarray]] = {probe: [] for probe in probes}
    bgot: dict[tuple[str, int], list[np.ndarray]] = {probe: [] for probe in probes}
    for feeds in samples:
        expected = original.run(feeds)
        envs = run_chain_steps(submodels, feeds)
        env = envs[-1]
        for pos, spec in enumerate(original.outputs):
            refs[spec.name].append(expected[spec.name])
            gots[spec.name].append(_chain_output(spec, pos, env, submodels[-1], expected))
        for name, k in probes:
            if name in expected or name in feeds:
                bref[name, k].append(expected[name] if name in expected else feeds[name])
                bgot[name, k].append(envs[k][name])
    stats = tuple(compare(n, refs[n], gots[n]) for n in refs)
    bounds = tuple(
        _at_submodel(compare(name, bref[name, k], bgot[name, k]), k)
        for name, k in probes
        if bref[name, k]
    )
    return ValidationReport(
        passed=all(s.passed for s in stats + bounds),
        runtime=runtime,
        samples=tuple(labels),
        outputs=stats,
        submodels=tuple(submodel_names),
        tolerance={"float_max_abs": FLOAT_MAX_ABS, "integer": "bit-exact"},
        boundaries=bounds,
    )


def _chain_output(
    spec: TensorSpec,
    pos: int,
    env: Mapping[str, np.ndarray],
    last: Runner,
    expected: Mapping[str, np.ndarray],
) -> np.ndarray:
    """The chain's value of graph output ``spec``: by name, else by position among the last
    sub-model's outputs when it has as many as the original (a pass-through renamed it).

    A missing output or one of another shape is a :class:`ValidationError` naming it (a
    multi-output model compared position by position crashed with a broadcasting error)."""
    outs = [t.name for t in last.outputs]
    if spec.name in env:
        got = env[spec.name]
    elif len(outs) == len(expected) and pos < len(outs):
        got = env[outs[pos]]
    else:
        raise ValidationError(
            f"graph output {spec.name!r} is not produced by the sub-models (the last one writes "
            f"{outs}); every graph output must leave the last sub-model"
        )
    want = np.shape(expected[spec.name])
    if np.shape(got) != want:
        raise ValidationError(
            f"graph output {spec.name!r}: the sub-models give shape {list(np.shape(got))}, the "
            f"model {list(want)}; the cut is wrong, report it"
        )
    return got


def boundary_probes(submodels: Sequence[Runner]) -> list[tuple[str, int]]:
    """``(tensor name, sub-model index)`` of every output of every sub-model but the last."""
    return [(t.name, k) for k, sub in enumerate(submodels[:-1]) for t in sub.outputs]


def _at_submodel(stats: OutputStats, k: int) -> OutputStats:
    return replace(stats, submodel=k)


def validate_models(
    original: LoadedModel,
    submodels: Sequence[tuple[str, bytes]],
    *,
    count: int = DEFAULT_SAMPLES,
    seed: int = DEFAULT_SEED,
    input_files: Sequence[str | Path] = (),
    float_range: tuple[float, float] | None = None,
    data_file: str | Path | None = None,
) -> ValidationReport:
    """Validate sub-models ``(name, bytes)`` against the normalised model ``original``
    (:func:`splitter.importers.load_model`: the user's input shapes hold in the reference too);
    with ``data_file`` (``.npz``, :func:`load_labelled`) also the accuracy on that set.

    Raises :class:`ValidationError` when any output fails (the report is attached as
    ``exc.report``).
    """
    suffix = original.suffix
    chain = [make_runner(data, suffix) for _, data in submodels]
    ref = make_runner(original.data, suffix, [name for name, _ in boundary_probes(chain)])
    samples = random_inputs(ref.inputs, count, seed, float_range)
    labels = [f"random:seed={seed}:{i}" for i in range(count)]
    given = load_input_samples(input_files, ref.inputs)
    samples += given
    labels += [f"file:{' '.join(map(str, input_files))}[{i}]" for i in range(len(given))]
    runtime = "onnxruntime" if suffix == ".onnx" else "LiteRT"
    report = validate_chain(
        ref, chain, samples, labels, runtime=runtime, submodel_names=[n for n, _ in submodels]
    )
    normalised = normalisation_stats(original, ref, samples)
    labelled = None
    if data_file is not None:
        data = load_labelled(data_file, _single_input(ref, data_file), output_classes(ref))
        labelled = labelled_accuracy(ref, chain, data)
    return replace(
        report,
        passed=report.passed and all(s.passed for s in normalised),
        normalisation=normalised,
        labelled=labelled,
    )


def _single_input(runner: Runner, path: str | Path) -> TensorSpec:
    if len(runner.inputs) != 1:
        raise InputFileError(
            f"{path}: --data needs a single-input model, this one has {len(runner.inputs)} inputs"
        )
    return runner.inputs[0]


def output_classes(runner: Runner) -> int:
    """Scores per sample of the first output (its element count): the number of classes."""
    shape = runner.outputs[0].shape
    return int(np.prod(shape)) if shape else 1


def normalisation_stats(
    original: LoadedModel, ref: Runner, samples: Sequence[Mapping[str, np.ndarray]]
) -> tuple[OutputStats, ...]:
    """The normalised model (``ref``, running ``original.data``) against the model file at
    ``original.path`` on ``samples``, per output (:func:`compare`, file = reference).

    Empty when the normalised bytes are the file's (nothing to check) or the file is gone.
    """
    path = Path(original.path)
    if not path.is_file() or path.read_bytes() == original.data:
        return ()
    try:
        source = make_runner(path, original.suffix)
    except Exception as exc:  # the runtime rejects the file the importer accepted
        raise ValidationError(
            f"{path}: {original.suffix[1:]} runtime cannot load the model file "
            f"({' '.join(str(exc).split())[:200]}); the normalised model cannot be checked "
            "against it"
        ) from exc
    refs: dict[str, list[np.ndarray]] = {t.name: [] for t in ref.outputs}
    gots: dict[str, list[np.ndarray]] = {t.name: [] for t in ref.outputs}
    for feeds in samples:
        expected, got = source.run(feeds), ref.run(feeds)
        for pos, spec in enumerate(ref.outputs):
            name = spec.name if spec.name in expected else source.outputs[pos].name
            refs[spec.name].append(expected[name])
            gots[spec.name].append(got[spec.name])
    return tuple(compare(name, refs[name], gots[name]) for name in refs)


def require_pass(report: ValidationReport, model: str | Path) -> None:
    """Raise :class:`ValidationError` (with ``.report``) unless every output passed.

    The message names the first sub-model whose output differs from the original, if any.
    """
    if report.passed:
        return
    changed = next((s for s in report.normalisation if not s.passed), None)
    if changed is not None:
        error = ValidationError(
            f"{model}: the normalised model (--input-shape applied, constants folded) does not "
            f"reproduce the file's output '{changed.name}': max-abs {changed.max_abs:.3g}, "
            f"exact {changed.exact}, over {len(report.samples)} inputs; the importer's "
            "normalisation is wrong, report it"
        )
        error.report = report  # type: ignore[attr-defined]
        raise error
    first = next((b for b in report.boundaries if not b.passed), None)
    bad = [s for s in report.outputs if not s.passed]
    worst = max(bad, key=lambda s: s.max_abs) if bad else first
    assert worst is not None
    rule = "bit-exact" if np.issubdtype(np.dtype(worst.dtype), np.integer) else "max-abs <= 1e-5"
    where = ""
    if first is not None and first.submodel is not None:
        name = _submodel_name(report, first.submodel)
        where = f"; first divergence: sub-model {name} output '{first.name}'"
    error = ValidationError(
        f"{model}: the sub-models do not reproduce output '{worst.name}' ({rule} required): "
        f"max-abs {worst.max_abs:.3g}, max-rel {worst.max_rel:.3g}, cosine {worst.cosine:.6f} "
        f"over {len(report.samples)} inputs{where}; the split is wrong, report it"
    )
    error.report = report  # type: ignore[attr-defined]
    raise error


def _submodel_name(report: ValidationReport, k: int) -> str:
    return report.submodels[k] if k < len(report.submodels) else str(k)


def _ort_spec(value: Any) -> TensorSpec:
    """A :class:`TensorSpec` from an onnxruntime ``NodeArg``."""
    kind = value.type  # e.g. "tensor(float)"
    dtype = _ORT_TYPES.get(kind, "float32")
    shape = tuple(d if isinstance(d, int) else 1 for d in value.shape)
    return TensorSpec(name=value.name, shape=shape, dtype=dtype)


def _litert_spec(detail: Mapping[str, Any]) -> TensorSpec:
    return TensorSpec(
        name=str(detail["name"]),
        shape=tuple(int(d) for d in detail["shape"]),
        dtype=np.dtype(detail["dtype"]).name,
    )


_ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(int16)": "int16",
    "tensor(uint16)": "uint16",
    "tensor(int32)": "int32",
    "tensor(int64)": "int64",
    "tensor(bool)": "bool",
}


# --- labelled data (--data x.npz) -------------------------------------------------------

#: array names accepted for the inputs and the labels of a labelled set
DATA_INPUT_KEYS = ("x", "inputs", "input", "data")
DATA_LABEL_KEYS = ("y", "labels", "label", "targets")


@dataclass(frozen=True)
class LabelledSet:
    """Inputs (one array per sample, the model input's shape) and integer class labels."""

    path: str
    inputs: tuple[np.ndarray, ...]
    labels: tuple[int, ...]


def _pick(arrays: Mapping[str, np.ndarray], keys: Sequence[str], path: str, what: str) -> str:
    found = [k for k in keys if k in arrays]
    if len(found) != 1:
        raise InputFileError(
            f"{path}: needs exactly one {what} array named {' or '.join(keys)}, it has "
            f"{sorted(arrays) or 'none'}; save it with numpy.savez(path, x=inputs, y=labels)"
        )
    return found[0]


def load_labelled(path: str | Path, spec: TensorSpec, classes: int) -> LabelledSet:
    """A labelled set from ``path`` (``.npz`` with inputs ``x`` and labels ``y``) for a model
    whose single input is ``spec`` and whose output has ``classes`` scores per sample.

    Labels are integers in ``0..classes-1`` (or one-hot rows, turned into their argmax).
    """
    from splitter.inputs import read_npz

    where = str(path)
    arrays = read_npz(path)
    x = arrays[_pick(arrays, DATA_INPUT_KEYS, where, "inputs")]
    y = arrays[_pick(arrays, DATA_LABEL_KEYS, where, "labels")]
    samples = _as_samples(x, spec, where)
    if y.ndim == 2 and y.shape[1] == classes and y.shape[0] == len(samples):
        y = np.argmax(y, axis=1)
    if y.ndim != 1 or len(y) != len(samples) or not np.issubdtype(y.dtype, np.integer):
        raise InputFileError(
            f"{path}: labels must be {len(samples)} integers (one per input) or one-hot rows of "
            f"{classes}, the file has {y.dtype} {list(y.shape)}; save integer class indices"
        )
    if len(y) and (int(y.min()) < 0 or int(y.max()) >= classes):
        raise InputFileError(
            f"{path}: labels span {int(y.min())}..{int(y.max())}, the model has {classes} "
            f"classes (0..{classes - 1}); fix the labels"
        )
    return LabelledSet(where, tuple(samples), tuple(int(v) for v in y))


def _as_samples(x: np.ndarray, spec: TensorSpec, path: str) -> list[np.ndarray]:
    shape = tuple(spec.shape)
    if x.dtype != np.dtype(spec.dtype):
        raise InputFileError(
            f"{path}: inputs need dtype {spec.dtype} (input '{spec.name}'), the file has "
            f"{x.dtype}; save them with x.astype('{spec.dtype}')"
        )
    if x.ndim == len(shape) + 1 and x.shape[1:] == shape and len(x):
        return [a for a in x]
    if shape and shape[0] == 1 and x.ndim == len(shape) and x.shape[1:] == shape[1:] and len(x):
        return [a[None, ...] for a in x]
    raise InputFileError(
        f"{path}: inputs need shape [N, {', '.join(str(v) for v in shape)}] (input "
        f"'{spec.name}'), the file has {list(x.shape)}; reshape the array"
    )


def labelled_accuracy(
    original: Runner, submodels: Sequence[Runner], data: LabelledSet
) -> dict[str, Any]:
    """Top-1 accuracy of the original and of the chain on ``data``, their agreement, and the
    chain's confusion matrix (rows: label, columns: predicted class), on the first output."""
    out = original.outputs[0]
    classes = int(np.prod(out.shape)) if out.shape else 1
    confusion = np.zeros((classes, classes), dtype=np.int64)
    right_orig = right_split = agree = 0
    for feeds_x, label in zip(data.inputs, data.labels, strict=True):
        feeds = {original.inputs[0].name: feeds_x}
        p_orig = int(np.argmax(original.run(feeds)[out.name]))
        env = run_chain(submodels, feeds)
        got = env[out.name] if out.name in env else env[submodels[-1].outputs[0].name]
        p_split = int(np.argmax(got))
        confusion[label, p_split] += 1
        right_orig += p_orig == label
        right_split += p_split == label
        agree += p_orig == p_split
    n = len(data.labels)
    return {
        "file": data.path,
        "samples": n,
        "output": out.name,
        "classes": classes,
        "accuracy_original": right_orig / n,
        "accuracy_split": right_split / n,
        "agreement": agree / n,
        "confusion": confusion.tolist(),
    }
