"""Click options shared by several commands, each defined once.

``input_shape_option`` and ``activation_bytes_option`` are the import options of ``inspect``,
``plan`` and ``compile``; ``objective_option`` is the planning objective of ``plan`` and
``compile``; ``port_option`` and ``verbose_option`` are the link options of ``run`` and
``bench``. Each is a decorator: ``@input_shape_option`` above the command function.
:func:`stop_on_sigterm` is how the commands that boot emulators or open ports end cleanly.
"""

from __future__ import annotations

import math
import signal
from pathlib import Path
from types import FrameType

import click

#: Largest element count of an ``--input-shape`` (2^32, as for a profile's tensors): more than
#: any MCU holds, and below ONNX's int64 dims and numpy's index range.
MAX_INPUT_ELEMENTS = 2**32


def parse_input_shape(
    ctx: click.Context | None, param: click.Parameter | None, values: tuple[str, ...]
) -> dict[str, tuple[int, ...]]:
    """``NAME=1x49x10x1`` (repeatable) -> {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    for value in values:
        name, sep, dims = value.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) <= 0:
            raise click.BadParameter(
                f"'{value}' is not NAME=DIMS; write e.g. input_1=1x49x10x1", param=param
            )
        if math.prod(shape) > MAX_INPUT_ELEMENTS:
            raise click.BadParameter(
                f"'{value}' has {math.prod(shape)} elements, more than {MAX_INPUT_ELEMENTS}; "
                "give the model's real dims",
                param=param,
            )
        shapes[name] = shape
    return shapes


#: ``OUT``: the output directory of ``splitter compile`` (every command after ``compile``).
out_argument = click.argument("out", metavar="OUT", type=click.Path(path_type=Path))

input_shape_option = click.option(
    "--input-shape",
    "input_shapes",
    multiple=True,
    callback=parse_input_shape,
    metavar="NAME=1x49x10x1",
    help="Static shape of a dynamic model input (repeatable).",
)

activation_bytes_option = click.option(
    "--activation-bytes",
    type=click.IntRange(min=1),
    default=None,
    help="Bytes per activation element (e.g. 1 for int8); default: the tensors' dtype.",
)

objective_option = click.option(
    "--objective",
    type=click.Choice(["latency", "throughput"]),
    default="latency",
    show_default=True,
)


def parse_ports(
    ctx: click.Context | None, param: click.Parameter | None, values: tuple[str, ...]
) -> dict[str, str]:
    """``[DEVICE=]PORT`` (repeatable) -> {device: url}; an unnamed port gets the key ``""``."""
    ports: dict[str, str] = {}
    for v in values:
        name, sep, url = v.partition("=")
        if sep and "://" not in name and "/" not in name:
            ports[name] = url
        else:
            ports[""] = v
    return ports


port_option = click.option(
    "--port",
    "ports",
    multiple=True,
    callback=parse_ports,
    metavar="[DEVICE=]PORT",
    help="Serial port, socket:// or tcp:// URL of a host-facing board (repeatable).",
)

verbose_option = click.option("--verbose", "-v", is_flag=True, help="Log every frame on stderr.")


def stop_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so emulators and ports are closed on the way out."""

    def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _raise_interrupt)
