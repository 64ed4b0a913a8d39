"""Prediction intervals: TTFT, TPOT and throughput bounds from the error-band table.

A prediction ``p`` whose cell has residual quantiles ``q_lo <= 0 <= q_hi`` (of
``log(measured / predicted)``, see :mod:`inferlab.calibration.error_band`) has the interval
``[p exp(q_lo), p exp(q_hi)]``: measured values of validation cases like it fell inside
in a share ``level`` of cases.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..calibration.band_files import table_for_profile
from ..calibration.error_band import Band, MissingBandError, level_probabilities
from ..calibration.profile import hardware_family
from ..techniques.step import ResolvedDeployment

#: What each quantity's interval is of, and its unit.
UNITS = {"ttft": "s", "tpot": "s", "throughput": "tok/s"}


def _listed(x: Any) -> Any:
    """Plain floats (nested lists for a grid); a point that does not run (NaN) is None."""
    arr = np.asarray(x, float)
    plain = arr.astype(object)
    plain[~np.isfinite(arr)] = None
    return plain.item() if arr.size == 1 else plain.tolist()


def _decimals(x: float, digits: int) -> int:
    """Decimals that show ``x`` with about ``digits`` significant digits (none above ``10**digits``)."""
    return max(0, digits - 1 - int(np.floor(np.log10(abs(x))))) if x and np.isfinite(x) else digits - 1


@dataclass(frozen=True)
class Bounds:
    """The interval of one quantity: ``low <= point <= high`` [s for ttft and tpot, tok/s for throughput]
    (arrays for a grid), and the band it comes from."""

    quantity: str
    point: Any
    low: Any
    high: Any
    band: Band

    @property
    def unit(self) -> str:
        """``s`` or ``tok/s``."""
        return UNITS[self.quantity]

    def at(self, point: int = 0) -> tuple[float, float, float]:
        """``(low, point, high)`` of one grid point."""
        flat = [np.ravel(np.asarray(v, float)) for v in (self.low, self.point, self.high)]
        return tuple(float(v[min(point, v.size - 1)]) for v in flat)  # type: ignore[return-value]

    def text(self, point: int = 0) -> str:
        """``12.72 ms (80%: 11.9-14.1 ms, from 45 static-batch cases of trtllm on hopper GPUs)``."""
        mid = self.at(point)[1]
        if not np.isfinite(mid):
            return "- (this point does not run)"
        scale, unit = (1e3, "ms") if self.unit == "s" and mid < 10.0 else (1.0, self.unit)
        low, mid, high = (v * scale for v in self.at(point))
        point_digits, bound_digits = _decimals(mid, 4), _decimals(mid, 3)
        return (f"{mid:,.{point_digits}f} {unit} ({self.band.level:.0%}: {low:,.{bound_digits}f}-"
                f"{high:,.{bound_digits}f} {unit}, {self.band.describe()})")

    def to_dict(self) -> dict[str, Any]:
        """Plain values, JSON-ready."""
        return {"point": _listed(self.point), "low": _listed(self.low), "high": _listed(self.high), "unit": self.unit,
                "log_ratio": [self.band.low, self.band.high], "from": self.band.describe(),
                "widened": list(self.band.widened)}


@dataclass(frozen=True)
class PredictionInterval:
    """TTFT, TPOT and output-throughput intervals of one prediction at ``level``."""

    level: float
    regime: str
    ttft: Bounds
    tpot: Bounds
    throughput: Bounds
    source: str

    def lines(self, point: int = 0) -> list[str]:
        """Text lines for :meth:`explain`: one per quantity."""
        what = "of the mean TTFT and TPOT and the throughput " if self.regime == "serving" else ""
        return [f"{self.level:.0%} interval {what}from the validation residuals of this regime, GPU family and engine:",
                f"  TTFT {self.ttft.text(point)}", f"  TPOT {self._tpot_text(point)}",
                f"  throughput {self.throughput.text(point)}"] + ([f"  {self.ttft.band.wider()}"]
                                                                  if self.ttft.band.widened else [])

    def _tpot_text(self, point: int) -> str:
        """The TPOT's text; none at a point that runs but decodes nothing (one output token a request)."""
        if np.isfinite(self.ttft.at(point)[1]) and not np.isfinite(self.tpot.at(point)[1]):
            return "- (one output token a request: no decode step)"
        return self.tpot.text(point)

    def to_dict(self) -> dict[str, Any]:
        """Plain values, JSON-ready."""
        return {"level": self.level, "regime": self.regime, "ttft_s": self.ttft.to_dict(),
                "tpot_s": self.tpot.to_dict(), "output_tokens_per_s": self.throughput.to_dict(),
                "table": self.source}


def tpot_floor_s(deployment: ResolvedDeployment, ops: tuple, speculative: Any = None) -> Any:
    """Least TPOT a decode step of ``ops`` allows [s]: their weight and KV reads at the memory
    bandwidth (:func:`~inferlab.core.timing.unavoidable_memory_s`), times the pipeline stages a
    token passes (the ops are one stage's), over the most tokens a step gives (k + 1 with speculation)."""
    from ..core.timing import unavoidable_memory_s

    tokens = 1.0 if speculative is None else speculative.k + 1.0
    return deployment.parallel.pp * unavoidable_memory_s(ops, deployment.hardware) / tokens


def ttft_floor_s(deployment: ResolvedDeployment, ops: tuple, prompts: Any = 1.0) -> Any:
    """Least time to a first token a prefill step of ``ops`` allows [s]: one prompt's share of
    the step's matrix FLOPs at the datasheet's dense tensor rate
    (:func:`~inferlab.core.timing.unavoidable_compute_s`) or the step's weight and KV reads at
    the memory bandwidth over ``prompts``, whichever is longer. One pipeline stage's (the ops
    are one stage's): a prompt's chunks can pass the stages in a pipeline."""
    from ..core.timing import unavoidable_compute_s, unavoidable_memory_s

    hw = deployment.hardware
    return np.maximum(unavoidable_compute_s(ops, hw), unavoidable_memory_s(ops, hw)) / np.asarray(prompts, float)


def _floored(bounds: Bounds, floor: Any) -> Bounds:
    """``bounds`` with its low edge raised to ``floor`` where the point is above it (never above
    the point: a point below physics' floor keeps it as its low edge); NaN points (not run) stay."""
    point = np.asarray(bounds.point, float)
    with np.errstate(invalid="ignore"):
        low = np.where(np.isfinite(point), np.maximum(bounds.low, np.minimum(floor, point)), bounds.low)
    return Bounds(bounds.quantity, bounds.point, low if np.ndim(low) else float(low), bounds.high, bounds.band)


def prediction_interval(deployment: ResolvedDeployment, engine: str, regime: str, level: float, *, ttft_s: Any,
                        tpot_s: Any, output_tokens_per_s: Any, tpot_floor_s: Any = 0.0,
                        ttft_floor_s: Any = 0.0) -> PredictionInterval:
    """The intervals of a prediction on ``deployment`` with ``engine`` in ``regime``.

    ``tpot_floor_s``, ``ttft_floor_s``: the least TPOT and TTFT physics allows (the decode
    step's weight and KV reads at the memory bandwidth; one prompt's prefill FLOPs at the
    dense tensor rate); the interval's low edge is never below them (nor above the point).

    Raises
    ------
    InferlabError
        The profile has no error-band table, or ``level`` is not one it holds.
    """
    level_probabilities(level)  # a level the table does not hold is refused before any arithmetic
    table = table_for_profile(deployment.profile.name)
    family = hardware_family(deployment.hardware.architecture)

    def bounds(quantity: str, point: Any) -> Bounds:
        band = replace(table.band(quantity, regime, family, engine, level), device=deployment.hardware.device_word)
        p = np.asarray(point, float)
        return Bounds(quantity, point, p * np.exp(band.low), p * np.exp(band.high), band)

    return PredictionInterval(float(level), regime, _floored(bounds("ttft", ttft_s), ttft_floor_s),
                              _floored(bounds("tpot", tpot_s), tpot_floor_s),
                              bounds("throughput", output_tokens_per_s), table.source)


def interval_or_reason(result: Any, level: float = 0.8) -> PredictionInterval | str:
    """``result.interval(level)``, or why there is none (its profile has no table: ``roofline``, a mapping)."""
    try:
        return result.interval(level)
    except MissingBandError as exc:
        return str(exc)


def interval_dict(result: Any, level: float = 0.8) -> dict[str, Any]:
    """The interval as :meth:`to_dict` shows it: its dict, or ``{"level", "unavailable": why}``."""
    found = interval_or_reason(result, level)
    return found.to_dict() if isinstance(found, PredictionInterval) else {"level": level, "unavailable": found}


def interval_lines(result: Any, point: int = 0, level: float = 0.8) -> list[str]:
    """The interval's lines for ``explain()``, or one line saying why there is none."""
    found = interval_or_reason(result, level)
    return found.lines(point) if isinstance(found, PredictionInterval) else [f"no {level:.0%} interval: {found}"]


def estimate_interval_text(est: Any, level: float = 0.8) -> str:
    """The intervals of every grid point of an estimate as a text table, with where they come from."""
    from ..results.render import text_table

    found = interval_or_reason(est, level)
    if not isinstance(found, PredictionInterval):
        return f"no {level:.0%} interval: {found}"
    shape = np.shape(est.ttft_s)
    flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))  # noqa: E731 - each array once
    grid = [flat(v) for v in (est.batch_size, est.isl, est.osl)]
    # each bound's (low, point, high) at every point, scaled, flattened once (not once a point: a
    # 100,000-point grid had spent minutes re-flattening them)
    spans = [[flat(v) * scale for v in (b.low, b.point, b.high)]
             for b, scale in ((found.ttft, 1e3), (found.tpot, 1e3), (found.throughput, 1.0))]
    rows = []
    for j in range(int(np.prod(shape)) if shape else 1):
        cells = [f"{v[j]:.0f}" for v in grid]
        for span in spans:
            low, mid, high = (float(v[j]) for v in span)
            if not np.isfinite(mid):  # a point that does not run has no interval (the table above says why)
                cells.append("-")
                continue
            digits = _decimals(mid, 3)
            cells.append(f"{low:,.{digits}f}-{high:,.{digits}f}")
        rows.append(cells)
    table = text_table(["batch", "isl", "osl", "TTFT ms", "TPOT ms", "tok/s"], rows, right={0, 1, 2, 3, 4, 5})
    basis = "; ".join(f"{name} {b.band.describe()}" for name, b in (("TTFT", found.ttft), ("TPOT", found.tpot),
                                                                     ("tok/s", found.throughput)))
    wider = f"\n{found.ttft.band.wider()}" if found.ttft.band.widened else ""
    return f"{level:.0%} interval from the validation residuals:\n{table}\n{basis}{wider}"
