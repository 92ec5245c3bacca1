"""Build canonical :class:`Graph` objects by hand (tests, examples, synthetic models).

Output shapes come from the cost handlers' ``infer_shape``, so a hand-built graph is always
consistent with the cost model; :func:`check_shapes` runs the same inference over an imported
graph to catch importer/handler disagreements.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from splitter.cost.handlers import handler
from splitter.ir import Graph, Op, TensorSpec


class GraphBuilder:
    """Append ops one at a time; every call returns the name of the op's output tensor.

    >>> b = GraphBuilder((1, 1, 28, 28))
    >>> y = b.op("relu", b.input)
    >>> b.build(y).ops[0].kind
    'relu'
    """

    def __init__(
        self,
        input_shape: tuple[int, ...],
        *,
        layout: str = "NCHW",
        dtype: str = "float32",
        name: str = "hand",
        input_name: str = "input",
    ) -> None:
        self.layout = layout
        self.dtype = dtype
        self.name = name
        self.input = input_name
        spec = TensorSpec(input_name, input_shape, dtype)
        self.tensors: dict[str, TensorSpec] = {input_name: spec}
        self.ops: list[Op] = []

    def op(
        self,
        kind: str,
        *inputs: str,
        name: str | None = None,
        weights: Mapping[str, np.ndarray] | None = None,
        **attrs: Any,
    ) -> str:
        """Add an op of ``kind`` reading ``inputs``; returns its output tensor's name."""
        op_name = name or f"{kind}_{len(self.ops)}"
        out = f"{op_name}:out"
        draft = Op(op_name, kind, tuple(inputs), (out,), dict(attrs), dict(weights or {}))
        shape = handler(draft).infer_shape(
            draft, [self.tensors[i].shape for i in inputs], self.layout
        )
        self.tensors[out] = TensorSpec(out, tuple(int(d) for d in shape), self.dtype)
        self.ops.append(draft)
        return out

    def conv(
        self,
        x: str,
        out_ch: int,
        k: int = 3,
        *,
        stride: int = 1,
        pad: int = 0,
        groups: int = 1,
        bias: bool = True,
        act: str | None = None,
        name: str | None = None,
        seed: int = 0,
    ) -> str:
        """conv2d with seeded random weights ``(out_ch, in_ch/groups, k, k)``."""
        in_ch = self.tensors[x].shape[1 if self.layout == "NCHW" else 3]
        rng = np.random.default_rng(seed)
        weights = {"W": rng.standard_normal((out_ch, in_ch // groups, k, k)).astype(np.float32)}
        if bias:
            weights["B"] = rng.standard_normal(out_ch).astype(np.float32)
        return self.op(
            "conv2d",
            x,
            name=name,
            weights=weights,
            kernel=(k, k),
            strides=(stride, stride),
            pads=(pad, pad, pad, pad),
            dilations=(1, 1),
            groups=groups,
            act=act,
        )

    def dense(self, x: str, n_out: int, *, bias: bool = True, act: str | None = None) -> str:
        """dense with seeded random ``W (n_out, n_in)``."""
        n_in = self.tensors[x].shape[-1]
        rng = np.random.default_rng(n_out)
        weights = {"W": rng.standard_normal((n_out, n_in)).astype(np.float32)}
        if bias:
            weights["B"] = np.zeros(n_out, np.float32)
        return self.op("dense", x, weights=weights, act=act)

    def build(self, *outputs: str) -> Graph:
        """The finished :class:`Graph` with the given outputs."""
        return Graph(
            name=self.name,
            ops=tuple(self.ops),
            tensors=dict(self.tensors),
            inputs=(self.input,),
            outputs=tuple(outputs),
            layout=self.layout,
            source_format="hand",
        )


def check_shapes(graph: Graph) -> list[str]:
    """Ops whose recorded output shape differs from the handler's ``infer_shape`` (messages)."""
    problems = []
    for op in graph.ops:
        ins = [graph.tensor(n).shape for n in op.inputs]
        got = graph.tensor(op.outputs[0]).shape
        layout = "NHWC" if graph.tensor(op.outputs[0]).dtype == "int8" else graph.layout
        want = tuple(int(d) for d in handler(op).infer_shape(op, ins, layout))
        if want != got:
            problems.append(f"{op.name} ({op.kind}): recorded {got}, handler infers {want}")
    return problems
