"""The layer-split search's prune (:func:`splitter.partition.layer_split._hopeless`) is sound.

When the unsplit chain has no plan, the search plans every combination of ``k_j in 2..K_j``
slices over the layers no device holds, unless the split into the most slices already leaves a
layer no device holds (run whole or with every PEX loop that lowers RAM): then it plans none.
That prune rests on a monotonicity: fewer slices never make a slice smaller, so a combination
with fewer slices is hopeless whenever the one with the most is. Checked here on every
combination of a real model's split layers, over four boards whose flash and RAM are swept
from "nothing fits" to "everything fits".
"""

from __future__ import annotations

import itertools
from pathlib import Path

from splitter.graph.split import layer_split
from splitter.hardware.boards import load_boards
from splitter.importers import load_chain
from splitter.partition.layer_split import _hopeless, _k_max, _needing_split, op_chain_of

MODELS = Path(__file__).resolve().parents[1] / "models"

BOARDS = """
[link]
baud = 115200
""" + "".join(
    f'[[device]]\nname = "d{i}"\nmcu = "STM32F405RG"\nflash = "{{flash}} KiB"\n'
    f'ram = "{{ram}} KiB"\n'
    for i in range(4)
)


def test_fewer_slices_are_hopeless_whenever_the_most_slices_are(tmp_path: Path) -> None:
    chain = load_chain(MODELS / "dw_wide.onnx")
    build = op_chain_of(None)
    verdicts: set[bool] = set()
    for flash, ram in itertools.product((48, 64, 80, 96, 128), (24, 48, 96)):
        path = tmp_path / f"b{flash}_{ram}.toml"
        path.write_text(BOARDS.replace("{flash}", str(flash)).replace("{ram}", str(ram)))
        boards = load_boards(path)
        free = _needing_split(chain, boards, set(), upper=False)
        if not free:
            continue
        most = tuple(_k_max(op, len(boards.devices)) for op in free)
        combos = list(itertools.product(*(range(2, k + 1) for k in most)))
        hopeless = {
            combo: _hopeless(
                chain,
                boards,
                build,
                [layer_split(op, k) for op, k in zip(free, combo, strict=True)],
            )
            for combo in combos
        }
        for few, many in itertools.product(hopeless, repeat=2):
            if all(a <= b for a, b in zip(few, many, strict=True)) and hopeless[many]:
                assert hopeless[few], (flash, ram, few, many)
        verdicts |= set(hopeless.values())
    assert verdicts == {True, False}  # the sweep reaches both sides of the prune
