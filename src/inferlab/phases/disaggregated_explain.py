"""Plain-language diagnosis of a disaggregated estimate: the parts of its TTFT, what bounds
each pool's step, which pool limits the pair, memory and cost, and what would move them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..results.render import pretty
from ..units import Q
from .explain import _bound_shares
from .interval import interval_lines
from .result import op_rows

if TYPE_CHECKING:
    from ..techniques.step import StepResult
    from .disaggregated_result import DisaggEstimate


def _step_lines(what: str, step: StepResult, point: int, hw_id: str) -> list[str]:
    total = float(np.ravel(step.time_s)[point] if np.size(step.time_s) > 1 else np.ravel(step.time_s)[0])
    rows = op_rows(step, point, total)
    shares = _bound_shares(rows)
    main = next(iter(shares))
    flops, moved = sum(r["flops"] for r in rows), sum(r["bytes"] for r in rows)
    top = sorted(rows, key=lambda r: -r["time_s"])[:3]
    return [f"{what}: {pretty(Q(total, 's'))} per step on {hw_id}, {main}-bound ({shares[main]:.0%} of op time); "
            f"{flops / 1e12:.3g} TFLOP and {moved / 1e9:.3g} GB per GPU",
            "  costliest ops: " + "; ".join(f"{r['op']} [{r['group']}] {r['share']:.0%} ({r['bound']})" for r in top)]


def explain_disaggregated(est: DisaggEstimate, point: int = 0) -> str:
    """Diagnosis of grid point ``point`` of ``est``."""
    shape = np.shape(est.ttft_s)
    at = lambda x: float(np.ravel(np.broadcast_to(np.asarray(x, float), shape))[point])
    d, t = est.disaggregation, est.transfer
    dep_p, dep_d = est.prefill_deployment, est.decode_deployment
    ms = lambda s: pretty(Q(s, "s"))
    lines = [
        f"{dep_p.model.id or dep_p.model.name} disaggregated: prefill {d.prefill} ({est.engines[0]}), decode "
        f"{d.decode} ({est.engines[1]}), {dep_p.precision}; prefill batch {at(est.prefill_batch):.0f}, decode "
        f"batch {at(est.decode_batch):.0f}, ISL {at(est.isl):.0f}, OSL {at(est.osl):.0f}",
        f"TTFT {ms(at(est.ttft_s))} = prefill {ms(at(est.prefill_s))} + exposed KV transfer "
        f"{ms(at(t.exposed_s))} (of {ms(at(t.time_s))}: {at(t.bytes) / 1e9:.3g} GB over {t.link.name} at "
        f"{t.bandwidth / 1e9:.0f} GB/s, " + ("sent layer by layer during the prefill" if d.overlap else
                                              "sent after the prefill") + ")" +
        (f" + the decode pool's first step {ms(at(est.first_token_step_s))}" if d.first_token == "decode" else
         ": the prefill pool's token, forwarded (first_token=prefill)"),
    ]
    if at(est.tpot_s) > 0:
        lines.append(f"TPOT {ms(at(est.tpot_s))} on the decode pool ({1 / at(est.tpot_s):.1f} tok/s per user)")
    lines += interval_lines(est, point)
    lines += _step_lines("prefill step", est.prefill_step, point, dep_p.hardware.id)
    lines += _step_lines("decode step at mid generation", est.decode_step, point, dep_d.hardware.id)
    rate_p, rate_d = at(est.prefill_requests_per_s), at(est.decode_requests_per_s)
    limit = "prefill" if rate_p < rate_d else "decode"
    lines.append(
        f"pools as given: prefill {rate_p:.3g} req/s ({_replicas(d.prefill.replicas)}), decode {rate_d:.3g} req/s "
        f"({_replicas(d.decode.replicas)}): the {limit} pool limits them to {min(rate_p, rate_d):.3g} req/s, "
        f"{at(est.output_tokens_per_s):.0f} tok/s ({at(est.output_tokens_per_s_per_gpu):.0f} per GPU); in the "
        f"balanced ratio, {at(est.pd_ratio):.2f} prefill GPUs per decode GPU, "
        f"{at(est.balanced_output_tokens_per_s_per_gpu):.0f} tok/s per GPU")
    for name, plan, batch in (("prefill", est.prefill_memory, est.prefill_batch),
                              ("decode", est.decode_memory, est.decode_batch)):
        lines.append(f"memory per {name} GPU: weights {plan.weights / 1e9:.1f} GB, KV cache of the batch of "
                     f"{at(batch):.0f} {at(plan.kv_batch) / 1e9:.2f} GB of {at(plan.kv_budget) / 1e9:.1f} GB free "
                     f"after weights; up to {at(plan.max_sequences):.0f} sequences fit")
    usd = at(est.usd_per_million_output)
    if np.isfinite(usd):
        lines.append(f"cost: {est.usd_per_hour:.2f} USD/hour for the pools as given, {usd:.3f} USD per million "
                     f"output tokens fully loaded ({at(est.balanced_usd_per_million_output):.3f} in the balanced "
                     "ratio)")
    levers = _levers(est, at, limit)
    if levers:
        lines.append("what would move the numbers:")
        lines += [f"  - {lever}" for lever in levers]
    return "\n".join(lines)


def _replicas(n: int) -> str:
    return f"{n} replica" + ("" if n == 1 else "s")


def _levers(est: DisaggEstimate, at: Any, limit: str) -> list[str]:
    d, levers = est.disaggregation, []
    ratio = at(est.pd_ratio)
    given = d.prefill.num_gpus / d.decode.num_gpus
    if limit == "prefill":
        levers.append(f"the prefill pool limits: {ratio:.2f} prefill GPUs per decode GPU balance the pools (given "
                      f"{given:.2f}); more prefill replicas or a larger prefill batch")
    else:
        room = at(est.decode_memory.max_sequences)
        more = f", up to {room:.0f} fit" if room > at(est.decode_batch) else ""
        levers.append(f"the decode pool limits: more decode replicas or a larger decode batch{more} (the balanced "
                      f"ratio is {ratio:.2f} prefill GPUs per decode GPU, given {given:.2f})")
    if at(est.transfer.exposed_s) > 0.1 * at(est.ttft_s):
        levers.append("the KV transfer is over a tenth of TTFT: a faster link"
                      + ("" if d.overlap else ", or sending the KV cache layer by layer (overlap=on)"))
    return levers
