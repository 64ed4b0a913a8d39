"""The latency-throughput curve over increasing load, and its knee.

A :class:`LoadCurve` holds one simulation per load (Poisson rates or closed-loop clients)
with throughput, the per-user token rate, latency percentiles and, given SLOs, goodput per
point. Its knee is where latency starts to grow faster than throughput
(:func:`knee_index`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..errors import SpecError, option_name
from ..results.render import text_table
from .goodput import METRICS, Goodput, check_percentile, check_slo, goodput, reject_load_kwargs, user_latency
from .progress import Progress

if TYPE_CHECKING:
    from .result import ServeResult


def knee_index(throughput: Any, latency: Any, *, elasticity: float = 1.0) -> int | None:
    """The last point before latency starts to grow faster than throughput.

    Parameters
    ----------
    throughput, latency : array-like
        One value per load point, in increasing load order (any units).
    elasticity : float
        Threshold ``k`` on the arc elasticity of latency with respect to throughput.

    Returns
    -------
    int or None
        Index ``i - 1`` of the first segment ``(i - 1, i)`` whose elasticity exceeds ``k``;
        None when no segment does (the sweep stops before the knee).

    Notes
    -----
    The arc elasticity of segment ``i`` is the relative rise in latency per relative rise
    in throughput, ``e_i = (L_i / L_{i-1} - 1) / (X_i / X_{i-1} - 1)``, infinite when
    latency rises while throughput does not. Unlike a slope it needs no units or
    low-load reference. With ``k = 1`` the knee is the last load before a step that costs
    more latency, in relative terms, than it buys in throughput. For a single queue
    (``L = L_0 / (1 - rho)``) ``e = rho / (1 - rho)`` exceeds 1 past half load; for a
    memory-bound decode batch whose step is ``a + b C`` it exceeds 1 once the KV reads
    ``b C`` outweigh the weight reads ``a``.

    Examples
    --------
    >>> knee_index([10, 20, 30, 38, 40], [1.0, 1.05, 1.2, 2.0, 6.0])
    2
    """
    x, y = np.asarray(throughput, float), np.asarray(latency, float)
    if x.shape != y.shape or x.ndim != 1:
        raise SpecError(f"throughput and latency must be 1-D and of one length, got {x.shape} and {y.shape}")
    for i in range(1, len(x)):
        rise = y[i] / y[i - 1] - 1.0 if y[i - 1] > 0 else math.inf
        gain = x[i] / x[i - 1] - 1.0 if x[i - 1] > 0 else math.inf
        if rise <= 0:
            continue
        if gain <= 0 or rise / gain > elasticity:
            return i - 1
    return None


@dataclass(frozen=True)
class LoadCurve:
    """Serving results over increasing load: the latency-throughput curve.

    Attributes
    ----------
    kind : {"rate", "concurrency"}
        Poisson arrival rates [request/s] or closed-loop clients.
    loads : array
        The load of each point, increasing.
    results : tuple of ServeResult
        One simulation per load.
    percentile : float
        Percentile of the curve's latencies, of the knee and of the SLO check.
    knee_metric : {"e2e", "ttft", "tpot"}
        Latency whose ``percentile`` defines the knee (:func:`knee_index`).
    knee_elasticity : float
        Threshold of :func:`knee_index`.
    ttft_slo_s, tpot_slo_s : float [s], optional
        Objectives for the goodput column (one alone: the other bounds nothing).
    """

    kind: Literal["rate", "concurrency"]
    loads: np.ndarray
    results: tuple[ServeResult, ...]
    percentile: float = 99.0
    knee_metric: str = "e2e"
    knee_elasticity: float = 1.0
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None

    @property
    def output_tokens_per_s(self) -> np.ndarray:
        """Generated tokens per second, all replicas, per point."""
        return np.array([r.output_tokens_per_s for r in self.results])

    @property
    def requests_per_s(self) -> np.ndarray:
        """Completed requests per second, per point."""
        return np.array([r.requests_per_s for r in self.results])

    @property
    def output_tokens_per_s_per_user(self) -> np.ndarray:
        """What one user's stream gets: ``1 / mean TPOT`` [token/s], per point."""
        return np.array([1.0 / _of_defined(user_latency(r, "tpot"), np.mean) for r in self.results])

    def latency(self, metric: str, q: float | None = None) -> np.ndarray:
        """Percentile ``q`` (default :attr:`percentile`) of ``ttft``, ``tpot`` or ``e2e`` [s], per point."""
        q = self.percentile if q is None else q
        return np.array([_of_defined(user_latency(r, metric), lambda x: np.percentile(x, q)) for r in self.results])

    @property
    def knee(self) -> int | None:
        """Index of the knee (:func:`knee_index` on throughput and the percentile of
        :attr:`knee_metric`); None when the sweep does not reach it."""
        return knee_index(self.output_tokens_per_s, self.latency(self.knee_metric), elasticity=self.knee_elasticity)

    @property
    def knee_load(self) -> float | None:
        """The load at the knee (rate or clients), or None."""
        k = self.knee
        return None if k is None else float(self.loads[k])

    def goodput(self) -> list[Goodput] | None:
        """:func:`goodput` of each point under the curve's SLOs (None without SLOs)."""
        if self.ttft_slo_s is None and self.tpot_slo_s is None:
            return None
        ttft, tpot = (math.inf if v is None else v for v in (self.ttft_slo_s, self.tpot_slo_s))
        return [goodput(r, ttft, tpot, self.percentile) for r in self.results]

    def rows(self) -> list[dict[str, Any]]:
        """One dict per point: load, throughput, per-user rate, latency percentiles [s], goodput, knee."""
        knee, good = self.knee, self.goodput()
        tok, req, user = self.output_tokens_per_s, self.requests_per_s, self.output_tokens_per_s_per_user
        lat = {(m, q): self.latency(m, q) for m in METRICS for q in (50, self.percentile)}
        out = []
        for i, r in enumerate(self.results):
            row: dict[str, Any] = {self.kind: self._load(self.loads[i]), "requests_per_s": float(req[i]),
                                   "output_tokens_per_s": float(tok[i]),
                                   "output_tokens_per_s_per_gpu": float(tok[i]) / r.num_gpus,
                                   "output_tokens_per_s_per_user": float(user[i])}
            for (m, q), v in lat.items():
                row[f"{m}_p{q:g}_s"] = float(v[i])
            if good is not None:
                row["goodput_requests_per_s"] = good[i].requests_per_s
                row["meets_slo"] = good[i].meets
            row["knee"] = i == knee
            out.append(row)
        return out

    def _load(self, load: Any) -> int | float:
        """A load as JSON writes it: clients are a count (an integer), a rate a float."""
        return int(load) if self.kind == "concurrency" else float(load)

    def to_dict(self) -> dict[str, Any]:
        """The curve, JSON-ready (seconds, tokens/s)."""
        first = self.results[0].to_dict()
        head = {k: first[k] for k in ("model", "hardware", "layout", "num_gpus", "precision", "engine")}
        return {**head, "kind": self.kind, "max_concurrency": self.results[0].max_concurrency,
                "percentile": self.percentile, "knee_metric": self.knee_metric,
                "knee_elasticity": self.knee_elasticity,
                "knee_load": None if self.knee_load is None else self._load(self.knee_load),
                **{k: None if v is None or math.isinf(v) else v  # (inf: bounds nothing, null in JSON)
                   for k, v in (("ttft_slo_s", self.ttft_slo_s), ("tpot_slo_s", self.tpot_slo_s))},
                "points": self.rows()}

    def __str__(self) -> str:
        p = f"P{self.percentile:g}"
        first = str(self.results[0]).splitlines()[0].rsplit(";", 1)[0]
        cap = self.results[0].workload.max_concurrency
        if cap is not None:
            first += f"; at most {cap} in flight" + (" a stream" if self.results[0].replicas != 1 else "")
        rows = self.rows()
        good = rows[0].get("goodput_requests_per_s") is not None
        headers = ["clients" if self.kind == "concurrency" else "req/s in", "req/s", "tok/s", "tok/s/GPU",
                   "tok/s/user", "TTFT P50", f"TTFT {p}", "TPOT P50", f"TPOT {p}", f"E2E {p}"]
        headers += ["goodput", "SLO"] if good else []
        table = []
        for row in rows:
            cells = [f"{row[self.kind]:g}", f"{row['requests_per_s']:.2f}", f"{row['output_tokens_per_s']:,.0f}",
                     f"{row['output_tokens_per_s_per_gpu']:,.0f}", _cell(row['output_tokens_per_s_per_user'], ".1f"),
                     _cell(row['ttft_p50_s'] * 1e3, ".1f"), _cell(row[f'ttft_p{self.percentile:g}_s'] * 1e3, ".1f"),
                     _cell(row['tpot_p50_s'] * 1e3, ".2f"), _cell(row[f'tpot_p{self.percentile:g}_s'] * 1e3, ".2f"),
                     _cell(row[f'e2e_p{self.percentile:g}_s'] * 1e3, ".0f")]
            if good:
                cells += [f"{row['goodput_requests_per_s']:.2f}", "ok" if row["meets_slo"] else "miss"]
            table.append(cells + (["<- knee"] if row["knee"] else [""]))
        if not any(row["knee"] for row in rows):  # no marker column without a knee to mark
            table = [cells[:-1] for cells in table]
        text = text_table([*headers, *(["knee"] if len(table[0]) > len(headers) else [])], table,
                          right=set(range(len(headers))))
        lines = [first, "latencies in ms", text]
        k = self.knee
        unit = "clients" if self.kind == "concurrency" else "req/s"
        served = self.requests_per_s
        if k is None and self.kind == "rate" and len(served) > 1 and _follows(self.loads[-2:], served[-2:]) < SATURATED:
            # the run ends with its queue still growing: latency rises with the run's length, not as a knee
            lines.append(f"no knee within the sweep, but the highest rate is past the replicas' capacity: "
                         f"{served[-1]:.3g} of {self.loads[-1]:g} req/s offered are served (the queue grows as long "
                         "as the run lasts); the capacity lies below it, where the served rate stops following")
        elif k is None:
            lines.append(f"no knee within the sweep: {p} {self.knee_metric} latency still grows slower than "
                         "throughput at the highest load; extend the sweep")
        else:
            at = "1 client" if unit == "clients" and self.loads[k] == 1 else f"{self.loads[k]:g} {unit}"
            lines.append(f"knee at {at}: past it {p} {self.knee_metric} latency grows faster than "
                         f"throughput (elasticity > {self.knee_elasticity:g})")
        return "\n".join(lines)

    def to_frame(self):
        """One row per load point (:meth:`rows`) as a pandas DataFrame."""
        from ..results.html import load_curve_frame

        return load_curve_frame(self)

    def _repr_html_(self) -> str:
        from ..results.html import load_curve_html

        return load_curve_html(self)

    def __repr__(self) -> str:
        from ..results.html import load_curve_repr

        return load_curve_repr(self)

    def plot(self, path: Any = None, **kwargs: Any) -> Any:
        """Latency percentiles against throughput, knee marked (needs matplotlib); see
        :func:`~.plot.plot_curve`."""
        from .plot import plot_curve

        return plot_curve(self, path, **kwargs)


def load_sweep(model: Any, hardware: Any, *, rates: Any = None, concurrencies: Any = None,
               percentile: float = 99.0, knee_metric: str = "e2e", knee_elasticity: float = 1.0,
               ttft_slo_s: float | None = None, tpot_slo_s: float | None = None, progress: bool | None = None,
               **serve_kwargs: Any) -> LoadCurve:
    """Serve the same workload at increasing load: the latency-throughput curve.

    Parameters
    ----------
    model, hardware
        As for :func:`inferlab.serve`.
    rates : sequence of float [request/s], optional
        Poisson arrival rates; or
    concurrencies : sequence of int, optional
        Closed-loop clients (exactly one of the two).
    percentile, knee_metric, knee_elasticity, ttft_slo_s, tpot_slo_s
        See :class:`LoadCurve`.
    progress : bool, optional
        Draw a progress bar on stderr (default: on a terminal, when the sweep takes over 1 s).
    **serve_kwargs
        Everything else :func:`inferlab.serve` takes (lengths, layout, engine, seed...).

    Returns
    -------
    LoadCurve

    Examples
    --------
    >>> curve = load_sweep("llama-3.1-8b", "h100-sxm", concurrencies=[1, 4], isl=512, osl=64, num_requests=16)
    >>> bool(curve.output_tokens_per_s[1] > curve.output_tokens_per_s[0])
    True
    """
    from .serve import serve

    reject_load_kwargs(serve_kwargs)
    if (rates is None) == (concurrencies is None):
        raise SpecError("load_sweep: give exactly one of rates (requests/s) or concurrencies (clients)")
    kind: Literal["rate", "concurrency"] = "rate" if rates is not None else "concurrency"
    given = np.atleast_1d(np.asarray(rates if rates is not None else concurrencies, float))
    loads = np.sort(given)  # a curve runs from the lightest load up, whatever order they came in
    name = option_name("rates" if kind == "rate" else "concurrency")
    if loads.size == 0 or not np.all(np.isfinite(loads) & (loads > 0)):
        raise SpecError(f"{name}: loads must be finite and above 0, got {given.tolist()}")
    if np.any(np.diff(loads) == 0):
        raise SpecError(f"{name}: a load is given twice ({loads[1:][np.diff(loads) == 0][0]:g}), got {given.tolist()}")
    if kind == "concurrency" and not np.all(loads == np.round(loads)):
        raise SpecError(f"load_sweep: concurrencies must be whole clients, got {loads.tolist()}")
    if knee_metric not in METRICS:
        raise SpecError(f"knee_metric {knee_metric!r} is not one of {', '.join(METRICS)}")
    check_percentile(percentile)
    if ttft_slo_s is not None or tpot_slo_s is not None:  # one given: the other bounds nothing
        ttft_slo_s, tpot_slo_s = (math.inf if v is None else v for v in (ttft_slo_s, tpot_slo_s))
        check_slo(ttft_slo_s, tpot_slo_s, percentile)
    results = []
    with Progress(len(loads), "load points", enabled=progress) as bar:
        for load in loads:
            load_kw = {"rate": float(load)} if kind == "rate" else {"concurrency": int(load)}
            results.append(serve(model, hardware, **load_kw, **serve_kwargs))
            bar.step(f"({kind} {load:g})")
    return LoadCurve(kind, loads, tuple(results), percentile=percentile, knee_metric=knee_metric,
                     knee_elasticity=knee_elasticity, ttft_slo_s=ttft_slo_s, tpot_slo_s=tpot_slo_s)


#: Elasticity of the served rate to the offered one between a sweep's two highest rates below
#: which the highest is past capacity (below capacity a run serves what is offered, elasticity
#: one, less its ramp-up and drain: 100 requests at 20 and 80 req/s, 1.2 s each, 0.67).
SATURATED = 0.5


def _follows(offered: np.ndarray, served: np.ndarray) -> float:
    """``d log served / d log offered`` between two points of a rate sweep."""
    return float(np.log(served[1] / served[0]) / np.log(offered[1] / offered[0]))


def _cell(value: float, spec: str) -> str:
    """A table cell: ``-`` for a number that does not exist (NaN)."""
    return "-" if np.isnan(value) else format(value, spec)


def _of_defined(values: Any, reduce: Any) -> float:
    """``reduce`` of the values that are not NaN; NaN, without numpy's empty-slice warning, when
    none is (the TPOT of one-token outputs)."""
    arr = np.asarray(values, float)
    arr = arr[~np.isnan(arr)]
    return float(reduce(arr)) if arr.size else float("nan")
