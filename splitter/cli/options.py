"""Click options shared by several commands, each defined once.

``input_shape_option`` and ``activation_bytes_option`` are the import options of ``inspect``,
``plan`` and ``compile``; ``objective_option`` is the planning objective of ``plan`` and
``compile`` and ``emulated_option`` which runs (emulated or on the parts) their times
predict; ``port_option`` and ``verbose_option`` are the link options of ``run`` and ``bench``.
Each is a decorator: ``@input_shape_option`` above the command function.
:func:`stop_on_sigterm` is how the commands that boot emulators or open ports end cleanly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

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

emulated_option = click.option(
    "--emulated",
    is_flag=True,
    help="Predict a run on the emulator (QEMU's clock, [calibration.emulated.*] factors) "
    "instead of on the parts ([calibration.real.*]).",
)
#: the ``--granularity`` modes every command takes (its help is :func:`_granularity_option`'s)
_GRANULARITY_HELP = (
    "supernode: every branch is one layer (the thesis); op: one layer per fused op, a cut "
    "carries every tensor live across it (skip tensors too)"
)


def _granularity_option(auto: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--granularity``; with ``auto`` (``plan``, ``compile``: they know the boards) also
    ``auto``."""
    extra = "; auto: supernode unless a block fits no board, then op." if auto else "."
    return click.option(
        "--granularity",
        type=click.Choice(["supernode", "op", "auto"] if auto else ["supernode", "op"]),
        default="supernode",
        show_default=True,
        help=_GRANULARITY_HELP + extra,
    )


granularity_option = _granularity_option(auto=False)
granularity_auto_option = _granularity_option(auto=True)

host_io_option = click.option(
    "--no-host-io",
    "no_host_io",
    is_flag=True,
    help="Leave the host's input and output transfers out of the latency, as the thesis does "
    "(default: counted, as the user waits for them). Layer profiles never count them.",
)

partial_execution_option = click.option(
    "--partial-execution",
    type=click.Choice(["off", "auto", "on"]),
    default="auto",
    show_default=True,
    help="PEX channel-by-channel loops (float32 NCHW, int8 models) and row-by-row loops (int8 "
    "convs): on = wherever they lower RAM, auto = only when no plan fits without them.",
)


def parse_split_layers(
    ctx: click.Context | None, param: click.Parameter | None, values: tuple[str, ...]
) -> dict[str, int]:
    """``NAME:K`` (repeatable) -> {layer name: k}; the layer itself is checked by the planner
    (:func:`splitter.graph.split.resolve_splits`)."""
    out: dict[str, int] = {}
    for value in values:
        name, sep, k = value.rpartition(":")
        if not sep or not name or not k.isdigit() or int(k) < 1:
            raise click.BadParameter(
                f"'{value}' is not NAME:K; write e.g. conv3:2 (layer names: `splitter inspect`)",
                param=param,
            )
        out[name] = int(k)
    return out


def split_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--split`` and ``--split-layer`` (``plan``, ``compile``; docs/split-layer.md)."""
    from splitter.partition.layer_split import MODES

    fn = click.option(
        "--split-layer", "split_layers", multiple=True, callback=parse_split_layers,
        metavar="NAME:K",
        help="Split layer NAME (a conv, grouped or depthwise too, or a dense op) into K "
        "output-channel slices (a grouped conv at group boundaries; repeatable; K = 1 keeps it "
        "whole).",
    )(fn)  # fmt: skip
    return click.option(
        "--split", "split", type=click.Choice(MODES), default="auto", show_default=True,
        help="Split inside a layer: auto = a conv / dense layer no board holds is split into "
        "output-channel slices over several boards (the number of slices chosen exactly); "
        "search = also try the heaviest layer, kept if the objective improves; off = never.",
    )(fn)  # fmt: skip


objective_option = click.option(
    "--objective",
    type=click.Choice(["latency", "throughput", "energy"]),
    default="latency",
    show_default=True,
    help="Minimise the latency, the waiting time (1 / throughput) or the energy of one "
    "inference (then optionally bounded by --max-latency-ms / --min-throughput).",
)

#: largest latency bound / throughput target taken (ms, inferences per s): beyond, a typo
MAX_LATENCY_MS = 1e7
MAX_THROUGHPUT = 1e6


def positive_figure(value: float | None, flag: str, top: float) -> float | None:
    """``value`` when finite, > 0 and <= ``top``; else a one-line UsageError naming ``flag``."""
    if value is None:
        return None
    if not math.isfinite(value) or value <= 0 or value > top:
        raise click.UsageError(f"{flag} {value:g}: give a number > 0 and at most {top:g}")
    return value


def energy_bound_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--max-latency-ms`` and ``--min-throughput``: the bounds of ``--objective energy``."""
    fn = click.option(
        "--min-throughput",
        type=float,
        default=None,
        metavar="PER_S",
        help="With --objective energy: only plans of at least this many inferences per second.",
    )(fn)
    return click.option(
        "--max-latency-ms",
        type=float,
        default=None,
        metavar="MS",
        help="With --objective energy: only plans whose latency is at most this.",
    )(fn)


def energy_bounds(
    objective: str, max_latency_ms: float | None, min_throughput: float | None
) -> dict[str, object]:
    """The solver options ``max_latency_s`` / ``max_waiting_s`` of :func:`energy_bound_options`
    (checked: finite, positive, sane; only with ``--objective energy``)."""
    ms = positive_figure(max_latency_ms, "--max-latency-ms", MAX_LATENCY_MS)
    rate = positive_figure(min_throughput, "--min-throughput", MAX_THROUGHPUT)
    if objective != "energy" and (ms is not None or rate is not None):
        raise click.UsageError("--max-latency-ms / --min-throughput bound --objective energy only")
    out: dict[str, object] = {}
    if ms is not None:
        out["max_latency_s"] = ms / 1000.0
    if rate is not None:
        out["max_waiting_s"] = 1.0 / rate
    return out


def solver_options(fn: Callable[..., None]) -> Callable[..., None]:
    """``--solver``, ``--time-limit``, ``--var-order`` and ``--val-order`` (``plan``, ``compile``).

    The orderings are branch and bound's (thesis section 4.3, :mod:`splitter.partition.bnb`); they
    apply to ``bnb`` and to the ``bnb`` entrant of ``auto``'s portfolio.
    """
    from splitter.partition import SOLVER_NAMES
    from splitter.partition.bnb import VAL_ORDERS, VAR_ORDERS

    for option in reversed(
        (
            click.option(
                "--solver", type=click.Choice(SOLVER_NAMES), default="auto", show_default=True,
                help="Partition solver; auto races the exact ones, the first proof wins.",
            ),
            click.option(
                "--time-limit", type=click.FloatRange(min=0.0, min_open=True), default=None,
                metavar="SECONDS",
                help="Stop the solver after SECONDS (default 60 for auto, dp and cpsat) with the "
                "best plan so far, reported as not proved optimal with its gap.",
            ),
            click.option(
                "--var-order", type=click.Choice(VAR_ORDERS), default=None,
                help="bnb variable order (layer chosen next) [input].",
            ),
            click.option(
                "--val-order", type=click.Choice(VAL_ORDERS), default=None,
                help="bnb value order (device tried first) [fastest].",
            ),
        )
    ):  # fmt: skip
        fn = option(fn)
    return fn


def solver_kwargs(
    solver: str, time_limit: float | None, var_order: str | None, val_order: str | None
) -> dict[str, object]:
    """The solver options of :func:`solver_options` as ``solve(**options)`` takes them.

    Orderings are refused with a solver other than ``bnb`` or ``auto`` (they would be ignored).
    """
    orders = {"var_order": var_order, "val_order": val_order}
    given = {k: v for k, v in orders.items() if v is not None}
    if given and solver not in ("bnb", "auto"):
        flags = " and ".join(f"--{k.replace('_', '-')}" for k in given)
        verb, pronoun = ("orders", "it") if len(given) == 1 else ("order", "them")
        raise click.UsageError(
            f"{flags} {verb} branch and bound; use {pronoun} with --solver bnb or auto"
        )
    return {**given, **({"time_limit": time_limit} if time_limit is not None else {})}


def search_options(fn: Callable[..., None]) -> Callable[..., None]:
    """What ``plan`` and ``compile`` search for and how: :data:`objective_option`,
    :func:`energy_bound_options` and :func:`solver_options`, in that order;
    :func:`search_settings` reads them."""
    return objective_option(energy_bound_options(solver_options(fn)))


def search_settings(
    objective: str,
    max_latency_ms: float | None,
    min_throughput: float | None,
    solver: str,
    time_limit: float | None,
    var_order: str | None,
    val_order: str | None,
) -> dict[str, object]:
    """The ``solve(**options)`` of :func:`search_options`: :func:`solver_kwargs` and
    :func:`energy_bounds`, each checked."""
    return {
        **solver_kwargs(solver, time_limit, var_order, val_order),
        **energy_bounds(objective, max_latency_ms, min_throughput),
    }


def model_plan_options(fn: Callable[..., None]) -> Callable[..., None]:
    """How ``plan`` and ``compile`` read the model and count its costs: ``--input-shape``,
    ``--activation-bytes``, ``--emulated``, ``--granularity`` (with ``auto``),
    ``--no-host-io``, ``--partial-execution``, ``--split`` / ``--split-layer``, in that order."""
    for option in reversed(
        (
            input_shape_option,
            activation_bytes_option,
            emulated_option,
            granularity_auto_option,
            host_io_option,
            partial_execution_option,
            split_options,
        )
    ):
        fn = option(fn)
    return fn


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

allow_edited_option = click.option(
    "--allow-edited",
    is_flag=True,
    help="Use OUT although files splitter generated there were edited (their SHA-256 in "
    "files.sha256 differs); without it an edited file is an error.",
)

verbose_option = click.option("--verbose", "-v", is_flag=True, help="Log every frame on stderr.")


def stop_on_sigterm() -> None:
    """Turn SIGTERM into KeyboardInterrupt, so emulators and ports are closed on the way out."""

    from splitter import signals

    signals.install()
