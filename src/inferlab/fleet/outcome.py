"""A fleet run's outcome: its :class:`~.result.FleetResult` from the loop's record (cost from
the replicas paid over time, availability from the serving ones, the notes that explain them)."""

from __future__ import annotations

import math

import numpy as np

from .autoscaler import flapping_note, unreached_note
from .pricing import Pricing, spend_usd
from .prompts import too_long_note
from .result import FleetResult
from .simulation import TOO_LONG, FleetConfig, Record
from .traffic import Requests


def result_of(name: str, requests: Requests, rec: Record, cfg: FleetConfig, price: Pricing, need: int,
              ttft_slo_s: float, notes: tuple[str, ...] = ()) -> FleetResult:
    """A :class:`FleetResult` from the loop's record: cost from the paid replicas over time,
    availability from the serving ones."""
    samples = {k: np.asarray(v, float) for k, v in rec.samples.items()}
    # the replicas serving the backlog at the horizon run (and are paid) until its last request ends
    finish = np.asarray(rec.finish, float)[np.asarray(rec.status) == 0]
    end = max(cfg.horizon_s, float(np.nanmax(finish)) if finish.size and np.isfinite(finish).any() else 0.0)
    if end > 1.01 * cfg.horizon_s:
        notes = (*notes, f"the backlog at the end of the {cfg.horizon_s / 3600.0:.3g} h took {end - cfg.horizon_s:,.0f}"
                         " s more to serve; the replicas serving it are paid until their last request ends, "
                         "the reserved ones (paid whether they run or not) until then too, the others until the horizon")
    # each replica paid from its order until it stops; one running at the horizon until its own last request ends
    usd = spend_usd([p.pricing for p in cfg.pools], paid_intervals(rec, cfg.horizon_s), rec.pool, rec.spot, end)
    gpu = lambda p: p.kind.model.dep.hardware.id  # noqa: E731 - named beside a pool's own name
    unpriced = sorted({p.kind.name + ("" if gpu(p) in p.kind.name else f" ({gpu(p)})") for p in cfg.pools
                       if math.isnan(p.pricing.on_demand_usd_per_hour)})
    if math.isnan(usd) and unpriced:
        notes = (*notes, f"cost unknown: no on-demand price for {', '.join(unpriced)} (the catalog has none for its "
                         "GPU); give pricing: {on_demand_usd_per_hour: ...}")
    notes = (*notes, *too_long_note(cfg.pools, requests, rec.status, TOO_LONG))
    most = int(np.max(samples["running"])) if len(samples.get("running", ())) else 0
    ok = np.asarray(rec.status) == 0  # a utilization autoscaler that never asked for more while requests were late
    notes = (*notes, *unreached_note([p.autoscaler for p in cfg.pools], samples.get("utilization", ()),
                                     float(np.mean((rec.first_token - rec.sent)[ok] > ttft_slo_s)) if ok.any() else 0.0))
    notes = (*notes, *flapping_note(rec.events, rec.pool, [p.autoscaler for p in cfg.pools]))
    if price.reserved > most:  # paid whether they run or not
        notes = (*notes, f"pricing: {price.reserved} replicas reserved and paid for the whole horizon, more than the "
                         f"{most} that ever ran")
    if need > most:  # availability counts the time at least ``need`` serve: never here
        notes = (*notes, f"availability 0: it counts the time at least {need} replicas serve, and at most {most} ran")
    return FleetResult(name, rec.sent, rec.first_token, rec.finish, requests.isl, requests.osl, rec.cached,
                       requests.prefix, rec.status, rec.replica, samples, usd,
                       availability_of(rec.healthy, need, cfg.horizon_s), need, cfg.horizon_s, ttft_slo_s,
                       tuple(rec.events), notes, np.asarray(rec.pool, int))


def paid_intervals(rec: Record, horizon_s: float) -> list[tuple[float, float]]:
    """Each replica's paid span [s]: from its order until it stops; one still running at the
    horizon, until the horizon or the end of the last request it served, whichever is later
    (the idle ones are let go at the horizon, the backlog's kept until it is served)."""
    finish = np.asarray(rec.finish, float)
    served = np.isfinite(finish) & (np.asarray(rec.status) == 0)
    last = np.full(len(rec.intervals), horizon_s)
    np.maximum.at(last, np.asarray(rec.replica)[served].astype(int), finish[served])
    return [(a, b if math.isfinite(b) else float(t)) for (a, b), t in zip(rec.intervals, last)]


def availability_of(healthy: list[tuple[float, int]], need: int, horizon_s: float) -> float:
    """Share of ``[0, horizon_s]`` with at least ``need`` replicas serving, from the count at
    each change [-]."""
    if not healthy:
        return 0.0
    times = np.array([t for t, _ in healthy] + [horizon_s])
    counts = np.array([c for _, c in healthy])
    spans = np.clip(np.diff(np.minimum(times, horizon_s)), 0.0, None)
    return float(np.sum(spans[counts >= need]) / horizon_s)
