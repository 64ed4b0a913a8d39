"""A benchmark run whose measured throughput no GPU could reach without caching its prompts.

Every request's prompt is prefilled once, at about two FLOPs per active parameter per token
(attention adds more), so a run's completed requests per second times its prompt length times
``2 x active parameters`` is a lower bound on the tensor FLOP/s its GPUs ran for prefill alone.
Above the GPUs' highest dense tensor rate (any precision they list) the prompts cannot all
have been prefilled: the server found them in its prefix cache (a dataset that repeats
prompts, vLLM's and SGLang's default caching), or the recorded lengths are not what was sent.
The simulation, which prefills what the case records, then over-predicts TTFT and under-predicts
throughput; the run's note says why before a user reads its error as the model's.
"""

from __future__ import annotations

from typing import Any

#: FLOPs per active parameter per prompt token (a multiply and an add), attention aside.
FLOPS_PER_PARAM_TOKEN = 2.0


def beyond_peak_note(run_id: str, model: Any, hardware: Any, num_gpus: int, isl: float, osl: float,
                     output_tokens_per_s: float | None) -> str | None:
    """A note when the run's recorded throughput implies more prefill FLOP/s per GPU than the
    GPU's highest dense tensor rate, else None (also without a throughput)."""
    if not output_tokens_per_s or osl <= 0 or isl <= 0 or num_gpus < 1:
        return None
    peak = max(f.si for f in hardware.flops.values())
    requests_per_s = output_tokens_per_s / osl
    per_gpu = requests_per_s * isl * FLOPS_PER_PARAM_TOKEN * model.active_params / num_gpus
    if per_gpu <= peak:
        return None
    return (f"{run_id}: {requests_per_s:,.3g} requests/s of {isl:,.0f}-token prompts imply {per_gpu / 1e15:.3g} "
            f"PFLOP/s of prefill per GPU (2 x {model.active_params / 1e9:.3g} B active parameters a token), above "
            f"{hardware.id}'s highest dense tensor rate, {peak / 1e15:.3g} PFLOP/s: its prompts must have been found "
            "in a prefix cache (a dataset that repeats them) or were not the length recorded; the simulation "
            "prefills every prompt, so expect its TTFT high and its throughput low")


#: Fewest bytes a weight is stored in (a 4-bit format), for a decode step's least read.
LEAST_BYTES_PER_WEIGHT = 0.5


def below_floor_notes(run_id: str, model: Any, hardware: Any, num_gpus: int, isl: float, metrics: dict[str, float],
                      draft_tokens: int = 0) -> list[str]:
    """Notes for a measured mean TTFT or TPOT below what any GPU allows, else none: a prompt's
    prefill FLOPs (2 x the active parameters but the embedding a token, the LM head once) over
    all the run's GPUs at their highest dense tensor rate; a decode step's read of the active
    weights but the embedding table in a 4-bit format over all the GPUs' memory bandwidth (per
    token of the k + 1 a speculative step can emit). Below either, the figure is not the time it
    says: most often seconds written where milliseconds belong."""
    notes = []
    peak = max(f.si for f in hardware.flops.values())
    gpus = max(num_gpus, 1)
    counts = model.param_counts
    # the embedding is a lookup, not a GEMM; the LM head runs on a prompt's last token only
    body = counts.active - counts.embedding - counts.lm_head
    floors = {"ttft_ms": FLOPS_PER_PARAM_TOKEN * (body * isl + counts.lm_head) / (gpus * peak),
              "tpot_ms": LEAST_BYTES_PER_WEIGHT * (body + counts.lm_head)
              / (gpus * hardware.memory_bandwidth.si * (draft_tokens + 1))}
    why = {"ttft_ms": f"one uncached {isl:,.0f}-token prompt needs", "tpot_ms": "a decode step of the weights needs"}
    cause = {"ttft_ms": "seconds written as milliseconds, or prompts found in a prefix cache?",
             "tpot_ms": "seconds written as milliseconds?"}
    for metric, floor in floors.items():
        value = metrics.get(metric)
        if value is not None and value * 1e-3 < floor:
            notes.append(f"{run_id}: {metric} {value:.3g} ms is below the {floor * 1e3:.3g} ms {why[metric]} on "
                         f"{num_gpus} {hardware.id} ({model.active_params / 1e9:.3g} B active parameters at the "
                         f"fastest dense rate and memory): {cause[metric]}")
    return notes
