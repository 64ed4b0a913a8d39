"""``inferlab.sweep``: evaluate a grid of deployments and workloads into one table.

Numeric axes (batch size, ISL, OSL) form an outer-product grid evaluated as numpy
broadcasts in chunks; discrete axes (model, hardware, TP, precision) are the few
combinations looped over. Points that cannot run are kept with ``feasible`` false and
the reason, so a table of a million points never stops at the first bad one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InferlabError
from .estimate import _positive, deployment, static_batch
from .results.render import text_table

COLUMNS = ("batch_size", "isl", "osl", "waves", "ttft_s", "tpot_s", "output_tokens_per_s",
           "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user", "memory_per_gpu_bytes",
           "usd_per_million_output")
LABELS = ("model", "hardware", "tp", "precision")


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


@dataclass(frozen=True)
class SweepResult:
    """Columns of equal length: labels (model, hardware, tp, precision), grid inputs,
    metrics (SI: seconds, tokens/s, bytes, USD), ``feasible`` and ``reason``."""

    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.columns["batch_size"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def to_frame(self):
        """The table as a pandas DataFrame (optional ``frames`` extra)."""
        try:
            import pandas as pd
        except ImportError:
            raise InferlabError("to_frame() needs pandas: pip install 'inferlab[frames]'") from None
        return pd.DataFrame(self.columns)

    def to_dict(self) -> dict[str, list]:
        """Columns as lists (JSON-ready; NaN for infeasible points)."""
        return {k: v.tolist() for k, v in self.columns.items()}

    def best(self, metric: str = "output_tokens_per_s_per_gpu") -> dict[str, Any]:
        """The feasible row with the highest ``metric``."""
        values = np.where(self.columns["feasible"], self.columns[metric], -np.inf)
        j = int(np.argmax(values))
        return {k: v[j].item() if hasattr(v[j], "item") else v[j] for k, v in self.columns.items()}

    def __str__(self, limit: int = 20) -> str:
        heads = ["model", "hardware", "tp", "precision", "batch", "isl", "osl", "TTFT ms", "TPOT ms", "tok/s/GPU", "ok"]
        rows = []
        c = self.columns
        for j in range(min(len(self), limit)):
            rows.append([str(c["model"][j]), str(c["hardware"][j]), str(c["tp"][j]), str(c["precision"][j]),
                         f"{c['batch_size'][j]:.0f}", f"{c['isl'][j]:.0f}", f"{c['osl'][j]:.0f}",
                         f"{c['ttft_s'][j] * 1e3:.1f}", f"{c['tpot_s'][j] * 1e3:.2f}",
                         f"{c['output_tokens_per_s_per_gpu'][j]:.0f}", "yes" if c["feasible"][j] else str(c["reason"][j])])
        more = f"\n... {len(self) - limit} more rows" if len(self) > limit else ""
        return text_table(heads, rows, right={4, 5, 6, 7, 8, 9}) + more


def sweep(model: Any, hardware: Any, *, tp: Any = 1, precision: Any = "bf16", batch_size: Any = 1,
          isl: Any = 1024, osl: Any = 128, engine: str = "generic", profile: Any = "default",
          gpu_memory_utilization: float = 0.9, kv_block_size: int = 16, max_num_tokens: int = 8192,
          price_per_gpu_hour: float | None = None, utilization: float = 1.0, waves: bool = False,
          chunk_size: int = 1 << 15) -> SweepResult:
    """Evaluate every combination of the given values.

    ``model``, ``hardware``, ``tp`` and ``precision`` may be lists (combined by outer
    product); ``batch_size``, ``isl`` and ``osl`` may be lists or arrays (outer-product
    grid). A point whose batch does not fit is infeasible unless ``waves`` is true.
    """
    b, i, o = (np.ravel(_positive(name, v)) for name, v in (("batch_size", batch_size), ("isl", isl), ("osl", osl)))
    grid = [g.ravel() for g in np.meshgrid(b, i, o, indexing="ij")]
    parts: list[dict[str, np.ndarray]] = []
    for m, hw, t, p in itertools.product(_as_list(model), _as_list(hardware), _as_list(tp), _as_list(precision)):
        parts.append(_one(m, hw, t, p, grid, engine=engine, profile=profile, chunk_size=chunk_size, waves=waves,
                          kw={"gpu_memory_utilization": gpu_memory_utilization, "kv_block_size": kv_block_size,
                              "max_num_tokens": max_num_tokens, "utilization": utilization},
                          price=price_per_gpu_hour))
    return SweepResult({k: np.concatenate([p[k] for p in parts]) for k in parts[0]})


def _one(model: Any, hardware: Any, tp: int, precision: Any, grid: list[np.ndarray], *, engine: str, profile: Any,
         chunk_size: int, waves: bool, kw: dict, price: float | None) -> dict[str, np.ndarray]:
    n = grid[0].size
    out = {c: np.full(n, np.nan) for c in COLUMNS}
    out["batch_size"], out["isl"], out["osl"] = grid
    reason = np.full(n, "", dtype=object)
    try:
        dep = deployment(model, hardware, tp=tp, precision=precision, engine=engine, profile=profile)
        unit_price = price if price is not None else (dep.hardware.price.si if dep.hardware.price else None)
        labels = (dep.model.id or dep.model.name, dep.hardware.id, dep.tp, str(dep.precision))
        for start in range(0, n, chunk_size):
            sl = slice(start, start + chunk_size)
            est = static_batch(dep, engine, grid[0][sl], grid[1][sl], grid[2][sl], price_per_gpu_hour=unit_price,
                               waves=True, **kw)
            _fill(out, sl, est)
        too_big = out["waves"] > 1
        if not waves:
            reason[too_big] = "KV cache does not fit (use waves=True to run in waves)"
    except InferlabError as exc:
        labels = (str(model), str(hardware), tp, str(precision))
        reason[:] = str(exc)
    for name, value in zip(LABELS, labels):
        out[name] = np.full(n, value, dtype=object)
    out["feasible"] = reason == ""
    out["reason"] = reason
    return out


def _fill(out: dict[str, np.ndarray], sl: slice, est: Any) -> None:
    tp = est.deployment.num_gpus
    tput = est.output_tokens_per_s
    out["waves"][sl] = est.waves
    out["ttft_s"][sl] = est.ttft_s
    out["tpot_s"][sl] = est.tpot_s
    out["output_tokens_per_s"][sl] = tput
    out["output_tokens_per_s_per_gpu"][sl] = tput / tp
    out["output_tokens_per_s_per_user"][sl] = np.where(est.tpot_s > 0, 1.0 / np.maximum(est.tpot_s, 1e-300), np.nan)
    out["memory_per_gpu_bytes"][sl] = est.memory.used
    out["usd_per_million_output"][sl] = est.cost.usd_per_million_output
