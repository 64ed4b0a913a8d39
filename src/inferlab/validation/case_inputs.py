"""A validation case as a :class:`~inferlab.inputs.deployment.Deployment` and a
:class:`~inferlab.inputs.workload.Workload`: the schema's deployment (layout, precision,
engine with its version and scheduler limits, speculation, prefix cache hit rate,
disaggregated pools) and its workload (load, lengths, a client's pool of distinct prompts) in
the one form every entry point parses into.
"""

from __future__ import annotations

from ..errors import SpecError
from ..inputs.deployment import Deployment
from ..inputs.prefixes import prompt_pool
from ..inputs.workload import Workload
from .cases import (Case, case_engine, case_layout, case_limits, case_precision, case_prefix, case_speculative,
                    case_version)
from .serving import case_pools


def case_deployment(case: Case) -> Deployment:
    """The case's Deployment. Long contexts are allowed: the engine served the measured run's context.

    Raises
    ------
    SpecError
        A case whose layout or pools cannot be mapped (the reason of
        :func:`~inferlab.validation.cases.case_layout` or
        :func:`~inferlab.validation.serving.case_pools`), or an invalid deployment.
    """
    fields: dict = {"model": case.model, "hardware": case.hardware, "num_gpus": case.num_gpus,
                    "precision": case_precision(case) or None,
                    "engine": {"name": case_engine(case), "version": case_version(case), **case_limits(case)},
                    "speculative": case_speculative(case), "allow_long_context": True}
    if case.prefix_cache and case.prefix_cache.get("hit_rate") is not None:
        fields["prefix_cache"] = {"hit_rate": case.prefix_cache["hit_rate"]}
    if case.disaggregation:
        pools = case_pools(case)
        if isinstance(pools, str):
            raise SpecError(f"case {case.id}: {pools}")
        fields["disaggregation"] = {side: {"hardware": hw, "num_gpus": n, "tp": tp, "ep": ep, "attention_dp": adp}
                                    for side, (hw, n, tp, ep, adp) in zip(("prefill", "decode"), pools)}
    else:
        layout = case_layout(case)
        if isinstance(layout, str):
            raise SpecError(f"case {case.id}: {layout}")
        fields["layout"] = layout
    return Deployment(**fields)


def case_workload(case: Case, num_requests: int = 1000) -> Workload:
    """The case's Workload: its static batch (in waves when it does not fit, as the engines ran
    it), or its load with the case's request count (``num_requests`` [request] when it
    states none; validation sizes its simulations itself,
    :func:`~inferlab.validation.serving.serving_workload`)."""
    load, lengths = case.load, {"isl": case.isl, "osl": case.osl}
    if case.regime == "static_batch":
        return Workload(batch_size=load.get("batch_size", 1), waves=True, **lengths)
    pool = case_prefix(case)
    if pool is not None and pool[0] == "prompts":  # the client's distinct prompts, repeats found cached
        lengths["prefix"] = prompt_pool(int(pool[1]), case.isl)
    n = load.get("num_requests", num_requests)
    if "concurrency" in load:
        return Workload(concurrency=load["concurrency"], num_requests=n, **lengths)
    if "request_rate" in load and not load.get("offline"):
        return Workload(rate=float(load["request_rate"]), num_requests=n, max_concurrency=load.get("max_concurrency"),
                        **lengths)
    return Workload(offline=True, num_requests=n, **lengths)
