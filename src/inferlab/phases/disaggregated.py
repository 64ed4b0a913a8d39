"""``inferlab.estimate_disaggregated``: prefill and decode served by separate pools.

Composes two :class:`~inferlab.techniques.step.ResolvedDeployment` (one per pool, each timed by the
core) with the KV transfer of :mod:`inferlab.techniques.disaggregation`, and sizes the
pools: TTFT with the transfer, TPOT free of prefill interference, the P:D ratio.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .. import checks
from ..calibration.profile import Profile
from ..core.graph import Step
from ..core.memory import MemoryPlan, plan_memory, require_weights_fit
from ..engines.memory_share import iteration_tokens, memory_keywords, prefill_chunks
from ..engines.graph_limits import checked_graph_limit, checked_prefill_graphs, decode_graph_limit
from ..engines.scheduler import default_scheduler, token_budget
from ..engines.window_options import window_scheduler
from ..engines.window_pool import held_windows
from ..errors import CombinationError, InfeasibleError, SpecError
from ..inputs.resolve import MAX_BATCH, MAX_TOKENS, deployment, memory_options
from ..specs.catalog import load_model
from ..specs.model import ModelSpec
from ..techniques.deployed_precision import resolve_precision
from ..techniques.disaggregation import Disaggregation
from ..techniques.kv_transfer import kv_transfer
from ..techniques.prefix_cache import PrefixCache, effective_cached_tokens
from ..techniques.prefill_graphs import chunked_prefill_s, graphed_prefill, prefill_graphed
from ..techniques.step import ResolvedDeployment, decode, graph_limited_decode_s, mean_decode_step_s, run_step
from ..units import Q, to_si_array
from .disaggregated_result import DisaggEstimate
from .feasibility import model_len_reasons


def _plan(dep: ResolvedDeployment, engine: str, batch: np.ndarray, context: np.ndarray, step_tokens: float,
          windows: tuple[Any, Any] = (None, None), **kw: Any) -> MemoryPlan:
    """Memory of one pool's replica, held as its engine holds it; raises when its weights do not fit.

    The replica's whole layout, as :func:`inferlab.estimate` plans it: with attention DP each GPU
    holds the attention weights whole and the full KV of its ``1/tp`` of the sequences, and each
    rank runs its own token budget where the engine's limits are a rank's; ``windows``: the
    ``window_kv`` and ``window_pool_ratio`` given (None: the engine's)."""
    par = dep.parallel
    share = kw.pop("gpu_memory_utilization", None)
    plan = plan_memory(dep.model, dep.hardware, dep.precision, parallel=par, batch=batch, context=context,
                       **memory_keywords(window_scheduler(engine, *windows), dep.hardware, par, step_tokens, share=share,
                                         model=dep.model),
                       **kw)
    require_weights_fit(plan, dep.model, dep.hardware, par, dep.precision)
    return plan


def _pool_reasons(plan: MemoryPlan, dep: ResolvedDeployment, batch: np.ndarray, context: np.ndarray, what: str,
                  shape: tuple[int, ...]) -> np.ndarray:
    """Per grid point, why the pool's batch does not fit (``""`` where it does)."""
    flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))
    b, c, fits = flat(batch), flat(context), np.ravel(np.broadcast_to(plan.fits, shape))
    need, free, largest = flat(plan.kv_batch), flat(plan.kv_budget), flat(plan.max_sequences)
    reason = np.full(b.size, "", dtype=object)
    for j in np.flatnonzero(~fits):
        reason[j] = (f"the {what} pool's batch of {b[j]:.0f} sequences of {c[j]:.0f} tokens needs {need[j] / 1e9:.1f} "
                     f"GB of KV cache per GPU but {free[j] / 1e9:.1f} GB is free after weights on {dep.hardware.id} at "
                     f"tp={dep.tp}; the largest {what} batch that fits is {max(int(largest[j]), 0)}")
    return reason


def _feasibility(plans: tuple[MemoryPlan, MemoryPlan], deps: tuple[ResolvedDeployment, ResolvedDeployment],
                 batches: tuple[np.ndarray, np.ndarray], contexts: tuple[np.ndarray, np.ndarray],
                 shape: tuple[int, ...], max_model_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``feasible`` and ``reason`` of every grid point; raises when none runs (a single point
    that does not fit, or a grid none of whose points does), saying what would fit. A point
    past the engines' ``max_model_len`` does not run: the pools refuse the request."""
    parts = [_pool_reasons(p, dep, b, c, what, shape)
             for p, dep, b, c, what in zip(plans, deps, batches, contexts, ("prefill", "decode"))]
    prefill, decode_ = parts
    reason = np.where((prefill != "") & (decode_ != ""), prefill + "; " + decode_, prefill + decode_)
    feasible = reason == ""
    total = np.broadcast_to(contexts[1], shape).ravel()
    feasible, reason = model_len_reasons(max_model_len, total, feasible, reason)
    if not feasible.any() and max_model_len and total[0] > max_model_len:
        grid = f"none of the {feasible.size} grid points runs; at the first: " if feasible.size > 1 else ""
        raise InfeasibleError(grid + str(reason[0]))
    if not feasible.any():
        j = 0
        which = 0 if parts[0][j] else 1
        plan = plans[which]
        flat = lambda x: float(np.ravel(np.broadcast_to(np.asarray(x, float), shape))[j])
        what = ("prefill", "decode")[which]
        grid = f"none of the {feasible.size} grid points runs; at the first: " if feasible.size > 1 else ""
        raise InfeasibleError(grid + str(parts[which][j]), needed_bytes=flat(plan.kv_batch),
                              available_bytes=flat(plan.kv_budget),
                              suggestion={f"{what}_batch": max(int(flat(plan.max_sequences)), 0)})
    return feasible.reshape(shape), reason.reshape(shape)


def pool_deployments(model: str | ModelSpec, disagg: Disaggregation | str, *, engine: str,
                     profile: str | Path | Profile, precision: Any) -> tuple[Disaggregation, ResolvedDeployment, ResolvedDeployment]:
    """The pools (parsed if given as text) and one replica's deployment of each; pools that
    name no precision, engine or profile take the ones given here."""
    d = disagg if isinstance(disagg, Disaggregation) else Disaggregation.parse(disagg)
    m = load_model(model) if isinstance(model, (str, Path)) else model

    def one(side: str, pool: Any) -> ResolvedDeployment:
        try:
            return deployment(m, pool.hardware, tp=int(pool.tp or 1), ep=pool.ep, attention_dp=pool.attention_dp,
                              precision=pool.precision if pool.precision is not None else precision,
                              engine=pool.engine or engine, profile=profile if pool.profile is None else pool.profile)
        except (SpecError, InfeasibleError) as exc:  # say which pool (other errors name their own subject)
            if type(exc) is SpecError:
                raise SpecError(f"{side} pool {pool}: {exc}") from None
            if type(exc) in (InfeasibleError, CombinationError):
                kind: type[InfeasibleError] = type(exc)  # type: ignore[assignment]
                raise kind(f"{side} pool {pool}: {exc}", needed_bytes=exc.needed_bytes,  # type: ignore[union-attr]
                           available_bytes=exc.available_bytes, suggestion=exc.suggestion) from None
            raise

    pre, dec = one("prefill", d.prefill), one("decode", d.decode)
    if precision is not None and d.prefill.precision is not None and d.decode.precision is not None and any(
            resolve_precision(precision, m, dep.hardware).config != dep.precision for dep in (pre, dec)):
        raise SpecError(f"both pools name their formats (prefill {d.prefill.precision}, decode {d.decode.precision}), "
                        f"so the precision given beside them ({precision}) would be ignored: drop it, or leave a "
                        "pool's format out for it to take this one")
    d = d.for_engine(d.decode.engine or engine)
    kv_p, kv_d = pre.precision.kv_cache, dec.precision.kv_cache
    if kv_p != kv_d:  # the decode pool reads the blocks the prefill pool wrote, as they are
        raise SpecError(f"the prefill pool keeps its KV cache in {kv_p} and the decode pool in {kv_d}: the KV blocks "
                        "move between the pools as written (NIXL, Mooncake), so both need one KV format; give both "
                        f"pools precisions with one KV cache (e.g. prefill={d.prefill.hardware}:{dec.precision}; in "
                        f"Python a Pool's precision may set it apart: 'fp8 kv:{kv_d}')")
    return d, pre, dec


def estimate_disaggregated(model: str | ModelSpec, disagg: Disaggregation | str, *, isl: Any = 1024, osl: Any = 128,
                           prefill_batch: Any = 1, decode_batch: Any = 1, request_rate: Any = None,
                           engine: str = "generic", profile: str | Path | Profile = "default",
                           prefix_cache: PrefixCache | str | None = None, gpu_memory_utilization: float | None = None,
                           kv_block_size: int = 16, max_num_tokens: int | None = None, precision: Any = None,
                           allow_long_context: bool = False, graph_max_batch: int | None = None,
                           price_per_gpu_hour: Any = None, window_kv: Any = None,
                           window_pool_ratio: float | None = None,
                           prefill_graph_tokens: int | None = None, max_model_len: int | None = None) -> DisaggEstimate:
    """Predict serving with prefill and decode on separate pools.

    Parameters
    ----------
    model : str or ModelSpec
    disagg : Disaggregation or str
        Pools and link, or their text (:meth:`Disaggregation.parse`).
    isl, osl : int or array [token]
    prefill_batch : int or array [request]
        Prompts prefilled together on one prefill replica.
    decode_batch : int or array [request]
        Sequences decoded together on one decode replica.
    request_rate : float, str or array, optional [request/s]
        Arrival rate to size the pools for (:attr:`DisaggEstimate.gpus_needed`).
    engine, profile
        Defaults for pools that name neither.
    prefix_cache : PrefixCache or str, optional
        Cached prefixes shorten the prefill; the whole prompt's KV is still sent (the
        decode pool is assumed not to hold the prefix).
    gpu_memory_utilization, kv_block_size, max_num_tokens
        As in :func:`inferlab.estimate`; ``max_num_tokens`` chunks the prefill (default: the
        engine's on the prefill pool's GPU).
    graph_max_batch : int, optional
        The decode pool's largest decode batch run from a CUDA graph (default its engine's).
    prefill_graph_tokens : int, optional [token]
        The prefill pool's chunks of at most this many tokens run in piecewise CUDA graphs, as in
        :func:`inferlab.estimate` (default: eagerly where its engine graphs decode only).
    allow_long_context : bool
        Accept ``isl + osl`` beyond the model's ``max_position_embeddings`` (RoPE scaling).
    price_per_gpu_hour : float or pint quantity, optional [USD/hour]
        One price for every GPU of both pools (default: each GPU's catalog price).
    window_kv, window_pool_ratio : optional
        Where both pools' engines keep a windowed-attention model's KV, as in :func:`inferlab.estimate`.
    max_model_len : int, optional [token]
        Both pools' engines' longest request: a point whose prompt plus output passes it does not run.

    A grid point whose batch does not fit its pool keeps its row, marked in ``feasible`` and
    ``reason``, with NaN times.

    Raises
    ------
    InfeasibleError
        A pool's weights do not fit, no grid point's batches fit (a single point that does
        not, say), or the link is impossible.
    """
    d, dep_p, dep_d = pool_deployments(model, disagg, engine=engine, profile=profile, precision=precision)
    if max_model_len is not None:
        checks.integer("max_model_len", max_model_len, what="tokens", whole_floats=True)
        checks.engine_context_within_model(dep_p.model, max_model_len, allow_long_context=bool(allow_long_context))
    bp, bd, i, o = checks.grid(
        "give fewer values, or several calls over parts of the grid (inferlab.sweep does not take two pools)",
        prefill_batch=checks.count_array("prefill_batch", prefill_batch, maximum=MAX_BATCH, unit="request"),
        decode_batch=checks.count_array("decode_batch", decode_batch, maximum=MAX_BATCH, unit="request"),
        isl=checks.count_array("isl", isl, maximum=MAX_TOKENS, unit="token"),
        osl=checks.count_array("osl", osl, maximum=MAX_TOKENS, unit="token"))
    checks.context_within_model(dep_d.model, i, o, allow_long_context=allow_long_context)
    mem = memory_options(gpu_memory_utilization, kv_block_size, max_num_tokens)
    max_num_tokens = mem.pop("max_num_tokens")
    engine_p, engine_d = d.prefill.engine or engine, d.decode.engine or engine
    graph_max_batch = checked_graph_limit(graph_max_batch, dep_d.profile, engine_d)
    prefill_graph_tokens = checked_prefill_graphs(prefill_graph_tokens, dep_p.profile, engine_p)
    # a given budget holds for both pools, as serve()'s limits do; else each pool's engine's on its GPU
    budget_d = max_num_tokens or token_budget(engine_d, dep_d.hardware)
    if max_num_tokens is None:
        max_num_tokens = token_budget(engine_p, dep_p.hardware)
    # each pool's engine reserves activation memory for its whole token budget at start-up, as serve()'s pools
    windows = (window_kv, window_pool_ratio)
    plan_p = _plan(dep_p, engine_p, bp, i, float(max_num_tokens), windows, **mem)
    plan_d = _plan(dep_d, engine_d, bd, i + o, float(budget_d), windows, **mem)
    shape = np.broadcast_shapes(*(np.shape(x) for x in (bp, bd, i, o)))
    feasible, reason = _feasibility((plan_p, plan_d), (dep_p, dep_d), (bp, bd), (i, i + o), shape, max_model_len)
    runs = lambda x: np.where(feasible, x, np.nan)  # a point that does not run has no time
    cache = None if prefix_cache is None else PrefixCache.of(prefix_cache)
    # each prefill replica (and attention-DP rank) caches apart, as estimate()'s data-parallel ranks
    cache = cache and cache.over_ranks(d.prefill.replicas * dep_p.parallel.attention_groups)
    cached = 0.0 if cache is None else effective_cached_tokens(i, cache, block_size=kv_block_size)
    pre = run_step(dep_p, Step.prefill(bp, i, cached))
    # each attention-DP rank prefills its share of the prompts under its own budget where the
    # engine's limits are a rank's (the replica's tokens per iteration, as estimate() chunks them)
    replica_budget = iteration_tokens(default_scheduler(engine_p), dep_p.parallel, float(max_num_tokens))
    chunks = prefill_chunks(bp, i - cached, dep_p.parallel, replica_budget)
    graphed = prefill_graphed(dep_p, np.minimum(bp * (i - cached), replica_budget), prefill_graph_tokens)
    prefill_s = chunked_prefill_s(dep_p, pre, chunks, graphed, replica_budget)
    pre = graphed_prefill(dep_p, pre, graphed)
    transfer = kv_transfer(d, dep_p, dep_d, bp, i, prefill_s,
                           freed=held_windows(dep_d.model, window_scheduler(engine_d, *windows))[0])
    step_d = graph_limited_decode_s(dep_d, bd, decode_graph_limit(engine_d, dep_d.hardware, dep_d.parallel.tp,
                                                                  graph_max_batch),
                                    lambda d: mean_decode_step_s(d, bd, i, o))
    tpot = np.where(o > 1, step_d, 0.0)
    first = decode(dep_d, bd, i - 1.0).time_s if d.first_token == "decode" else np.zeros(np.shape(i))
    rate = None if request_rate is None else (
        to_si_array(Q(request_rate) if isinstance(request_rate, str) else request_rate, "request/second",
                    "request_rate"))
    if rate is not None and (np.any(rate <= 0) or not np.all(np.isfinite(rate))):
        raise SpecError(f"request_rate must be > 0 requests/s, got {request_rate!r}")
    prices = tuple(float("nan") if dep.hardware.price is None else dep.hardware.price.si for dep in (dep_p, dep_d))
    if price_per_gpu_hour is not None:
        prices = (checks.price("price_per_gpu_hour", price_per_gpu_hour),) * 2
    return DisaggEstimate(d, dep_p, dep_d, i, o, bp, bd, pre, transfer, runs(prefill_s), runs(first), runs(tpot),
                          plan_p, plan_d, rate, feasible=feasible, reason=reason, usd_per_gpu_hour=prices,
                          engines=(engine_p, engine_d))
