"""What the explorer's views draw, computed by the library: JSON-ready dicts in SI units.

- :func:`estimate_view`: the metrics of one static batch, the curve over batch size, the
  step's ops on the roofline, the memory per GPU, the cost and ``explain()``;
- :func:`load_curve_view`: a serving sweep's latency-throughput points, knee and goodput;
- :func:`catalog_view`: the names the page's menus offer.

Nothing here formats for display: the page does that, so the numbers it shows can be checked
against :func:`inferlab.estimate` to the digit.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np

from .config import Knobs

#: Batch sizes of the batch curve (the chosen batch is added).
CURVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _num(x: Any) -> float | None:
    """A float, or None where the number does not exist (JSON has no NaN)."""
    v = float(np.asarray(x, float).ravel()[0]) if np.ndim(x) else float(x)
    return v if math.isfinite(v) else None


def _shown(tpot_s: Any) -> np.ndarray:
    """TPOT [s], NaN where one output token leaves no decode step (0 inside, for the sums), as
    the CLI's '-' and ``Estimate.tpot``."""
    t = np.asarray(tpot_s, float)
    return np.where(t > 0, t, np.nan)


def _per_user(tpot_s: Any) -> float | None:
    """What one user's stream gets, ``1 / TPOT`` [token/s]; None for a one-token output."""
    tpot = _num(tpot_s)
    return 1.0 / tpot if tpot else None


def _nums(x: Any) -> list[float | None]:
    return [v if math.isfinite(v) else None for v in np.asarray(x, float).ravel().tolist()]


def catalog_view() -> dict[str, Any]:
    """Models, GPUs, engines and number formats the menus list."""
    from ..inputs.resolve import ENGINES
    from ..precision import FORMATS
    from ..specs.catalog import hardware_ids, model_ids

    return {"models": list(model_ids()), "gpus": list(hardware_ids()), "engines": list(ENGINES),
            "formats": [f for f in FORMATS if f != "fp32"], "defaults": asdict(Knobs())}


def estimate_view(knobs: Knobs) -> dict[str, Any]:
    """Everything the estimate tab draws for one configuration.

    Raises
    ------
    InferlabError
        Bad knobs, or a configuration that does not run (its message says why).
    """
    from ..phases.estimate import estimate

    batches = np.array(sorted({*CURVE_BATCHES, knobs.batch}), float)
    curve = estimate(**knobs.estimate_kwargs(batches))
    if knobs.disagg:
        return _disaggregated_view(knobs, curve, batches)
    est = estimate(**knobs.estimate_kwargs())
    dep = est.deployment
    ok = np.ravel(curve.feasible) if np.ndim(curve.feasible) else np.full(batches.shape, bool(curve.feasible))
    return {
        "title": str(est).splitlines()[0],
        "num_gpus": dep.num_gpus,
        "metrics": {
            "ttft_s": _num(est.ttft_s), "tpot_s": _num(_shown(est.tpot_s)),
            "output_tokens_per_s": _num(est.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": _num(est.output_tokens_per_s / dep.num_gpus),
            "output_tokens_per_s_per_user": _per_user(est.tpot_s),
            "usd_per_million_output": _num(est.cost.usd_per_million_output),
            "usd_per_million_input": _num(est.cost.usd_per_million_input),
            "usd_per_gpu_hour": _num(est.cost.usd_per_gpu_hour),
            "memory_per_gpu_bytes": _num(est.memory.used), "waves": _num(est.waves),
        },
        "batch_curve": {"batch": batches.tolist(), "feasible": ok.tolist(), "ttft_s": _nums(curve.ttft_s),
                        "tpot_s": _nums(_shown(curve.tpot_s)), "output_tokens_per_s": _nums(curve.output_tokens_per_s)},
        "roofline": _roofline(est),
        "memory": _memory(est.memory),
        "explain": est.explain(),
    }


def _roofline(est: Any) -> dict[str, Any]:
    """The GPU's roofs and each op of the prefill and decode steps: intensity [FLOP/B] and
    attained FLOP/s per GPU (its FLOPs over its time)."""
    hw = est.deployment.hardware
    ops = []
    for phase in ("prefill", "decode"):
        for row in est.op_table(phase):
            if row["flops"] > 0 and row["bytes"] > 0 and row["time_s"] > 0:
                ops.append({"phase": phase, "op": row["op"], "bound": row["bound"], "intensity": row["intensity"],
                            "flops_per_s": row["flops"] / row["time_s"], "share": row["share"]})
    roofs = {str(getattr(k, "value", k)): float(v.si) for k, v in hw.flops.items()
             if str(getattr(k, "value", k)) in ("bf16", "fp8", "fp4")}
    return {"memory_bandwidth": float(hw.memory_bandwidth.si), "roofs": roofs, "ops": ops}


def _memory(plan: Any) -> dict[str, Any]:
    return {"capacity_bytes": _num(plan.capacity), "budget_bytes": _num(plan.budget),
            "weights_bytes": _num(plan.weights), "kv_bytes": _num(plan.kv_batch),
            "workspace_bytes": _num(plan.workspace), "reserve_bytes": _num(plan.reserve),
            "kv_bytes_per_token": _num(plan.kv_per_token), "max_sequences": _num(plan.max_sequences)}


def _disaggregated_view(knobs: Knobs, curve: Any, batches: np.ndarray) -> dict[str, Any]:
    """Prefill and decode pools: the decode pool's memory, no single step on the roofline."""
    from ..phases.estimate import estimate

    est = estimate(**knobs.estimate_kwargs())
    return {
        "title": str(est).splitlines()[0], "num_gpus": est.num_gpus,
        "metrics": {"ttft_s": _num(est.ttft_s), "tpot_s": _num(_shown(est.tpot_s)),
                    "output_tokens_per_s": _num(est.output_tokens_per_s),
                    "output_tokens_per_s_per_gpu": _num(est.output_tokens_per_s_per_gpu),
                    "output_tokens_per_s_per_user": _per_user(est.tpot_s),
                    "usd_per_million_output": None, "usd_per_million_input": None, "usd_per_gpu_hour": None,
                    "memory_per_gpu_bytes": _num(est.decode_memory.used), "waves": 1.0},
        "batch_curve": {"batch": batches.tolist(), "feasible": [True] * len(batches), "ttft_s": _nums(curve.ttft_s),
                        "tpot_s": _nums(_shown(curve.tpot_s)), "output_tokens_per_s": _nums(curve.output_tokens_per_s)},
        "roofline": None,
        "memory": _memory(est.decode_memory),
        "explain": str(est),
    }


def load_curve_view(curve: Any) -> dict[str, Any]:
    """A :class:`~inferlab.serving.curve.LoadCurve` for the serving tab: per point the load,
    throughput and latency percentiles [s], goodput; the knee's index."""
    rows = curve.rows()
    q = f"p{curve.percentile:g}"
    keys = ("requests_per_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user",
            "ttft_p50_s", f"ttft_{q}_s", "tpot_p50_s", f"tpot_{q}_s", "e2e_p50_s", f"e2e_{q}_s",
            "goodput_requests_per_s", "meets_slo")
    return {"title": str(curve).splitlines()[0], "kind": curve.kind, "percentile": curve.percentile,
            "loads": curve.loads.tolist(), "knee": curve.knee,
            "points": [{k: (_num(r[k]) if isinstance(r.get(k), float) else r.get(k)) for k in keys} for r in rows],
            "text": str(curve)}
