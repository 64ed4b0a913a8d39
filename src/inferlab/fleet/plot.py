"""The fleet over time: replicas, queue depth, P99 TTFT and spend (matplotlib, optional)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..serving.plot import _figure

if TYPE_CHECKING:
    from .result import FleetResult


def plot_fleet(result: FleetResult, path: str | None = None) -> Any:
    """Four panels sharing the time axis [h]; saved to ``path`` when given."""
    fig = _figure("FleetResult.plot", figsize=(9, 8), layout="constrained")
    axes = fig.subplots(4, 1, sharex=True)
    s = result.samples
    h = s["t"] / 3600.0
    ax = axes[0]
    ax.step(h, s["ready"], where="post", label="serving")
    ax.step(h, s["running"], where="post", label="paid (incl. starting)", alpha=0.7)
    ax.set_ylabel("replicas")
    ax.legend(loc="upper left", fontsize=8)
    ax2 = ax.twinx()
    ax2.plot(h, _smooth(s["rate"]), color="0.6", lw=0.8)
    ax2.set_ylabel("arrivals [req/s]", color="0.5")
    axes[1].plot(h, _smooth(s["queued"]), lw=0.9)
    axes[1].set_ylabel("queued requests\n(mean over 1/200 of the run)")
    starts, p99 = result.p99_ttft_over_time()
    axes[2].step(starts / 3600.0, p99 * 1e3, where="post")
    axes[2].axhline(result.ttft_slo_s * 1e3, color="r", ls="--", lw=0.8, label="SLO")
    axes[2].set_ylabel("P99 TTFT [ms]")
    axes[2].set_yscale("log")
    axes[2].legend(loc="upper left", fontsize=8)
    axes[3].step(h, s["usd_per_hour"], where="post", lw=0.9)
    axes[3].set_ylabel("spend [USD/h]")
    axes[3].set_xlabel("time [h]")
    from ..results.render import share_text

    axes[0].set_title(f"{result.name}: {result.usd:,.0f} USD, goodput {share_text(result.goodput())}, "
                      f"availability {result.availability:.4f}", fontsize=10)
    for ax in axes:
        ax.grid(alpha=0.3)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _smooth(x: np.ndarray) -> np.ndarray:
    """Moving mean over 1/200 of the series (at least one sample)."""
    w = max(len(x) // 200, 1)
    return np.convolve(x, np.ones(w) / w, mode="same") if w > 1 else x
