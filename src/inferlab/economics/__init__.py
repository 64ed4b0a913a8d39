"""Economics of serving: what a token costs, when dedicated GPUs beat a per-token API,
which capacity to buy for a daily curve, and what slow replica start-up forces.

Every function takes plain numbers in the canonical units (USD/hour, USD/Mtok, request/s,
token/s, byte, second) or pint quantities, broadcasts arrays, and returns a float, an
array or a small frozen result with ``to_dict()`` and a text table as ``str()``.

==========================  ==============================================================
module                      concept
==========================  ==============================================================
:mod:`.cost`                cost per million tokens from the GPU-hour price and utilization
:mod:`.break_even`          per-token API against whole dedicated replicas
:mod:`.capacity`            reserved, on-demand and spot replicas for a demand curve
:mod:`.cold_start`          time to bring a replica up, and the warm headroom it forces
==========================  ==============================================================

Examples
--------
>>> from inferlab.economics import cost_per_million_tokens, plan_capacity
>>> round(cost_per_million_tokens(2.95, 1, 1000.0, utilization=0.5), 4)
1.6389
>>> plan_capacity([1, 2, 4, 3], reserved_usd_per_hour=2.2, on_demand_usd_per_hour=4.0).reserved
2
"""

from .break_even import BreakEven, TrafficCosts, api_usd_per_request, api_vs_dedicated, traffic_costs
from .capacity import CapacityPlan, plan_capacity, replicas_needed, reserved_replicas
from .cold_start import ColdStart, Headroom, cold_start, warm_headroom
from .cost import cost_per_million_tokens, utilization_for_cost

__all__ = [
    "BreakEven", "CapacityPlan", "ColdStart", "Headroom", "TrafficCosts", "api_usd_per_request", "api_vs_dedicated",
    "cold_start", "cost_per_million_tokens", "plan_capacity", "replicas_needed", "reserved_replicas",
    "traffic_costs", "utilization_for_cost", "warm_headroom",
]
