"""Memory breakdown of one GPU: weights, KV cache, workspace, reserve and what is left."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InferlabError

#: Parts of a GPU's memory, bottom of the bar first: (MemoryPlan field, legend name, colour).
PARTS = (("weights", "weights", "C0"), ("kv_batch", "KV cache", "C1"), ("workspace", "activation workspace", "C2"),
         ("reserve", "runtime reserve", "C7"))


def _plans(est: Any) -> list[tuple[str, Any, Any]]:
    """(bar name, MemoryPlan, HardwareSpec) of each kind of GPU in the estimate."""
    if hasattr(est, "prefill_memory") and hasattr(est, "decode_memory"):
        return [("prefill GPU", est.prefill_memory, est.prefill_deployment.hardware),
                ("decode GPU", est.decode_memory, est.decode_deployment.hardware)]
    if hasattr(est, "memory") and hasattr(est, "deployment"):
        return [("per GPU", est.memory, est.deployment.hardware)]
    raise InferlabError(f"memory_breakdown() takes the result of inferlab.estimate(...), got {type(est).__name__}")


def memory_breakdown(estimate: Any, point: int = 0, *, title: str | None = None):
    """Stacked bar of where one GPU's memory goes, against the budget and the usable capacity.

    Parameters
    ----------
    estimate : Estimate or DisaggEstimate
        The result of :func:`inferlab.estimate` (a disaggregated one gets a bar per pool).
    point : int
        Grid point (flat index) when batch size, ISL or OSL were arrays.
    title : str, optional
        Replaces the generated title.

    Returns
    -------
    matplotlib.figure.Figure
        One horizontal bar per kind of GPU [GB]: weights, KV cache of the resident batch at
        full context (one wave's sequences when the batch runs in waves), activation workspace,
        runtime reserve and the free rest of the budget; the budget (``usable capacity x
        gpu_memory_utilization``) and the usable capacity as lines.

    Notes
    -----
    ``free = budget - weights - kv - workspace - reserve``; a negative free shows as the part
    of the bar past the budget line.
    """
    from . import new_figure

    plans = _plans(estimate)
    shape = np.shape(estimate.ttft_s)
    n = int(np.prod(shape)) if shape else 1
    if not 0 <= point < n:
        raise InferlabError(f"memory_breakdown(): point={point} is outside the estimate's grid of {n} points; "
                            f"use 0..{n - 1}")
    fig = new_figure("memory_breakdown", figsize=(10, 1.9 + 1.1 * len(plans)), layout="constrained")
    ax = fig.add_subplot()

    def at(values: Any) -> float:
        return float(np.ravel(np.broadcast_to(np.asarray(values, float), shape))[point])

    # With waves only one wave's sequences hold KV at a time; MemoryPlan.kv_batch counts the whole batch.
    resident = (at(estimate.wave_batch) / at(estimate.batch_size)) if hasattr(estimate, "wave_batch") else 1.0
    right = 0.0
    for k, (name, plan, _) in enumerate(plans):
        sizes = {field: at(getattr(plan, field)) / 1e9 for field, _, _ in PARTS}
        sizes["kv_batch"] *= resident
        right = max(right, _draw_bar(ax, k, plan, sizes, legend=k == 0, values=len(plans) == 1))
    ax.set_yticks(range(len(plans)), [f"{name}\n{hw.id}" for name, _, hw in plans], fontsize=9)
    ax.set_ylim(-0.6, len(plans) - 0.4)
    ax.set_xlim(0, right * 1.02)
    ax.set_xlabel("memory per GPU [GB]")
    handles, names = ax.get_legend_handles_labels()
    bars_first = sorted(range(len(names)), key=lambda j: not hasattr(handles[j], "patches"))
    ax.legend([handles[j] for j in bars_first], [names[j] for j in bars_first], fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title or _title(estimate, plans, at), fontsize=10)
    return fig


def _draw_bar(ax: Any, k: int, plan: Any, sizes: dict[str, float], legend: bool, values: bool) -> float:
    """Draw bar ``k`` from ``sizes`` [GB]; return its right end [GB]. The legend (from the first
    bar) gives sizes only when there is one bar; with several, the sizes are on the bars."""
    left = 0.0
    budget, capacity = plan.budget / 1e9, plan.capacity / 1e9
    for field, name, color in PARTS:
        size = sizes[field]
        ax.barh(k, size, left=left, height=0.55, color=color, alpha=0.85, edgecolor="white",
                label=(f"{name} {size:.1f} GB" if values else name) if legend else None)
        if size > 0.06 * capacity:
            ax.text(left + size / 2, k, f"{size:.1f}", ha="center", va="center", fontsize=8, color="white")
        left += size
    free = budget - left
    if free > 0:
        ax.barh(k, free, left=left, height=0.55, color="white", edgecolor="0.5", hatch="//",
                label=(f"free {free:.1f} GB" if values else "free") if legend else None)
    else:
        ax.text(left, k + 0.33, f"{-free:.1f} GB over the budget", fontsize=8, color="C3", ha="right")
    ax.barh(k, capacity - budget, left=budget, height=0.55, color="0.9", edgecolor="0.7",
            label="held back by utilization" + (f" {capacity - budget:.1f} GB" if values else "") if legend else None)
    ax.plot([budget] * 2, [k - 0.4, k + 0.4], color="C3", linestyle="--", linewidth=1.5,
            label=f"budget ({plan.budget / plan.capacity:.0%} of usable)" + (f" {budget:.1f} GB" if values else "")
            if legend else None)
    ax.plot([capacity] * 2, [k - 0.4, k + 0.4], color="black", linewidth=1.5,
            label="usable capacity" + (f" {capacity:.1f} GB" if values else "") if legend else None)
    return max(left, capacity)


def _title(est: Any, plans: list, at: Any) -> str:
    batch = at(getattr(est, "batch_size", getattr(est, "decode_batch", np.nan)))
    dep = getattr(est, "deployment", None)
    if dep is not None:
        head = f"{dep.model.id or dep.model.name} on {dep.hardware.id} ({dep.parallel}), {dep.precision}: "
    else:
        model = est.decode_deployment.model
        head = f"{model.id or model.name}, disaggregated prefill and decode: "
    waves = at(est.waves) if hasattr(est, "waves") else 1.0
    wave = f" in {waves:g} waves of {at(est.wave_batch):g}" if waves > 1 else ""
    return (f"{head}batch {batch:g}{wave} at context {at(est.isl):g} + {at(est.osl):g} tokens; "
            f"up to {at(plans[-1][1].max_sequences):,.0f} sequences fit")
