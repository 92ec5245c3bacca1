"""splitter: split a neural network over several STM32 microcontrollers.

Pipeline (one package per stage, imports flow one way):
``importers -> graph -> cost -> partition -> slicing -> codegen -> link``.
"""

__version__ = "0.1.0"
