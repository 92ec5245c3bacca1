"""Per-layer costs of SPEC.md: FLASH_j, RAM_j, MAC_j, OUT_j.

* :mod:`splitter.cost.handlers` - one handler per op kind (shape, MACs, scratch), FLASH per op;
* :mod:`splitter.cost.memory` - the arena rule (:func:`~splitter.cost.memory.plan_layer_memory`),
  shared with the C generator;
* :mod:`splitter.cost.layer` - :func:`~splitter.cost.layer.layer_cost` of one layer;
* :mod:`splitter.cost.layer_table` - the rows, totals, JSON and CSV ``splitter inspect`` prints.
"""
