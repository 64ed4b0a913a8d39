"""The result of :func:`inferlab.estimate`: metrics, memory, cost, per-op tables, diagnosis."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.cost import Cost
from ..core.memory import MemoryPlan
from ..core.ops import BYTE_CATEGORIES
from ..errors import SpecError
from ..inputs.record import inputs_dict
from ..results.render import pretty, significant, text_table, whole
from ..techniques.step import ResolvedDeployment, StepResult, decode
from ..units import Q
from .interval import interval_dict
from .table_notes import SHOWN_ROWS, estimate_tail
from ..results.record import array_record

if TYPE_CHECKING:
    import pint


def _scalar(x: Any) -> Any:
    arr = np.asarray(x)
    return arr.item() if arr.size == 1 else arr


def _plain(x: Any) -> Any:
    """A Python scalar, or nested lists for an array of more than one value."""
    s = _scalar(x)
    return s.tolist() if isinstance(s, np.ndarray) else s


def _nan_to_none(x: Any) -> Any:
    """NaN and infinities (numbers that do not exist) as None, through nested lists."""
    if isinstance(x, list):
        return [_nan_to_none(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


@array_record
@dataclass(frozen=True)
class Estimate:
    """Predicted static-batch serving of one deployment; arrays when inputs were grids.

    Times are in seconds in the ``*_s`` fields and pint quantities in the properties.
    """

    deployment: ResolvedDeployment
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
    #: Per grid point: whether it runs, and why not (``""`` where it does).
    feasible: np.ndarray = True  # type: ignore[assignment]
    reason: np.ndarray = ""  # type: ignore[assignment]
    #: ``isl + osl`` exceeds the model's trained length (accepted with ``allow_long_context``).
    long_context: bool = False
    #: The Deployment and Workload of an ``estimate(deployment, workload)`` call (None otherwise).
    inputs: Any = None
    #: Largest decode batch (one rank's, per micro-batch) run from a CUDA graph; larger run eagerly.
    graph_max_batch: float = float("inf")
    #: The engine's scheduler the memory was planned with (its window settings); None: its default.
    scheduler: Any = None
    #: Prefill iterations of at most this many tokens run in piecewise CUDA graphs (None: eagerly
    #: where the engine graphs decode only); ``prefill_graphed``: where the prefill step's chunks do.
    prefill_graph_tokens: int | None = None
    prefill_graphed: Any = False
    #: Tokens per iteration, the prompts' chunks (the engine's budget where none was given).
    max_num_tokens: int | None = None

    def first_feasible(self) -> int:
        """Index of the first grid point that runs (flat order)."""
        from .feasibility import first_feasible

        return first_feasible(self)

    def _point(self, point: int | None) -> int:
        from .feasibility import grid_point

        return grid_point(self, point)

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
        """Mean time per output token after the first; NaN where one output token leaves no decode
        step (``tpot_s`` holds 0 there, for the sums), as the table's '-' and the JSON's null."""
        return Q(_scalar(self._tpot_shown), "s").to("ms")

    @property
    def output_tokens_per_s(self) -> np.ndarray:
        """Generated tokens per second of the whole deployment (prefill time included)."""
        return self.batch_size * self.osl / self.total_s

    @property
    def throughput(self) -> dict[str, pint.Quantity]:
        """Output tokens/s per system, per GPU and per user (``1 / tpot``)."""
        per_user = self._per_user
        return {
            "system": Q(_scalar(self.output_tokens_per_s), "tok/s"),
            "per_gpu": Q(_scalar(self.output_tokens_per_s / self.deployment.num_gpus), "tok/s"),
            "per_user": Q(_scalar(per_user), "tok/s"),
        }

    def tpot_at(self, context: Any) -> pint.Quantity:
        """Time of one decode step of this batch at ``context`` tokens (array-like, broadcast
        against the estimate's batch sizes: a column ``[[c1], [c2]]`` gives a context x batch grid).

        Raises
        ------
        SpecError
            A context whose shape does not broadcast against the batch sizes'."""
        ctx = np.asarray(context, float)
        try:
            np.broadcast_shapes(ctx.shape, np.shape(self.wave_batch))
        except ValueError:
            raise SpecError(f"tpot_at: context of shape {ctx.shape} does not match this estimate's "
                            f"{np.size(self.wave_batch)} batch sizes (shape {np.shape(self.wave_batch)}); give one "
                            "context, one per batch size, or a column ([[1024], [4096]]) for a context x batch grid") from None
        step = decode(self.deployment, self.wave_batch, ctx)
        return Q(_scalar(step.time_s), "s").to("ms")

    @property
    def e2e_latency(self) -> pint.Quantity:
        """Mean time from submission to last token of one request."""
        return Q(_scalar(self.ttft_s + (self.osl - 1.0) * self.tpot_s), "s")

    def interval(self, level: float = 0.8):
        """TTFT, TPOT and throughput intervals at ``level`` (0.5, 0.8 or 0.9) from the validation
        residuals of static batches on this GPU family with this engine (a
        :class:`~inferlab.phases.interval.PredictionInterval`; wider for a GPU or engine with no
        calibration data, see :mod:`inferlab.calibration.error_band`).

        Raises
        ------
        InferlabError
            Another level, or a profile without an error-band table (``roofline``).
        """
        from .interval import prediction_interval

        return prediction_interval(self.deployment, self.engine, "static_batch", level, ttft_s=self.ttft_s,
                                   tpot_s=self._tpot_shown, output_tokens_per_s=self.output_tokens_per_s,
                                   tpot_floor_s=self._tpot_floor_s, ttft_floor_s=self._ttft_floor_s)

    @property
    def _ttft_floor_s(self) -> np.ndarray:
        """Least TTFT the prefill allows [s]: one prompt's share of the prefill step's matrix
        FLOPs at the dense tensor rate, or its share of the step's weight and KV reads."""
        from .interval import ttft_floor_s

        return ttft_floor_s(self.deployment, self.prefill_step.ops, self.wave_batch)

    @property
    def _tpot_floor_s(self) -> np.ndarray:
        """Least TPOT the decode step allows [s]: its weight and KV reads at the memory
        bandwidth, over the most tokens a step can give (k + 1 with speculation); 0 for a
        batch that runs in waves (its last, smaller wave reads less)."""
        from .interval import tpot_floor_s

        floor = tpot_floor_s(self.deployment, self.decode_step.ops, self.speculative)
        return np.where(np.asarray(self.waves) > 1, 0.0, floor)

    # --- tables ---------------------------------------------------------------------
    def op_table(self, phase: str = "decode", point: int | None = None) -> list[dict[str, Any]]:
        """Per-op rows of the prefill or (mid-context) decode step at one grid point (by
        default the first that runs).

        With speculative decoding the decode table has the draft passes and the verify pass,
        each op named ``<pass>/<op>``, and shares of the whole speculative step.
        """
        if phase not in ("prefill", "decode"):
            from ..errors import SpecError

            raise SpecError(f"phase must be 'prefill' or 'decode', got {phase!r:.40}")
        point = self._point(point)
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
        return op_rows(step, point, total)

    def to_dict(self) -> dict[str, Any]:
        """Plain floats (or lists for grids), seconds and tokens/s, JSON-ready; counts (batch,
        prompt and output tokens, waves, sequences) as integers where whole.

        A number that does not exist (the times and costs of a point that does not run, a
        cost without a price, the per-user rate of a one-token output) is None (JSON null).
        """
        shape = np.shape(self.ttft_s)
        val = lambda x: _nan_to_none(_plain(x))
        count = lambda x: whole(val(x))  # requests, tokens, waves: JSON integers
        dep = self.deployment
        return {
            "model": dep.model.id or dep.model.name, "hardware": dep.hardware.id, "tp": dep.tp,
            "pp": dep.parallel.pp, "ep": dep.parallel.ep, "dp": dep.parallel.dp,
            "attention_dp": dep.parallel.attention_dp, "attention_tp": dep.parallel.attention_tp,
            "num_gpus": dep.num_gpus, "precision": str(dep.precision),
            "formats": dep.precision.to_dict(), "precision_notes": list(dep.precision_notes),
            "notes": self.notes, "engine": self.engine, "profile": dep.profile.name, "long_context": self.long_context,
            "batch_size": count(self.batch_size), "isl": count(self.isl), "osl": count(self.osl),
            "feasible": _plain(np.broadcast_to(self.feasible, shape)),
            "reason": _plain(np.broadcast_to(np.asarray(self.reason, dtype=object), shape)),
            "waves": count(self.waves), "ttft_s": val(self.ttft_s), "tpot_s": val(self._tpot_shown),
            "total_s": val(self.total_s), "output_tokens_per_s": val(self.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": val(self.output_tokens_per_s / dep.num_gpus),
            "output_tokens_per_s_per_user": val(self._per_user),
            "memory": {"capacity_bytes": self.memory.capacity, "budget_bytes": val(self.memory.budget),
                       "kv_budget_bytes": val(self.memory.kv_budget), "kv_fraction": self.memory.kv_fraction,
                       "weights_bytes": self.memory.weights, "reserve_bytes": self.memory.reserve,
                       "workspace_bytes": val(self.memory.workspace), "kv_bytes_per_token": self.memory.kv_per_token,
                       "kv_batch_bytes": val(self.memory.kv_batch), "max_sequences": count(self.memory.max_sequences)},
            "cost": {"usd_per_gpu_hour": val(self.cost.usd_per_gpu_hour), "utilization": self.cost.utilization,
                     "usd_per_million_input": val(self.cost.usd_per_million_input),
                     "usd_per_million_output": val(self.cost.usd_per_million_output),
                     "usd_per_request": val(self.cost.usd_per_request)},
            "interval": interval_dict(self),
            **inputs_dict(self.inputs),
        }

    @property
    def _tpot_shown(self) -> np.ndarray:
        """TPOT [s], NaN where one output token leaves no decode step (0 inside, for the sums)."""
        t = self.tpot_s
        return t if not np.any(np.asarray(t) <= 0) else np.where(t > 0, t, np.nan)

    @property
    def _per_user(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.tpot_s > 0, 1.0 / np.where(self.tpot_s > 0, self.tpot_s, 1.0), np.nan)

    def to_frame(self, phase: str | None = None):
        """A pandas DataFrame: the per-op table of ``phase``, or the metrics (one row per grid
        point, with ``feasible`` and ``reason``; a point that does not run has ``<NA>`` metrics)."""
        try:
            import pandas as pd
        except ImportError:  # pandas is the optional "frames" extra
            from ..errors import InferlabError

            raise InferlabError("to_frame() needs pandas: pip install 'inferlab[frames]'") from None
        if phase is not None:
            return pd.DataFrame(self.op_table(phase))
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))
        data: dict[str, Any] = {c: flat(getattr(self, c)) for c in ("batch_size", "isl", "osl")}
        metrics = {"waves": self.waves, "ttft_s": self.ttft_s, "tpot_s": self._tpot_shown,
                   "output_tokens_per_s": self.output_tokens_per_s,
                   "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.deployment.num_gpus,
                   "output_tokens_per_s_per_user": self._per_user, "memory_per_gpu_bytes": self.memory.used,
                   "usd_per_million_output": self.cost.usd_per_million_output}
        ok = np.ravel(np.broadcast_to(self.feasible, shape))
        data.update({c: pd.array(np.where(ok, flat(v), np.nan), dtype="Float64") for c, v in metrics.items()})
        data["feasible"] = ok
        data["reason"] = np.ravel(np.broadcast_to(np.asarray(self.reason, dtype=object), shape))
        return pd.DataFrame(data)

    # --- presentation -----------------------------------------------------------------
    def summary_rows(self, limit: int | None = None) -> list[list[str]]:
        """Key metrics as text rows, one per grid point (the first ``limit``); ``-`` where a point does not run."""
        rows = []
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))
        tput, ok = flat(self.output_tokens_per_s), np.ravel(np.broadcast_to(self.feasible, shape))
        cols = [flat(x) for x in (self.batch_size, self.isl, self.osl, self.ttft_s, self.tpot_s, self.memory.used,
                                  self.cost.usd_per_million_output, self.waves)]
        b, i, o, ttft, tpot, used, usd, waves = cols
        for j in range(min(int(np.prod(shape)) if shape else 1, limit or math.inf)):
            head = [f"{b[j]:.0f}", f"{i[j]:.0f}", f"{o[j]:.0f}"]
            if not ok[j]:
                rows.append(head + ["-"] * (len(self.HEADERS) - 3))
                continue
            rows.append(head + [f"{ttft[j] * 1e3:.1f}", f"{tpot[j] * 1e3:.2f}" if tpot[j] > 0 else "-", significant(tput[j], 2),
                                significant(tput[j] / self.deployment.num_gpus, 2),
                                f"{1 / tpot[j]:.1f}" if tpot[j] > 0 else "-", f"{used[j] / 1e9:.1f}",
                                f"{usd[j]:.3f}" if np.isfinite(usd[j]) else "-", f"{waves[j]:.0f}"])
        return rows

    def infeasible_lines(self, limit: int | None = None) -> list[str]:
        """One line per grid point that does not run (the first ``limit``, then their count): its inputs and the reason."""
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x, float), shape))
        ok = np.ravel(np.broadcast_to(self.feasible, shape))
        reason = np.ravel(np.broadcast_to(np.asarray(self.reason, dtype=object), shape))
        b, i, o = flat(self.batch_size), flat(self.isl), flat(self.osl)
        out = np.flatnonzero(~ok)
        more = [f"... and {len(out) - limit:,} more points that do not run"] if limit and len(out) > limit else []
        return [f"batch {b[j]:.0f}, isl {i[j]:.0f}, osl {o[j]:.0f} does not run: {reason[j]}" for j in out[:limit]] + more

    HEADERS = ["batch", "isl", "osl", "TTFT ms", "TPOT ms", "tok/s", "tok/s/GPU", "tok/s/user", "GB/GPU",
               "$/M out", "waves"]

    @property
    def headers(self) -> list[str]:
        """:attr:`HEADERS`, per CPU or SoC where the hardware is one (not "per GPU")."""
        word = self.deployment.hardware.device_word
        return [h.replace("/GPU", f"/{word}") for h in self.HEADERS]

    def __str__(self) -> str:
        dep = self.deployment
        head = (f"{dep.model.id or dep.model.name} on {dep.num_gpus}x {dep.hardware.id} ({dep.parallel}), {dep.precision}, "
                f"engine {self.engine}, profile {dep.profile.name}")
        table = text_table(self.headers, self.summary_rows(SHOWN_ROWS), right=set(range(len(self.HEADERS))))
        return "\n".join([head, table, *estimate_tail(self)])

    @property
    def notes(self) -> list[str]:
        """What the table's numbers assume that the engine would not do as configured (a prompt
        past an unchunked budget, estimated in chunks), and a profile calibrated for another engine or GPU."""
        from .table_notes import idle_notes, wave_notes, whole_prompt_notes

        note = self.deployment.profile.note  # a calibration written for another engine or GPU
        return whole_prompt_notes(self) + idle_notes(self) + wave_notes(self) + ([note] if note else [])

    def _repr_html_(self) -> str:  # the text's table, its rows capped as the text's, its reasons and notes below
        from ..results.html import html_table

        return html_table(self.headers, self.summary_rows(SHOWN_ROWS), str(self).splitlines()[0], estimate_tail(self))

    def explain(self, point: int | None = None) -> str:
        """A plain-language diagnosis of one grid point (by default the first that runs):
        bounds, intensity vs ridge, costliest ops, levers."""
        from .explain import explain

        return explain(self, self._point(point))

    def __repr__(self) -> str:
        return f"<Estimate {str(self).splitlines()[0]}>"


def quantity_text(seconds: float) -> str:
    """``12.3 ms``-style text for a time in seconds."""
    return pretty(Q(seconds, "s"))


def op_rows(step: StepResult, point: int, total: float) -> list[dict[str, Any]]:
    """Per-op rows of ``step`` at grid point ``point``: FLOPs, bytes by category, intensity,
    bound, time and share of ``total`` (the keys of :meth:`Estimate.op_table`)."""
    rows = []
    for t in step.times:
        at = lambda x: float(np.ravel(np.broadcast_to(x, np.shape(step.time_s)))[point])
        parts = t.op.byte_parts()
        rows.append({
            "op": t.op.name, "group": t.op.group, "count": t.op.count, "kind": t.op.kind,
            "precision": t.op.precision if t.op.kind in ("gemm", "attention") else "-",
            "flops": at(t.op.flops) * t.op.count, "bytes": at(t.op.bytes) * t.op.count,
            **{f"{k}_bytes": at(parts[k]) * t.op.count for k in BYTE_CATEGORIES},
            "comm_bytes": at(t.op.comm_bytes) * t.op.count,
            "intensity": at(t.intensity), "bound": str(np.ravel(np.broadcast_to(t.bound, np.shape(step.time_s)))[point]),
            "time_s": at(t.total_s), "share": at(t.total_s) / total,
        })
    return rows
