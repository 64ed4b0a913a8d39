"""Figures of serving results: latency distributions, and latency against throughput.

Built on :class:`matplotlib.figure.Figure` without pyplot (no global state, no GUI backend);
matplotlib is the optional ``plot`` extra, imported only when a figure is drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InferlabError
from ..results.figure_file import figure_file

if TYPE_CHECKING:
    from .curve import LoadCurve
    from .result import ServeResult

PANELS = (("ttft", "TTFT [ms]"), ("tpot", "TPOT [ms]"), ("e2e", "end-to-end latency [ms]"))


def _figure(caller: str, **kwargs: Any) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:  # matplotlib is the optional "plot" extra
        raise InferlabError(f"{caller}() needs matplotlib: pip install 'inferlab[plot]'") from None
    return Figure(**kwargs)


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 100 else f"{x:.3g} ms"


def _plain_log_ticks(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig: Any, path: str | Path | None, caller: str = "plot") -> Any:
    if path is not None:
        fig.savefig(figure_file(path, caller), dpi=100)
    return fig


def plot_result(result: ServeResult, path: str | Path | None = None, *,
                percentiles: tuple[float, ...] = (50, 99)) -> Any:
    """Cumulative distributions of TTFT, TPOT and end-to-end latency over the requests.

    Parameters
    ----------
    result : ServeResult
        A simulated run; with client overheads the user-side curves are drawn dashed.
    path : str or Path, optional
        Write the figure there (the suffix picks the format: .png, .svg, .pdf, .jpg or another matplotlib writes).
    percentiles : tuple of float
        Percentiles marked on each panel (on the user-side curve when there is one).

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _figure("ServeResult.plot", figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, 3)
    user = result.user if result.overheads else None
    for ax, (name, label) in zip(axes, PANELS, strict=True):
        series = [("at the server", getattr(result, f"{name}_s"), "-")]
        if user is not None:
            series.append(("user side", getattr(user, f"{name}_s"), "--"))
        for text, values, style in series:
            v = np.sort(values[~np.isnan(values)]) * 1e3
            if not len(v):
                continue
            ax.plot(v, np.arange(1, len(v) + 1) / len(v), style, label=text)
            if text != series[-1][0]:
                continue  # percentiles marked on one curve (the user side when there is one)
            for q in percentiles:
                x = float(np.percentile(v, q))
                ax.axvline(x, color="0.6", lw=0.8, ls=":")
                right = q > 75  # high percentiles sit at the right edge: label on the left of the line
                ax.annotate(f"P{q:g} {_ms(x)}", (x, q / 100.0 - 0.08), xytext=(-4 if right else 4, 0),
                            textcoords="offset points", fontsize=8, ha="right" if right else "left")
        ax.set_xlabel(label)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of requests")
    if user is not None:
        axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(str(result).splitlines()[0], fontsize=10)
    return _save(fig, path, "ServeResult.plot")


def plot_curve(curve: LoadCurve, path: str | Path | None = None) -> Any:
    """TTFT and TPOT percentiles against throughput, one point per load, the knee marked.

    Parameters
    ----------
    curve : LoadCurve
        A load sweep.
    path : str or Path, optional
        Write the figure there.

    Returns
    -------
    matplotlib.figure.Figure
    """
    fig = _figure("LoadCurve.plot", figsize=(11, 4.2), layout="constrained")
    axes = fig.subplots(1, 2)
    x = curve.output_tokens_per_s
    p = curve.percentile
    knee = curve.knee
    unit = "clients" if curve.kind == "concurrency" else "req/s"
    slos = {"ttft": curve.ttft_slo_s, "tpot": curve.tpot_slo_s}
    for ax, (name, label) in zip(axes, PANELS[:2], strict=True):
        for q, style in ((50, "o-"), (p, "s-")):
            ax.plot(x, curve.latency(name, q) * 1e3, style, ms=4, label=f"P{q:g}")
        top = curve.latency(name, p) * 1e3
        for i, load in enumerate(curve.loads):
            ax.annotate(f"{load:g}", (x[i], top[i]), xytext=(0, 6), textcoords="offset points", fontsize=7,
                        ha="center", color="0.35")
        if knee is not None:
            ax.axvline(x[knee], color="tab:red", lw=1, ls="--")
            ax.plot([x[knee]], [top[knee]], "o", ms=11, mfc="none", mec="tab:red", mew=1.5,
                    label=f"knee ({curve.loads[knee]:g} {unit})")
        if slos[name] is not None:
            ax.axhline(slos[name] * 1e3, color="tab:green", lw=1, ls=":", label="SLO")
        if np.any(np.isfinite(top) & (top > 0)):
            ax.set_yscale("log")
            _plain_log_ticks(ax)
        else:  # one-token outputs: no decode step, so no TPOT to draw
            ax.text(0.5, 0.5, f"no {name.upper()}: every output is one token", transform=ax.transAxes,
                    ha="center", va="center", color="0.4")
        ax.set_xlabel("output tokens/s")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper left")
    first = str(curve.results[0]).splitlines()[0].rsplit(";", 1)[0]
    fig.suptitle(f"{first}; labels: {unit}", fontsize=10)
    return _save(fig, path, "LoadCurve.plot")
