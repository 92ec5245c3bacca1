"""LO-SC segments (``splitter segment``): one model run on one board in segments, its weights
streamed from the host or read from external flash (docs/guide/segments.md).

The feature in one place, one module per pipeline layer (``pyproject.toml``'s import contract
places each beside its layer): :mod:`~splitter.segments.problem` (the segmentation problem and
its CP-SAT model, the partition layer), :mod:`~splitter.segments.firmware` (the segment
firmware's C, with the code generator), :mod:`~splitter.segments.server` (the host's weight
server, with the device layer) and :mod:`~splitter.segments.build` (the driver of ``splitter
segment`` and ``plan --segments``). The C runtime is ``firmware_templates/segments.c``.
"""
