"""Where a sub-model's boundary tensors live in its device's arena (model C -> firmware tables).

``splitter.codegen.model_c`` places every input and output tensor of a sub-model (plan.json's
``inputs`` / ``outputs``, in that order) at a byte offset of the device arena; the firmware
runtime receives input ``t`` at ``in[t]`` and sends output ``t`` from ``out[t]``
(``splitter/firmware_templates/runtime.h``: ``tensor_slot_t``). A pass-through tensor (an input
that is
also an output) has one slot used for both, so it is forwarded without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorSlot:
    """``nbytes`` bytes of tensor ``name`` at byte ``offset`` of the arena."""

    name: str
    offset: int
    nbytes: int


@dataclass(frozen=True)
class SubModelSlots:
    """The input and output slots of sub-model ``index``, in plan.json order."""

    index: int
    inputs: tuple[TensorSlot, ...]
    outputs: tuple[TensorSlot, ...]

    @staticmethod
    def of(row: SubModelSlots | tuple[int, int, int, int, int]) -> SubModelSlots:
        """``row`` itself, or a one-input, one-output sub-model from ``(index, input_offset,
        input_bytes, output_offset, output_bytes)`` (``GeneratedC.submodels``)."""
        if isinstance(row, SubModelSlots):
            return row
        k, in_off, in_b, out_off, out_b = row
        return SubModelSlots(k, (TensorSlot("", in_off, in_b),), (TensorSlot("", out_off, out_b),))
