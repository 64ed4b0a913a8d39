"""Pareto front of a sweep: the configurations no other one beats on both metrics.

The usual pair is interactivity (output tokens/s per user, ``1 / TPOT``) against
efficiency (output tokens/s per GPU): a larger batch buys the second with the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InferlabError, UnknownNameError

#: Axis titles of the usual sweep columns; other columns are shown by name.
AXIS_LABELS = {
    "output_tokens_per_s_per_user": "output tokens/s per user (1 / TPOT)",
    "output_tokens_per_s_per_gpu": "output tokens/s per GPU",
    "output_tokens_per_s": "output tokens/s of the deployment",
    "ttft_s": "TTFT [s]",
    "tpot_s": "TPOT [s]",
    "usd_per_million_output": "USD per million output tokens",
    "memory_per_gpu_bytes": "memory per GPU [B]",
}
#: Short units of the usual columns, for the description of the chosen point.
SHORT_UNITS = {
    "output_tokens_per_s_per_user": "tok/s/user",
    "output_tokens_per_s_per_gpu": "tok/s/GPU",
    "output_tokens_per_s": "tok/s",
    "ttft_s": "s TTFT",
    "tpot_s": "s TPOT",
    "usd_per_million_output": "USD/M out",
}
#: Columns that name a configuration, used to colour the points when ``label`` is not given.
CONFIG_COLUMNS = ("model", "hardware", "tp", "precision")


def pareto_mask(x: Any, y: Any, maximize: tuple[bool, bool] = (True, True)) -> np.ndarray:
    """Which points no other point dominates.

    Parameters
    ----------
    x, y : array_like, shape (n,)
        The two metrics of each point (any units; NaN or infinite points are never on the front).
    maximize : (bool, bool)
        Whether larger is better for ``x`` and for ``y``.

    Returns
    -------
    numpy.ndarray of bool, shape (n,)
        True for points on the front. Equal points do not dominate each other, so all copies
        of a front point are on it.

    Notes
    -----
    ``q`` dominates ``p`` when it is at least as good on both metrics and better on one.
    Sorting by ``x`` (best first, ties by ``y``) makes ``p`` non-dominated exactly when its
    ``y`` is the best of its equal-``x`` group and better than every ``y`` seen at a better
    ``x``: one sort and one running maximum, O(n log n).

    References
    ----------
    Kung, Luccio and Preparata, "On finding the maxima of a set of vectors", J. ACM 22(4), 1975.

    Examples
    --------
    >>> pareto_mask([1, 2, 2, 3], [4, 3, 1, 1]).tolist()
    [True, True, False, True]
    >>> pareto_mask([1, 2, 2, 3], [4, 3, 1, 1], maximize=(False, False)).tolist()
    [True, False, True, False]
    """
    sx, sy = (np.asarray(v, float) for v in (x, y))
    if sx.ndim != 1 or sx.shape != sy.shape:
        raise InferlabError(f"pareto_mask needs two 1-d arrays of equal length, got shapes {sx.shape} and {sy.shape}")
    if len(maximize) != 2:
        raise InferlabError(f"maximize must be two booleans (for x and for y), got {maximize!r}")
    sx = sx if maximize[0] else -sx
    sy = sy if maximize[1] else -sy
    mask = np.zeros(sx.shape, bool)
    valid = np.flatnonzero(np.isfinite(sx) & np.isfinite(sy))
    if valid.size == 0:
        return mask
    order = valid[np.lexsort((-sy[valid], -sx[valid]))]
    xs, ys = sx[order], sy[order]
    starts = np.r_[True, xs[1:] != xs[:-1]]
    group = np.cumsum(starts) - 1
    group_best = ys[starts]
    better_x_best = np.r_[-np.inf, np.maximum.accumulate(group_best)[:-1]]
    mask[order[(ys == group_best[group]) & (ys > better_x_best[group])]] = True
    return mask


def _columns(table: Any) -> Mapping[str, Any]:
    """The name -> column mapping of a SweepResult, a dict of arrays or a DataFrame."""
    cols = getattr(table, "columns", None)
    if isinstance(cols, Mapping):
        return cols
    if isinstance(table, Mapping) or (hasattr(table, "__getitem__") and cols is not None):  # dict or DataFrame
        return table
    raise InferlabError(f"expected a SweepResult, a dict of arrays or a DataFrame, got {type(table).__name__}")


def _column(cols: Mapping[str, Any], name: str) -> np.ndarray:
    if name not in cols:
        raise UnknownNameError("column", name, [str(c) for c in cols])
    return np.asarray(cols[name])


def _usable(cols: Mapping[str, Any], x: str, y: str) -> np.ndarray:
    """Rows that are feasible (when the table says) with finite x and y."""
    xs, ys = _column(cols, x).astype(float), _column(cols, y).astype(float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    if "feasible" in cols:
        ok &= np.asarray(cols["feasible"], bool)
    return ok


def pareto_front(points: Any, x: str = "output_tokens_per_s_per_user", y: str = "output_tokens_per_s_per_gpu", *,
                 maximize: tuple[bool, bool] = (True, True)) -> np.ndarray:
    """Row indices of the Pareto front of a table, in increasing ``x``.

    Parameters
    ----------
    points : SweepResult, dict of arrays or pandas.DataFrame
        The table, e.g. ``inferlab.sweep(...)``. Rows with ``feasible`` false are left out.
    x, y : str
        Column names of the two metrics.
    maximize : (bool, bool)
        Whether larger is better for ``x`` and for ``y``.

    Returns
    -------
    numpy.ndarray of int

    Examples
    --------
    >>> table = {"a": [1.0, 2.0, 3.0, 2.5], "b": [9.0, 5.0, 1.0, 2.0], "feasible": [True, True, True, False]}
    >>> pareto_front(table, "a", "b").tolist()
    [0, 1, 2]
    """
    cols = _columns(points)
    ok = _usable(cols, x, y)
    xs = _column(cols, x).astype(float)
    ys = _column(cols, y).astype(float)
    front = np.flatnonzero(ok)[pareto_mask(xs[ok], ys[ok], maximize)]
    return front[np.argsort(xs[front], kind="stable")]


def _group_labels(cols: Mapping[str, Any], label: str | Sequence[str] | None, rows: np.ndarray) -> np.ndarray:
    """One legend text per row: the ``label`` columns joined, or the configuration columns that vary."""
    if label is None:
        names = [c for c in CONFIG_COLUMNS if c in cols and len({str(v) for v in np.asarray(cols[c])[rows]}) > 1]
    else:
        names = [label] if isinstance(label, str) else list(label)
    if not names:
        return np.full(len(_column(cols, next(iter(cols)))), "all points", dtype=object)
    parts = [[f"tp{v}" if n == "tp" else str(v) for v in _column(cols, n)] for n in names]
    return np.array([" ".join(p) for p in zip(*parts)], dtype=object)


def _config_text(cols: Mapping[str, Any], row: int) -> str:
    names = [c for c in (*CONFIG_COLUMNS, "batch_size") if c in cols]
    words = [f"tp{cols[c][row]}" if c == "tp" else f"batch {float(cols[c][row]):g}" if c == "batch_size"
             else str(cols[c][row]) for c in names]
    return " ".join(words)


def _auto_log(values: np.ndarray) -> bool:
    """Log scale when every value is positive and they span more than 30x."""
    pos = values[values > 0]
    return pos.size > 1 and pos.max() / pos.min() > 30 and pos.size == values.size


def pareto_plot(table: Any, x: str = "output_tokens_per_s_per_user", y: str = "output_tokens_per_s_per_gpu", *,
                label: str | Sequence[str] | None = None, chosen: int | None = None,
                maximize: tuple[bool, bool] = (True, True), connect: str | None = "batch_size",
                log: tuple[bool, bool] | None = None, title: str | None = None):
    """Every point of a table, its Pareto front, and the chosen configuration.

    Parameters
    ----------
    table : SweepResult, dict of arrays or pandas.DataFrame
        E.g. ``inferlab.sweep(...)``; rows with ``feasible`` false are not drawn.
    x, y : str
        Column names of the two metrics.
    label : str or sequence of str, optional
        Columns whose values colour the points (default: those of model, hardware, tp and
        precision that vary).
    chosen : int, optional
        Row index of the configuration to mark with a star and describe in the legend.
    maximize : (bool, bool)
        Whether larger is better for ``x`` and for ``y``.
    connect : str or None
        Join each colour's points in the order of this column (default ``batch_size``, when
        the table has it), so that a configuration's trade-off reads as a curve.
    log : (bool, bool), optional
        Log scale of x and y (default: log when the drawn values are positive and span more
        than 30x).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    from . import new_figure

    fig = new_figure("pareto_plot", figsize=(10.5, 5.6), layout="constrained")
    cols = _columns(table)
    ok = _usable(cols, x, y)
    rows = np.flatnonzero(ok)
    if rows.size == 0:
        raise InferlabError(f"pareto_plot: no feasible row with finite {x!r} and {y!r} to draw")
    xs, ys = _column(cols, x).astype(float), _column(cols, y).astype(float)
    groups = _group_labels(cols, label, rows)
    ax = fig.add_subplot()
    order_key = _column(cols, connect).astype(float) if connect and connect in cols else None
    for k, name in enumerate(dict.fromkeys(groups[rows])):
        members = rows[groups[rows] == name]
        if order_key is not None:
            members = members[np.argsort(order_key[members], kind="stable")]
        style = "-" if order_key is not None else "none"
        ax.plot(xs[members], ys[members], linestyle=style, marker="o", markersize=5, linewidth=0.8, alpha=0.75,
                color=f"C{k % 10}", label=name)
    front = pareto_front(table, x, y, maximize=maximize)
    ax.plot(xs[front], ys[front], color="black", linewidth=2.2, alpha=0.55, zorder=1, label="Pareto front")
    ax.plot(xs[front], ys[front], linestyle="none", marker="o", markersize=9, markerfacecolor="none",
            markeredgecolor="black", zorder=3)
    logs = log if log is not None else (_auto_log(xs[rows]), _auto_log(ys[rows]))
    _format_axes(ax, logs, x, y)
    if chosen is not None:
        _mark_chosen(ax, cols, int(chosen), x, y, ok, front)
    hidden = int(len(ok) - ok.sum())
    ax.set_title((title or f"{len(front)} of {rows.size} configurations on the Pareto front")
                 + (f" ({hidden} infeasible not shown)" if hidden else ""), fontsize=11)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return fig


def _format_axes(ax: Any, logs: tuple[bool, bool], x: str, y: str) -> None:
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda v, _: f"{v:,.10g}")
    ax.set_xscale("log" if logs[0] else "linear")
    ax.set_yscale("log" if logs[1] else "linear")
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(plain)
    ax.set_xlabel(AXIS_LABELS.get(x, x))
    ax.set_ylabel(AXIS_LABELS.get(y, y))
    ax.grid(True, which="major", alpha=0.3)


def _number(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _mark_chosen(ax: Any, cols: Mapping[str, Any], chosen: int, x: str, y: str, ok: np.ndarray,
                 front: np.ndarray) -> None:
    """A star on the chosen row, described in the legend (outside the axes, so it hides no point)."""
    xs, ys = _column(cols, x).astype(float), _column(cols, y).astype(float)
    if not 0 <= chosen < len(xs):
        raise InferlabError(f"chosen={chosen} is not a row of the table (0..{len(xs) - 1})")
    if not ok[chosen]:
        raise InferlabError(f"chosen={chosen} is infeasible or has no value to plot; pick a feasible row")
    values = ", ".join(f"{_number(v)} {SHORT_UNITS.get(name, name)}" for v, name in ((xs[chosen], x), (ys[chosen], y)))
    text = (f"chosen: {_config_text(cols, chosen)}\n{values}" + ("" if chosen in front else "\n(not on the front)"))
    ax.plot([xs[chosen]], [ys[chosen]], marker="*", markersize=20, color="gold", markeredgecolor="black", zorder=4,
            linestyle="none", label=text)
