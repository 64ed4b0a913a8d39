"""Serving cases (``offline``, ``online``, ``closed_loop``) predicted with :func:`inferlab.serve`.

A serving case is simulated request by request; cases that share a deployment, lengths and
a load (the TTFT and TPOT rows of one run) share one simulation. What each simulates:

* ``offline`` (every request queued at once, output tokens/s over the whole run): the run's
  ``num_requests`` where the case states it (at most :data:`MAX_REQUESTS` a replica), else
  :data:`OFFLINE_WAVES` times what the engine holds at once (its sequence limit or its KV
  pool, whichever binds), at least :data:`MIN_REQUESTS` and at most :data:`MAX_REQUESTS`,
  so that the ramp-up of the first wave and the drain of the last weigh as little as in
  the benchmarks (the TensorRT-LLM performance overview sizes its datasets, 1,000-30,000
  requests, "to guarantee that the system hit a steady state").
* ``online``: the case's Poisson rate and request count. An infinite rate
  (``load: {offline: true}``) is served as offline with its count, or the one its source's
  finite-rate rows all state (:func:`sweep_request_counts`); its mean TTFT grows with the
  count, so without one that metric is not predicted.
* ``closed_loop``: ``concurrency`` clients, each sending its next request when the last
  one ends. Benchmark clients (vLLM and SGLang ``bench_serving``, genai-perf) measure from
  the first request, whose burst of ``concurrency`` simultaneous prompts lengthens the first
  round's TTFT, over the run's ``num_requests`` when the case states it (``load:
  {concurrency: 64, num_requests: 640}``: 10 a client; a benchmark file's request count),
  else about :data:`BENCHMARK_ROUNDS` requests per client. The simulation runs
  :data:`SIMULATED_ROUNDS` rounds, the later ones periodic, and weighs them as the
  benchmark's remaining rounds: the fewer the rounds, the more the opening burst weighs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np
from pydantic import ValidationError

from ..errors import InferlabError
from ..specs.validation import format_validation_error
from .cases import (Case, Parallelism, case_engine, case_layout, case_limits, case_precision, case_prefix,
                    case_speculative, layout_of, prefix_cache_reason, speculative_from)
from .request_times import BENCHMARK_ROUNDS, RequestTimes, serving_metric

#: Offline: requests per sequence the engine holds at once.
OFFLINE_WAVES = 4
#: Closed loop: rounds a simulation runs (the benchmark's, :data:`~.request_times.BENCHMARK_ROUNDS`).
SIMULATED_ROUNDS = 3
#: Fewest and most requests a simulation serves (its run time grows with them).
MIN_REQUESTS = 256
MAX_REQUESTS = 4096
#: Simulations run in parallel processes from this many on, over at most this many workers.
PARALLEL_MIN_GROUPS = 32
MAX_WORKERS = 8


#: What a disaggregated case's pool states (the case schema's ``disaggregation``).
POOL_KEYS = ("hardware", "num_gpus", "parallelism")


def case_pools(case: Case) -> tuple[tuple[str, int, int, int, bool], tuple[str, int, int, int, bool]] | str:
    """A disaggregated case's pools as ``(hardware, num_gpus, tp, ep, attention_dp)`` for prefill
    and decode, or why not. Each pool's ``parallelism`` maps as an aggregated case's layout
    does (:func:`~.cases.layout_of`); without a ``tp`` the pool is one replica, or ``dp`` of them."""
    pools = []
    extra = sorted(map(str, set(case.disaggregation or {}) - {"prefill", "decode"}))
    if extra:
        return f"disaggregation: unknown key(s) {', '.join(extra)} (it holds prefill and decode)"
    for name in ("prefill", "decode"):
        pool = (case.disaggregation or {}).get(name)
        if not isinstance(pool, dict) or not isinstance(pool.get("hardware"), str):
            return f"disaggregation.{name} needs a hardware id and num_gpus"
        extra = sorted(map(str, set(pool) - set(POOL_KEYS)))
        if extra:
            return f"disaggregation.{name}: unknown key(s) {', '.join(extra)} (a pool holds {', '.join(POOL_KEYS)})"
        gpus, raw = pool.get("num_gpus"), pool.get("parallelism") or {}
        if not isinstance(raw, dict) or isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
            return f"disaggregation.{name}: num_gpus {gpus!r} must be a whole number of tp replicas"
        unknown = sorted(set(raw) - set(Parallelism.model_fields))
        if unknown:
            return f"disaggregation.{name}: unknown parallelism key(s) {', '.join(map(str, unknown))}"
        dp = raw.get("dp", 1)
        tp = gpus // dp if isinstance(dp, int) and dp > 1 and gpus % dp == 0 else gpus
        try:
            par = Parallelism(**{"tp": tp, **raw})
        except ValidationError as exc:
            return f"disaggregation.{name}: {format_validation_error(exc)}"
        layout = layout_of(case.model, par, gpus)
        if isinstance(layout, str):
            return f"disaggregation.{name}: {layout}"
        if layout["attention_tp"] > 1:
            return f"disaggregation.{name}: attention ranks of {layout['attention_tp']} GPUs in a pool are not simulated"
        tp = layout["tp"]
        if layout["pp"] != 1:
            return f"disaggregation.{name}: pipeline parallelism inside a pool is not simulated"
        if layout["dp"] != 1 and gpus != layout["dp"] * tp:
            return f"disaggregation.{name}: dp={layout['dp']} with tp={tp} differs from the pool's {gpus} GPUs"
        if gpus % tp:
            return f"disaggregation.{name}: num_gpus {gpus} must be a whole number of tp={tp} replicas"
        pools.append((pool["hardware"], gpus, tp, layout["ep"], layout["attention_dp"]))
    if case.num_gpus != pools[0][1] + pools[1][1]:
        return f"num_gpus={case.num_gpus} differs from the pools' {pools[0][1]} + {pools[1][1]} GPUs"
    return pools[0], pools[1]


def _disaggregated_reason(case: Case) -> str | None:
    pools = case_pools(case)
    if isinstance(pools, str):
        return pools
    if case.speculative or case.prefix_cache:
        return "speculation or a prefix cache with separate prefill and decode pools is not simulated"
    return None


def serving_unsupported_reason(case: Case) -> str | None:
    """Why :func:`inferlab.serve` cannot predict the serving ``case``, or None when it can."""
    if case.disaggregation:
        reason = _disaggregated_reason(case)
        if reason is not None:
            return reason
    layout = case_layout(case) if not case.disaggregation else {}
    if isinstance(layout, str):
        return layout
    if case.speculative:
        try:
            case_speculative(case)
        except InferlabError as exc:
            return f"speculative decoding as given cannot be modelled: {exc}"
    reason = prefix_cache_reason(case)
    if reason is not None:
        return reason
    load = case.load
    if case.regime == "online" and load.get("offline") and case.metric == "ttft_ms" and "num_requests" not in load:
        return ("online at an infinite rate: the mean TTFT grows with the request count, which neither the case "
                "states nor its source's finite-rate rows state as one")
    # every request sent at once (an offline run, or an online one at an infinite rate): the mean
    # TTFT grows with the count (a concurrency cap runs as a closed loop, whose TTFT does not)
    if case.metric == "ttft_ms" and (case.regime == "offline" or load.get("offline")) and "concurrency" not in load:
        reason = _offline_ttft_reason(load, layout.get("dp", 1) if layout else 1, pools=bool(case.disaggregation))
        if reason is not None:
            return reason
    if case.regime == "online" and not ({"request_rate", "num_requests"} <= set(load) or load.get("offline")):
        return f"online with load {sorted(load)} (expected request_rate and num_requests)"
    if "max_concurrency" in load and not (case.regime == "online" and "request_rate" in load):
        return (f"{case.regime} with load {sorted(load)}: max_concurrency caps the requests in flight of an online "
                "run at a request_rate")
    if case.regime == "closed_loop" and "concurrency" not in load:
        return f"closed_loop with load {sorted(load)} (expected concurrency)"
    if case.regime == "offline" and not (load.get("offline") or "concurrency" in load):
        return f"offline with load {sorted(load)} (expected offline: true or a concurrency)"
    return None


def _offline_ttft_reason(load: dict, dp: int, pools: bool = False) -> str | None:
    """Why an offline run's mean TTFT cannot be predicted: it grows with the request count (the
    last prompts wait for all before them), so the count must be the run's and at most what a
    simulation serves (:data:`MAX_REQUESTS` a replica, as :func:`serving_workload` caps it; the
    two-pool simulation serves the run's count whole)."""
    if "num_requests" not in load:
        return ("offline: the mean TTFT grows with the request count (the last prompts wait for every one before "
                "them), and the case states none (load: {offline: true, num_requests: N})")
    if not pools and int(load["num_requests"]) > MAX_REQUESTS * dp:
        return (f"offline: the mean TTFT grows with the request count, and {int(load['num_requests']):,} requests "
                f"are more than the simulation serves ({MAX_REQUESTS:,} a replica)")
    return None


def _load_key(case: Case) -> tuple:
    """The simulated load: ``("offline",)`` (``("offline", n)`` with the run's request count),
    ``("rate", r, n)`` (``("rate", r, n, cap)`` with at most ``cap`` in flight) or ``("concurrency",
    c)`` (``("concurrency", c, n)`` with the run's request count)."""
    load = case.load
    if "concurrency" in load:
        count = (int(load["num_requests"]),) if "num_requests" in load else ()
        return ("concurrency", int(load["concurrency"]), *count)
    if "request_rate" in load:
        cap = (int(load["max_concurrency"]),) if "max_concurrency" in load else ()
        return ("rate", float(load["request_rate"]), int(load["num_requests"]), *cap)
    return ("offline", int(load["num_requests"])) if "num_requests" in load else ("offline",)


def case_scheduler(engine: str, limits: tuple = ()) -> Any:
    """The engine's scheduler with the limits a case records (as :func:`inferlab.serve` takes
    them: vLLM without chunked prefill sizes its own budget)."""
    from ..serving.replica import engine_scheduler

    return engine_scheduler(engine, None, **dict(limits))


def _in_flight(dep: Any, engine: str, isl: int, osl: int, limits: tuple = ()) -> float:
    """Requests one replica holds at once: its sequence limit or its KV pool."""
    from ..serving.replica import kv_capacity_tokens, scheduler_for, state_tokens

    sched = case_scheduler(engine, limits)  # (a hybrid model's state pages beside its tokens)
    per_request = isl + (osl if sched.reserve_output else osl / 2.0) + state_tokens(dep, sched, context=isl + osl)
    seqs = scheduler_for(dep, sched).max_num_seqs * dep.parallel.pp
    return min(seqs, kv_capacity_tokens(dep, sched, context=isl + osl) / per_request)


def serving_workload(dep: Any, engine: str, isl: int, osl: int, load: tuple,
                     max_requests: int = MAX_REQUESTS, limits: tuple = ()) -> dict[str, Any]:
    """Keyword arguments of :func:`inferlab.serve` for one simulated load."""
    if load[0] == "rate":
        return {"rate": load[1], "num_requests": load[2], "max_concurrency": load[3] if len(load) > 3 else None}
    if load[0] == "concurrency":
        return {"concurrency": load[1], "num_requests": _closed_loop_requests(load, max_requests)}
    streams = dep.parallel.dp
    if len(load) > 1:  # the run's own request count (its mean TTFT and its ramp and drain follow it)
        return {"offline": True, "num_requests": min(load[1], max_requests * streams)}
    # The simulation runs one replica with 1/dp of the requests, so the cap is per replica:
    # every replica must fill its sequence slots or KV pool several times over (an NVL72 rack
    # of 72 replicas holds far more requests in flight than one replica's cap).
    n = OFFLINE_WAVES * _in_flight(dep, engine, isl, osl, limits) * streams
    return {"offline": True, "num_requests": int(np.clip(math.ceil(n), MIN_REQUESTS, max_requests * streams))}


def _closed_loop_requests(load: tuple, max_requests: int) -> int:
    """Requests a closed loop ``("concurrency", c[, n])`` simulates: :data:`SIMULATED_ROUNDS` a
    client (at most ``max_requests``, at least one round), no more than the run's ``n``."""
    n = min(SIMULATED_ROUNDS * load[1], max(max_requests, load[1]))
    return int(min(n, load[2]) if len(load) > 2 else n)


def _rounds(load: tuple) -> float:
    """Requests per client of a closed-loop run: its stated count over its clients, else
    :data:`BENCHMARK_ROUNDS`."""
    return max(load[2] / load[1], 1.0) if len(load) > 2 else float(BENCHMARK_ROUNDS)


def sweep_request_counts(cases: Sequence[Any]) -> list[Any]:
    """``cases`` with an infinite-rate online row that states no request count given the one its
    source's finite-rate rows all state: a request-rate sweep (``benchmark_serving.py
    --request-rate 2 ... inf --num-prompts N``) sends the same ``N`` prompts at every rate, the
    infinite one too, whose mean TTFT, ITL and ramp follow that count (TensorRT-LLM 0.14's
    online-serving table: 500 at rates 2-32 and "inf"). Rows of a source whose counts differ
    keep theirs. Applied once to a whole set of cases (a subset may hold one count where the set holds
    several), by :func:`predict_serving_cases`, the cluster's units and the fit."""
    counts: dict[str, set[int]] = {}
    for c in (c for c in cases if isinstance(c, Case) and c.regime == "online"):
        if "request_rate" in c.load and "num_requests" in c.load:
            counts.setdefault(c.source, set()).add(int(c.load["num_requests"]))
    return [c.model_copy(update={"load": {**c.load, "num_requests": next(iter(counts[c.source]))}})
            if isinstance(c, Case) and c.regime == "online" and c.load.get("offline") and "num_requests" not in c.load
            and len(counts.get(c.source, ())) == 1 else c for c in cases]


def serving_groups(cases: Sequence[Case]) -> tuple[dict[tuple, list[int]], dict[int, str]]:
    """Cases grouped by simulation key (deployment, lengths, load), and why the others are not predicted."""
    groups: dict[tuple, list[int]] = {}
    reasons: dict[int, str] = {}
    for i, case in enumerate(cases):
        reason = serving_unsupported_reason(case)
        if reason is not None:
            reasons[i] = reason
            continue
        groups.setdefault(serving_group_key(case), []).append(i)
    return groups, reasons


def serving_group_key(case: Case) -> tuple:
    """The simulation a supported serving case is predicted by (deployment, lengths, load,
    speculation, prefix cache, pools, scheduler limits)."""
    layout = case_layout(case) if not case.disaggregation else {}
    spec = tuple(sorted((case.speculative or {}).items()))
    hit = case_prefix(case)
    pools = case_pools(case) if case.disaggregation else None
    return (case.model, case.hardware, tuple(sorted(layout.items())), tuple(sorted(case_precision(case).items())),
            case_engine(case), case.isl, case.osl, _load_key(case), spec, hit, pools,
            tuple(sorted(case_limits(case).items())))


def _techniques(spec: tuple, hit: tuple[str, float] | None, isl: int) -> dict[str, Any]:
    """``serve()`` keywords of a case's speculation and prefix cache: a stated hit rate as one
    shared prefix (:func:`~inferlab.inputs.prefixes.shared_by_hit_rate`, as the planner runs it),
    a client's pool of distinct prompts as one prefix per prompt
    (:func:`~inferlab.inputs.prefixes.prompt_pool`)."""
    from ..inputs.prefixes import prompt_pool, shared_by_hit_rate

    out: dict[str, Any] = {}
    if spec:
        out["speculative"] = speculative_from(dict(spec))
    prefix = None if hit is None else prompt_pool(int(hit[1]), isl) if hit[0] == "prompts" \
        else shared_by_hit_rate(hit[1], isl)
    if prefix is not None:
        out["prefix"] = prefix
    return out


def simulate_group(key: tuple, profile: Any, max_requests: int = MAX_REQUESTS) -> RequestTimes | str:
    """Simulate one group's deployment and load; the request times, or why it cannot run."""
    from ..inputs.resolve import deployment
    from ..serving.replica import serve_deployment

    model, hardware, layout, precision, engine, isl, osl, load, spec, hit, pools, limits = key
    if pools is not None:
        return _simulate_pools(key, profile, max_requests)
    try:
        dep = deployment(model, hardware, precision=dict(precision), engine=engine, profile=profile, **dict(layout))
        result = serve_deployment(dep, engine, isl=isl, osl=osl, scheduler=case_scheduler(engine, limits),
                                  allow_long_context=True,  # a measured run: its engine served these lengths
                                  **_techniques(spec, hit, isl),
                                  **serving_workload(dep, engine, isl, osl, load, max_requests, limits))
    except InferlabError as exc:
        return str(exc)
    t = result.trace
    # the simulated stream's own clients (a replica's share of them with dp or pp > 1)
    if load[0] != "concurrency":
        return RequestTimes(t.arrival, t.first_token, t.finish, t.osl, result.replicas)
    clients = result.workload.concurrency or load[1]
    return RequestTimes(t.arrival, t.first_token, t.finish, t.osl, result.replicas, min(clients, len(t.osl)),
                        _rounds(load))


def _simulate_pools(key: tuple, profile: Any, max_requests: int) -> RequestTimes | str:
    """A disaggregated group: both pools simulated request by request (every request of the
    system in one trace, so it stands for one system, not one replica)."""
    from ..serving.disaggregated import serve_disaggregated
    from ..techniques.disaggregation import Disaggregation, Pool

    model, _, _, precision, engine, isl, osl, load, _, _, pools, limits = key
    if load[0] == "rate" and len(load) > 3:
        return "a client's concurrency cap (max_concurrency) is not simulated over separate prefill and decode pools"
    if load[0] == "rate":
        workload = {"rate": load[1], "num_requests": load[2]}
    elif load[0] == "concurrency":  # both pools on one clock, rounds as an aggregated closed loop's
        workload = {"concurrency": load[1], "num_requests": _closed_loop_requests(load, max_requests)}
    else:  # offline: every request queued, the run's count, else enough to fill the decode pool several times over
        workload = {"offline": True, "num_requests": load[1] if len(load) > 1 else int(max_requests)}
    try:
        disagg = Disaggregation(*(Pool(hw, num_gpus=gpus, tp=tp, ep=ep, attention_dp=adp)
                                  for hw, gpus, tp, ep, adp in pools))
        result = serve_disaggregated(model, disagg, isl=isl, osl=osl, engine=engine, profile=profile,
                                     precision=dict(precision), scheduler=case_scheduler(engine, limits) if limits
                                     else None, **workload)
    except InferlabError as exc:
        return str(exc)
    t = result.trace
    if load[0] != "concurrency":
        return RequestTimes(t.arrival, t.first_token, t.finish, t.osl, 1)
    return RequestTimes(t.arrival, t.first_token, t.finish, t.osl, 1, min(load[1], len(t.osl)), _rounds(load))


def _simulate_star(args: tuple) -> RequestTimes | str:
    return simulate_group(*args)


def simulate_groups(keys: Sequence[tuple], profile: Any, workers: int | None = None,
                    max_requests: int = MAX_REQUESTS) -> list[RequestTimes | str]:
    """:func:`simulate_group` for many keys, over ``workers`` processes (default: the CPUs, when
    there are at least :data:`PARALLEL_MIN_GROUPS` keys)."""
    jobs = [(key, profile, max_requests) for key in keys]
    if workers is None:
        workers = min(os.cpu_count() or 1, MAX_WORKERS) if len(jobs) >= PARALLEL_MIN_GROUPS else 1
    if workers <= 1:
        return [simulate_group(*job) for job in jobs]
    # Small chunks, so that the processes finish together.
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_simulate_star, jobs, chunksize=max(1, len(jobs) // (8 * workers))))


def predict_serving_cases(cases: Sequence[Case], profile: Any = "default", workers: int | None = None,
                          swept: bool = False) -> list[tuple[float | None, str | None]]:
    """Predict serving cases, one simulation per (deployment, workload, load); ``swept``: their
    infinite-rate rows already hold their sweep's count (:func:`sweep_request_counts`)."""
    groups, reasons = serving_groups(cases if swept else sweep_request_counts(cases))
    out: list[tuple[float | None, str | None]] = [(None, reasons.get(i)) for i in range(len(cases))]
    for (key, idx), times in zip(groups.items(), simulate_groups(list(groups), profile, workers)):
        for i in idx:
            if isinstance(times, str):
                out[i] = (None, times)
                continue
            value = serving_metric(times, cases[i].metric, cases[i].num_gpus, cases[i].load.get("preamble_tokens", 0))
            out[i] = (value, None) if np.isfinite(value) else (None, f"{cases[i].metric} is undefined here")
    return out
