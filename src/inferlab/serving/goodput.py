"""Goodput, and the highest arrival rate that meets an SLO.

Goodput is the rate of requests that meet both a TTFT and a TPOT service-level objective
(DistServe's definition); a deployment *meets* the SLO at a percentile when that
percentile of TTFT and of TPOT are both within their objectives. Latencies are the
user-side ones when the result carries :class:`~.overheads.ClientOverheads`.

References
----------
Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large
Language Model Serving", OSDI 2024, section 2 (goodput under TTFT and TPOT SLOs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import percentile as check_percentile  # (curve and the CLI import it from here)
from ..errors import InfeasibleError, SpecError, option_name
from .overheads import user_latencies
from .result import ServeResult


METRICS = ("ttft", "tpot", "e2e")
#: Share of a run's requests arriving before its first completion past which the SLO verdict says so.
FILLING_NOTE = 0.1
#: Most requests :func:`max_rate_meeting_slo` lengthens a run to, for one in steady state.
STEADY_MAX_REQUESTS = 20000


def user_latency(result: ServeResult, metric: str) -> np.ndarray:
    """Per-request ``ttft``, ``tpot`` or ``e2e`` as the user sees it [s]."""
    if metric not in METRICS:
        raise SpecError(f"latency metric {metric!r} is not one of {', '.join(METRICS)}")
    return getattr(user_latencies(result), f"{metric}_s")


def check_slo(ttft_slo_s: float, tpot_slo_s: float, percentile: float) -> None:
    """Raise :class:`SpecError` unless both objectives are times > 0 (``math.inf``: that one
    bounds nothing), one of them finite, and the percentile is in (0, 100]."""
    times = [v for v in (ttft_slo_s, tpot_slo_s) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(times) < 2 or not all(v > 0 for v in times) or not any(math.isfinite(v) for v in times):
        raise SpecError(f"SLOs must be times > 0 in seconds (math.inf for one that bounds nothing, the other finite), "
                        f"got TTFT {ttft_slo_s!r:.40} and TPOT {tpot_slo_s!r:.40}")
    check_percentile(percentile)


def slo_words(ttft_slo_s: float, tpot_slo_s: float) -> str:
    """``"TTFT 200 ms and TPOT 10 ms"``, leaving out an objective that bounds nothing (inf)."""
    said = [f"{name} {v * 1e3:g} ms" for name, v in (("TTFT", ttft_slo_s), ("TPOT", tpot_slo_s)) if math.isfinite(v)]
    return " and ".join(said)


@dataclass(frozen=True)
class Goodput:
    """Requests meeting a TTFT and a TPOT objective, and whether a percentile meets both.

    Attributes
    ----------
    requests_per_s : float [request/s]
        Completed requests that met both objectives, per second of the run, all replicas.
    fraction : float
        Share of requests that met both.
    ttft_s, tpot_s : float [s]
        TTFT and TPOT at ``percentile``.
    """

    requests_per_s: float
    fraction: float
    ttft_s: float
    tpot_s: float
    ttft_slo_s: float
    tpot_slo_s: float
    percentile: float
    #: Share of the requests that arrived within one mean request lifetime (arrival to last token)
    #: of the first arrival, while the replicas filled up: past :data:`FILLING_NOTE` the
    #: percentiles lean on an emptier system than steady traffic meets.
    filling: float = 0.0

    @property
    def meets(self) -> bool:
        """The ``percentile`` of TTFT and of TPOT are both within their objectives."""
        return bool(self.ttft_s <= self.ttft_slo_s and self.tpot_s <= self.tpot_slo_s)

    def __str__(self) -> str:
        p = f"P{self.percentile:g}"
        verdict = "meets" if self.meets else "misses"
        return (f"goodput {self.requests_per_s:.2f} req/s ({self.fraction:.1%} of requests within "
                f"{slo_words(self.ttft_slo_s, self.tpot_slo_s)}); {p} TTFT "
                f"{self.ttft_s * 1e3:.1f} ms, {p} TPOT {self.tpot_s * 1e3:.2f} ms: {verdict} the SLO"
                + (f" (but {self.filling:.0%} of the requests arrived while the replicas filled up: more requests, "
                   f"{option_name('num_requests')}, for steady traffic)" if self.filling > FILLING_NOTE else ""))


def goodput(result: ServeResult, ttft_slo_s: float, tpot_slo_s: float, percentile: float = 99) -> Goodput:
    """Rate of requests meeting both a TTFT and a TPOT objective.

    Parameters
    ----------
    result : ServeResult
        A simulated run (user-side latencies when it carries client overheads).
    ttft_slo_s, tpot_slo_s : float [s]
        Objectives for time to first token and time per output token (``math.inf``: bounds nothing;
        one of them finite).
    percentile : float
        Percentile at which :attr:`Goodput.meets` checks both objectives.

    Notes
    -----
    ``requests_per_s = replicas x #{i : TTFT_i <= ttft_slo and TPOT_i <= tpot_slo} / duration``.
    A one-token answer has no TPOT and meets that objective.

    Examples
    --------
    >>> from inferlab.serving.serve import serve
    >>> r = serve("llama-3.1-8b", "h100-sxm", isl=512, osl=64, rate=4, num_requests=200)
    >>> g = goodput(r, ttft_slo_s=0.5, tpot_slo_s=0.05)
    >>> g.meets, round(g.fraction, 2)
    (True, 1.0)
    """
    if not isinstance(result, ServeResult):  # (a duck would fail deep inside with an AttributeError)
        raise SpecError(f"goodput: result must be a ServeResult (what serve() returns), got {type(result).__name__}")
    check_slo(ttft_slo_s, tpot_slo_s, percentile)
    u = user_latencies(result)
    tpot_ok = np.isnan(u.tpot_s) | (u.tpot_s <= tpot_slo_s)
    ok = (u.ttft_s <= ttft_slo_s) & tpot_ok
    tpot_p = float(np.nanpercentile(u.tpot_s, percentile)) if np.any(~np.isnan(u.tpot_s)) else 0.0
    t = result.trace
    filling = 0.0
    if getattr(result.workload, "mode", None) == "online" and len(t.arrival):
        filling = float(np.mean(t.arrival < np.min(t.arrival) + np.mean(t.finish - t.arrival)))
    return Goodput(requests_per_s=float(np.sum(ok)) / result.duration_s * result.replicas,
                   fraction=float(np.mean(ok)), ttft_s=float(np.percentile(u.ttft_s, percentile)), tpot_s=tpot_p,
                   ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s, percentile=percentile, filling=filling)


def reject_load_kwargs(serve_kwargs: dict[str, Any]) -> None:
    """Raise :class:`SpecError` when keywords meant for :func:`inferlab.serve` set the load a search varies."""
    clash = sorted({"rate", "concurrency", "offline", "trace"} & serve_kwargs.keys())
    if clash:
        raise SpecError(f"the load is what the sweep varies; do not pass {', '.join(clash)}")


@dataclass(frozen=True)
class SloRate:
    """The highest Poisson rate found to meet an SLO.

    Attributes
    ----------
    rate : float [request/s]
        Highest rate tried that met the SLO (within ``rel_tol`` of the first that did not).
    result : ServeResult
        The run at that rate.
    goodput : Goodput
        Its goodput.
    tried : tuple of (rate, meets)
        Every rate simulated, in order.
    """

    rate: float
    result: ServeResult
    goodput: Goodput
    tried: tuple[tuple[float, bool], ...]


def max_rate_meeting_slo(model: Any, hardware: Any, *, ttft_slo_s: float, tpot_slo_s: float,
                         percentile: float = 99.0, rel_tol: float = 0.02, max_runs: int = 30,
                         **serve_kwargs: Any) -> SloRate:
    """Highest arrival rate whose ``percentile`` TTFT and TPOT meet both objectives.

    Parameters
    ----------
    ttft_slo_s, tpot_slo_s : float [s]
        The objectives.
    rel_tol : float
        Stop when the passing and failing rates are within this relative distance.
    max_runs : int
        Simulations at most.
    **serve_kwargs
        Everything else :func:`inferlab.serve` takes.

    Notes
    -----
    Start at half the rate one request at a time could sustain (``0.5 / E2E`` of a lone
    request), double until the SLO fails, then bisect geometrically. A run most of whose
    requests arrive while the replicas fill up (more than :data:`FILLING_NOTE` of them) is
    rerun longer, and one whose queue keeps growing misses. Every run uses the
    same ``seed``, so arrivals at different rates are the same draws rescaled (common
    random numbers) and the pass/fail answer is close to monotone in the rate.

    Raises
    ------
    InfeasibleError
        A lone request already misses the objectives.
    """
    from .serve import serve

    reject_load_kwargs(serve_kwargs)
    if serve_kwargs.get("max_concurrency") is not None:
        raise SpecError("max_rate_meeting_slo: a client capped at max_concurrency holds the requests past its cap and "
                        "times them from when it sends them, so every rate above the cap's throughput reads alike; "
                        "search without max_concurrency (or sweep rates with load_sweep)")
    check_slo(ttft_slo_s, tpot_slo_s, percentile)
    lone = serve(model, hardware, concurrency=1, **{**serve_kwargs, "num_requests": 1})
    g1 = goodput(lone, ttft_slo_s, tpot_slo_s, 100.0)
    if not g1.meets:
        raise InfeasibleError(f"a lone request already misses the SLO ({slo_words(ttft_slo_s, tpot_slo_s)}): TTFT "
                              f"{g1.ttft_s * 1e3:.1f} ms, TPOT {g1.tpot_s * 1e3:.2f} ms; a faster deployment (more "
                              "GPUs, a narrower format) is needed")
    tried: list[tuple[float, bool]] = []
    runs: dict[float, tuple[ServeResult, Goodput]] = {}

    def meets(rate: float) -> bool:
        r = serve(model, hardware, rate=rate, **serve_kwargs)
        g = goodput(r, ttft_slo_s, tpot_slo_s, percentile)
        n = len(r.trace.arrival)
        if g.filling > FILLING_NOTE and n < STEADY_MAX_REQUESTS:
            # most of the run arrived while the replicas filled up: lengthen it until the requests
            # read are mostly steady traffic (100 requests at twice a replica's capacity had met)
            more = min(STEADY_MAX_REQUESTS, math.ceil(n * g.filling / (FILLING_NOTE / 2.0)))
            r = serve(model, hardware, rate=rate, **{**serve_kwargs, "num_requests": int(round(more * r.replicas))})
            g = goodput(r, ttft_slo_s, tpot_slo_s, percentile)
        ok = g.meets and not queue_grows(r.trace)  # a queue that keeps growing misses however it reads
        runs[rate] = (r, g)
        tried.append((rate, ok))
        return ok

    lo, hi = 0.5 / float(np.mean(lone.e2e_s)) * lone.replicas, None
    while not meets(lo):
        if len(tried) >= max_runs // 2:
            raise InfeasibleError(f"no rate down to {lo:.3g} req/s meets the SLO at P{percentile:g}")
        hi, lo = lo, lo / 2.0
    while hi is None:
        if meets(lo * 2.0):
            lo *= 2.0
        else:
            hi = lo * 2.0
        if len(tried) >= max_runs:
            break
    while hi is not None and hi / lo > 1.0 + rel_tol and len(tried) < max_runs:
        mid = math.sqrt(lo * hi)
        if meets(mid):
            lo = mid
        else:
            hi = mid
    r, g = runs[lo]
    return SloRate(lo, r, g, tuple(tried))


def queue_grows(trace: Any) -> bool:
    """Whether the replicas fall behind the arrivals: the backlog (arrived, not yet scheduled)
    at the last arrival exceeds 1.5x the backlog at the middle arrival, 1% of the requests and
    10 requests. A backlog that grows linearly doubles from the middle to the end; a stable
    one stays near its mean, which for an in-flight-batching engine is near zero until its
    sequence or KV limit binds. Without it a scenario with no TTFT objective would accept a replica
    count whose queue (and TTFT) grows for as long as the traffic lasts."""
    arrival = getattr(trace, "arrival", None)
    scheduled = getattr(trace, "first_scheduled", None)
    if arrival is None or scheduled is None or len(arrival) < 20:
        return False
    arrival, scheduled = np.asarray(arrival, float), np.asarray(scheduled, float)
    order = np.sort(arrival)

    def backlog(t: float) -> int:
        return int(np.count_nonzero((arrival <= t) & (scheduled > t)))

    end, mid = backlog(float(order[-1])), backlog(float(order[len(order) // 2]))
    return end > max(1.5 * mid, 0.01 * len(arrival), 10)


def steady_requests_per_s(result: Any, edge: float = 0.2) -> float:
    """Requests per second a run completes in its steady middle [request/s]: the output tokens
    its requests generate between ``edge`` and ``1 - edge`` of its span (each request's after
    the first spread evenly from its first token to its last), over that time and the mean
    output length, for every replica the run stands for. Counting finishes instead misreads a
    run whose requests start together and end in bursts (Llama-3.1-70B over two pipeline stages,
    all queued: 31 req/s by finishes between the 20th and 80th percentile, 18.5 by tokens, as a
    Poisson stream shows: 26 req/s offered, 18.5 served, the backlog growing)."""
    t = result.trace
    first, finish, osl = (np.asarray(v, float) for v in (t.first_token, t.finish, t.osl))
    start, end = float(np.min(np.asarray(t.arrival, float))), float(np.max(finish))
    lo, hi = start + edge * (end - start), start + (1.0 - edge) * (end - start)
    if not hi > lo or not len(osl):
        return math.inf
    inside = np.clip(np.minimum(finish, hi) - np.maximum(first, lo), 0.0, None)
    share = np.where(finish > first, inside / np.maximum(finish - first, 1e-300), 0.0)
    tokens = (osl - 1.0) * share + ((first >= lo) & (first < hi))
    return float(np.sum(tokens)) / (hi - lo) * float(result.replicas) / float(np.mean(osl))
