"""Every op-kind table of the tree agrees with the one definition per kind in splitter/ops.py."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from splitter import ops
from splitter.codegen import model_c
from splitter.codegen import ops as emitters
from splitter.codegen.ops.base import ACT_CODES
from splitter.cost.handlers import HANDLERS
from splitter.graph import chain
from splitter.importers import onnx_fuse, onnx_ops, onnx_qdq, tflite_ops


def unknown(keys: Iterable[object]) -> set[object]:
    """Keys that are not canonical op kinds."""
    return {k for k in keys if k not in ops.OPS}


def test_ops_tables_are_the_op_classes_definitions() -> None:
    """OPS is read off the registry: one definition per op class, keyed by its kind."""
    assert list(ops.OPS) == list(emitters.KINDS)
    assert all(d.kind == k for k, d in ops.OPS.items())
    assert all(c.definition is ops.OPS[k] for k, c in emitters.KINDS.items())
    assert HANDLERS is emitters.KINDS


@pytest.mark.parametrize(
    "table",
    [
        HANDLERS,
        onnx_fuse.FUSABLE_ACTS,
        onnx_fuse.ACT_PRODUCERS,
        chain.POOL_KINDS,
        model_c.NCHW_ONLY_KINDS,
        emitters.EMITTERS,
        {k for k in ACT_CODES if k is not None},
        {j for d in ops.OPS.values() for j in d.joins},
    ],
)
def test_every_table_key_is_a_known_kind(table: Iterable[object]) -> None:
    assert unknown(table) == set()


def test_every_kind_has_a_cost_handler() -> None:
    assert set(HANDLERS) == set(ops.OPS)


def test_activations_agree() -> None:
    """Every activation fuses, carries its attributes and has a fused-activation code."""
    assert {k: ops.OPS[k].attrs for k in ops.ACTIVATIONS} == onnx_fuse.FUSABLE_ACTS
    assert set(ACT_CODES) == {None, *ops.ACTIVATIONS}
    assert {k for k, d in ops.OPS.items() if "act" in d.attrs} == onnx_fuse.ACT_PRODUCERS


def test_every_kernel_claim_has_an_emitter() -> None:
    """float claims <-> float emitters, int8 claims <-> int8 emitters, both ways."""
    floats = ops.kinds_with_kernel("NCHW", "float32") | ops.kinds_with_kernel("NHWC", "float32")
    assert {k for k, e in emitters.EMITTERS.items() if e.has_float()} == floats
    assert {k for k, e in emitters.EMITTERS.items() if e.has_int8()} == ops.kinds_with_kernel(
        "NHWC", "int8"
    )
    assert all(e.kind == k for k, e in emitters.EMITTERS.items())
    assert ops.kinds_with_kernel("NCHW", "int8") == frozenset()


def test_importer_op_maps_match_the_source_ops() -> None:
    """The source operators each OpDef names are exactly the importers' converter tables."""
    onnx_sources = set(onnx_ops.CONVERTERS) | onnx_qdq.QDQ_OPS  # Q / DQ: onnx_qdq lowers them
    assert onnx_sources == {n for d in ops.OPS.values() for n in d.onnx}
    assert set(tflite_ops.CONVERTERS) == {n for d in ops.OPS.values() for n in d.tflite}


def test_fused_activation_attrs() -> None:
    assert {"act_min", "act_max", "alpha", "beta"} == ops.FUSED_ACT_ATTRS


def test_every_named_kernel_is_declared_in_its_header() -> None:
    """A :class:`~splitter.codegen.ops.opdef.Kernel` an op class calls exists in its header."""
    import re

    from splitter.codegen.model_c import KERNELS_DIR

    named = [k for c in emitters.KINDS.values() for k in c.c_kernels]
    assert named  # the transpose kernels at least
    for kernel in named:
        header = (KERNELS_DIR / kernel.header).read_text()
        assert re.search(rf"\b{kernel.symbol}\(", header), (kernel, kernel.header)


def test_declared_converters_serve_the_definitions_operators() -> None:
    """A converter an op class declares is for an operator its ``definition`` names, and the
    importers' tables hold it."""
    for kind in emitters.KINDS.values():
        assert set(kind.onnx_converters) <= set(kind.definition.onnx), kind.kind
        assert set(kind.tflite_converters) <= set(kind.definition.tflite), kind.kind
    assert set(onnx_ops.declared_converters()) <= set(onnx_ops.CONVERTERS)
    assert set(tflite_ops.declared_converters()) <= set(tflite_ops.CONVERTERS)


def test_the_registry_is_ordered_by_the_order_attribute() -> None:
    """Op classes register themselves; ``splitter ops`` lists them by ``order`` (the order the
    explicit ``_CLASSES`` list had, new kinds where their ``order`` puts them)."""
    kinds = list(emitters.KINDS.values())
    assert [type(k).order for k in kinds] == sorted(type(k).order for k in kinds)
    assert list(emitters.KINDS)[:4] == ["conv2d", "conv_transpose", "dense", "matmul"]
    assert list(emitters.KINDS)[-2:] == ["quantize", "dequantize"]
