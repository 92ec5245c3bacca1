"""From a canonical Graph to a strict chain of layers.

* :mod:`splitter.graph.supernodes` - minimal single-entry / single-exit regions (dominators);
* :mod:`splitter.graph.chain` - :func:`~splitter.graph.chain.build_chain`: input layer, fused
  conv+pool blocks, reshapes merged into the preceding layer, costs attached;
* :mod:`splitter.graph.builder` - hand-built graphs and the importer/handler shape check.
"""
