"""A static batch as a :class:`~inferlab.inputs.workload.Workload`: the axes :func:`inferlab.estimate` takes.

``batch_size`` [request], ``isl`` and ``osl`` [token] (and a disaggregated deployment's
``prefill_batch`` [request]) are each a whole number or a list of them. With
``grid="broadcast"`` the lists broadcast together as numpy arrays do (equal lengths
pair up: ``isl=[128, 1024]`` with ``osl=[64, 256]`` is two points), as the keyword
arguments of :func:`inferlab.estimate` do; with ``grid="outer"`` each list is its own
axis and the grid holds every combination, as the CLI's comma-separated flags do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..checks import boolean, integer
from ..errors import SpecError

#: The static batch's axes, in the order of ``grid="outer"`` (batch, prompt, output).
AXES = ("batch_size", "isl", "osl")
#: Longest prompt or output [token] and largest batch [request] (as :mod:`inferlab.inputs.resolve`).
MAX_TOKENS = 2**31 - 1
MAX_BATCH = 10**9
#: Most values of one axis.
MAX_AXIS_VALUES = 100_000


def _axis(name: str, value: Any, maximum: int, what: str) -> int | tuple[int, ...]:
    """A whole number or a tuple of them (from a list, tuple or 1-D array)."""
    kind = getattr(value, "kind", None)  # a Lengths distribution
    if kind is not None:
        if kind != "fixed":
            raise SpecError(f"workload: {name} of a static batch is a whole number or a list of them (grid points), "
                            f"not a {kind} distribution; serve() takes distributions")
        value = value.value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, (list, tuple, np.ndarray)):
        if np.ndim(value) != 1 or not 1 <= len(value) <= MAX_AXIS_VALUES:
            raise SpecError(f"workload: {name} must be a whole number or a flat list of 1 to {MAX_AXIS_VALUES:,} "
                            f"of them, got {np.shape(value)} values; for other shapes call estimate() with arrays")
        return tuple(integer(f"workload: {name}", v, maximum=maximum, what=what, whole_floats=True) for v in value)
    return integer(f"workload: {name}", value, maximum=maximum, what=what, whole_floats=True)


def check(workload: Any) -> None:
    """Validate a static-batch workload in place (its axes made ints or tuples of ints)."""
    if workload.prefix is not None:
        raise SpecError("workload: prefix structure is simulated with traffic; a static batch takes the "
                        "deployment's prefix_cache (a hit rate or cached tokens)")
    if workload.grid not in ("broadcast", "outer"):
        raise SpecError(f"workload: grid must be 'broadcast' or 'outer', got {workload.grid!r:.60}")
    set_ = object.__setattr__
    set_(workload, "batch_size", _axis("batch_size", workload.batch_size, MAX_BATCH, "requests"))
    set_(workload, "isl", _axis("isl", workload.isl, MAX_TOKENS, "tokens"))
    set_(workload, "osl", _axis("osl", workload.osl, MAX_TOKENS, "tokens"))
    if workload.prefill_batch is not None:
        set_(workload, "prefill_batch", _axis("prefill_batch", workload.prefill_batch, MAX_BATCH, "requests"))
    set_(workload, "waves", boolean("workload: waves", workload.waves))


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def to_dict(workload: Any) -> dict[str, Any]:
    """The JSON-ready form: the axes, and ``prefill_batch``, ``grid`` and ``waves`` when set."""
    out = {name: _plain(getattr(workload, name)) for name in AXES}
    if workload.prefill_batch is not None:
        out["prefill_batch"] = _plain(workload.prefill_batch)
    if workload.grid != "broadcast":
        out["grid"] = workload.grid
    if workload.waves:
        out["waves"] = True
    return out


def estimate_kwargs(workload: Any) -> dict[str, Any]:
    """``batch_size``, ``isl``, ``osl`` (lists, or arrays shaped into an outer grid), and the options set.

    With ``grid="outer"`` each list becomes an array along its own axis of three (batch,
    prompt, output), the shapes the CLI gives :func:`inferlab.estimate`.
    """
    kw: dict[str, Any] = {}
    for i, name in enumerate(AXES):
        value = getattr(workload, name)
        if isinstance(value, tuple) and workload.grid == "outer":
            shape = [1, 1, 1]
            shape[i] = len(value)
            value = np.asarray(value).reshape(shape)
        kw[name] = _plain(value)
    if workload.prefill_batch is not None:
        kw["prefill_batch"] = _plain(workload.prefill_batch)
    if workload.waves:
        kw["waves"] = True
    return kw
