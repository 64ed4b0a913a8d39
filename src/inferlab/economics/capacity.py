"""Which capacity to buy for a daily traffic curve: reserved, on-demand and spot replicas.

Reserved (committed) replicas are paid every period whether used or not; on-demand ones
only when running; spot ones are cheaper but can vanish, so a safety share of each
period's demand stays on non-spot capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from ._common import as_si, jsonable, non_negative, positive, share, table, whole, shapes_agree
from .cost import SECONDS_PER_HOUR

#: Share of time a spot replica runs before it is reclaimed. An assumption, not a
#: measurement: AWS's Spot Instance Advisor reports monthly interruption frequencies in
#: bands from <5% to >20% per instance type; set it per provider and instance type.
DEFAULT_SPOT_AVAILABILITY = 0.9
#: Share of each period's demand kept on reserved or on-demand capacity so that a spot
#: reclaim cannot take more than the rest. A policy choice (assumption), not a measurement.
DEFAULT_MIN_NON_SPOT_SHARE = 0.5


@dataclass(frozen=True)
class CapacityPlan:
    """Replicas of each kind per period and what they cost.

    Attributes
    ----------
    demand : numpy.ndarray
        Whole replicas needed in each period [-].
    reserved : int
        Reserved replicas, paid in every period [-].
    on_demand, spot : numpy.ndarray
        On-demand and (planned) spot replicas in each period [-].
    period_s : float
        Length of one period [s].
    reserved_usd_per_hour, on_demand_usd_per_hour, spot_usd_per_hour : float
        Prices of one replica [USD/hour] (spot NaN when not offered).
    spot_availability : float
        Share of time a spot replica runs; the rest is made up on demand [-].
    """

    demand: np.ndarray
    reserved: int
    on_demand: np.ndarray
    spot: np.ndarray
    period_s: float
    reserved_usd_per_hour: float
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float
    spot_availability: float

    @property
    def spot_effective_usd_per_hour(self) -> float:
        """Expected cost of a planned spot replica-hour, reclaimed hours refilled on demand [USD/hour]."""
        a = self.spot_availability
        return a * self.spot_usd_per_hour + (1.0 - a) * self.on_demand_usd_per_hour

    @property
    def usd_per_period(self) -> np.ndarray:
        """Cost of each period [USD]."""
        spot = self.spot * self.spot_effective_usd_per_hour if np.any(self.spot) else 0.0
        hourly = self.reserved * self.reserved_usd_per_hour + self.on_demand * self.on_demand_usd_per_hour + spot
        return hourly * self.period_s / SECONDS_PER_HOUR

    @property
    def total_usd(self) -> float:
        """Cost of the whole curve (a day for 24 hourly periods) [USD]."""
        return float(np.sum(self.usd_per_period))

    @property
    def all_on_demand_usd(self) -> float:
        """Cost of the same curve on on-demand replicas only [USD]."""
        return float(np.sum(self.demand)) * self.on_demand_usd_per_hour * self.period_s / SECONDS_PER_HOUR

    @property
    def idle_reserved(self) -> np.ndarray:
        """Reserved replicas paid for but not needed in each period [-]."""
        return np.maximum(self.reserved - self.demand, 0.0)

    @property
    def mix(self) -> dict[str, float]:
        """Replica-hours by kind: reserved used and idle, on-demand, spot, and the expected
        on-demand fallback for reclaimed spot [replica-hour]."""
        hours = self.period_s / SECONDS_PER_HOUR
        used = np.minimum(self.reserved, self.demand)
        return {"reserved_used": float(np.sum(used)) * hours, "reserved_idle": float(np.sum(self.idle_reserved)) * hours,
                "on_demand": float(np.sum(self.on_demand)) * hours, "spot": float(np.sum(self.spot)) * hours,
                "spot_fallback": float(np.sum(self.spot)) * hours * (1.0 - self.spot_availability)}

    def to_dict(self) -> dict[str, Any]:
        """Inputs, the plan per period, totals and the mix, JSON-ready."""
        keys = ("demand", "reserved", "on_demand", "spot", "period_s", "reserved_usd_per_hour",
                "on_demand_usd_per_hour", "spot_usd_per_hour", "spot_availability", "spot_effective_usd_per_hour",
                "usd_per_period", "total_usd", "all_on_demand_usd", "idle_reserved", "mix")
        return {k: jsonable(getattr(self, k)) for k in keys}

    def __str__(self) -> str:
        saved = 1.0 - self.total_usd / self.all_on_demand_usd if self.all_on_demand_usd > 0 else 0.0
        head = (f"capacity plan: {self.reserved} reserved replicas, {self.demand.size} periods of "
                f"{self.period_s / SECONDS_PER_HOUR:g} h; cost ${self.total_usd:,.2f} "
                f"(all on-demand ${self.all_on_demand_usd:,.2f}, {saved:.0%} saved)")
        mix = ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in self.mix.items())
        return table(head, {
            "period": np.arange(self.demand.size), "demand": self.demand,
            "reserved used": np.minimum(self.reserved, self.demand), "idle reserved": self.idle_reserved,
            "on-demand": self.on_demand, "spot": self.spot, "$": self.usd_per_period,
        }) + f"\nreplica-hours: {mix}"


@shapes_agree
def replicas_needed(demand: Any, requests_per_s_per_replica: Any = None) -> np.ndarray:
    """Whole replicas per period for a curve in replicas, or in requests/s with a per-replica capacity.

    Raises
    ------
    SpecError
        For an empty or multi-dimensional curve, or a negative level (naming the period).
    """
    unit = "request/second" if requests_per_s_per_replica is not None else "dimensionless"
    levels = as_si(demand, unit, "demand")
    if levels.ndim != 1:
        raise SpecError(f"demand must be a 1-D curve (one level per period), got shape {levels.shape}")
    if np.any(levels < 0):
        i = int(np.argmax(levels < 0))
        raise SpecError(f"demand must be >= 0 in every period; period {i} has {float(levels[i])!r}")
    if requests_per_s_per_replica is None:
        return whole(levels)
    cap = positive(requests_per_s_per_replica, "request/second", "requests_per_s_per_replica",
                   "traffic one replica sustains within its SLOs")
    if cap.ndim:
        raise SpecError("requests_per_s_per_replica must be one number for the whole curve")
    return whole(levels / cap)


def _count_at_least(levels: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Periods with ``levels >= r``, for each ``r``."""
    return levels.size - np.searchsorted(np.sort(levels), r, side="left")


@shapes_agree
def reserved_replicas(demand: Any, *, reserved_usd_per_hour: Any, on_demand_usd_per_hour: Any,
                      requests_per_s_per_replica: Any = None) -> int:
    r"""Reserved replicas for a curve covered otherwise on demand (the classic rule).

    Parameters
    ----------
    demand : array_like
        Replicas (or requests/s, with ``requests_per_s_per_replica``) per period.
    reserved_usd_per_hour, on_demand_usd_per_hour : float
        Prices of one replica [USD/hour].

    Returns
    -------
    int
        Reserved replicas [-].

    Notes
    -----
    Replica ``r`` costs ``p_res`` in every period reserved, and ``p_od`` only in the periods
    that need it otherwise, so reserve it when

    .. math:: \frac{\#\{h : d_h \ge r\}}{H} > \frac{p_{res}}{p_{od}}

    The share is non-increasing in ``r``, so the answer is the number of ``r`` that pass.

    Examples
    --------
    >>> reserved_replicas([1, 2, 4, 3], reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0)
    2
    """
    d = replicas_needed(demand, requests_per_s_per_replica)
    p_res = _price(reserved_usd_per_hour, "reserved_usd_per_hour")
    p_od = _price(on_demand_usd_per_hour, "on_demand_usd_per_hour")
    r = np.arange(1, int(d.max()) + 1)
    return int(np.count_nonzero(_count_at_least(d, r) * p_od > d.size * p_res))


@shapes_agree
def plan_capacity(demand: Any, *, reserved_usd_per_hour: Any, on_demand_usd_per_hour: Any,
                  spot_usd_per_hour: Any = None, spot_availability: Any = DEFAULT_SPOT_AVAILABILITY,
                  min_non_spot_share: Any = DEFAULT_MIN_NON_SPOT_SHARE, requests_per_s_per_replica: Any = None,
                  period_s: Any = SECONDS_PER_HOUR, reserved: int | None = None) -> CapacityPlan:
    r"""Cheapest mix of reserved, on-demand and spot replicas for a demand curve.

    Parameters
    ----------
    demand : array_like
        Replicas needed per period (fractions round up), or requests/s with
        ``requests_per_s_per_replica`` [request/s].
    reserved_usd_per_hour, on_demand_usd_per_hour : float or pint.Quantity
        Prices of one replica [USD/hour]; reserved is the committed rate, paid every period.
    spot_usd_per_hour : float or pint.Quantity, optional
        Spot price of one replica [USD/hour]; ``None`` when spot is not used.
    spot_availability : float
        Share of time a spot replica runs before it is reclaimed, in [0, 1] [-]; reclaimed
        hours are refilled on demand. Default: an assumption (see ``DEFAULT_SPOT_AVAILABILITY``).
    min_non_spot_share : float
        Share of each period's demand kept on reserved or on-demand replicas, in [0, 1] [-].
    requests_per_s_per_replica : float, optional
        Capacity of one replica [request/s], when ``demand`` is in requests/s.
    period_s : float
        Length of one period [s] (one hour by default).
    reserved : int, optional
        Force this many reserved replicas instead of the optimum (to compare plans).

    Returns
    -------
    CapacityPlan

    Notes
    -----
    Per period ``h`` with demand ``d_h`` and non-spot floor ``n_h = ceil(s d_h)``, ``R``
    reserved replicas leave ``max(n_h - R, 0)`` on demand and ``max(d_h - max(R, n_h), 0)``
    on spot at ``p_spot* = a p_spot + (1 - a) p_od``. Reserving replica ``r`` saves ``p_od``
    in periods with ``r <= n_h`` and ``p_spot*`` in those with ``n_h < r <= d_h``, and costs
    ``p_res`` in all ``H``; reserve it when

    .. math:: p_{od} \, \#\{h: n_h \ge r\} + p^*_{spot} \, \#\{h: n_h < r \le d_h\} > H \, p_{res}

    The left side is non-increasing in ``r`` (``p_spot* <= p_od``), so the cost is convex
    in ``R`` and this is the optimum. Without spot (or with ``s = 1``) ``n_h = d_h`` and
    it is the classic rule of :func:`reserved_replicas`. Spot is used only when
    ``p_spot* < p_od``.

    Examples
    --------
    >>> plan = plan_capacity([1, 2, 4, 3], reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0)
    >>> plan.reserved, plan.on_demand.tolist(), round(plan.total_usd, 2)   # 2 x 2.2 x 4 + 3 x 4
    (2, [0.0, 0.0, 2.0, 1.0], 29.6)
    """
    d = replicas_needed(demand, requests_per_s_per_replica)
    p_res = _price(reserved_usd_per_hour, "reserved_usd_per_hour")
    p_od = _price(on_demand_usd_per_hour, "on_demand_usd_per_hour")
    avail = float(share(spot_availability, "spot_availability", "share of time a spot replica runs",
                        allow_zero=True))
    safety = float(share(min_non_spot_share, "min_non_spot_share",
                         "share of each period's demand kept off spot", allow_zero=True))
    hours = float(positive(period_s, "second", "period_s", "length of one period of the curve")) / SECONDS_PER_HOUR
    p_spot = np.nan if spot_usd_per_hour is None else _price(spot_usd_per_hour, "spot_usd_per_hour")
    spot_eff = avail * p_spot + (1.0 - avail) * p_od
    use_spot = spot_usd_per_hour is not None and spot_eff < p_od
    n = whole(safety * d) if use_spot else d
    if reserved is None:
        r = np.arange(1, int(d.max()) + 1)
        alt_spot = spot_eff if use_spot else p_od
        cnt_n, cnt_d = _count_at_least(n, r), _count_at_least(d, r)
        saving = (p_od - alt_spot) * cnt_n + alt_spot * cnt_d
        reserved = int(np.count_nonzero(saving > d.size * p_res))
    elif isinstance(reserved, bool) or not isinstance(reserved, (int, np.integer)) or reserved < 0:
        raise SpecError(f"reserved must be a whole number of replicas >= 0, got {reserved!r}")
    on_demand = np.maximum(n - reserved, 0.0)
    spot = np.maximum(d - np.maximum(reserved, n), 0.0)
    return CapacityPlan(d, int(reserved), on_demand, spot, hours * SECONDS_PER_HOUR, p_res, p_od, p_spot, avail)


def _price(value: Any, name: str) -> float:
    arr = non_negative(value, "USD/hour", name, "the hourly price of one replica; a price cannot be negative")
    if arr.ndim:
        raise SpecError(f"{name} must be one price for the whole curve, got an array of shape {arr.shape}")
    return float(arr)
