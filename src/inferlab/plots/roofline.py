"""Roofline chart of an estimate: the GPU's roofs with the ops of a prefill and a decode step on them.

Each op sits at its arithmetic intensity (FLOPs over bytes moved, per GPU) and the FLOP
rate it achieves (its FLOPs over its predicted time). The distance below the roof is what
the calibration profile's efficiencies, kernel floors and launch overheads cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InferlabError
from ..results.figure_file import figure_file

#: Colour and marker of each phase.
PHASE_STYLE = {"prefill": ("C0", "o"), "decode": ("C1", "^")}
_TERA = 1e12
_ROOF_STYLES = ("-", "--", "-.", ":")


def _check_estimate(est: Any, point: int, caller: str) -> None:
    if not hasattr(est, "op_table") or not hasattr(est, "deployment"):
        hint = (" A disaggregated estimate has two pools: plot inferlab.estimate(...) of each pool's GPU, TP and"
                " precision." if hasattr(est, "prefill_deployment") else "")
        raise InferlabError(f"{caller}() takes the Estimate of inferlab.estimate(...), got {type(est).__name__}.{hint}")
    n = int(np.size(est.ttft_s))
    if not 0 <= point < n:
        raise InferlabError(f"{caller}(): point={point} is outside the estimate's grid of {n} points; use 0..{n - 1}")


def grid_value(est: Any, values: Any, point: int) -> float:
    """``values`` (broadcast over the estimate's grid) at grid point ``point``."""
    return float(np.ravel(np.broadcast_to(np.asarray(values, float), np.shape(est.ttft_s)))[point])


def _on_chart(row: dict) -> bool:
    """Ops with FLOPs and time have a place on the log-log axes; collectives and copies do not."""
    return row["flops"] > 0 and row["time_s"] > 0 and np.isfinite(row["intensity"]) and row["intensity"] > 0


def _roofs(hw: Any, rows: dict[str, list[dict]]) -> dict[str, float]:
    """Peak [FLOP/s] of each tensor precision the ops use, widest roof first."""
    peaks = {str(p): fig.si for p, fig in hw.flops.items()}
    used = {r["precision"] for rs in rows.values() for r in rs if r["precision"] in peaks}
    used = used or {next(iter(peaks))}
    return dict(sorted(((p, peaks[p]) for p in used), key=lambda kv: -kv[1]))


def roofline_chart(estimate: Any, point: int = 0, *, labels: int = 3, title: str | None = None):
    """Roofline of the GPU with the ops of the prefill and decode steps placed on it.

    Parameters
    ----------
    estimate : Estimate
        The result of :func:`inferlab.estimate`.
    point : int
        Grid point (flat index) when batch size, ISL or OSL were arrays.
    labels : int
        Name the ``labels`` costliest ops of each phase.
    title : str, optional
        Replaces the generated title.

    Returns
    -------
    matplotlib.figure.Figure
        Left: log-log axes of intensity [FLOP/B] against FLOP rate [TFLOP/s] per GPU, with the
        memory-bandwidth slope, one flat roof per tensor precision the ops use, the ridge
        points, and one marker per op (area ~ its share of the step time). Right: the ops
        without FLOPs (collectives, norms, residual adds), as shares of the step time.

    Notes
    -----
    Attainable rate ``min(peak(precision), bandwidth x intensity)``; ridge point
    ``peak / bandwidth`` [FLOP/B]. An op's marker is at ``(flops / bytes, flops / time)``.

    References
    ----------
    Williams, Waterman and Patterson, "Roofline: an insightful visual performance model for
    multicore architectures", Commun. ACM 52(4), 2009.
    """
    from . import new_figure

    _check_estimate(estimate, point, "roofline_chart")
    rows = {phase: estimate.op_table(phase, point) for phase in PHASE_STYLE}
    placed = {phase: [r for r in rs if _on_chart(r)] for phase, rs in rows.items()}
    hw = estimate.deployment.hardware
    roofs = _roofs(hw, placed)
    fig = new_figure("roofline_chart", figsize=(12, 6.4), layout="constrained")
    ax, side = fig.subplots(1, 2, width_ratios=[3.3, 1])
    limits = _limits(hw.memory_bandwidth.si, roofs, placed)
    for phase, phase_rows in placed.items():
        _draw_ops(ax, phase, phase_rows, labels, limits)
    _draw_roofs(ax, hw.memory_bandwidth.si, roofs, limits)
    _format_axes(ax, limits)
    _draw_off_chart(side, estimate, rows)
    fig.suptitle(title or _title(estimate, point), fontsize=11)
    fig.draw_without_rendering()  # settle the layout so the slope label can follow the slope
    _label_slope(ax, hw.memory_bandwidth.si, limits)
    return fig


def _limits(bandwidth: float, roofs: dict[str, float], placed: dict[str, list[dict]]) -> tuple[float, ...]:
    """Axis limits (x [FLOP/B], then y [FLOP/s]) that hold every op, roof and ridge."""
    intensity = np.array([r["intensity"] for rs in placed.values() for r in rs] or [1.0])
    rate = np.array([r["flops"] / r["time_s"] for rs in placed.values() for r in rs] or [bandwidth])
    ridges = np.array([peak / bandwidth for peak in roofs.values()])
    x_lo = min(intensity.min(), ridges.min()) / 4
    x_hi = max(intensity.max(), ridges.max()) * 5
    y_lo = min(rate.min(), bandwidth * x_lo) / 3
    y_hi = max(roofs.values()) * 4
    return x_lo, x_hi, y_lo, y_hi


def _draw_roofs(ax: Any, bandwidth: float, roofs: dict[str, float], limits: tuple[float, ...]) -> None:
    """The bandwidth slope, one roof per precision (named in the legend) and their ridge points."""
    x_lo, x_hi, y_lo, _ = limits
    top = max(roofs.values()) / bandwidth
    ax.plot([x_lo, top], [bandwidth * x_lo / _TERA, bandwidth * top / _TERA], color="0.25", linewidth=1.8)
    for k, (precision, peak) in enumerate(roofs.items()):
        ridge = peak / bandwidth
        ax.plot([ridge, x_hi], [peak / _TERA] * 2, color="0.25", linewidth=1.8, linestyle=_ROOF_STYLES[k % 4],
                label=f"{precision} roof {peak / _TERA:,.0f} TFLOP/s (dense), ridge {ridge:,.0f} FLOP/B")
        ax.plot([ridge, ridge], [y_lo / _TERA, peak / _TERA], color="0.5", linewidth=0.8, linestyle=":")
        ax.plot([ridge], [peak / _TERA], marker="D", color="0.25", markersize=5)


def _label_slope(ax: Any, bandwidth: float, limits: tuple[float, ...]) -> None:
    """Name the bandwidth slope, rotated to lie along it on screen."""
    x = limits[0] * 2.2
    p0, p1 = ax.transData.transform([(x, bandwidth * x / _TERA), (x * 10, bandwidth * x * 10 / _TERA)])
    angle = float(np.degrees(np.arctan2(p1[1] - p0[1], p1[0] - p0[0])))
    ax.text(x, bandwidth * x / _TERA * 2.2, f"HBM {bandwidth / 1e12:.2f} TB/s", rotation=angle,
            rotation_mode="anchor", fontsize=8.5, color="0.2", ha="left", va="bottom")


def _draw_ops(ax: Any, phase: str, rows: list[dict], labels: int, limits: tuple[float, ...]) -> None:
    color, marker = PHASE_STYLE[phase]
    x = np.array([r["intensity"] for r in rows])
    y = np.array([r["flops"] / r["time_s"] for r in rows]) / _TERA
    share = np.array([r["share"] for r in rows])
    ax.scatter(x, y, s=25 + 900 * share, c=color, marker=marker, alpha=0.7, edgecolors="black", linewidths=0.5,
               zorder=3)
    ax.plot([], [], color=color, marker=marker, linestyle="none", markeredgecolor="black", label=f"{phase} step ops")
    top = np.argsort(-share, kind="stable")[:labels]
    if top.size == 0:
        return
    # Labels go right of and below their op, where the roofline leaves the chart empty, and
    # are pushed down (in decades) so that ops at one intensity stay readable.
    gap = 0.055 * np.log10(limits[3] / limits[2])
    spread = _spread_down(np.log10(y[top]) - 0.45, gap)
    for j, ly in zip(top, spread):
        ax.annotate(f"{rows[j]['op']} {share[j]:.0%}", xy=(x[j], y[j]), xytext=(x[j] * 1.8, 10**ly), fontsize=8,
                    color=color, va="center", zorder=4,
                    arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.7, "shrinkB": 4})


def _spread_down(wanted: np.ndarray, gap: float) -> np.ndarray:
    """Positions at or below ``wanted``, at least ``gap`` apart, the highest label where it wanted to be."""
    order = np.argsort(-wanted, kind="stable")
    placed = wanted[order].astype(float)
    for k in range(1, placed.size):
        placed[k] = min(placed[k], placed[k - 1] - gap)
    out = np.empty_like(placed)
    out[order] = placed
    return out


def _format_axes(ax: Any, limits: tuple[float, ...]) -> None:
    from matplotlib.ticker import FuncFormatter

    x_lo, x_hi, y_lo, y_hi = limits
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo / _TERA, y_hi / _TERA)
    plain = FuncFormatter(lambda v, _: f"{v:,.10g}")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlabel("arithmetic intensity [FLOP/B] (per op, per GPU)")
    ax.set_ylabel("attainable / achieved [TFLOP/s] per GPU")
    ax.grid(True, which="major", alpha=0.3)
    ax.plot([], [], linestyle="none", label="marker area ~ share of step time")
    ax.legend(loc="upper left", fontsize=8.5, framealpha=0.9)


def _draw_off_chart(ax: Any, est: Any, rows: dict[str, list[dict]]) -> None:
    """Side bars: share of step time of the ops that have no FLOPs (and of the step overhead)."""
    shares: dict[str, dict[str, float]] = {}
    for phase, phase_rows in rows.items():
        for r in phase_rows:
            if not _on_chart(r):
                shares.setdefault(r["op"], {}).setdefault(phase, 0.0)
                shares[r["op"]][phase] += r["share"]
    small = [name for name, s in shares.items() if max(s.values()) < 0.005]
    if small:
        folded = [shares.pop(name) for name in small]
        shares[f"{len(small)} other ops"] = {phase: sum(s.get(phase, 0.0) for s in folded) for phase in rows}
    if est.deployment.parallel.pp == 1:
        rest = {phase: max(0.0, 1.0 - sum(r["share"] for r in rs)) for phase, rs in rows.items()}
        if max(rest.values()) >= 0.005:
            shares["step overhead (no op)"] = rest
    names = list(shares)[::-1]
    pos = np.arange(len(names))
    for k, phase in enumerate(PHASE_STYLE):
        values = np.array([shares[n].get(phase, 0.0) * 100 for n in names])
        bars = ax.barh(pos + (0.2 if k == 0 else -0.2), values, height=0.38, color=PHASE_STYLE[phase][0],
                       alpha=0.75, label=phase)
        ax.bar_label(bars, labels=[f"{v:.1f}%" if v >= 0.05 else "" for v in values], fontsize=7.5, padding=2)
    ax.set_yticks(pos, names, fontsize=8)
    ax.set_xlabel("share of step time [%]")
    ax.set_title("not on the chart:\nops without FLOPs", fontsize=9.5)
    ax.set_xlim(0, max([v * 100 for s in shares.values() for v in s.values()] + [1.0]) * 1.35)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)


def _title(est: Any, point: int) -> str:
    dep = est.deployment
    batch = grid_value(est, est.wave_batch, point)
    isl = grid_value(est, est.isl, point)
    context = isl + np.floor(grid_value(est, est.osl, point) / 2)
    prefill_s = grid_value(est, est.prefill_step.time_s, point)
    spec = est.speculative_step
    decode_s = grid_value(est, (spec or est.decode_step).time_s, point)
    decode = "speculative decode step (draft passes + verify)" if spec is not None else "decode step"
    return (f"{dep.model.id or dep.model.name} on {dep.num_gpus}x {dep.hardware.id} ({dep.parallel}), "
            f"{dep.precision}, engine {est.engine}\n"
            f"prefill step: {batch:g} x {isl:g} tokens, {prefill_s * 1e3:.1f} ms; "
            f"{decode}: batch {batch:g} at context {context:g}, {decode_s * 1e3:.2f} ms")


def write_estimate_plot(est: Any, path: str | Path, point: int = 0) -> Path:
    """Write the roofline chart of ``est`` to ``path``; the suffix picks the format (.png, .svg,
    .pdf, .jpg: any matplotlib writes).

    Parameters
    ----------
    est : Estimate
    path : str or Path
    point : int
        Grid point to draw (the first by default, as ``inferlab estimate --ops`` shows).

    Returns
    -------
    Path
        The file written.
    """
    path = figure_file(path, "estimate plot")  # checked before drawing
    fig = roofline_chart(est, point)
    fig.savefig(path, dpi=110)
    return path
