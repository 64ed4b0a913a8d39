"""The chosen configuration through a day: capacity to buy, cold start, warm headroom.

The plan sizes replicas for the scenario's rate, its peak. With an ``operations`` section
(:class:`~inferlab.planning.scenario.Operations`) the winner's replicas also follow the
daily traffic curve, bought as the cheapest reserved / on-demand / spot mix
(:func:`inferlab.economics.plan_capacity`), and the time to start one more replica
(:func:`inferlab.economics.cold_start`) sets the warm headroom a traffic rise needs
(:func:`inferlab.economics.warm_headroom`).
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..economics import CapacityPlan, ColdStart, Headroom, cold_start, plan_capacity, warm_headroom
from ..inputs.resolve import deployment
from .probes import HEADROOM_MAX
from .scenario import Scenario
from ..results.record import array_record


@array_record
@dataclass(frozen=True)
class DayPlan:
    """What running the winner costs over the day, and what scaling it up takes."""

    capacity: CapacityPlan | None
    cold_start: ColdStart
    headroom: Headroom
    period_h: float
    #: What the capacity plan counts: ``replicas``, or ``GPUs`` for separate pools of two kinds.
    unit: str = "replicas"

    def lines(self) -> list[str]:
        """Plain-language summary lines for :meth:`Plan.explain`."""
        out = []
        cap = self.capacity
        if cap is not None:
            mix = f"{cap.reserved} reserved" if self.unit == "replicas" else f"{cap.reserved} {self.unit} reserved"
            for kind, count in (("on demand", np.max(cap.on_demand)), ("spot", np.max(cap.spot))):
                if count > 0:
                    mix += f", {kind} up to {int(count)}"
            saved = 1.0 - cap.total_usd / cap.all_on_demand_usd if cap.all_on_demand_usd > 0 else 0.0
            hours = len(cap.demand) * self.period_h  # the profile's span, a day only when it is 24 h
            span = "per day" if abs(hours - 24.0) < 1e-9 else f"over those {hours:g} h"
            out.append(f"over the profile ({len(cap.demand)} periods of {self.period_h:g} h, "
                       f"{int(np.min(cap.demand))}-{int(np.max(cap.demand))} {self.unit}): {mix}; "
                       f"${cap.total_usd:,.0f} {span}, {saved:.0%} below all on demand (${cap.all_on_demand_usd:,.0f})")
        cs, hr = self.cold_start, self.headroom
        out.append(f"one more replica takes {float(cs.total_s) / 60:.1f} min to start (provisioning "
                   f"{float(cs.provisioning_s):.0f} s, image {float(cs.image_pull_s):.0f} s, weights "
                   f"{float(cs.weight_load_s):.0f} s, warm-up {float(cs.warmup_s):.0f} s)")
        if float(hr.demand_rise) > 0:
            react = float(hr.lead_time_s) - float(cs.total_s)  # noticing the rise and ordering, then the start
            lead = f"the {float(hr.lead_time_s) / 60:.1f} min lead time ({react:.0f} s to react, then the start)" \
                if react > 0.5 else "that lead time"
            out.append(f"a rise of {float(hr.demand_rise):.1f} req/s over {lead} needs "
                       f"{int(hr.extra_replicas_whole)} warm replica(s) beyond the plan "
                       f"(${float(hr.usd_per_hour):,.2f}/h)")
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"capacity": self.capacity.to_dict() if self.capacity is not None else None,
                "cold_start": self.cold_start.to_dict(), "headroom": self.headroom.to_dict(),
                "period_h": self.period_h, "unit": self.unit}


def carried_per_replica(best: Any, rate: float) -> float:
    """What one of ``best``'s replicas carries within the SLOs [request/s]: its planned share of
    ``rate`` and the headroom it showed (the fluid model's capacity where the simulation stopped
    looking, at +HEADROOM_MAX, or never looked)."""
    headroom = best.headroom if math.isfinite(best.headroom) and best.headroom > 0.0 else 0.0  # (NaN: not measured)
    carried = rate / best.replicas * (1.0 + headroom)
    if not best.disaggregated and (best.headroom_by != "simulation" or best.headroom >= HEADROOM_MAX):
        carried = max(carried, best.replica_rate)  # (separate pools: a decode replica's rate is not a replica's)
    return carried


def day_plan(scenario: Scenario, best: Any) -> DayPlan | None:
    """The :class:`DayPlan` of the chosen candidate, or None without an ``operations`` section."""
    ops = scenario.operations
    if ops is None or best is None:
        return None
    per_replica_usd_h = best.usd_per_hour / best.replicas
    capacity, unit = None, "replicas"
    if ops.daily_profile is not None:
        # the plan's replicas carry the peak; each period needs its share of them, or fewer where
        # the simulation showed a replica carrying more than its share of the peak within the SLOs
        # (its headroom: 4 replicas that each absorb +30% carry a 30% hour on one, not two; a
        # bisected headroom stays below n / (n - 1) - 1, so the peak keeps all n; a fluid
        # model's headroom counts the utilization margin it sizes with, so it is not used)
        # (separate pools: each pool its share, at least one replica of each to serve at all;
        # pools of two kinds of replica are bought by the GPU)
        share = np.asarray(ops.daily_profile, float)
        unit_usd_h = per_replica_usd_h
        if not best.disaggregated:
            demand = np.ceil(best.replicas * share - 1e-9)
            if best.headroom_by == "simulation" and 0.0 < best.headroom < HEADROOM_MAX:  # (NaN: none)
                rate = scenario.traffic.request_rate
                demand = np.minimum(demand, np.ceil(rate * share / carried_per_replica(best, rate) - 1e-9))
        else:
            by_gpu = len(set(best.pool_gpus_per_replica)) > 1
            sizes = best.pool_gpus_per_replica if by_gpu else (1, 1)
            demand = sum(np.maximum(np.ceil(n * share - 1e-9), 1.0) * g for n, g in zip(best.pools, sizes))
            if by_gpu:
                unit, unit_usd_h = "GPUs", best.usd_per_hour / best.gpus
        capacity = plan_capacity(demand, reserved_usd_per_hour=unit_usd_h * (1.0 - ops.reserved_discount),
                                 on_demand_usd_per_hour=unit_usd_h,
                                 spot_usd_per_hour=None if ops.spot_discount is None
                                 else unit_usd_h * (1.0 - ops.spot_discount),
                                 spot_availability=ops.spot_availability, period_s=ops.period_h * 3600.0)
    dep = deployment(best.model, best.hardware, tp=best.tp, pp=best.pp, ep=best.ep, attention_dp=best.attention_dp,
                     precision=best.precision,
                     engine=scenario.engine, profile=scenario.profile)
    cs = cold_start(dep, provisioning_s=ops.provisioning_s, image_bytes=ops.image_gb * 1e9,
                    storage_bytes_per_s=ops.storage_gb_per_s * 1e9, warmup_s=ops.warmup_s)
    headroom = warm_headroom(requests_per_s_per_replica=carried_per_replica(best, scenario.traffic.request_rate),
                             cold_start_s=cs, ramp_requests_per_s2=ops.ramp_rps_per_min / 60.0,
                             reaction_s=ops.reaction_s, usd_per_replica_hour=per_replica_usd_h)
    return DayPlan(capacity, cs, headroom, ops.period_h, unit)
