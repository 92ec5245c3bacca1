"""Constraints (1)-(5) of SPEC.md: global checks before any search, and explanations.

Every message says which constraint fails, for which layer and device, by how many bytes, and
what would fix it (a bigger part, a smaller flash reserve). Partial execution, which lowers RAM_j,
is advised by :func:`splitter.partition.partial.plan_partial` when planning without it fails.
"""

from __future__ import annotations

from splitter.errors import InfeasibleError
from splitter.partition.problem import Problem


def _kib(nbytes: int | float) -> str:
    return f"{nbytes / 1024:.2f} KiB"


def _where(problem: Problem) -> str:
    return problem.boards.source_path or "boards"


def global_violation(problem: Problem) -> str | None:
    """The first violated global constraint (1)-(3) or single-layer fit, as a message, else None.

    (1) ``sum_j FLASH_j <= sum_i FLASH_i``; (2) ``max_j FLASH_j <= max_i FLASH_i``;
    (3) ``max_j RAM_j <= max_i RAM_i``; then every layer must fit (4) and (5) on one device alone.
    """
    devs = problem.boards.devices
    where = _where(problem)
    total, cap = int(problem.flash.sum()), int(problem.dev_flash.sum())
    if total > cap:
        code = " after each one's firmware code" if problem.reserves else ""
        return (
            f"{where}: not enough flash: the layers need {_kib(total)} of flash, all devices "
            f"together offer {_kib(cap)}{code} (short by {total - cap} B); add a device, use "
            "bigger parts, lower the flash reserves, or run it by segments on one board, the "
            "weights loaded from outside flash (`splitter segment MODEL --target ONE.toml -o OUT`)"
        )
    for kind, need_arr, have_arr, note in (
        ("flash", problem.flash, problem.dev_flash, problem.flash_note),
        ("RAM", problem.ram, problem.dev_ram, problem.ram_note),
    ):
        j, i = int(need_arr.argmax()), int(have_arr.argmax())
        need, have = int(need_arr[j]), int(have_arr[i])
        if need > have:
            fix = "use a bigger part"
            return (
                f"{where}: layer {j} ({problem.names[j]}) needs {_kib(need)} of {kind}, more "
                f"than any device: the largest, {devs[i].name} "
                f"({devs[i].part.name}) has {_kib(have)}{note(i)} (short by {need - have} B); "
                f"{fix}"
            )
    for j in range(problem.n):
        if not problem.allowed[j].any():
            return (
                f"{where}: no device fits layer {j} ({problem.names[j]}): it needs "
                f"{_kib(int(problem.flash[j]))} flash and {_kib(int(problem.ram[j]))} RAM, and no "
                "single device has both; use a part with enough of both"
            )
    return None


def check_global(problem: Problem) -> None:
    """Raise :class:`InfeasibleError` if a global constraint (1)-(3) fails (before any search)."""
    msg = global_violation(problem)
    if msg is not None:
        raise InfeasibleError(msg)


def explain_infeasible(problem: Problem) -> str:
    """Why no assignment satisfies (4)-(5) once (1)-(3) hold: the flash packing that fails."""
    msg = global_violation(problem)
    if msg is not None:
        return msg
    # flash each device could take = what the layers that fit it by RAM need at most
    devs = problem.boards.devices
    ram_only = [j for j in range(problem.n) if problem.allowed[j].sum() == 1]
    pinned = [0] * problem.d
    for j in ram_only:
        pinned[int(problem.allowed[j].argmax())] += int(problem.flash[j])
    for i, need in enumerate(pinned):
        if need > problem.dev_flash[i]:
            over = need - int(problem.dev_flash[i])
            return (
                f"{_where(problem)}: not enough flash on device {devs[i].name}: the layers "
                f"only it can hold (by RAM) need {_kib(need)} of flash, it has "
                f"{_kib(int(problem.dev_flash[i]))}{problem.flash_note(i)} (short by {over} B); "
                "use a bigger part or a smaller flash reserve"
            )
    total, cap = int(problem.flash.sum()), int(problem.dev_flash.sum())
    return (
        f"{_where(problem)}: the layers do not pack into the devices: they need "
        f"{_kib(total)} of flash in all ({_kib(cap)} offered) but no assignment packs them into "
        "the devices whose RAM each layer fits; use a bigger part or a smaller flash reserve"
    )
