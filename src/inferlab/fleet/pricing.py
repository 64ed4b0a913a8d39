"""What the fleet's replicas cost over the day: reserved ones all day, the rest on demand,
or partly on spot capacity.

Reserved replicas are paid for the whole horizon whether they serve or not; replicas
running beyond them are paid while they run (from the moment they are ordered: a starting
replica holds its GPUs). Each replica ordered beyond the reserved ones runs on spot capacity
with probability ``spot_share``, at the spot price; the provider reclaims a spot replica at
``spot_reclaims_per_h`` with a two-minute notice [1] (it stops taking requests, and those it
has not finished by then are lost).

References
----------
.. [1] AWS, "Spot Instance interruption notices" (EC2 User Guide): a two-minute warning
   before an interruption. Interruption frequency per instance type: AWS Spot Instance
   Advisor, monthly bands from <5% to >20%.

The hourly prices are the deployment's: ``on_demand_usd_per_hour`` defaults to the
catalog's GPU price times the replica's GPUs (see ``hardware_specs``, each with its source
and date); reserved and spot prices are given by the user (provider and term specific).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..checks import MAX_PRICE, MIN_PRICE, integer, real
from ..errors import SpecError
from ..units import is_quantity, to_si_array

#: Most a replica's price may be [USD/hour]: a thousand GPUs at the most one may cost.
MAX_REPLICA_PRICE = MAX_PRICE * 1000
#: Spot interruption notice [s] ([1]).
SPOT_NOTICE_S = 120.0
#: Reclaims per spot replica-hour: 10% a month (the middle of the Spot Instance Advisor's
#: bands, [1]) over 730 hours. An assumption per instance type and region.
DEFAULT_SPOT_RECLAIMS_PER_H = 0.10 / 730.0


@dataclass(frozen=True)
class Pricing:
    """Prices of one replica [USD/hour] and the mix.

    Parameters
    ----------
    on_demand_usd_per_hour : float [USD/hour]
    reserved_usd_per_hour : float [USD/hour]; NaN: the on-demand price
    spot_usd_per_hour : float [USD/hour]; NaN: no spot
    reserved : int
        Replicas reserved for the whole horizon.
    spot_share : float
        Chance that a replica beyond the reserved ones runs on spot [-].
    spot_reclaims_per_h : float [1/h]
        Rate at which the provider reclaims one spot replica.
    """

    on_demand_usd_per_hour: float = math.nan
    reserved_usd_per_hour: float = math.nan
    spot_usd_per_hour: float = math.nan
    reserved: int = 0
    spot_share: float = 0.0
    spot_reclaims_per_h: float = DEFAULT_SPOT_RECLAIMS_PER_H

    def __post_init__(self) -> None:
        object.__setattr__(self, "reserved", integer("pricing.reserved", self.reserved, minimum=0, maximum=100_000))
        object.__setattr__(self, "spot_share", real("pricing.spot_share", self.spot_share, minimum=0.0, maximum=1.0))
        object.__setattr__(self, "spot_reclaims_per_h", real("pricing.spot_reclaims_per_h", self.spot_reclaims_per_h,
                                                             minimum=0.0, maximum=1e6, unit="1/h"))
        for name in ("on_demand_usd_per_hour", "reserved_usd_per_hour", "spot_usd_per_hour"):
            v = getattr(self, name)
            if is_quantity(v):
                v = to_si_array(v, "USD/hour", f"pricing.{name}")
                v = float(v) if v.ndim == 0 else v  # an array is refused as not a number below
                object.__setattr__(self, name, v)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise SpecError(f"pricing.{name} must be a number [USD/hour], got {v!r:.40}")
            if v < 0 or math.isinf(v):
                raise SpecError(f"pricing.{name} must be a finite price >= 0 USD/hour, got {v}")
            if not math.isnan(v) and (0.0 < v < MIN_PRICE or v > MAX_REPLICA_PRICE):  # (a replica's: its GPUs' sum)
                raise SpecError(f"pricing.{name} must be 0 (free) or from {MIN_PRICE:g} to {MAX_REPLICA_PRICE:.0e} "
                                f"USD/hour a replica, got {v:g}")
        if self.reserved < 0 or not 0 <= self.spot_share <= 1:
            raise SpecError("pricing: reserved must be >= 0 replicas and spot_share in [0, 1]")
        if self.spot_share > 0 and math.isnan(self.spot_usd_per_hour):
            raise SpecError("pricing: a spot_share needs spot_usd_per_hour")

    @property
    def unused_spot_note(self) -> str | None:
        """What a spot price beside a ``spot_share`` of 0 does: nothing (said, not dropped)."""
        if self.spot_share == 0 and not math.isnan(self.spot_usd_per_hour):
            return (f"pricing: a spot price ({self.spot_usd_per_hour:g} USD/h) with spot_share 0: no replica runs on "
                    "spot; give spot_share (the chance a replica beyond the reserved ones does)")
        return None

    def usd_per_hour(self, replicas: np.ndarray, spot: np.ndarray | float = 0.0) -> np.ndarray:
        """Spend rate with ``replicas`` running (ordered or serving), ``spot`` of them on spot
        capacity [USD/hour]; the reserved ones are paid whether they run or not."""
        reserved_price = self.on_demand_usd_per_hour if math.isnan(self.reserved_usd_per_hour) \
            else self.reserved_usd_per_hour
        spot = np.asarray(spot, float)
        over = np.maximum(np.asarray(replicas, float) - spot - self.reserved, 0.0)
        # a price is only needed where replicas pay it (none on demand: its price may be unknown)
        spot_cost = np.where(spot > 0, spot * self.spot_usd_per_hour, 0.0)
        on_demand = np.where(over > 0, over * self.on_demand_usd_per_hour, 0.0)
        return (self.reserved * reserved_price if self.reserved else 0.0) + on_demand + spot_cost

    def with_on_demand(self, usd_per_hour: float | None) -> Pricing:
        """This pricing with ``usd_per_hour`` as its on-demand price where it names none."""
        if usd_per_hour is None or not math.isnan(self.on_demand_usd_per_hour):
            return self
        return replace(self, on_demand_usd_per_hour=float(usd_per_hour))


def catalog_price(dep: Any) -> float | None:
    """A replica's on-demand price from the catalog: its GPUs at the GPU's price [USD/h]; None
    where the catalog has no price for the GPU."""
    hw = dep.hardware
    return None if hw.price is None else hw.price.si * dep.parallel.tp * dep.parallel.pp


def spend_usd(pricings: list[Pricing], intervals: list[tuple[float, float]], pools: list[int], spot: list[bool],
              end_s: float) -> float:
    """USD paid over ``[0, end_s]``: each pool's pricing at the replicas it holds at each
    instant, a replica from its order until it stops (one still running, until ``end_s``)."""
    total = 0.0
    span = np.asarray(intervals, float).reshape(-1, 2)
    which, on_spot = np.asarray(pools, int), np.asarray(spot, bool)
    for k, price in enumerate(pricings):
        mine = which == k
        start, stop = span[mine, 0], np.minimum(span[mine, 1], end_s)
        times = np.unique(np.concatenate([[0.0, end_s], start[start < end_s], stop[stop < end_s]]))

        def held(sel: np.ndarray) -> np.ndarray:  # replicas ordered and not yet stopped at each time
            return (np.searchsorted(np.sort(start[sel]), times, "right")
                    - np.searchsorted(np.sort(stop[sel]), times, "right")).astype(float)

        rate = price.usd_per_hour(held(np.ones(len(start), bool)), held(on_spot[mine]))
        total += float(np.sum(np.asarray(rate, float)[:-1] * np.diff(times))) / 3600.0
    return total
