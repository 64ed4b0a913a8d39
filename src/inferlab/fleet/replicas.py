"""A replica of the fleet: what it is (:class:`ReplicaKind`) and its state in the event
loop (:class:`Replica`, see :mod:`.simulation`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engines.scheduler import USER_LIMITS, SchedulerConfig
from ..engines.window_options import check_model_windows
from ..errors import SpecError, did_you_mean
from ..inputs.resolve import deployment
from ..serving.engine import Engine
from ..serving.replica import (engine_scheduler, kv_capacity_tokens, replica_limits, state_tokens, taken,
                               unchunked_budget)
from ..serving.stepmodel import StepModel


@dataclass(frozen=True)
class ReplicaKind:
    """What one replica is: its step model, scheduler, KV pool, price and start-up time.

    Parameters
    ----------
    name : str
    model : StepModel
    sched : SchedulerConfig
    kv_capacity_tokens : float [token]
    cold_start_s : float [s]
    prefix_cache : bool
    peak_tokens_per_s : float [token/s]
        Tokens one replica processes per second at full prefill budget (the ``utilization``
        signal's denominator).
    state_tokens : float [token]
        Pool tokens a running request's linear-attention state takes (a hybrid model; 0: none).
    """

    name: str
    model: Any
    sched: Any
    kv_capacity_tokens: float
    cold_start_s: float = 0.0
    prefix_cache: bool = True
    peak_tokens_per_s: float = math.nan
    state_tokens: float = 0.0


def replica_kind(name: str, model: Any, hardware: Any, *, tp: int = 1, ep: int = 1, attention_dp: bool = False,
                 precision: Any = None, engine: str = "vllm", profile: Any = "default", limits: dict | None = None,
                 startup: Any = None, prefix_cache: bool = True, lengths: Any = None,
                 allow_long_context: bool = False) -> tuple[ReplicaKind, Any]:
    """One replica of a fleet pool, as :func:`inferlab.serve` runs it (its deployment, the
    engine's limits for it, the step model), and its cold start (``startup``: a
    :class:`~.startup.Startup`); ``lengths``, the prompt and output lengths of the requests it
    is sent (:func:`served_lengths`): the mean of those its engine takes sizes what a request
    holds beside its own tokens (:func:`~inferlab.serving.replica.state_tokens`)."""
    dep = deployment(model, hardware, tp=tp, ep=ep, attention_dp=attention_dp, precision=precision, engine=engine,
                     profile=profile)
    limits = limits or {}
    base = unchunked_budget(dep, engine_scheduler(engine, None, **limits))
    check_model_windows(dep.model, limits.get("window_kv"), limits.get("window_pool_ratio"), engine)
    sched = replica_limits(dep, engine, base)
    context = _mean_taken(dep, sched, lengths, allow_long_context)
    step = StepModel(dep, sched.max_num_batched_tokens + sched.max_num_seqs, sched.overlap_host, sched.graph_max_batch,
                     sched.prefill_graph_tokens)
    cs = startup.cold_start(dep)
    kind = ReplicaKind(name or f"{dep.model.id or dep.model.name} on {dep.hardware.id}", step, sched,
                       kv_capacity_tokens(dep, base, context=context), float(cs.total_s), prefix_cache,
                       _peak_tokens_per_s(step, sched), state_tokens(dep, base, context=context))
    return kind, cs


def _peak_tokens_per_s(step: StepModel, sched: Any) -> float:
    """Tokens per second of back-to-back full-budget prefill iterations [token/s]: under
    attention DP a prompt on each rank, each its share of the budget (as the engine chunks them)."""
    budget, ranks = float(sched.max_num_batched_tokens), max(int(step.groups), 1)
    t = step.time(decode_context=np.zeros(0), prefill_context=np.zeros(ranks),
                  prefill_tokens=np.full(ranks, budget / ranks), logits=float(ranks))
    return budget / t


class Replica:
    """One replica; a change of its ``state`` bumps :attr:`changes` (the loop keeps the list
    of routable replicas until then)."""

    changes = 0  # state changes of every replica so far
    __slots__ = ("index", "engine", "gids", "_state", "since", "ordered", "stopped", "busy_mark", "ver", "fail_ver",
                 "engines", "pool", "scale_mark", "key", "spot", "slot", "place")

    def __init__(self, index: int, engine: Engine, ordered: float, up: bool, pool: int) -> None:
        self.index, self.engine, self.gids, self.pool, self.scale_mark = index, engine, [], pool, 0.0
        self.key: tuple[float, int] | None = None  # (time, priority) of the pending engine event
        self.spot = False
        self.slot = -1  # place among the routable replicas (the loop's ``loads``), -1: none
        self.place = 0  # place among its pool's replicas in the order they were ordered
        self.engines: list[tuple[Engine, list[int]]] = []  # replaced by restarts, kept for their results
        self.state = "up" if up else "starting"  # starting, up, failed (undetected), down, draining, stopped
        self.since, self.ordered, self.stopped = ordered, ordered, math.inf
        self.busy_mark, self.ver, self.fail_ver = 0.0, 0, 0

    @property
    def state(self) -> str:
        return self._state

    @state.setter
    def state(self, value: str) -> None:
        self._state = value
        Replica.changes += 1


def served_lengths(requests: Any, model: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output lengths of the ``requests`` a pool serving ``model`` is sent [token]
    (every request where they name no model or the pool no model, else theirs and the unnamed)."""
    isl, osl = np.asarray(requests.isl, float), np.asarray(requests.osl, float)
    if requests.model is not None and model:
        mine = (requests.model == model) | (requests.model == "")
        isl, osl = isl[mine], osl[mine]
    return isl, osl


def _mean_taken(dep: Any, sched: Any, lengths: Any, allow_long_context: bool) -> float | None:
    """Mean prompt plus output of the requests of ``lengths`` the replica's engine takes
    (:func:`~inferlab.serving.replica.taken`; those it refuses hold nothing) [token]; of all of
    them where it takes none (the fleet is then refused whole), None for no requests."""
    if lengths is None or not len(lengths[0]):
        return None
    isl, osl = lengths
    keep = taken(dep.model, sched, isl, osl, allow_long_context, dep.parallel.attention_groups)
    both = isl + osl
    return float(np.mean(both[keep] if keep.any() else both))


def check_keywords(limits: dict[str, Any], fn: Any) -> None:
    """Refuse a keyword that ``fn`` does not take and that is no engine limit either (it reached
    its ``**limits``): ``fleet(..., slo=...)`` said 'unknown limit' with no word of ``ttft_slo_s``."""
    import inspect

    unknown = sorted(str(k) for k in limits if k not in SchedulerConfig.__dataclass_fields__)
    if unknown:
        params = [p for p in inspect.signature(fn).parameters if p != "limits"]
        raise SpecError(f"{fn.__name__}: unknown argument {unknown[0]!r}{did_you_mean(unknown[0], params + list(USER_LIMITS))}"
                        f"; it takes {', '.join(params)}, and the engine limits {', '.join(USER_LIMITS)}")
