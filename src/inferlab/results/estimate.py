"""The result of :func:`inferlab.estimate`: metrics, memory, cost, per-op tables, diagnosis."""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pint

from ..core.cost import Cost
from ..core.memory import MemoryPlan
from ..core.phases import Deployment, StepResult, decode
from ..core.ops import BYTE_CATEGORIES
from ..units import Q
from .render import pretty, text_table


def _scalar(x: Any) -> Any:
    arr = np.asarray(x)
    return arr.item() if arr.size == 1 else arr


@dataclass(frozen=True)
class Estimate:
    """Predicted static-batch serving of one deployment; arrays when inputs were grids.

    Times are in seconds in the ``*_s`` fields and pint quantities in the properties.
    """

    deployment: Deployment
    engine: str
    batch_size: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    waves: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    total_s: np.ndarray
    memory: MemoryPlan
    cost: Cost
    prefill_step: StepResult
    wave_batch: np.ndarray
    speculative: Any = None
    prefix_cache: Any = None

    @cached_property
    def decode_step(self) -> StepResult:
        """The decode step at mid generation (context ``isl + osl // 2``), for tables and diagnosis.

        With speculative decoding this is the verify pass; :attr:`speculative_step` has all passes.
        """
        if self.speculative is not None:
            return self.speculative_step.verify
        return decode(self.deployment, self.wave_batch, self.isl + np.floor(self.osl / 2.0))

    @cached_property
    def speculative_step(self):
        """One speculative step at mid generation: draft passes and the verify pass (or None)."""
        if self.speculative is None:
            return None
        from ..techniques.speculative import speculative_decode

        return speculative_decode(self.deployment, self.wave_batch, self.isl + np.floor(self.osl / 2.0),
                                  self.speculative)

    # --- metrics --------------------------------------------------------------------
    @property
    def ttft(self) -> pint.Quantity:
        """Mean time to first token (the batch's prefill, plus waiting for earlier waves)."""
        return Q(_scalar(self.ttft_s), "s").to("ms")

    @property
    def tpot(self) -> pint.Quantity:
        """Mean time per output token after the first."""
        return Q(_scalar(self.tpot_s), "s").to("ms")

    @property
    def output_tokens_per_s(self) -> np.ndarray:
        """Generated tokens per second of the whole deployment (prefill time included)."""
        return self.batch_size * self.osl / self.total_s

    @property
    def throughput(self) -> dict[str, pint.Quantity]:
        """Output tokens/s per system, per GPU and per user (``1 / tpot``)."""
        per_user = np.where(self.tpot_s > 0, 1.0 / np.where(self.tpot_s > 0, self.tpot_s, 1.0), np.nan)
        return {
            "system": Q(_scalar(self.output_tokens_per_s), "tok/s"),
            "per_gpu": Q(_scalar(self.output_tokens_per_s / self.deployment.num_gpus), "tok/s"),
            "per_user": Q(_scalar(per_user), "tok/s"),
        }

    def tpot_at(self, context: Any) -> pint.Quantity:
        """Time of one decode step of this batch at ``context`` tokens (array-like)."""
        step = decode(self.deployment, self.wave_batch, np.asarray(context, float))
        return Q(_scalar(step.time_s), "s").to("ms")

    @property
    def e2e_latency(self) -> pint.Quantity:
        """Mean time from submission to last token of one request."""
        return Q(_scalar(self.ttft_s + (self.osl - 1.0) * self.tpot_s), "s")

    # --- tables ---------------------------------------------------------------------
    def op_table(self, phase: str = "decode", point: int = 0) -> list[dict[str, Any]]:
        """Per-op rows of the prefill or (mid-context) decode step at one grid point.

        With speculative decoding the decode table has the draft passes and the verify pass,
        each op named ``<pass>/<op>``, and shares of the whole speculative step.
        """
        if phase == "decode" and self.speculative is not None:
            spec = self.speculative_step
            total = float(np.ravel(np.broadcast_to(spec.time_s, np.shape(self.ttft_s)))[point])
            rows = []
            for name, result in spec.passes:
                for row in self._rows(result, point, total):
                    rows.append({**row, "op": f"{name}/{row['op']}"})
            return rows
        step = self.prefill_step if phase == "prefill" else self.decode_step
        return self._rows(step, point, float(np.ravel(step.time_s)[point]))

    def _rows(self, step: StepResult, point: int, total: float) -> list[dict[str, Any]]:
        rows = []
        for t in step.times:
            at = lambda x: float(np.ravel(np.broadcast_to(x, np.shape(step.time_s)))[point])
            parts = t.op.byte_parts()
            row = {
                "op": t.op.name, "group": t.op.group, "count": t.op.count, "kind": t.op.kind,
                "precision": t.op.precision if t.op.kind in ("gemm", "attention") else "-",
                "flops": at(t.op.flops) * t.op.count, "bytes": at(t.op.bytes) * t.op.count,
                **{f"{k}_bytes": at(parts[k]) * t.op.count for k in BYTE_CATEGORIES},
                "comm_bytes": at(t.op.comm_bytes) * t.op.count,
                "intensity": at(t.intensity), "bound": str(np.ravel(np.broadcast_to(t.bound, np.shape(step.time_s)))[point]),
                "time_s": at(t.total_s), "share": at(t.total_s) / total,
            }
            rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        """Plain floats (or lists for grids), seconds and tokens/s, JSON-ready."""
        def val(x: Any) -> Any:
            s = _scalar(x)
            return s.tolist() if isinstance(s, np.ndarray) else s

        dep = self.deployment
        return {
            "model": dep.model.id or dep.model.name, "hardware": dep.hardware.id, "tp": dep.tp,
            "pp": dep.parallel.pp, "ep": dep.parallel.ep, "dp": dep.parallel.dp,
            "attention_dp": dep.parallel.attention_dp, "num_gpus": dep.num_gpus, "precision": str(dep.precision), "engine": self.engine, "profile": dep.profile.name,
            "batch_size": val(self.batch_size), "isl": val(self.isl), "osl": val(self.osl), "waves": val(self.waves),
            "ttft_s": val(self.ttft_s), "tpot_s": val(self.tpot_s), "total_s": val(self.total_s),
            "output_tokens_per_s": val(self.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": val(self.output_tokens_per_s / dep.num_gpus),
            "output_tokens_per_s_per_user": val(np.where(self.tpot_s > 0, 1 / np.maximum(self.tpot_s, 1e-300), np.nan)),
            "memory": {"capacity_bytes": self.memory.capacity, "budget_bytes": self.memory.budget,
                       "weights_bytes": self.memory.weights, "reserve_bytes": self.memory.reserve,
                       "workspace_bytes": val(self.memory.workspace), "kv_bytes_per_token": self.memory.kv_per_token,
                       "kv_batch_bytes": val(self.memory.kv_batch), "max_sequences": val(self.memory.max_sequences)},
            "cost": {"usd_per_gpu_hour": self.cost.usd_per_gpu_hour, "utilization": self.cost.utilization,
                     "usd_per_million_input": val(self.cost.usd_per_million_input),
                     "usd_per_million_output": val(self.cost.usd_per_million_output),
                     "usd_per_request": val(self.cost.usd_per_request)},
        }

    def to_frame(self, phase: str | None = None):
        """A pandas DataFrame: the per-op table of ``phase``, or the metrics (one row per grid point)."""
        try:
            import pandas as pd
        except ImportError:  # pandas is the optional "frames" extra
            from ..errors import InferlabError

            raise InferlabError("to_frame() needs pandas: pip install 'inferlab[frames]'") from None
        if phase is not None:
            return pd.DataFrame(self.op_table(phase))
        d = self.to_dict()
        cols = ["batch_size", "isl", "osl", "waves", "ttft_s", "tpot_s", "output_tokens_per_s",
                "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user"]
        data = {c: np.ravel(np.broadcast_to(np.asarray(d[c], float), self.ttft_s.shape)) for c in cols}
        return pd.DataFrame(data)

    # --- presentation -----------------------------------------------------------------
    def summary_rows(self) -> list[list[str]]:
        """Key metrics as text rows, one per grid point."""
        rows = []
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))
        tput = self.output_tokens_per_s
        for j in range(int(np.prod(shape)) if shape else 1):
            rows.append([f"{flat(self.batch_size)[j]:.0f}", f"{flat(self.isl)[j]:.0f}", f"{flat(self.osl)[j]:.0f}",
                         f"{flat(self.ttft_s)[j] * 1e3:.1f}", f"{flat(self.tpot_s)[j] * 1e3:.2f}",
                         f"{flat(tput)[j]:.0f}", f"{flat(tput)[j] / self.deployment.num_gpus:.0f}",
                         f"{1 / flat(self.tpot_s)[j]:.1f}" if flat(self.tpot_s)[j] > 0 else "-",
                         f"{flat(self.memory.used)[j] / 1e9:.1f}", f"{flat(self.cost.usd_per_million_output)[j]:.3f}",
                         f"{flat(self.waves)[j]:.0f}"])
        return rows

    HEADERS = ["batch", "isl", "osl", "TTFT ms", "TPOT ms", "tok/s", "tok/s/GPU", "tok/s/user", "GB/GPU",
               "$/M out", "waves"]

    def __str__(self) -> str:
        dep = self.deployment
        head = (f"{dep.model.id or dep.model.name} on {dep.num_gpus}x {dep.hardware.id} ({dep.parallel}), {dep.precision}, "
                f"engine {self.engine}, profile {dep.profile.name}")
        return head + "\n" + text_table(self.HEADERS, self.summary_rows(), right=set(range(len(self.HEADERS))))

    def _repr_html_(self) -> str:
        body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in self.summary_rows())
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.HEADERS)
        return f"<table><caption>{html.escape(str(self).splitlines()[0])}</caption><tr>{head}</tr>{body}</table>"

    def explain(self, point: int = 0) -> str:
        """A plain-language diagnosis of one grid point: bounds, intensity vs ridge, costliest ops, levers."""
        from .explain import explain

        return explain(self, point)

    def __repr__(self) -> str:
        return f"<Estimate {str(self).splitlines()[0]}>"


def quantity_text(seconds: float) -> str:
    """``12.3 ms``-style text for a time in seconds."""
    return pretty(Q(seconds, "s"))
