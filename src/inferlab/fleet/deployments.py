"""A :class:`~inferlab.Deployment` as a fleet replica, or as a pool's replica fields."""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from ..inputs.deployment import Deployment
from .pricing import Pricing

#: The fields of a fleet replica a deployment sets.
REPLICA = ("model", "hardware", "tp", "ep", "attention_dp", "precision", "engine", "profile", "limits")


def replica_of(dep: Deployment) -> dict[str, Any]:
    """The fleet replica a :class:`~inferlab.Deployment` describes: model, hardware, ``tp``,
    ``ep`` and attention DP, formats, engine with its limits, profile, and the price of the
    replica's GPUs [USD/h] when it names one.

    Raises
    ------
    SpecError
        What a fleet replica does not simulate: pipeline stages, data-parallel copies (each
        is a replica: give their number as ``replicas``), attention TP inside data-parallel
        ranks, speculation, a static prefix-cache hit rate (the fleet's replicas keep their
        own caches), disaggregated pools.
    """
    lay = dep.layout
    unused = {"pp": lay.pp != 1, "dp (each copy is a replica: give replicas)": lay.dp != 1,
              "attention_tp": lay.attention_tp != 1, "expert_imbalance": lay.expert_imbalance != 1.0,
              "speculative": dep.speculative is not None,
              "prefix_cache (each replica keeps its own)": dep.prefix_cache is not None,
              "disaggregation": dep.disaggregation is not None, "utilization": dep.utilization != 1.0,
              "attention": dep.attention != "flash", "cuda_graphs": not dep.cuda_graphs}
    given = [name for name, was_set in unused.items() if was_set]
    if given:
        raise SpecError(f"a fleet replica is one group of GPUs serving its own requests; the deployment's "
                        f"{', '.join(given)} are not simulated in fleets: drop them")
    price = None if dep.price_per_gpu_hour is None else dep.price_per_gpu_hour * lay.tp
    return {"model": dep.model, "hardware": dep.hardware, "tp": lay.tp, "ep": lay.ep, "attention_dp": lay.attention_dp,
            "precision": dep.precision.value() if dep.precision is not None else None, "engine": dep.engine.name,
            "profile": dep.profile, "limits": dep.engine.limits(), "price": price,
            "allow_long_context": dep.allow_long_context}


def pool_of_deployment(k: int, spec: dict[str, Any]) -> dict[str, Any]:
    """Pool ``k``'s ``spec`` with its ``deployment`` written out as the replica's fields."""
    clash = sorted(set(spec) & {*REPLICA, "engine", "allow_long_context"} - {"deployment"})
    if clash:
        raise SpecError(f"pool {k}: {', '.join(clash)} given beside its deployment; set them in the deployment")
    dep = spec["deployment"]
    rep = replica_of(dep if isinstance(dep, Deployment) else Deployment.from_dict(dep))
    out = {key: value for key, value in spec.items() if key != "deployment"}
    out.update({key: rep[key] for key in REPLICA if rep[key] is not None})
    out["allow_long_context"] = rep["allow_long_context"]
    given = spec.get("pricing")  # the pool's on-demand price where its pricing names none
    if rep["price"] is not None and (given is None or isinstance(given, (dict, Pricing))):
        out["pricing"] = given.with_on_demand(rep["price"]) if isinstance(given, Pricing) else \
            {"on_demand_usd_per_hour": rep["price"], **(given or {})}
    return out
