"""The fleet over time: replicas, queue depth, P99 TTFT and spend (matplotlib, optional)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..results.figure_file import figure_file
from ..serving.plot import _figure

if TYPE_CHECKING:
    from .result import FleetResult


def plot_fleet(result: FleetResult, path: str | None = None) -> Any:
    """Four panels sharing the time axis [h]; saved to ``path`` when given."""
    from ..results.render import share_text

    title = (f"{result.name}: {result.usd:,.0f} USD, goodput {share_text(result.goodput())}, "
             f"availability {result.availability:.4f}")
    return plot_fleets([("", result)], title, path)


def plot_fleets(fleets: Sequence[tuple[str, FleetResult]], title: str, path: str | None = None) -> Any:
    """The panels of :func:`plot_fleet` with one line per fleet, labelled (a cascade's small and
    large model); the arrival rate of the first fleet; spend added up over the fleets."""
    fig = _figure("FleetResult.plot", figsize=(9, 8), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    for label, result in fleets:
        s = result.samples
        h = s["t"] / 3600.0
        tag = f"{label}: " if label else ""
        lines = axes[0].step(h, s["ready"], where="post", label=f"{tag}serving")
        axes[0].step(h, s["running"], where="post", label=f"{tag}paid (incl. starting)", alpha=0.7, ls="--",
                     color=lines[0].get_color())
        axes[1].plot(h, _smooth(s["queued"]), lw=0.9, label=label or None)
        starts, p99 = result.p99_ttft_over_time()
        axes[2].step(starts / 3600.0, p99 * 1e3, where="post", label=label or None)
        axes[3].step(h, s["usd_per_hour"], where="post", lw=0.9, label=label or None)
    first = fleets[0][1]
    if len(fleets) > 1:
        spend = sum(np.interp(first.samples["t"], r.samples["t"], r.samples["usd_per_hour"]) for _, r in fleets)
        axes[3].step(first.samples["t"] / 3600.0, spend, where="post", lw=1.2, color="k", label="total")
        for ax in axes[1:]:
            ax.legend(loc="upper left", fontsize=8)
    axes[0].set_ylabel("replicas")
    from matplotlib.ticker import MaxNLocator

    counts = np.concatenate([np.asarray(r.samples[k], float) for _, r in fleets for k in ("ready", "running")])
    axes[0].set_ylim(max(float(np.nanmin(counts)) - 1.0, 0.0), float(np.nanmax(counts)) + 1.0)
    axes[0].yaxis.set_major_locator(MaxNLocator(integer=True))  # whole replicas: no 1.875 tick on a flat 2
    axes[0].legend(loc="upper left", fontsize=8)
    ax2 = axes[0].twinx()
    ax2.plot(first.samples["t"] / 3600.0, _smooth(first.samples["rate"]), color="0.6", lw=0.8)
    ax2.set_ylabel("arrivals [req/s]", color="0.5")
    axes[1].set_ylabel("queued requests\n(mean over 1/200 of the run)")
    axes[2].axhline(first.ttft_slo_s * 1e3, color="r", ls="--", lw=0.8, label="SLO")
    axes[2].set_ylabel("P99 TTFT [ms]")
    axes[2].set_yscale("log")
    axes[2].legend(loc="upper left", fontsize=8)
    axes[3].set_ylabel("spend [USD/h]")
    axes[3].set_xlabel("time [h]")
    axes[0].set_title(title, fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3)
    if path is not None:
        fig.savefig(figure_file(path, "FleetResult.plot"), dpi=110)
    return fig


def _smooth(x: np.ndarray) -> np.ndarray:
    """Moving mean over 1/200 of the series (at least one sample)."""
    w = max(len(x) // 200, 1)
    return np.convolve(x, np.ones(w) / w, mode="same") if w > 1 else x
