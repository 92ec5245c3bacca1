"""Graph-level rewrites on canonical ops: BatchNorm folding, bias folding, activation fusion.

They make the chain look like an optimised MCU graph (the thesis's "optimized model"): a
``Conv -> BatchNormalization -> Relu`` triple becomes one ``conv2d`` with ``act="relu"``. A
follower is merged into its producer only when it is the producer output's **only** consumer and
that output is not a graph output; the merged op keeps the producer's name, takes the follower's
output tensor and lists both ops' source nodes. Pooling is never merged here (the chain builder
groups a following pool into the conv's layer).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from splitter.ir import Op
from splitter.ops import ACT_HOSTS, ACTIVATIONS, OPS

#: Ops that may carry a fused activation in ``attrs["act"]`` (splitter/ops.py).
ACT_PRODUCERS = ACT_HOSTS
#: Standalone activation kinds that can be fused, with the attributes they carry along.
FUSABLE_ACTS = {kind: OPS[kind].attrs for kind in ACTIVATIONS}

#: ``rank(tensor)``: number of dimensions of an activation tensor.
RankOf = Callable[[str], int]
Rule = Callable[[Op, Op, RankOf], Op | None]


def _merged(producer: Op, follower: Op, **changes: object) -> Op:
    """``producer`` writing ``follower``'s output and covering both ops' source nodes."""
    return replace(
        producer,
        outputs=follower.outputs,
        source_nodes=producer.source_nodes + follower.source_nodes,
        **changes,  # type: ignore[arg-type]
    )


def fold_batchnorm(producer: Op, follower: Op, rank: RankOf) -> Op | None:
    """Conv/dense followed by batchnorm: scale the weights, shift the bias.

    With ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale`` (see
    ``onnx_ops.batchnorm``): ``W'[o] = W[o] * scale[o]`` and
    ``B' = (B - mean) * scale + beta = B * scale + shift`` (``B = 0`` when absent). BN
    normalises axis 1, which is a dense layer's output axis only for a 2-D ``(N, out)`` output.
    """
    if follower.kind != "batchnorm" or producer.kind not in ("conv2d", "dense"):
        return None
    if producer.kind == "dense" and rank(producer.outputs[0]) != 2:
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


def fold_bias_add(producer: Op, follower: Op, rank: RankOf) -> Op | None:
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
    if producer.kind == "dense" and (c.ndim > rank(producer.outputs[0]) or c.shape[-1] != out):
        return None
    bias = producer.weights.get("B")
    b_new = c.reshape(-1).astype(producer.weights["W"].dtype)
    if bias is not None:
        b_new = bias + b_new
    return _merged(producer, follower, weights={**producer.weights, "B": b_new})


def fuse_activation(producer: Op, follower: Op, rank: RankOf) -> Op | None:
    """Element-wise activation after an :data:`ACT_PRODUCERS` op -> the producer's ``act``."""
    if follower.kind not in FUSABLE_ACTS or producer.kind not in ACT_PRODUCERS:
        return None
    if producer.attrs.get("act") is not None:
        return None
    attrs = {**producer.attrs, "act": follower.kind}
    attrs.update({key: follower.attrs[key] for key in FUSABLE_ACTS[follower.kind]})
    return _merged(producer, follower, attrs=attrs)


RULES: tuple[Rule, ...] = (fold_batchnorm, fold_bias_add, fuse_activation)


def fuse(ops: Iterable[Op], graph_outputs: Iterable[str], rank: RankOf) -> list[Op]:
    """Apply :data:`RULES` in one topological pass and return the new op list."""
    ops = list(ops)
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
                    (m for rule in RULES if (m := rule(prev, op, rank)) is not None), None
                )
            if merged is not None:
                result[k] = merged
                del producer_at[op.inputs[0]]
                producer_at.update({o: k for o in merged.outputs})
                continue
        producer_at.update({o: len(result) for o in op.outputs})
        result.append(op)
    return result
