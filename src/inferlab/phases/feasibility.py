"""Which points of a static-batch grid can run, and why the others cannot.

A grid keeps its feasible points and marks the others with a reason; only a call with
nothing to show (a single point that does not fit, or a grid none of whose points fits)
raises :class:`~inferlab.errors.InfeasibleError`, with the bytes needed and available and
what would fit. The rule is the same for :func:`inferlab.estimate`, :func:`inferlab.sweep`
and ``inferlab estimate``.

A point is infeasible when not one sequence of its context fits next to the weights, or
when its batch's KV cache does not fit and running it in waves was not asked for.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..core.memory import MemoryPlan, require_weights_fit
from ..errors import CombinationError, InfeasibleError, SpecError, option


def _flat(x: Any, shape: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x, float)
    return np.ravel(x if x.shape == shape else np.broadcast_to(x, shape))


def static_batch_reasons(plan: MemoryPlan, dp: int, replica: np.ndarray, context: np.ndarray, shape: tuple[int, ...],
                         waves: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per grid point: whether it runs, and why not ('' where it does).

    Parameters
    ----------
    plan : MemoryPlan
        One GPU's memory at every point (the whole batch's KV cache).
    dp : int
        Replicas the batch is split over.
    replica, context : array [request, token]
        Sequences per replica and tokens per sequence (``isl + osl``).
    shape : tuple of int
        The grid's shape.
    waves : bool
        Whether a batch whose KV cache does not fit may run in waves.

    Returns
    -------
    feasible : array of bool, reason : array of str (object)
    """
    max_seq = _flat(plan.max_sequences, shape)
    batch = _flat(replica, shape)
    no_room = max_seq < 1
    too_big = ~no_room & (batch > max_seq) & (not waves)
    reason = np.full(int(np.prod(shape)), "", dtype=object)
    if np.any(no_room):
        need = plan.weights + plan.reserve + _flat(plan.workspace, shape) + _flat(plan.kv_per_sequence, shape)
        reason[no_room] = [
            f"one sequence of {c:,.0f} tokens does not fit: needs {n / 1e9:.1f} GB per GPU (weights "
            f"{plan.weights / 1e9:.1f} GB) but {plan.budget / 1e9:.1f} GB is usable"
            for c, n in zip(_flat(context, shape)[no_room], need[no_room])]
    if np.any(too_big):
        waves_hint = option("waves", True)
        reason[too_big] = [
            f"the KV cache of {b:.0f} sequences of {c:,.0f} tokens needs {kv / 1e9:.1f} GB per GPU but "
            f"{free / 1e9:.1f} GB is free after weights; at most {m * dp:.0f} fit (or pass {waves_hint})"
            for b, c, kv, free, m in zip(batch[too_big], _flat(context, shape)[too_big],
                                         _flat(plan.kv_batch, shape)[too_big], _flat(plan.kv_budget, shape)[too_big],
                                         max_seq[too_big])]
    return (reason == "").reshape(shape), reason.reshape(shape)


def _point_plan(plan: MemoryPlan, shape: tuple[int, ...], j: int) -> MemoryPlan:
    at = lambda x: np.asarray(_flat(x, shape)[j])
    return replace(plan, workspace=at(plan.workspace), kv_per_sequence=at(plan.kv_per_sequence),
                   kv_batch=at(plan.kv_batch), max_sequences=at(plan.max_sequences))


def prefix_reasons(cache: Any, isl: np.ndarray, feasible: np.ndarray, reason: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``feasible`` and ``reason`` with the points whose prompt is shorter than a cached prefix
    given in tokens marked: a prompt cannot hold a longer prefix (the prefill would skip all of
    it, a meaningless point, not a free one)."""
    tokens = getattr(cache, "cached_tokens", None)
    if tokens is None:
        return feasible, reason
    shape = np.shape(feasible)
    short = (_flat(isl, shape) < tokens) & np.ravel(feasible)
    if not np.any(short):
        return feasible, reason
    reason = np.ravel(reason).copy()
    reason[short] = [f"the cached prefix of {tokens:,.0f} tokens is longer than the {i:,.0f}-token prompt; a prompt "
                     "holds its prefix (give a shorter prefix or a longer prompt)" for i in _flat(isl, shape)[short]]
    return (np.ravel(feasible) & ~short).reshape(shape), reason.reshape(shape)


def context_reasons(model: Any, isl: np.ndarray, osl: np.ndarray, feasible: np.ndarray, reason: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``feasible`` and ``reason`` with the points whose prompt and output pass the model's trained
    length marked (as :func:`inferlab.sweep` marks its rows)."""
    limit = int(getattr(model, "max_position_embeddings", 0) or 0)
    return _beyond(limit, _flat(isl, np.shape(feasible)) + _flat(osl, np.shape(feasible)), feasible, reason,
                   lambda _: beyond_context_reason(model))


def model_len_reasons(limit: int | None, total: np.ndarray, feasible: np.ndarray, reason: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """``feasible`` and ``reason`` with the points whose prompt plus output (``total`` tokens) pass
    the engine's ``max_model_len`` marked: the engine refuses such a request whatever the batch."""
    return _beyond(limit, _flat(total, np.shape(feasible)), feasible, reason,
                   lambda t: f"isl + osl = {t:,.0f} tokens exceeds the engine's max_model_len={limit:,}: it refuses "
                             "such a request (raise max_model_len, or shorten the prompt or output)")


def _beyond(limit: int | None, total: np.ndarray, feasible: np.ndarray, reason: np.ndarray,
            why: Any) -> tuple[np.ndarray, np.ndarray]:
    """``feasible`` and ``reason`` with the feasible points of more than ``limit`` tokens (``total``,
    flat, as ``feasible``) marked, each with ``why(its tokens)``; unchanged without a limit."""
    shape = np.shape(feasible)
    beyond = (total > limit) & np.ravel(feasible) if limit else None
    if beyond is None or not np.any(beyond):
        return feasible, reason
    reason = np.ravel(reason).copy()
    for tokens in np.unique(total[beyond]):  # one text a distinct length (a sweep's million rows hold few)
        reason[beyond & (total == tokens)] = why(tokens)
    return (np.ravel(feasible) & ~beyond).reshape(shape), reason.reshape(shape)


def beyond_context_reason(model: Any) -> str:
    """Why a point whose prompt and output pass the model's trained length does not run."""
    from ..errors import option

    return (f"isl + osl exceeds the {model.max_position_embeddings:,} positions {model.id or model.name} was "
            f"trained for (pass {option('allow_long_context', True)} if it runs with RoPE scaling)")


def point_error(est: Any, j: int) -> InfeasibleError:
    """The full :class:`InfeasibleError` of grid point ``j`` of an estimate: bytes needed and
    available per GPU and what would fit (a layout, or the largest batch); a
    :class:`CombinationError` for a prompt shorter than its cached prefix."""
    dep, shape = est.deployment, np.shape(est.ttft_s)
    tokens = getattr(est.prefix_cache, "cached_tokens", None)
    if tokens is not None and _flat(est.isl, shape)[j] < tokens:  # marked by prefix_reasons
        return CombinationError(str(np.ravel(np.broadcast_to(est.reason, shape))[j]))
    said = str(np.ravel(np.broadcast_to(est.reason, shape))[j])
    if "linear-attention states" in said or "max_model_len" in said:  # a hybrid's pools; the engine's longest request
        return InfeasibleError(f"{dep.model.id or dep.model.name} on {dep.hardware.id} as {dep.parallel}: {said}")
    plan = _point_plan(est.memory, shape, j)
    try:
        require_weights_fit(plan, dep.model, dep.hardware, dep.parallel, dep.precision)
    except InfeasibleError as exc:
        return exc
    dp = dep.parallel.dp
    batch, context = _flat(est.batch_size, shape)[j], _flat(est.isl + est.osl, shape)[j]
    largest = int(plan.max_sequences)
    need, free = float(plan.kv_batch), float(plan.kv_budget)
    return InfeasibleError(
        f"the KV cache of {np.ceil(batch / dp):.0f} sequences of {context:.0f} tokens needs {need / 1e9:.1f} GB per "
        f"GPU but {free / 1e9:.1f} GB is free after weights; the largest batch that fits is {largest * dp} "
        f"(or pass {option('waves', True)})",
        needed_bytes=need, available_bytes=free, suggestion={"batch_size": largest * dp})


def require_feasible(est: Any) -> None:
    """Raise when the estimate has nothing to show: a single point that does not run, or a
    grid none of whose points runs (the error of its first point, with the grid's size)."""
    feasible = np.ravel(est.feasible)
    if np.any(feasible):
        return
    err = point_error(est, 0)
    if feasible.size > 1:
        shape = np.shape(est.ttft_s)
        b, i, o = (_flat(x, shape)[0] for x in (est.batch_size, est.isl, est.osl))
        raise InfeasibleError(f"none of the {feasible.size} grid points runs; at batch {b:.0f}, isl {i:.0f}, "
                              f"osl {o:.0f}: {err}", needed_bytes=err.needed_bytes,
                              available_bytes=err.available_bytes, suggestion=err.suggestion)
    raise err


def first_feasible(result: Any) -> int:
    """Index of the first grid point of ``result`` (an estimate) that runs, in flat order."""
    return int(np.argmax(np.ravel(np.broadcast_to(result.feasible, np.shape(result.ttft_s)))))


def grid_point(result: Any, point: Any) -> int:
    """``point`` checked as a grid index of ``result`` that runs (None: the first that does).

    Raises
    ------
    SpecError
        Not an index of the grid.
    InfeasibleError
        The point does not run (with its reason).
    """
    if point is None:
        return first_feasible(result)
    size = int(np.size(result.ttft_s))
    if isinstance(point, bool) or not isinstance(point, (int, np.integer)) or not 0 <= point < size:
        raise SpecError(f"point must be a grid index in [0, {size - 1}], got {point!r}")
    if not np.ravel(np.broadcast_to(result.feasible, np.shape(result.ttft_s)))[point]:
        raise InfeasibleError(f"grid point {point} does not run: {np.ravel(result.reason)[point]}")
    return int(point)
