"""Error statistics of predictions against measurements, per regime and metric.

The error of one prediction is ``100 * (predicted - measured) / measured`` [%]; a group
of them is summarised by the median absolute error, the bias (median signed error) and
the share of predictions within +-25% of the measurement.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: Predictions within this many percent of the measurement count as "close".
WITHIN_PERCENT = 25.0


@dataclass(frozen=True)
class ErrorStats:
    """Errors of one group of predictions [%]."""

    regime: str
    metric: str
    count: int
    skipped: int
    median_abs_error_pct: float
    bias_pct: float
    within_25_pct: float

    def to_dict(self) -> dict[str, Any]:
        """Plain values, JSON-ready (nan where the group had no prediction)."""
        return asdict(self)


def percent_errors(predicted: Any, measured: Any) -> np.ndarray:
    """``100 * (predicted - measured) / measured`` [%]."""
    predicted, measured = np.asarray(predicted, float), np.asarray(measured, float)
    return 100.0 * (predicted - measured) / measured


def error_stats(errors: Sequence[float] | np.ndarray, *, regime: str = "", metric: str = "",
                skipped: int = 0) -> ErrorStats:
    """Median absolute error, bias and share within +-25% of a set of errors [%]."""
    e = np.asarray(errors, float)
    if e.size == 0:
        return ErrorStats(regime, metric, 0, skipped, float("nan"), float("nan"), float("nan"))
    return ErrorStats(regime, metric, int(e.size), skipped, float(np.median(np.abs(e))), float(np.median(e)),
                      float(np.mean(np.abs(e) <= WITHIN_PERCENT)))


def summarize(records: Iterable[dict[str, Any]]) -> list[ErrorStats]:
    """Statistics per (regime, metric), sorted by regime then metric.

    ``records`` are mappings with ``regime``, ``metric``, ``measured`` and ``predicted``
    (None when the case was not predicted: counted as skipped).
    """
    groups: dict[tuple[str, str], tuple[list[float], list[int]]] = {}
    for r in records:
        errors, skipped = groups.setdefault((r["regime"], r["metric"]), ([], [0]))
        if r.get("predicted") is None:
            skipped[0] += 1
        else:
            errors.append(float(percent_errors(r["predicted"], r["measured"])))
    return [error_stats(errors, regime=regime, metric=metric, skipped=skipped[0])
            for (regime, metric), (errors, skipped) in sorted(groups.items())]


def stats_rows(stats: Sequence[ErrorStats]) -> tuple[list[str], list[list[str]]]:
    """Headers and text rows of a summary table."""
    headers = ["regime", "metric", "n", "skipped", "median |err| %", "bias %", "within 25%"]
    rows = [[s.regime, s.metric, str(s.count), str(s.skipped),
             "-" if s.count == 0 else f"{s.median_abs_error_pct:.1f}",
             "-" if s.count == 0 else f"{s.bias_pct:+.1f}",
             "-" if s.count == 0 else f"{100 * s.within_25_pct:.0f}%"] for s in stats]
    return headers, rows
