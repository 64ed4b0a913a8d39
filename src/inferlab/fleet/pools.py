"""Pools of replicas: one deployment each, in a region, serving one model, with its own
autoscaler and prices; regions with round-trip times between them and GPU quotas.

A request comes from a user region and asks for a model. The router looks first at the
pools of that model nearest to the user (smallest round trip) and spills to farther ones
only when every nearby replica carries ``spill`` more requests than the least loaded replica
anywhere; a request served across regions waits half a round trip to reach the replica and
half to return (its TTFT and end-to-end latency include the full round trip). Pools of
one region share its GPU quota, and pools of one provider (a cloud, a neocloud, on-premises)
share the provider's quota across its regions: a replica the autoscaler orders beyond
either is not started.

References
----------
.. [1] AWS, "Network latency between regions" (CloudPing.co medians, 2025): ap-southeast-2
   (Sydney) to us-east-1 about 200 ms round trip; us-east-1 to eu-west-1 about 70 ms.
   https://www.cloudping.co/grid
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..checks import integer, real
from ..errors import SpecError, did_you_mean
from .autoscaler import Autoscaler
from .pricing import Pricing

#: Round trips between regions [s], medians of [1].
DEFAULT_RTT_S = {("ap-southeast-2", "us-east-1"): 0.200, ("us-east-1", "eu-west-1"): 0.070,
                 ("ap-southeast-2", "eu-west-1"): 0.260}
#: Requests a nearby replica may carry beyond the least loaded one anywhere before a request
#: goes to a farther region. An assumption.
DEFAULT_SPILL = 16


@dataclass(frozen=True)
class Pool:
    """Replicas of one kind in one region.

    Parameters
    ----------
    kind : ReplicaKind
    replicas : int
        Serving at the start.
    autoscaler : Autoscaler, optional
    pricing : Pricing
    region : str
    model : str
        Requests of this model go here ("" : every request).
    gpus : int
        GPUs of one replica (for the region's and the provider's quota).
    provider : str
        Who rents the GPUs ("" : none named, no provider quota applies).
    allow_long_context : bool
        Its engine takes requests (and a ``max_model_len``) past the model's trained positions
        (RoPE scaling).
    """

    kind: Any
    replicas: int = 1
    autoscaler: Autoscaler | None = None
    pricing: Pricing = field(default_factory=Pricing)
    region: str = "local"
    model: str = ""
    gpus: int = 1
    provider: str = ""
    allow_long_context: bool = False

    def __post_init__(self) -> None:
        if self.replicas < 0 or self.gpus < 1:
            raise SpecError(f"pool {self.region}/{self.model or 'all'}: replicas must be >= 0 and gpus >= 1")


def default_need(pools: tuple[Pool, ...]) -> int:
    """Replicas a fleet's availability counts against when the user gives none: each pool's
    autoscaler floor (``min_replicas``: the count it keeps at the quietest hour; a fleet that
    scales down to it at night is not unavailable), else its starting replicas; at least one."""
    return max(sum(p.autoscaler.min_replicas if p.autoscaler else p.replicas for p in pools), 1)


@dataclass(frozen=True)
class Regions:
    """Round trips between regions and GPU quotas.

    Parameters
    ----------
    rtt_s : dict
        ``(region a, region b) -> round trip [s]``, either order; the same region: 0.
    quota_gpus : dict
        ``region -> GPUs`` its pools may hold together (absent: no limit).
    provider_quota_gpus : dict
        ``provider -> GPUs`` its pools may hold together over every region (absent: no limit).
    spill : int [request]
    """

    rtt_s: dict = field(default_factory=lambda: dict(DEFAULT_RTT_S))
    quota_gpus: dict = field(default_factory=dict)
    spill: int = DEFAULT_SPILL
    provider_quota_gpus: dict = field(default_factory=dict)

    def rtt(self, a: str, b: str) -> float:
        """Round trip between ``a`` and ``b`` [s]."""
        if a == b:
            return 0.0
        value = self.rtt_s.get((a, b), self.rtt_s.get((b, a)))
        if value is None:
            known = sorted({r for pair in self.rtt_s for r in pair})
            raise SpecError(f"no round-trip time between regions {a!r} and {b!r}; give rtt_s for the pair "
                            f"(regions with one: {', '.join(known)})")
        return float(value)

    def quota(self, region: str) -> float:
        """GPUs the pools of ``region`` may hold together."""
        return float(self.quota_gpus.get(region, math.inf))

    def provider_quota(self, provider: str) -> float:
        """GPUs the pools of ``provider`` may hold together, over every region."""
        return float(self.provider_quota_gpus.get(provider, math.inf)) if provider else math.inf


def check_start_quotas(pools: tuple[Pool, ...] | list[Pool], regions: Regions | None) -> None:
    """Refuse pools whose starting replicas hold more GPUs than their region's or provider's
    quota: they could never all start (the autoscaler's later orders meet the quota in the run).

    Raises
    ------
    SpecError
        Naming the region or provider, the GPUs asked for and the quota.
    """
    if regions is None:
        return
    for name, key, quota in (("region", "region", regions.quota), ("provider", "provider", regions.provider_quota)):
        for where in sorted({getattr(p, key) for p in pools}):
            gpus = sum(max(p.replicas, p.autoscaler.min_replicas if p.autoscaler else 0) * p.gpus
                       for p in pools if getattr(p, key) == where)  # the autoscaler's floor starts too
            if gpus > quota(where):
                raise SpecError(f"fleet: the pools of {name} {where!r} start {gpus} GPUs, over its quota of "
                                f"{quota(where):g}: start fewer replicas there (an autoscaler orders more within "
                                "the quota), or raise the quota")


def regions_of(value: Regions | dict | None) -> Regions | None:
    """``fleet_of``'s ``regions``: a :class:`Regions`, or its mapping (``rtt_s`` keyed
    ``"a|b"`` [s], ``quota_gpus``, ``provider_quota_gpus`` [GPU], ``spill`` [request]) checked
    field by field."""
    if value is None or isinstance(value, Regions):
        return value
    if not isinstance(value, dict):
        raise SpecError(f"fleet regions must be a mapping of rtt_s, quota_gpus, provider_quota_gpus and spill, "
                        f"got {value!r:.60}")
    unknown = sorted(set(value) - {"rtt_s", "quota_gpus", "provider_quota_gpus", "spill"})
    if unknown:
        allowed = ("rtt_s", "quota_gpus", "provider_quota_gpus", "spill")
        raise SpecError(f"fleet regions: unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)} (allowed: "
                        f"{', '.join(allowed)})")
    rtt = {}
    for key, v in _mapping(value, "rtt_s").items():
        pair = tuple(str(key).split("|"))
        if len(pair) != 2 or not all(pair) or pair[0] == pair[1]:
            raise SpecError(f"fleet regions.rtt_s: key {key!r} must name two regions as 'a|b' "
                            "(e.g. 'ap-southeast-2|us-east-1'; within a region the round trip is 0)")
        rtt[pair] = real(f"fleet regions.rtt_s[{key!r}]", v, minimum=0.0, maximum=10.0, unit="s")
        if rtt.get(pair[::-1], rtt[pair]) != rtt[pair]:  # one round trip, both ways
            raise SpecError(f"fleet regions.rtt_s: {key!r} and '{pair[1]}|{pair[0]}' give two round-trip times "
                            f"({rtt[pair]:g} and {rtt[pair[::-1]]:g} s) for one pair of regions: give one")
    quotas = [{str(k): integer(f"fleet regions.{name}[{k!r}]", v, minimum=0, maximum=10**7)
               for k, v in _mapping(value, name).items()} for name in ("quota_gpus", "provider_quota_gpus")]
    spill = integer("fleet regions.spill", value.get("spill", DEFAULT_SPILL), minimum=0, maximum=10**6)
    # a pair given either way round replaces the built-in time of that pair
    defaults = {k: v for k, v in DEFAULT_RTT_S.items() if k not in rtt and k[::-1] not in rtt}
    return Regions(rtt_s={**defaults, **rtt}, quota_gpus=quotas[0], spill=spill, provider_quota_gpus=quotas[1])


def check_region_names(pools: Any, regions: Regions | None) -> None:
    """Refuse a quota naming a region or provider no pool is in: a typo there had silently
    dropped the quota."""
    if regions is None:
        return
    for key, have, what in (("quota_gpus", {p.region for p in pools}, "region"),
                            ("provider_quota_gpus", {p.provider for p in pools if p.provider}, "provider")):
        for name in getattr(regions, key):
            if name not in have:
                raise SpecError(f"fleet regions.{key}: no pool is in {what} {name!r}{did_you_mean(name, sorted(have))}; "
                                f"the pools' {what}s: {', '.join(sorted(have)) or 'none named'}")


def _mapping(value: dict, key: str) -> dict:
    got = value.get(key, {})
    if not isinstance(got, dict):
        raise SpecError(f"fleet regions.{key} must be a mapping, got {got!r:.60}")
    return got


def check_pool(k: int, spec: Any, allowed: tuple[str, ...], *, written_out: bool = False) -> None:
    """Pool ``k``'s mapping: known keys; ``written_out`` (its deployment, if any, read): a model,
    a hardware and ``limits`` as a mapping."""
    if not isinstance(spec, dict):
        raise SpecError(f"pool {k}: must be a mapping (model, hardware, replicas, ...), got {spec!r:.60}")
    unknown = sorted(set(spec) - set(allowed))
    if unknown:
        raise SpecError(f"pool {k}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)} (allowed: "
                        f"{', '.join(allowed)})")
    if written_out and ("model" not in spec or "hardware" not in spec):
        raise SpecError(f"pool {k}: give its model and hardware")
    if written_out and not isinstance(spec.get("limits", {}), dict):
        raise SpecError(f"pool {k}: limits must be a mapping of scheduler fields (max_num_seqs, ...), "
                        f"got {spec['limits']!r:.60}")
