"""Graph-level rewrites on canonical ops: BatchNorm folding, bias folding, activation fusion,
transpose pairs, and the GELU pattern of exported graphs.

They make the chain look like an optimised MCU graph (the thesis's "optimized model"): a
``Conv -> BatchNormalization -> Relu`` triple becomes one ``conv2d`` with ``act="relu"``. A
follower is merged into its producer only when it is the producer output's **only** consumer and
that output is not a graph output; the merged op keeps the producer's name, takes the follower's
output tensor and lists both ops' source nodes. Pooling is never merged here (the chain builder
groups a following pool into the conv's layer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import numpy as np

from splitter.ir import Op
from splitter.ops import ACT_HOSTS, ACTIVATIONS, OPS

#: Ops that may carry a fused activation in ``attrs["act"]`` (splitter.ops.ACT_HOSTS).
ACT_PRODUCERS = ACT_HOSTS
#: Standalone activation kinds that can be fused, with the attributes they carry along.
FUSABLE_ACTS = {kind: OPS[kind].attrs for kind in ACTIVATIONS}

#: ``shape(tensor)``: the static shape of an activation tensor.
ShapeOf = Callable[[str], tuple[int, ...]]
Rule = Callable[[Op, Op, ShapeOf], Op | None]


def _merged(producer: Op, follower: Op, **changes: object) -> Op:
    """``producer`` writing ``follower``'s output and covering both ops' source nodes."""
    return replace(
        producer,
        outputs=follower.outputs,
        source_nodes=producer.source_nodes + follower.source_nodes,
        **changes,  # type: ignore[arg-type]
    )


def fold_batchnorm(producer: Op, follower: Op, shape: ShapeOf) -> Op | None:
    """Conv/dense followed by batchnorm: scale the weights, shift the bias.

    With ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale`` (see
    ``onnx_ops.batchnorm``): ``W'[o] = W[o] * scale[o]`` and
    ``B' = (B - mean) * scale + beta = B * scale + shift`` (``B = 0`` when absent). BN
    normalises axis 1, which is a dense layer's output axis only for a 2-D ``(N, out)`` output.
    """
    if follower.kind != "batchnorm" or producer.kind not in ("conv2d", "dense"):
        return None
    if producer.kind == "dense" and len(shape(producer.outputs[0])) != 2:
        return None
    if producer.attrs.get("act") is not None:
        return None
    w = producer.weights["W"]
    scale, shift = follower.weights["scale"], follower.weights["shift"]
    if scale.size != w.shape[0]:
        return None
    s64 = scale.astype(np.float64)
    w_new = (w.astype(np.float64) * s64.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    bias = producer.weights.get("B")
    b64 = np.zeros(w.shape[0]) if bias is None else bias.astype(np.float64)
    b_new = (b64 * s64 + shift.astype(np.float64)).astype(w.dtype)
    return _merged(producer, follower, weights={**producer.weights, "W": w_new, "B": b_new})


def fold_bias_add(producer: Op, follower: Op, shape: ShapeOf) -> Op | None:
    """Conv/dense followed by ``add`` of a per-output-channel constant: fold it into ``B``.

    Covers ONNX exporters' ``MatMul + Add`` for linear layers. The constant must have one value
    per output channel along the channel axis (axis 1 for conv2d, the last axis for dense).
    """
    if follower.kind != "add" or "C" not in follower.weights:
        return None
    if producer.kind not in ("conv2d", "dense") or producer.attrs.get("act") is not None:
        return None
    c, out = follower.weights["C"], producer.weights["W"].shape[0]
    squeezed = [d for d in c.shape if d != 1]
    if squeezed != [out] and not (out == 1 and c.size == 1):
        return None
    if producer.kind == "conv2d" and (c.ndim not in (3, 4) or c.shape[-3] != out):
        return None
    if producer.kind == "dense" and (
        c.ndim > len(shape(producer.outputs[0])) or c.shape[-1] != out
    ):
        return None
    bias = producer.weights.get("B")
    b_new = c.reshape(-1).astype(producer.weights["W"].dtype)
    if bias is not None:
        b_new = bias + b_new
    return _merged(producer, follower, weights={**producer.weights, "B": b_new})


def fuse_activation(producer: Op, follower: Op, shape: ShapeOf) -> Op | None:
    """Element-wise activation after an :data:`ACT_PRODUCERS` op -> the producer's ``act``."""
    if follower.kind not in FUSABLE_ACTS or producer.kind not in ACT_PRODUCERS:
        return None
    if producer.attrs.get("act") is not None:
        return None
    attrs = {**producer.attrs, "act": follower.kind}
    attrs.update({key: follower.attrs[key] for key in FUSABLE_ACTS[follower.kind]})
    return _merged(producer, follower, attrs=attrs)


def merge_transposes(producer: Op, follower: Op, shape: ShapeOf) -> Op | None:
    """Transpose by ``p`` then by ``q`` is one transpose by ``p[q[i]]``; when that is the
    identity (the pairs exporters put around NHWC regions) it is a zero-cost reshape."""
    if producer.kind != "transpose" or follower.kind != "transpose":
        return None
    p, q = producer.attrs["perm"], follower.attrs["perm"]
    perm = tuple(int(p[int(i)]) for i in q)
    if perm == tuple(range(len(perm))):
        return _merged(
            producer, follower, kind="reshape", attrs={"shape": shape(follower.outputs[0])}
        )
    return _merged(producer, follower, attrs={"perm": perm})


RULES: tuple[Rule, ...] = (fold_batchnorm, fold_bias_add, fuse_activation, merge_transposes)


def _const_is(op: Op, kind: str, value: float) -> bool:
    """``op`` is ``x <kind> C`` with a constant ``C`` equal to ``value`` everywhere (float32)."""
    c = op.weights.get("C")
    return (
        op.kind == kind
        and len(op.inputs) == 1
        and c is not None
        and op.attrs.get("act") is None
        and bool(np.allclose(np.asarray(c, np.float64), value, rtol=1e-6, atol=0))
    )


def _only_user(name: str, users: dict[str, list[Op]]) -> Op | None:
    """The single op reading ``name``, or None when zero or several do."""
    readers = users.get(name, [])
    return readers[0] if len(readers) == 1 else None


def _gelu_at(
    erf: Op, producer: dict[str, Op], users: dict[str, list[Op]]
) -> tuple[str, list[Op]] | None:
    """``(x, the ops of the pattern)`` when ``erf`` is the centre of an exported GELU:
    ``x / sqrt2`` (Div or Mul by 1/sqrt2) -> Erf -> ``+ 1`` -> ``* x`` -> ``* 0.5`` (torch), or
    the last two as ``(x * 0.5) * (...)`` (Hugging Face); intermediate results used once."""
    div = producer.get(erf.inputs[0])
    if div is None or _only_user(erf.inputs[0], users) is None:
        return None
    if not (_const_is(div, "div", 2**0.5) or _const_is(div, "mul", 2**-0.5)):
        return None
    x = div.inputs[0]
    add = _only_user(erf.outputs[0], users)
    if add is None or not _const_is(add, "add", 1.0):
        return None
    mul = _only_user(add.outputs[0], users)
    if mul is None or mul.kind != "mul" or len(mul.inputs) != 2 or mul.attrs.get("act"):
        return None
    other = mul.inputs[0] if mul.inputs[1] == add.outputs[0] else mul.inputs[1]
    if other == x:  # torch: (x * (1 + erf)) * 0.5
        tail = _only_user(mul.outputs[0], users)
        if tail is None or not _const_is(tail, "mul", 0.5):
            return None
        return x, [div, erf, add, mul, tail]
    half = producer.get(other)  # Hugging Face: (x * 0.5) * (1 + erf)
    if half is None or not _const_is(half, "mul", 0.5) or half.inputs[0] != x:
        return None
    if _only_user(other, users) is None:
        return None
    return x, [half, div, erf, add, mul]


def fuse_gelu(ops: Sequence[Op], graph_outputs: Iterable[str]) -> list[Op]:
    """Replace each exported GELU pattern (:func:`_gelu_at`) by one ``gelu`` op named after its
    Erf, reading ``x`` and writing the pattern's output, with every source node listed."""
    producer = {o: op for op in ops for o in op.outputs}
    users: dict[str, list[Op]] = {}
    for op in ops:
        for i in op.inputs:
            users.setdefault(i, []).append(op)
    outputs = set(graph_outputs)
    drop: set[int] = set()
    replace_at: dict[int, Op] = {}
    for erf in ops:
        if erf.kind != "erf" or erf.attrs.get("act") is not None:
            continue
        found = _gelu_at(erf, producer, users)
        if found is None:
            continue
        x, group = found
        inner = {o for op in group[:-1] for o in op.outputs}
        if inner & outputs or any(id(op) in drop for op in group):
            continue
        last = group[-1]
        gelu = Op(erf.name, "gelu", (x,), last.outputs, {}, {},
                  tuple(n for op in group for n in op.source_nodes))  # fmt: skip
        drop.update(id(op) for op in group)
        replace_at[id(last)] = gelu
    return [replace_at.get(id(op), op) for op in ops if id(op) in replace_at or id(op) not in drop]


def _pointwise(op: Op) -> bool:
    """An op that commutes with any transpose: an activation, or add / sub / mul / div of one
    activation and a single-valued constant."""
    if op.kind in ACTIVATIONS:
        return True
    c = op.weights.get("C")
    return (
        op.kind in ("add", "sub", "mul", "div")
        and len(op.inputs) == 1
        and c is not None
        and np.asarray(c).size == 1
        and set(op.weights) == {"C"}
    )


def drop_transpose_sandwiches(ops: Sequence[Op], graph_outputs: Iterable[str]) -> list[Op]:
    """``Transpose(p) -> one pointwise op -> Transpose(q)`` with ``p[q[i]] = i`` (tf2onnx's
    NHWC islands around an activation) is the pointwise op alone, reading the first
    transpose's input and writing the second's output: both tensors are the file's (cuts stay
    possible) and no tensor of the other layout is left. The op lists all three source nodes.
    """
    users: dict[str, list[Op]] = {}
    for op in ops:
        for i in op.inputs:
            users.setdefault(i, []).append(op)
    outputs = set(graph_outputs)

    def only_user(name: str) -> Op | None:
        readers = users.get(name, [])
        return readers[0] if len(readers) == 1 and name not in outputs else None

    replaced: dict[int, Op] = {}
    dropped: set[int] = set()
    for first in ops:
        mid = only_user(first.outputs[0]) if first.kind == "transpose" else None
        if mid is None or not _pointwise(mid) or id(first) in dropped:
            continue
        last = only_user(mid.outputs[0])
        if last is None or last.kind != "transpose":
            continue
        p, q = first.attrs["perm"], last.attrs["perm"]
        if tuple(int(p[int(i)]) for i in q) != tuple(range(len(p))):
            continue
        sources = first.source_nodes + mid.source_nodes + last.source_nodes
        replaced[id(mid)] = replace(mid, inputs=first.inputs, outputs=last.outputs,
                                    source_nodes=sources)  # fmt: skip
        dropped.update({id(first), id(last)})
    return [replaced.get(id(op), op) for op in ops if id(op) not in dropped]


def fuse(ops: Iterable[Op], graph_outputs: Iterable[str], shape: ShapeOf) -> list[Op]:
    """Fuse exported GELUs (:func:`fuse_gelu`), drop transpose pairs around pointwise ops
    (:func:`drop_transpose_sandwiches`), then apply :data:`RULES` in one topological pass and
    return the new op list."""
    graph_outputs = list(graph_outputs)
    ops = fuse_gelu(list(ops), graph_outputs)
    ops = drop_transpose_sandwiches(ops, graph_outputs)
    uses = Counter(i for op in ops for i in op.inputs)
    uses.update(graph_outputs)
    result: list[Op] = []
    producer_at: dict[str, int] = {}
    for op in ops:
        merged = None
        if len(op.inputs) == 1 and uses[op.inputs[0]] == 1 and op.inputs[0] in producer_at:
            k = producer_at[op.inputs[0]]
            prev = result[k]
            if len(prev.outputs) == 1:
                merged = next(
                    (m for rule in RULES if (m := rule(prev, op, shape)) is not None), None
                )
            if merged is not None:
                result[k] = merged
                del producer_at[op.inputs[0]]
                producer_at.update({o: k for o in merged.outputs})
                continue
        producer_at.update({o: len(result) for o in op.outputs})
        result.append(op)
    return result
