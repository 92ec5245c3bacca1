"""A grid of shapes for the kernel cost table (``make costs``, ``splitter.measure.kernel_table``).

The layers of ``models/`` cover the shapes real networks use; the grid adds shapes around
them so the per-kernel fits see each term vary on its own. Each grid chain is a sequence of
ops (the table measures per op, so a chain is only a way to run many ops in one ELF): a seeded
random walk where each op's input is the previous op's output, over

* convolutions: regular (kernel 1, 3, 5; stride 1, 2; padding none or "same"), depthwise 3x3
  (stride 1, 2), pointwise 1x1; 4-48 output channels; fused ReLU / ReLU6 / none;
* max and average pools (2x2 stride 2, 3x3 stride 2 unpadded, 3x3 stride 1 "same");
* dense layers of 16-640 inputs and 8-256 outputs;
* global average pools (``mean`` over H and W) of 8-640 channels and 1-144 pixels, and after a
  1x1 conv with the squeeze that ends a classifier (:func:`mean_chain`: the reshape a copy);
* pools on their own (:func:`pool_chain`: max and average, 2x2 and 3x3, stride 1 and 2,
  padded or not, 4-96 channels) and constant pads (:func:`pad_chain`: one side, two sides,
  all around, 8-144 channels), so the pool and pad fits see channels, rows and taps vary apart;
* layer splits (:func:`split_chain`): a depthwise conv split into 2-5 channel slices, as the
  planner's operator-granularity chain (input slices, concat, compaction moves);
* PEX loops (:func:`pex_chain`): an inverted-residual block (1x1 or 3x3 generating conv,
  depthwise 3x3, 1x1 projection) run by one channel loop (int8 and float32 NCHW) or one row
  loop (int8), fused as the planner fuses them, so the loop kernels' fits see loops of many
  shapes, not only the few of ``models/``;
* the graphs an op class declares (``OpKind.grid_graphs``, :func:`declared_chains`),

in float32 NCHW, float32 NHWC and int8 NHWC (per-channel weight scales, as TFLite's).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from splitter.ir import Chain, Graph, Op, QuantParams, TensorSpec

SEED = 12
#: (layout, dtype) of the grid chains
KINDS = (("NCHW", "float32"), ("NHWC", "float32"), ("NHWC", "int8"))
WALKS = 10  # window-op chains per kind
STEPS = 9  # ops per chain
DENSE_WALKS = 2
#: fused activations drawn (an object array: ``None`` stays ``None``, names stay ``str``)
_ACTS = np.array(["relu", "relu6", None], dtype=object)


def _shape(layout: str, c: int, h: int, w: int) -> tuple[int, ...]:
    return (1, h, w, c) if layout == "NHWC" else (1, c, h, w)


class _Builder:
    """Accumulates the ops and tensors of one grid chain."""

    def __init__(self, name: str, layout: str, dtype: str, rng: np.random.Generator) -> None:
        self.name, self.layout, self.dtype, self.rng = name, layout, dtype, rng
        self.ops: list[Op] = []
        self.tensors: dict[str, TensorSpec] = {}

    def tensor(self, shape: tuple[int, ...]) -> str:
        """A new activation tensor of ``shape`` (int8: a per-tensor scale and zero point)."""
        name = f"t{len(self.tensors)}"
        quant = None
        if self.dtype == "int8":
            scale = float(self.rng.uniform(0.01, 0.05))
            quant = QuantParams((scale,), (int(self.rng.integers(-128, 20)),), None)
        self.tensors[name] = TensorSpec(name, shape, self.dtype, quant)
        return name

    def weights(self, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """``W`` and ``B`` of ``shape`` (int8 weights, int32 bias for int8 ops)."""
        if self.dtype == "int8":
            w = self.rng.integers(-127, 128, size=shape).astype(np.int8)
            b = self.rng.integers(-500, 500, size=shape[0]).astype(np.int32)
            return {"W": w, "B": b}
        w = self.rng.normal(0, 0.2, size=shape).astype(np.float32)
        return {"W": w, "B": self.rng.normal(0, 0.1, size=shape[0]).astype(np.float32)}

    def quant_attrs(self, x: str, out_ch: int) -> dict[str, object]:
        """The importer's per-channel weight and bias scale attributes of an int8 op."""
        if self.dtype != "int8":
            return {}
        in_scale = self.tensors[x].quant.scale[0]  # type: ignore[union-attr]
        w_scale = tuple(float(v) for v in self.rng.uniform(0.002, 0.02, size=out_ch))
        zeros = (0,) * out_ch
        return {"w_scale": w_scale, "w_zero_point": zeros, "w_axis": 0,
                "b_scale": tuple(in_scale * s for s in w_scale), "b_zero_point": zeros,
                "b_axis": 0}  # fmt: skip

    def add(self, kind: str, x: str, y_shape: tuple[int, ...], attrs: dict[str, object],
            weights: dict[str, np.ndarray] | None = None) -> str:  # fmt: skip
        y = self.tensor(y_shape)
        name = f"{kind}_{len(self.ops)}"
        self.ops.append(Op(name, kind, (x,), (y,), attrs, weights or {}, (name,)))
        return y

    def graph(self, first: str, last: str) -> Graph:
        return Graph(self.name, tuple(self.ops), dict(self.tensors), (first,), (last,),
                     self.layout, "grid")  # fmt: skip


def _window_step(b: _Builder, x: str, c: int, h: int) -> tuple[str, int, int]:
    """One random window op on a ``c`` x ``h`` x ``h`` input; the output and its c, h."""
    rng = b.rng
    choice = rng.choice(["conv", "conv", "depthwise", "pointwise", "pointwise", "pool"])
    act = None if b.dtype == "int8" and rng.random() < 0.3 else rng.choice(_ACTS)
    if choice == "pool":
        kind = str(rng.choice(["maxpool", "avgpool"]))
        r = rng.random()
        k, s, p = (
            (2, 2, 0) if h >= 4 and r < 0.45 else (3, 2, 0) if h >= 5 and r < 0.7 else (3, 1, 1)
        )
        oh = (h + 2 * p - k) // s + 1
        attrs: dict[str, object] = {"kernel": (k, k), "strides": (s, s), "pads": (p, p, p, p),
                                    "act": None, "count_include_pad": False}  # fmt: skip
        y = b.add(kind, x, _shape(b.layout, c, oh, oh), attrs)
        # the int8 pools keep their input's scale and zero point (TFLite's rule)
        b.tensors[y] = replace(b.tensors[y], quant=b.tensors[x].quant)
        return y, c, oh
    if choice == "depthwise":
        k, o, g = 3, c, c
        s = 2 if h >= 6 and rng.random() < 0.4 else 1
        p = 1
    elif choice == "pointwise":
        k, s, p, g = 1, 1, 0, 1
        o = int(rng.choice([4, 8, 12, 16, 24, 32, 48]))
    else:
        k = int(rng.choice([1, 3, 3, 5])) if h >= 5 else 1
        s = 2 if h >= 8 and rng.random() < 0.4 else 1
        p = k // 2 if rng.random() < 0.6 else 0
        o, g = int(rng.choice([4, 8, 16, 24, 32])), 1
    oh = (h + 2 * p - k) // s + 1
    attrs = {"kernel": (k, k), "strides": (s, s), "pads": (p, p, p, p), "dilations": (1, 1),
             "groups": g, "act": act, **b.quant_attrs(x, o)}  # fmt: skip
    weights = b.weights((o, c // g, k, k))
    return b.add("conv2d", x, _shape(b.layout, o, oh, oh), attrs, weights), o, oh


def window_chain(layout: str, dtype: str, walk: int) -> Chain:
    """One random walk of :data:`STEPS` window ops."""
    from splitter.graph.chain import build_chain

    rng = np.random.default_rng([SEED, walk, KINDS.index((layout, dtype))])
    b = _Builder(f"grid_{layout}_{dtype}_{walk}", layout, dtype, rng)
    c, h = int(rng.choice([3, 8, 16, 24])), int(rng.choice([12, 16, 20, 24]))
    while c * h * h * (1 if dtype == "int8" else 4) > 16 * 1024:
        h -= 2
    first = x = b.tensor(_shape(layout, c, h, h))
    for _ in range(STEPS):
        x, c, h = _window_step(b, x, c, h)
        if h < 3 or c * h * h > 8 * 1024:
            break
    return build_chain(b.graph(first, x))


def dense_chain(dtype: str, walk: int) -> Chain:
    """A sequence of dense layers with random widths."""
    from splitter.graph.chain import build_chain

    rng = np.random.default_rng([SEED, 100 + walk, dtype == "int8"])
    b = _Builder(f"grid_dense_{dtype}_{walk}", "NHWC" if dtype == "int8" else "NCHW", dtype, rng)
    n = int(rng.choice([16, 64, 250, 640]))
    first = x = b.tensor((1, n))
    for _ in range(STEPS - 3):
        m = int(rng.choice([8, 10, 32, 64, 100, 256]))
        act = rng.choice(_ACTS[[0, 2]])
        attrs = {"act": act, **b.quant_attrs(x, m)}
        x = b.add("dense", x, (1, m), attrs, b.weights((m, n)))
        n = m
    return build_chain(b.graph(first, x))


def grid_chains() -> list[Chain]:
    """Every grid chain (module docstring)."""
    chains = [window_chain(lay, dt, k) for lay, dt in KINDS for k in range(WALKS)]
    chains += [dense_chain(dt, k) for dt in ("float32", "int8") for k in range(DENSE_WALKS)]
    chains += [pex_chain(lay, dt, by, k) for lay, dt, by in PEX_KINDS for k in range(PEX_WALKS)]
    chains += [mean_chain(lay, dt, k) for lay, dt in KINDS for k in range(MEAN_WALKS)]
    chains += [pool_chain(lay, dt, k) for lay, dt in KINDS for k in range(POOL_WALKS)]
    chains += [pad_chain(lay, dt, k) for lay, dt in KINDS for k in range(PAD_WALKS)]
    chains += [split_chain(lay, dt, k) for lay, dt in KINDS for k in range(SPLIT_WALKS)]
    return chains + declared_chains()


def declared_chains() -> list[Chain]:
    """The grid graphs the op classes declare (``OpKind.grid_graphs``: kinds no model of
    ``models/`` uses), in the order of ``splitter ops``."""
    from splitter.codegen.ops import KINDS as OP_KINDS
    from splitter.graph.chain import build_chain

    return [build_chain(g) for kind in OP_KINDS.values() for g in kind.grid_graphs()]


#: PEX loop chains per kind: (layout, dtype, loop kind)
PEX_KINDS = (("NHWC", "int8", "channel"), ("NHWC", "int8", "row"), ("NCHW", "float32", "channel"))
PEX_WALKS = 24


def _block(
    b: _Builder, x: str, c: int, h: int, project: bool | None = None
) -> tuple[list[str], str]:
    """An inverted-residual block with random widths: a generating conv (1x1, or 3x3 stride 1
    or 2), a depthwise 3x3 (stride 1 or 2), and a 1x1 projection (``project``; ``None``: four
    blocks in five); the names of its ops and its output."""
    rng = b.rng
    e = int(c * rng.choice([2, 3, 4, 6]))
    first = rng.random() < 0.7
    k, s = (1, 1) if first else (3, int(rng.choice([1, 2])))
    p = k // 2
    oh = (h + 2 * p - k) // s + 1
    attrs: dict[str, object] = {"kernel": (k, k), "strides": (s, s), "pads": (p, p, p, p),
                                "dilations": (1, 1), "groups": 1, "act": "relu6",
                                **b.quant_attrs(x, e)}  # fmt: skip
    x = b.add("conv2d", x, _shape(b.layout, e, oh, oh), attrs, b.weights((e, c, k, k)))
    s = 2 if oh >= 8 and rng.random() < 0.4 else 1
    dh = (oh + 2 - 3) // s + 1
    attrs = {"kernel": (3, 3), "strides": (s, s), "pads": (1, 1, 1, 1), "dilations": (1, 1),
             "groups": e, "act": "relu6", **b.quant_attrs(x, e)}  # fmt: skip
    x = b.add("conv2d", x, _shape(b.layout, e, dh, dh), attrs, b.weights((e, 1, 3, 3)))
    if not (rng.random() >= 0.2 if project is None else project):
        return [op.name for op in b.ops], x
    o = int(rng.choice([8, 12, 16, 24, 32]))
    attrs = {"kernel": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1),
             "groups": 1, "act": rng.choice(_ACTS), **b.quant_attrs(x, o)}  # fmt: skip
    x = b.add("conv2d", x, _shape(b.layout, o, dh, dh), attrs, b.weights((o, e, 1, 1)))
    return [op.name for op in b.ops], x


def pex_chain(layout: str, dtype: str, by: str, walk: int) -> Chain:
    """One inverted-residual block run by one PEX loop of kind ``by`` (``channel`` over the
    expanded channels, int8 in steps of 16, 4 or 1 channels per iteration by ``walk``, one
    such block in four without its projection so the loop ends in a depthwise writing its slab;
    or ``row`` over the output rows, in bands of 1, 2, 4 or 8 rows by ``walk``): the loop's
    layers fused as the planner fuses them (``splitter.cost.pex_chain.fuse_layers``)."""
    from dataclasses import replace

    from splitter.cost.layer import itemsize_function
    from splitter.cost.pex_chain import fuse_layers
    from splitter.graph.chain import build_chain
    from splitter.ir import ChannelLoop

    rng = np.random.default_rng([SEED, 200 + walk, PEX_KINDS.index((layout, dtype, by))])
    b = _Builder(f"grid_pex_{by}_{layout}_{dtype}_{walk}", layout, dtype, rng)
    c, h = int(rng.choice([4, 8, 16, 24])), int(rng.choice([8, 12, 16, 20, 24]))
    while c * h * h * (1 if dtype == "int8" else 4) > 12 * 1024:
        h -= 2
    first = b.tensor(_shape(layout, c, h, h))
    steps = by == "channel" and dtype == "int8"
    names, last = _block(b, first, c, h, (walk // 3 % 4 != 3) if steps else None)
    chain = build_chain(b.graph(first, last))
    y0 = b.tensors[b.ops[0].outputs[0]]
    end = b.tensors[b.ops[len(names) - 1].outputs[0]]
    count = (
        int(y0.shape[-1] if layout == "NHWC" else y0.shape[1])
        if by == "channel"
        else int(end.shape[1])
    )
    owner = [j for j, layer in enumerate(chain.layers) for _ in layer.ops]
    a, z = owner[0], owner[len(names) - 1]
    # a row loop in bands of 1, 2, 4 or 8 rows in turn (the bands the planner picks)
    band = (1, 2, 4, 8)[walk % 4] if by == "row" else 1
    step = min((16, 4, 1)[walk % 3], count) if steps else 1  # as the planner clamps it
    loop = ChannelLoop(tuple(names), count, by, step=step, band=band)
    fused = fuse_layers(chain, chain.layers[a : z + 1], [loop], itemsize_function(None))
    layers = (*chain.layers[:a], fused, *chain.layers[z + 1 :])
    return replace(chain, layers=tuple(replace(x, index=k) for k, x in enumerate(layers)))


MEAN_WALKS = 10
#: walks from which a mean follows a 1x1 conv and ends in a squeeze (:func:`mean_chain`)
SQUEEZE_WALK = 4


def mean_chain(layout: str, dtype: str, walk: int) -> Chain:
    """A global average pool (``mean`` over H and W) of a random ``C x H x W`` input: the
    reduction length and the channel count vary apart (the kernel's per-output requantisation
    against its per-input sum). From walk :data:`SQUEEZE_WALK` on, a classifier's end: a 1x1
    conv, the mean (``keepdims``) and the reshape to ``(1, C)`` in one layer, after the conv's
    larger one, so the arena moves the reshape's output and it copies (``k_copy``: channel
    counts of every remainder by 4)."""
    from splitter.graph.chain import build_chain

    rng = np.random.default_rng([SEED, 300 + walk, KINDS.index((layout, dtype))])
    b = _Builder(f"grid_mean_{layout}_{dtype}_{walk}", layout, dtype, rng)
    axes = (1, 2) if layout == "NHWC" else (2, 3)
    if walk < SQUEEZE_WALK:
        c, h = int(rng.choice([8, 32, 96, 256, 640])), int(rng.choice([1, 2, 3, 5, 8, 12]))
        first = b.tensor(_shape(layout, c, h, h))
        y = b.add("mean", first, (1, c), {"axes": axes, "keepdims": False, "act": None})
        return build_chain(b.graph(first, y))
    c, h = int(rng.choice([5, 6, 7, 12, 13, 30, 50, 99, 200])), int(rng.choice([2, 3, 4, 6, 7]))
    while c * h * h * 4 > 16 * 1024:
        h -= 1
    cin = int(rng.choice([8, 16, 24]))
    first = x = b.tensor(_shape(layout, cin, h, h))
    attrs: dict[str, object] = {"kernel": (1, 1), "strides": (1, 1), "pads": (0, 0, 0, 0),
                                "dilations": (1, 1), "groups": 1, "act": None,
                                **b.quant_attrs(x, c)}  # fmt: skip
    x = b.add("conv2d", x, _shape(layout, c, h, h), attrs, b.weights((c, cin, 1, 1)))
    x = b.add("mean", x, _shape(layout, c, 1, 1), {"axes": axes, "keepdims": True, "act": None})
    y = b.add("reshape", x, (1, c), {"shape": (1, c)})
    b.tensors[y] = replace(b.tensors[y], quant=b.tensors[x].quant)
    return build_chain(b.graph(first, y))


POOL_WALKS = 6
#: (kernel, stride, pad) of the pools :func:`pool_chain` draws
POOLS = ((2, 2, 0), (3, 2, 0), (3, 1, 1), (3, 2, 1), (2, 1, 0))


def pool_chain(layout: str, dtype: str, walk: int) -> Chain:
    """Three pools in a row (max or average, each of :data:`POOLS`) on a random ``C x H x W``
    input: channels, output rows and valid taps vary apart (the held-out models' pools are
    3x3 stride 2 and 2x2 stride 2 of 16-128 channels; the grid draws none of their shapes)."""
    from splitter.graph.chain import build_chain

    rng = np.random.default_rng([SEED, 500 + walk, KINDS.index((layout, dtype))])
    b = _Builder(f"grid_pool_{layout}_{dtype}_{walk}", layout, dtype, rng)
    c, h = int(rng.choice([4, 8, 12, 24, 40, 96])), int(rng.choice([6, 9, 11, 13, 17, 20]))
    while c * h * h * (1 if dtype == "int8" else 4) > 24 * 1024:
        h -= 1
    first = x = b.tensor(_shape(layout, c, h, h))
    for _ in range(3):
        k, s, p = POOLS[int(rng.integers(len(POOLS)))]
        if h + 2 * p < k + s:
            break
        oh = (h + 2 * p - k) // s + 1
        kind = str(rng.choice(["maxpool", "avgpool"]))
        attrs: dict[str, object] = {"kernel": (k, k), "strides": (s, s), "pads": (p, p, p, p),
                                    "act": None, "count_include_pad": False}  # fmt: skip
        y = b.add(kind, x, _shape(layout, c, oh, oh), attrs)
        b.tensors[y] = replace(b.tensors[y], quant=b.tensors[x].quant)
        x, h = y, oh
    return build_chain(b.graph(first, x))


PAD_WALKS = 4
#: (top, left, bottom, right) of the pads :func:`pad_chain` draws
PADS = ((0, 0, 1, 1), (1, 1, 1, 1), (1, 0, 0, 0), (2, 2, 2, 2), (0, 1, 0, 1))


def pad_chain(layout: str, dtype: str, walk: int) -> Chain:
    """Three constant pads in a row (each of :data:`PADS`) on a random ``C x H x W`` input: the
    rows copied, their length and the padded output vary apart (the held-out MobileNetV2's
    pads are 48-192 channels, bottom and right; the grid draws other channel counts)."""
    from splitter.graph.chain import build_chain

    rng = np.random.default_rng([SEED, 600 + walk, KINDS.index((layout, dtype))])
    b = _Builder(f"grid_pad_{layout}_{dtype}_{walk}", layout, dtype, rng)
    c, h = int(rng.choice([8, 12, 24, 40, 72, 144])), int(rng.choice([3, 5, 6, 10, 14, 20]))
    drawn = [PADS[int(i)] for i in rng.integers(len(PADS), size=3)]
    gh, gw = (sum(p[0] + p[2] for p in drawn), sum(p[1] + p[3] for p in drawn))
    item = 1 if dtype == "int8" else 4
    while c * (h + gh) * (h + gw) * item > 48 * 1024 and h > 3:
        h -= 1
    while c * (h + gh) * (h + gw) * item > 48 * 1024:
        c //= 2
    first = x = b.tensor(_shape(layout, c, h, h))
    w = h
    for t, left, bot, r in drawn:
        pads = (0, t, left, 0, 0, bot, r, 0) if layout == "NHWC" else (0, 0, t, left, 0, 0, bot, r)
        h, w = h + t + bot, w + left + r
        shape = (1, h, w, c) if layout == "NHWC" else (1, c, h, w)
        y = b.add("pad", x, shape, {"pads": pads, "value": 0.0})
        b.tensors[y] = replace(b.tensors[y], quant=b.tensors[x].quant)
        x = y
    return build_chain(b.graph(first, x))


SPLIT_WALKS = 4


def split_chain(layout: str, dtype: str, walk: int) -> Chain:
    """A depthwise conv (3x3 or 7x7) of a random ``C x H x W`` input split into ``k`` slices
    of its channels (:mod:`splitter.graph.split`), as the planner's operator-granularity chain:
    its input slices (``k_slice_part``), the slices, the concat and every layer's compaction
    ``memmove`` s of many sizes and alignments (``models/`` has the splits of two models)."""
    from splitter.graph.chain import build_chain
    from splitter.graph.split import layer_split, split_graph

    rng = np.random.default_rng([SEED, 400 + walk, KINDS.index((layout, dtype))])
    b = _Builder(f"grid_split_{layout}_{dtype}_{walk}", layout, dtype, rng)
    c, h = int(rng.choice([24, 40, 64, 96, 150, 256])), int(rng.choice([4, 6, 8, 12]))
    while c * h * h * (1 if dtype == "int8" else 4) > 12 * 1024:
        h -= 2
    k = int(rng.choice([3, 7]))
    first = b.tensor(_shape(layout, c, h, h))
    attrs: dict[str, object] = {"kernel": (k, k), "strides": (1, 1), "pads": (k // 2,) * 4,
                                "dilations": (1, 1), "groups": c, "act": "relu",
                                **b.quant_attrs(first, c)}  # fmt: skip
    y = b.add("conv2d", first, _shape(layout, c, h, h), attrs, b.weights((c, 1, k, k)))
    graph = b.graph(first, y)
    split = layer_split(graph.ops[0], int(rng.choice([2, 3, 4, 5])))
    return build_chain(split_graph(graph, [split]), granularity="op")
