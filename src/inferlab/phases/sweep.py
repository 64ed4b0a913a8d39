"""``inferlab.sweep``: evaluate a grid of deployments and workloads into one table.

Numeric axes (batch size, ISL, OSL) form an outer-product grid evaluated as numpy
broadcasts in chunks; discrete axes (model, hardware, TP, precision) are the few
combinations looped over. Points that cannot run are kept with ``feasible`` false and
the reason, so a table of a million points never stops at the first bad one.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import checks
from ..cluster import check_client, map_units
from ..engines.scheduler import token_budget
from ..errors import InfeasibleError, InferlabError, SpecError, UnknownNameError
from ..inputs import resolve as inputs
from ..inputs.resolve import deployment
from ..results.render import text_table, whole
from .estimate import static_batch
from ..results.record import array_record

COLUMNS = ("batch_size", "isl", "osl", "waves", "ttft_s", "tpot_s", "output_tokens_per_s",
           "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user", "memory_per_gpu_bytes",
           "usd_per_million_output")
LABELS = ("model", "hardware", "tp", "precision")
#: Columns that count (requests, tokens, waves): whole numbers as integers in :meth:`SweepResult.to_dict` and ``best``.
COUNTS = ("batch_size", "isl", "osl", "waves")
#: Rows evaluated together: a decode grid of four quadrature nodes per row then stays within
#: a core's L2 cache (twice this was half as fast).
_BLOCK = 1 << 14
#: Peak memory of one point of a sweep [B]: its row of the table, which holds it all at the end;
#: the evaluation itself runs in blocks of :data:`_BLOCK` rows, a fixed few tens of MB.
#: Measured on 10^6-point grids with tracemalloc's peak and the growth of
#: ``resource.getrusage().ru_maxrss``, each divided by the points: 138-142 B where every point
#: runs (Llama-3.1-70B on 4x H100, fp8: 11 float64 columns, 4 label and 1 reason reference,
#: ``feasible``), 374-438 B for the README's eight configurations (batch x ISL), 544-580 B where
#: almost no point runs (each row keeps its own reason text, ~190 B).
BYTES_PER_POINT = 600
#: Which way each metric is better, for :meth:`SweepResult.best`: costs and latencies
#: down, throughputs up.
DIRECTIONS = {"ttft_s": "min", "tpot_s": "min", "waves": "min", "memory_per_gpu_bytes": "min",
              "usd_per_million_output": "min", "output_tokens_per_s": "max", "output_tokens_per_s_per_gpu": "max",
              "output_tokens_per_s_per_user": "max"}


def _as_list(x: Any) -> list[Any]:
    values = list(x) if isinstance(x, (list, tuple)) else [x]
    if not values:
        raise SpecError("an axis of the sweep is an empty list: give at least one value")
    return values


def _cell(v: Any, column: str = "") -> Any:
    v = v.item() if hasattr(v, "item") else v
    v = None if isinstance(v, float) and not np.isfinite(v) else v
    return whole(v) if column in COUNTS else v


@array_record
@dataclass(frozen=True)
class SweepResult:
    """Columns of equal length: labels (model, hardware, tp, precision), grid inputs,
    metrics (SI: seconds, tokens/s, bytes, USD), ``feasible`` and ``reason``.

    A point that cannot run keeps its row with ``feasible`` false and the reason; its
    metrics are NaN in the columns, null in :meth:`to_dict`, ``<NA>`` in :meth:`to_frame`
    and ``-`` in the text table.
    """

    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["batch_size"])

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.columns:
            raise UnknownNameError("sweep column", str(name), self.columns)
        return self.columns[name]

    def __iter__(self):
        """The column names, as a DataFrame iterates (``len()`` counts the rows, as there)."""
        return iter(self.columns)

    def __contains__(self, name: object) -> bool:
        return name in self.columns

    def to_frame(self):
        """The table as a pandas DataFrame (optional ``frames`` extra); metrics of points that
        do not run are missing (``<NA>``)."""
        try:
            import pandas as pd
        except ImportError:
            raise InferlabError("to_frame() needs pandas: pip install 'inferlab[frames]'") from None
        return pd.DataFrame({k: pd.array(v, dtype="Float64") if k in DIRECTIONS else v
                             for k, v in self.columns.items()})

    def _repr_html_(self) -> str:
        from ..results.html import sweep_html

        return sweep_html(self)

    def __repr__(self) -> str:
        from ..results.html import sweep_repr

        return sweep_repr(self)

    def to_dict(self) -> dict[str, list]:
        """Columns as lists, JSON-ready; None (null) for metrics that do not exist."""
        return {k: [_cell(x, k) for x in v] for k, v in self.columns.items()}

    def best(self, metric: str = "output_tokens_per_s_per_gpu", direction: str | None = None) -> dict[str, Any]:
        """The feasible row with the best ``metric``: the lowest cost, latency or memory, the
        highest throughput (:data:`DIRECTIONS`), or as ``direction`` (``"min"``/``"max"``) says.

        Raises
        ------
        UnknownNameError
            ``metric`` is not a metric column.
        InfeasibleError
            No feasible row has a value of ``metric``.
        """
        if not isinstance(metric, str) or metric not in DIRECTIONS:
            raise UnknownNameError("metric", str(metric), DIRECTIONS)
        direction = DIRECTIONS[metric] if direction is None else direction
        if direction not in ("min", "max"):
            raise SpecError(f"direction must be 'min' or 'max', got {direction!r:.40}")
        values = np.asarray(self.columns[metric], float)
        usable = self.columns["feasible"] & np.isfinite(values)
        if not np.any(usable):
            reasons = sorted({str(r) for r in self.columns["reason"] if r})[:2]
            why = f"; e.g. {' | '.join(reasons)}" if reasons else f" ({metric} is not known: is a price given?)"
            raise InfeasibleError(f"no feasible row of the sweep has a value of {metric}{why}")
        ranked = np.where(usable, values if direction == "min" else -values, np.inf)
        j = int(np.argmin(ranked))
        return {k: _cell(v[j], k) for k, v in self.columns.items()}

    def __str__(self, limit: int = 20) -> str:
        heads = ["model", "hardware", "tp", "precision", "batch", "isl", "osl", "TTFT ms", "TPOT ms", "tok/s/GPU", "ok"]
        rows = []
        c = self.columns
        num = lambda x, fmt: "-" if not np.isfinite(x) else fmt.format(x)
        for j in range(min(len(self), limit)):
            rows.append([str(c["model"][j]), str(c["hardware"][j]), str(c["tp"][j]), str(c["precision"][j]),
                         f"{c['batch_size'][j]:.0f}", f"{c['isl'][j]:.0f}", f"{c['osl'][j]:.0f}",
                         num(c["ttft_s"][j] * 1e3, "{:.1f}"), num(c["tpot_s"][j] * 1e3, "{:.2f}"),
                         num(c["output_tokens_per_s_per_gpu"][j], "{:.0f}"),
                         "yes" if c["feasible"][j] else str(c["reason"][j])])
        more = f"\n... {len(self) - limit} more rows" if len(self) > limit else ""
        return text_table(heads, rows, right={4, 5, 6, 7, 8, 9}) + more


def sweep(model: Any, hardware: Any, *, tp: Any = 1, precision: Any = None, batch_size: Any = 1,
          isl: Any = 1024, osl: Any = 128, engine: str = "generic", profile: Any = "default",
          gpu_memory_utilization: float | None = None, kv_block_size: int = 16, max_num_tokens: int | None = None,
          price_per_gpu_hour: float | None = None, utilization: float = 1.0, waves: bool = False,
          allow_long_context: bool = False, chunk_size: int = 1 << 15, client: Any = None) -> SweepResult:
    """Evaluate every combination of the given values.

    ``model``, ``hardware``, ``tp`` and ``precision`` may be lists (combined by outer
    product; a precision of None is each model's shipped checkpoint formats); ``batch_size``, ``isl`` and ``osl`` may be lists or arrays (outer-product
    grid). The arguments are checked as for :func:`inferlab.estimate`; bad input raises.
    A point that cannot run is kept with ``feasible`` false and its reason: its batch does
    not fit (unless ``waves``), its layout does not suit the model, or ``isl + osl`` is
    beyond the model's ``max_position_embeddings`` (unless ``allow_long_context``).

    ``client``, a ``dask.distributed.Client``, spreads the configurations (and the chunks of
    a large grid) over its workers (:mod:`inferlab.cluster`); the table is the same as here.
    A sweep whose table would take more than :data:`inferlab.checks.MAX_GRID_BYTES`
    (:data:`BYTES_PER_POINT` a point: about 7 million points) is refused before it runs.
    """
    b, i, o = (checks.count_array("batch_size", batch_size, maximum=inputs.MAX_BATCH, unit="request").ravel(),
               checks.count_array("isl", isl, maximum=inputs.MAX_TOKENS, unit="token").ravel(),
               checks.count_array("osl", osl, maximum=inputs.MAX_TOKENS, unit="token").ravel())
    combos = list(itertools.product(_as_list(model), _as_list(hardware), _as_list(tp), _as_list(precision)))
    points = b.size * i.size * o.size * len(combos)
    checks.within_memory("the sweep", points, BYTES_PER_POINT,
                         "shorten the batch_size, isl or osl axes, or split the sweep into several calls (one per "
                         "model or hardware, say) and keep each table; a Dask client does not help, as the table "
                         "is gathered here")
    grid = [g.ravel() for g in np.meshgrid(b, i, o, indexing="ij")]
    kw = {**inputs.memory_options(gpu_memory_utilization, kv_block_size, max_num_tokens),
          "utilization": checks.fraction("utilization", utilization)}
    options = {"engine": inputs.engine_name(engine), "profile": profile, "waves": checks.boolean("waves", waves),
               "long": checks.boolean("allow_long_context", allow_long_context),
               "chunk_size": checks.integer("chunk_size", chunk_size, maximum=checks.MAX_GRID_POINTS, what="points",
                                             whole_floats=True),
               "price": None if price_per_gpu_hour is None else checks.price("price_per_gpu_hour", price_per_gpu_hour)}
    if check_client(client) is not None:
        return _on_cluster(client, combos, (b, i, o), kw, options)
    return _joined([_one(m, hw, t, p, grid, kw=kw, **options) for m, hw, t, p in combos])


#: Most units one configuration's grid is split into on a cluster.
_UNITS_PER_CONFIGURATION = 64


def _on_cluster(client: Any, combos: list[tuple], axes: tuple[np.ndarray, ...], kw: dict,
                options: dict) -> SweepResult:
    """The sweep as units of whole chunks per configuration, evaluated on ``client``'s workers:
    each chunk is evaluated as it is here, and the pieces are joined in the same order. A unit
    carries the grid's axes and its rows, not the grid."""
    n, chunk = math.prod(a.size for a in axes), options["chunk_size"]
    rows = chunk * max(1, math.ceil(n / chunk / _UNITS_PER_CONFIGURATION))
    units = [(combo, start, min(start + rows, n)) for combo in combos for start in range(0, n, rows)]
    return _joined(map_units(functools.partial(_unit, axes=axes, kw=kw, options=options), units, client))


def _joined(parts: list[dict[str, np.ndarray]]) -> SweepResult:
    """The parts' columns as one table. Each part's column is let go once joined, and the
    joined columns are made read-only here, so that :class:`SweepResult` need not copy them:
    the peak is the table and one column, not two or three tables."""
    columns = {}
    for k in list(parts[0]):
        columns[k] = np.concatenate([p.pop(k) for p in parts]) if len(parts) > 1 else parts[0].pop(k)
        columns[k].flags.writeable = False
    return SweepResult(columns)


def _unit(unit: tuple, *, axes: tuple[np.ndarray, ...], kw: dict, options: dict) -> dict[str, np.ndarray]:
    """Rows ``start:stop`` of one configuration's grid (the rows of ``np.meshgrid(*axes, indexing="ij")``)."""
    (model, hardware, tp, precision), start, stop = unit
    index = np.unravel_index(np.arange(start, stop), tuple(a.size for a in axes))
    rows = [axis[k] for axis, k in zip(axes, index)]
    return _one(model, hardware, tp, precision, rows, kw=kw, **options)


def _blocks(start: int, stop: int) -> list[slice]:
    """Slices of at most :data:`_BLOCK` rows covering ``[start, stop)``.

    A last slice of one row joins the one before: a one-row evaluation adds a step's terms
    in another order (ties in :func:`~inferlab.core.timing.broadcast_sum`), so its last bit
    would depend on where the block ends; rows of a chunk that had company keep it.
    """
    edges = [*range(start, stop, _BLOCK), stop]
    if len(edges) > 2 and edges[-1] - edges[-2] == 1:
        del edges[-2]
    return [slice(a, b) for a, b in zip(edges, edges[1:])]


def _object_column(n: int, value: Any) -> np.ndarray:
    """``n`` references to ``value`` (``ndarray.fill`` is several times faster than ``np.full`` here)."""
    column = np.empty(n, dtype=object)
    column.fill(value)
    return column


def _one(model: Any, hardware: Any, tp: int, precision: Any, grid: list[np.ndarray], *, engine: str, profile: Any,
         chunk_size: int, waves: bool, long: bool, kw: dict, price: float | None) -> dict[str, np.ndarray]:
    n = grid[0].size
    out: dict[str, np.ndarray] = {c: np.full(n, np.nan) for c in COLUMNS}
    out["batch_size"], out["isl"], out["osl"] = grid
    reason = _object_column(n, "")
    try:
        dep = deployment(model, hardware, tp=tp, precision=precision, engine=engine, profile=profile)
    except InfeasibleError as exc:  # a layout the model cannot take: its rows say why
        labels = (str(model), str(hardware), tp, _precision_label(model, hardware, precision))
        reason[:] = str(exc)
    else:
        unit_price = inputs.unit_price(price, dep.hardware)
        if kw["max_num_tokens"] is None:  # the engine's on this GPU, as estimate() takes it
            kw = {**kw, "max_num_tokens": token_budget(engine, dep.hardware)}
        labels = (dep.model.id or dep.model.name, dep.hardware.id, dep.tp, str(dep.precision))
        for start in range(0, n, chunk_size):
            for sl in _blocks(start, min(start + chunk_size, n)):
                est = static_batch(dep, engine, grid[0][sl], grid[1][sl], grid[2][sl], price_per_gpu_hour=unit_price,
                                   waves=waves, **kw)
                _fill(out, sl, est)
                reason[sl] = est.reason
        _mark_long_context(dep.model, grid, out, reason, long)
    for name, value in zip(LABELS, labels):
        out[name] = _object_column(n, value)
    out["feasible"] = reason == ""
    out["reason"] = reason
    return out


def _mark_long_context(model: Any, grid: list[np.ndarray], out: dict[str, np.ndarray], reason: np.ndarray,
                       allowed: bool) -> None:
    """Rows beyond the model's trained length do not run unless long contexts are allowed."""
    limit = model.max_position_embeddings
    beyond = grid[1] + grid[2] > limit
    if allowed or not limit or not np.any(beyond):
        return
    from .feasibility import beyond_context_reason

    reason[beyond] = beyond_context_reason(model)
    for c in DIRECTIONS:
        out[c][beyond] = np.nan


def _fill(out: dict[str, np.ndarray], sl: slice, est: Any) -> None:
    tp = est.deployment.num_gpus
    tput = est.output_tokens_per_s
    out["waves"][sl] = est.waves
    out["ttft_s"][sl] = est.ttft_s
    out["tpot_s"][sl] = est._tpot_shown  # NaN where one output token leaves no decode step, as estimate shows it
    out["output_tokens_per_s"][sl] = tput
    out["output_tokens_per_s_per_gpu"][sl] = tput / tp
    with np.errstate(divide="ignore", invalid="ignore"):
        out["output_tokens_per_s_per_user"][sl] = np.where(est.tpot_s > 0, 1.0 / est.tpot_s, np.nan)
    out["memory_per_gpu_bytes"][sl] = np.where(est.feasible, est.memory.used, np.nan)
    out["usd_per_million_output"][sl] = est.cost.usd_per_million_output


def _precision_label(model: Any, hardware: Any, precision: Any) -> str:
    """The formats a refused layout would have run, as the rows that run print them (the
    checkpoint's on this GPU when none is given), else the value as given."""
    try:
        from ..specs.catalog import load_hardware, load_model
        from ..techniques.deployed_precision import resolve_precision

        m = model if not isinstance(model, str) else load_model(model)
        hw = hardware if not isinstance(hardware, str) else load_hardware(hardware)
        return str(resolve_precision(precision, m, hw).config)
    except InferlabError:
        return "checkpoint" if precision is None else str(precision)

