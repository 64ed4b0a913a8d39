"""Error bands: how far measurements fall from predictions, per regime, GPU family and engine.

A residual is ``log(measured / predicted)`` of one validation case. The band table holds,
per cell (quantity, regime, GPU family, engine), the empirical quantiles of the residuals
of the cases in that cell; a prediction ``p`` of that cell gets the interval
``[p exp(q_lo), p exp(q_hi)]`` at level ``q_hi - q_lo``.

Quantities are ``ttft``, ``tpot`` and ``throughput`` (output tokens/s); regimes are
``static_batch`` (:func:`inferlab.estimate`) and ``serving`` (offline, online and
closed-loop cases, :func:`inferlab.serve`).

Pooling. A cell needs :data:`MIN_CASES` residuals; with fewer, the band comes from the
first cell that has them in the order (family, engine), (any family, engine), (family,
any engine), (any, any), and finally the quantity over both regimes.

Widening. A GPU family with no case in the table, or an engine with no case in the
regime (and ``generic``, which stands for engines nobody calibrated), runs on datasheet or
median efficiencies, not on fits of its own, so the residuals of calibrated cells
understate its error. Its band is the union of the pooled band above and the band of
*left-out* residuals: the cases of each family predicted with that family's fits removed
from the profile (``gpu_left_out``), and each engine's cases predicted as the ``generic``
engine (``engine_left_out``); see :mod:`inferlab.fitting.error_bands`. A band always contains the point
estimate (residual 0).

Notes
-----
Quantiles use the Weibull plotting position: the ``p`` quantile of ``n`` sorted residuals
``x_1 <= ... <= x_n`` sits at rank ``h = p (n + 1)`` (clipped to ``[1, n]``), interpolated
linearly between ``x_floor(h)`` and ``x_ceil(h)``. A new draw falls below the ``k``-th of
``n`` order statistics with probability ``k / (n + 1)``, so this rank makes the interval
cover a share ``level`` of new cases on average, where the default rank ``p (n - 1) + 1``
makes small-sample intervals too narrow.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InferlabError, UnknownNameError

SCHEMA = "inferlab-error-bands/1"
QUANTITIES = ("ttft", "tpot", "throughput")
REGIMES = ("static_batch", "serving")
#: Probabilities of the stored quantiles; a level ``L`` reads those at ``(1 - L) / 2`` and ``(1 + L) / 2``.
PROBABILITIES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)
LEVELS = (0.5, 0.8, 0.9)
#: Fewest residuals a cell needs: with 20, the 10% and 90% quantiles fall between the second
#: and third cases from either end, so no single case sets the 80% band.
MIN_CASES = 20
ANY = "*"
#: Residuals of calibrated predictions, and of predictions with the GPU family's or the engine's fits left out.
BASES = ("calibrated", "gpu_left_out", "engine_left_out")
#: How the left-out residuals were predicted, in words.
LEFT_OUT = {"gpu_left_out": "their GPU family's fits left out",
            "engine_left_out": "their engine's fits left out (as generic)"}
#: Engine that stands for no engine in particular: it is never calibrated.
GENERIC_ENGINE = "generic"


class MissingBandError(InferlabError):
    """A prediction's profile has no error-band table (``roofline``, a mapping, a file without one)."""


#: Case metric -> (quantity, sign): the residual of the quantity is ``sign x log(measured / predicted)``
#: (a per-user rate is ``1 / TPOT``).
METRIC_QUANTITY = {
    "ttft_ms": ("ttft", 1.0), "tpot_ms": ("tpot", 1.0), "itl_ms": ("tpot", 1.0), "tpot_p50_ms": ("tpot", 1.0),
    "output_tokens_per_s_per_user": ("tpot", -1.0),
    "output_tokens_per_s": ("throughput", 1.0), "output_tokens_per_s_per_gpu": ("throughput", 1.0),
}


def band_regime(regime: str) -> str:
    """The band regime of a case regime: ``static_batch``, or ``serving`` for the others."""
    return "static_batch" if regime == "static_batch" else "serving"


@dataclass(frozen=True)
class Residual:
    """One case's ``log(measured / predicted)`` of a quantity, with its cell."""

    quantity: str
    regime: str
    family: str
    engine: str
    log_ratio: float


def weibull_quantiles(values: Sequence[float] | np.ndarray, probabilities: Sequence[float] = PROBABILITIES
                      ) -> tuple[float, ...]:
    """Empirical quantiles at rank ``p (n + 1)`` (see the module notes).

    Raises
    ------
    InferlabError
        No values.
    """
    x = np.sort(np.asarray(values, float))
    if x.size == 0:
        raise InferlabError("error band: a quantile of no residuals is undefined; give at least one")
    ranks = np.clip(np.asarray(probabilities, float) * (x.size + 1), 1.0, x.size)
    return tuple(float(v) for v in np.interp(ranks, np.arange(1, x.size + 1), x))


def level_probabilities(level: float) -> tuple[int, int]:
    """Indices into :data:`PROBABILITIES` of the low and high quantile of ``level``.

    Raises
    ------
    InferlabError
        A level the table does not hold.
    """
    numeric = isinstance(level, (int, float, np.integer, np.floating)) and not isinstance(level, (bool, np.bool_))
    if numeric and any(math.isclose(float(level), v, abs_tol=1e-9) for v in LEVELS):
        low = min(range(len(PROBABILITIES)), key=lambda i: abs(PROBABILITIES[i] - (1.0 - float(level)) / 2.0))
        return low, len(PROBABILITIES) - 1 - low
    share = numeric and any(math.isclose(float(level) / 100.0, v, abs_tol=1e-9) for v in LEVELS)
    raise InferlabError(f"interval level {level!r:.40} is not in the error band table; allowed: "
                        f"{', '.join(f'{v:g}' for v in LEVELS)} (the table stores the quantiles "
                        f"{', '.join(f'{p:g}' for p in PROBABILITIES)})"
                        + (f"; a level is a share: {float(level) / 100.0:g}, not {level:g}" if share else ""))


@dataclass(frozen=True)
class BandCell:
    """Quantiles [log(measured / predicted)] at :data:`PROBABILITIES` of ``count`` residuals of one cell."""

    quantity: str
    regime: str
    family: str
    engine: str
    basis: str
    count: int
    log_ratio: tuple[float, ...]

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """``(basis, quantity, regime, family, engine)``."""
        return self.basis, self.quantity, self.regime, self.family, self.engine

    def bounds(self, level: float) -> tuple[float, float]:
        """Low and high log ratio of ``level``."""
        lo, hi = level_probabilities(level)
        return self.log_ratio[lo], self.log_ratio[hi]

    def describe(self) -> str:
        """``45 static-batch cases of trtllm on hopper GPUs``-style text."""
        regime = "static-batch" if self.regime == "static_batch" else "serving" if self.regime != ANY else "all"
        where = f", {LEFT_OUT[self.basis]}" if self.basis in LEFT_OUT else ""
        engine = "any engine" if self.engine == ANY else self.engine
        family = "any GPU" if self.family == ANY else f"{self.family} GPUs"
        return f"{self.count} {regime} cases of {engine} on {family}{where}"


@dataclass(frozen=True)
class Band:
    """The band of one prediction: log ratios ``low <= 0 <= high`` and where they come from.

    ``cells`` are the cells whose union it is (the pooled calibrated cell first); ``widened``
    names what had no calibration data (``"gpu"``: the ``family``; ``"engine"``: the ``engine``).
    """

    level: float
    low: float
    high: float
    cells: tuple[BandCell, ...]
    widened: tuple[str, ...]
    family: str = ""
    engine: str = ""
    device: str = "GPU"  # what the family's parts are called: GPU, CPU or SoC

    def describe(self) -> str:
        """Where the band comes from, in words (what had no calibration data: :meth:`wider`)."""
        return "from " + self.cells[0].describe()

    def wider(self) -> str:
        """``wider: no calibration data for cdna GPUs, ...`` (empty when nothing was missing)."""
        missing = {"gpu": f"{self.family} {self.device}s", "engine": f"the {self.engine} engine"}
        if not self.widened:
            return ""
        text = f"wider: no calibration data for {' or '.join(missing[w] for w in self.widened)}"
        left_out = " and ".join(LEFT_OUT[c.basis] for c in self.cells[1:] if c.basis in LEFT_OUT)
        text += (f", so the band also holds the residuals of cases predicted with {left_out}" if left_out
                 else " (and the table has no left-out residuals to widen the band with)")
        if any(c.basis == "calibrated" for c in self.cells[1:]):
            text += ", and the widest band of any calibrated GPU family"
        return text


@dataclass(frozen=True)
class ErrorBandTable:
    """The error-band table: cells of residual quantiles and what was calibrated.

    ``families`` are the GPU families with cases; ``engines`` the ``(regime, engine)``
    pairs with cases; ``coverage`` the share of held-out cases inside each level's band.
    """

    source: str
    min_cases: int
    families: tuple[str, ...]
    engines: tuple[tuple[str, str], ...]
    cells: tuple[BandCell, ...]
    coverage: tuple[tuple[float, float], ...] = ()

    @functools.cached_property
    def _index(self) -> dict[tuple[str, ...], BandCell]:
        return {c.key: c for c in self.cells}

    def cell(self, basis: str, quantity: str, regime: str, family: str, engine: str) -> BandCell | None:
        """The stored cell of that key, or None (fewer than :attr:`min_cases` residuals)."""
        return self._index.get((basis, quantity, regime, family, engine))

    def _pooled(self, basis: str, quantity: str, regime: str, family: str, engine: str) -> BandCell | None:
        for key in ((family, engine), (ANY, engine), (family, ANY), (ANY, ANY)):
            found = self.cell(basis, quantity, regime, *key)
            if found is not None:
                return found
        return self.cell(basis, quantity, ANY, ANY, ANY)

    def band(self, quantity: str, regime: str, family: str, engine: str, level: float = 0.8) -> Band:
        """The band of a prediction of ``quantity`` in ``regime`` on a GPU of ``family`` with ``engine``.

        Raises
        ------
        UnknownNameError
            A quantity or regime that is not one of :data:`QUANTITIES`, :data:`REGIMES`.
        InferlabError
            A level the table does not hold, or a table without the quantity.
        """
        if quantity not in QUANTITIES:
            raise UnknownNameError("error-band quantity", quantity, QUANTITIES)
        if regime not in REGIMES:
            raise UnknownNameError("error-band regime", regime, REGIMES)
        level_probabilities(level)
        base = self._pooled("calibrated", quantity, regime, family, engine)
        if base is None:
            raise InferlabError(f"error band table ({self.source}) has no {quantity} residuals; regenerate it with "
                                "`inferlab error-bands --out PATH`")
        widened = tuple(name for name, known in (("gpu", family in self.families),
                                                  ("engine", (regime, engine) in self.engines
                                                   and engine != GENERIC_ENGINE)) if not known)
        cells = [base]
        for name in widened:
            extra = self._pooled(f"{name}_left_out", quantity, regime, ANY, ANY)
            if extra is not None:
                cells.append(extra)
        if "gpu" in widened:
            # a GPU nobody measured may err as much as the worst calibrated family does
            known = (self._pooled("calibrated", quantity, regime, f, engine) for f in self.families)
            cells.extend(c for c in known if c is not None and c not in cells)
        lows, highs = zip(*(c.bounds(level) for c in cells))
        return Band(float(level), min(0.0, *lows), max(0.0, *highs), tuple(cells), widened, family, engine)


def _cells(residuals: Iterable[Residual], basis: str, min_cases: int, pooled_only: bool) -> list[BandCell]:
    """Cells of every key with at least ``min_cases`` residuals (``pooled_only``: only the
    (quantity, regime) and quantity pools)."""
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    for r in residuals:
        keys = [(r.quantity, r.regime, ANY, ANY), (r.quantity, ANY, ANY, ANY)]
        if not pooled_only:
            keys += [(r.quantity, r.regime, r.family, r.engine), (r.quantity, r.regime, ANY, r.engine),
                     (r.quantity, r.regime, r.family, ANY)]
        for key in keys:
            groups.setdefault(key, []).append(r.log_ratio)
    return [BandCell(*key, basis=basis, count=len(v), log_ratio=tuple(round(x, 4) for x in weibull_quantiles(v)))
            for key, v in sorted(groups.items()) if len(v) >= min_cases]


def build_table(calibrated: Sequence[Residual], *, gpu_left_out: Sequence[Residual] = (),
                engine_left_out: Sequence[Residual] = (), source: str = "", min_cases: int = MIN_CASES
                ) -> ErrorBandTable:
    """The table of the residuals of calibrated predictions and of left-out ones (see the module doc).

    ``generic``-engine residuals are engines nobody calibrated: they join the engine-left-out pool.
    """
    mine = [r for r in calibrated if r.engine != GENERIC_ENGINE]
    left_engine = list(engine_left_out) + [r for r in calibrated if r.engine == GENERIC_ENGINE]
    cells = _cells(mine, "calibrated", min_cases, pooled_only=False)
    cells += _cells(gpu_left_out, "gpu_left_out", min_cases, pooled_only=True)
    cells += _cells(left_engine, "engine_left_out", min_cases, pooled_only=True)
    return ErrorBandTable(source=source, min_cases=min_cases, families=tuple(sorted({r.family for r in mine})),
                          engines=tuple(sorted({(r.regime, r.engine) for r in mine})), cells=tuple(cells))


def coverage(table: ErrorBandTable, residuals: Sequence[Residual], level: float) -> float:
    """Share of ``residuals`` inside the band the table gives their cell at ``level`` (nan if none)."""
    if not residuals:
        return float("nan")
    inside = [b.low <= r.log_ratio <= b.high
              for r in residuals for b in [table.band(r.quantity, r.regime, r.family, r.engine, level)]]
    return float(np.mean(inside))
