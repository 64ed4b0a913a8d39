"""The result of a disaggregated estimate: metrics of the pools, their memory and cost,
per-point feasibility, tables, a diagnosis and the error band."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..core.memory import MemoryPlan
from ..inputs.record import inputs_dict
from ..results.record import array_record
from ..results.render import text_table, whole
from ..techniques.disaggregation import Disaggregation
from ..techniques.kv_transfer import KvTransfer
from ..techniques.step import ResolvedDeployment, StepResult, decode
from ..units import Q
from .interval import interval_dict
from .result import _nan_to_none, _plain as _listed, _scalar


def _plain(x: Any) -> Any:
    """A float, or nested lists for a grid; a number that does not exist (NaN) as None."""
    return _nan_to_none(_listed(x))


@array_record
@dataclass(frozen=True)
class DisaggEstimate:
    """Predicted disaggregated serving; arrays when inputs were grids, times in seconds.

    Notes
    -----
    A prefill replica turns out ``prefill_batch`` requests every ``cycle = max(prefill,
    transfer)`` (compute and the link run concurrently, so the slower one paces it); a
    decode replica holds ``decode_batch`` requests for ``first step + (osl - 1) x tpot``.
    The pools as given serve ``min`` of the two request rates; the balanced ratio sizes
    them so that neither waits. A grid point whose batch does not fit its pool keeps its
    row with ``feasible`` false and the reason; its times are NaN.
    """

    disaggregation: Disaggregation
    prefill_deployment: ResolvedDeployment
    decode_deployment: ResolvedDeployment
    isl: np.ndarray
    osl: np.ndarray
    prefill_batch: np.ndarray
    decode_batch: np.ndarray
    prefill_step: StepResult
    transfer: KvTransfer
    prefill_s: np.ndarray
    first_token_step_s: np.ndarray
    tpot_s: np.ndarray
    prefill_memory: MemoryPlan
    decode_memory: MemoryPlan
    request_rate: np.ndarray | None = None
    #: The Deployment and Workload of an ``estimate(deployment, workload)`` call (None otherwise).
    inputs: Any = None
    #: Per grid point: whether both pools hold their batch, and why not (``""`` where they do).
    feasible: np.ndarray = True  # type: ignore[assignment]
    reason: np.ndarray = ""  # type: ignore[assignment]
    #: USD per GPU-hour of the prefill and the decode pool's GPU (NaN where none is known).
    usd_per_gpu_hour: tuple[float, float] = (float("nan"), float("nan"))
    #: The engines the prefill and decode pools run.
    engines: tuple[str, str] = ("generic", "generic")

    # --- metrics --------------------------------------------------------------------
    @property
    def batch_size(self) -> np.ndarray:
        """The decode batch (as :func:`inferlab.estimate` names it)."""
        return self.decode_batch

    @property
    def ttft_s(self) -> np.ndarray:
        """Prefill + exposed KV transfer + the decode step that emits the first token [s]."""
        return self.prefill_s + self.transfer.exposed_s + self.first_token_step_s

    @property
    def ttft(self):
        """Time to first token (pint, ms)."""
        return Q(_scalar(self.ttft_s), "s").to("ms")

    @property
    def tpot(self):
        """Time per output token after the first, on the decode pool (pint, ms); NaN where one
        output token leaves no decode step."""
        t = np.asarray(self.tpot_s, float)
        return Q(_scalar(np.where(t > 0, t, np.nan)), "s").to("ms")

    @property
    def _per_user(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.tpot_s > 0, 1.0 / np.where(self.tpot_s > 0, self.tpot_s, 1.0), np.nan)

    @property
    def throughput(self):
        """Output tokens/s of the pools as given, per GPU of both pools, and per user (pint)."""
        return {"system": Q(_scalar(self.output_tokens_per_s), "tok/s"),
                "per_gpu": Q(_scalar(self.output_tokens_per_s_per_gpu), "tok/s"),
                "per_user": Q(_scalar(self._per_user), "tok/s")}

    @property
    def num_gpus(self) -> int:
        return self.disaggregation.prefill.num_gpus + self.disaggregation.decode.num_gpus

    @cached_property
    def prefill_cycle_s(self) -> np.ndarray:
        """Time a prefill replica spends per batch: ``max(prefill, transfer)`` [s]."""
        return np.maximum(self.prefill_s, self.transfer.time_s)

    @cached_property
    def decode_s(self) -> np.ndarray:
        """Time a request occupies a decode slot: first step + ``(osl - 1) x tpot`` [s]."""
        return self.first_token_step_s + (self.osl - 1.0) * self.tpot_s

    @cached_property
    def decode_step(self) -> StepResult:
        """The decode pool's step at mid generation (context ``isl + osl // 2``), for diagnosis."""
        return decode(self.decode_deployment, self.decode_batch, self.isl + np.floor(self.osl / 2.0))

    @property
    def prefill_gpu_s_per_request(self) -> np.ndarray:
        """``tp_p x cycle / prefill_batch`` [GPU s]."""
        return self.disaggregation.prefill.tp * self.prefill_cycle_s / self.prefill_batch

    @property
    def decode_gpu_s_per_request(self) -> np.ndarray:
        """``tp_d x decode_s / decode_batch`` [GPU s]."""
        return self.disaggregation.decode.tp * self.decode_s / self.decode_batch

    @property
    def pd_ratio(self) -> np.ndarray:
        """Prefill GPUs per decode GPU that balance the pools [1]."""
        with np.errstate(divide="ignore"):
            return self.prefill_gpu_s_per_request / self.decode_gpu_s_per_request

    @property
    def prefill_requests_per_s(self) -> np.ndarray:
        return self.disaggregation.prefill.replicas * self.prefill_batch / self.prefill_cycle_s

    @property
    def decode_requests_per_s(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return self.disaggregation.decode.replicas * self.decode_batch / self.decode_s

    @property
    def bottleneck(self) -> np.ndarray:
        """``prefill`` or ``decode``: the pool that limits the given pools' request rate
        (``-`` where the point does not run)."""
        which = np.where(self.prefill_requests_per_s < self.decode_requests_per_s, "prefill", "decode")
        return np.where(np.broadcast_to(self.feasible, np.shape(which)), which, "-")

    @property
    def output_tokens_per_s(self) -> np.ndarray:
        """Output tokens per second of the pools as given [tok/s]."""
        return self.osl * np.minimum(self.prefill_requests_per_s, self.decode_requests_per_s)

    @property
    def output_tokens_per_s_per_gpu(self) -> np.ndarray:
        return self.output_tokens_per_s / self.num_gpus

    @property
    def balanced_output_tokens_per_s_per_gpu(self) -> np.ndarray:
        """Per GPU with the pools in the balanced ratio: ``osl / (prefill + decode GPU s)``."""
        return self.osl / (self.prefill_gpu_s_per_request + self.decode_gpu_s_per_request)

    @property
    def gpus_needed(self) -> dict[str, np.ndarray] | None:
        """Whole replicas each pool needs for ``request_rate`` [GPU], or None without a rate."""
        if self.request_rate is None:
            return None
        p, d = self.disaggregation.prefill, self.disaggregation.decode
        return {"prefill": np.ceil(self.request_rate * self.prefill_cycle_s / self.prefill_batch) * p.tp,
                "decode": np.ceil(self.request_rate * self.decode_s / self.decode_batch) * d.tp}

    # --- memory and cost ------------------------------------------------------------
    @property
    def memory(self) -> dict[str, MemoryPlan]:
        """One GPU's memory in each pool: ``{"prefill": plan, "decode": plan}``."""
        return {"prefill": self.prefill_memory, "decode": self.decode_memory}

    @property
    def usd_per_hour(self) -> float:
        """What the pools as given cost an hour at their GPUs' prices [USD/hour] (NaN without a price)."""
        (price_p, price_d), d = self.usd_per_gpu_hour, self.disaggregation
        return d.prefill.num_gpus * price_p + d.decode.num_gpus * price_d

    @property
    def usd_per_million_output(self) -> np.ndarray:
        """USD per million output tokens of the pools as given, fully loaded [USD/Mtok]."""
        return self.usd_per_hour / 3600.0 / self.output_tokens_per_s * 1e6

    @property
    def balanced_usd_per_million_output(self) -> np.ndarray:
        """USD per million output tokens with the pools in the balanced ratio [USD/Mtok]:
        each request's prefill and decode GPU-seconds at their pools' prices."""
        price_p, price_d = self.usd_per_gpu_hour
        usd = (price_p * self.prefill_gpu_s_per_request + price_d * self.decode_gpu_s_per_request) / 3600.0
        return usd / self.osl * 1e6

    @property
    def notes(self) -> list[str]:
        """What of the deployment the estimate did not use (the engine limits that only serving
        applies, a Deployment's ``max_num_seqs`` among them: the pools run the batches given)."""
        from ..engines.scheduler import unused_limits_notes

        return unused_limits_notes(self.inputs[0].engine.limits(), disaggregated=True) if self.inputs is not None \
            else []

    def interval(self, level: float = 0.8):
        """No interval, as for disaggregated serving: no validation case measures a split
        deployment, and the residuals of aggregated static batches would claim a confidence
        nothing supports (the KV transfer and the pools' balance are in none of them).

        Raises
        ------
        MissingBandError
            Always; ``explain()`` and ``to_dict()`` say so.
        """
        from ..calibration.error_band import MissingBandError

        raise MissingBandError("no error band for a disaggregated estimate: no validation case measures one, and the "
                               "residuals of aggregated static batches would understate its error")

    # --- tables ---------------------------------------------------------------------
    def op_table(self, phase: str = "decode", point: int | None = None) -> list[dict[str, Any]]:
        """Per-op rows, per GPU, of the prefill pool's step (with the KV transfer as a last row,
        its share that of the exposed part in TTFT) or the decode pool's step at mid generation,
        at one grid point (by default the first that runs); the keys of ``Estimate.op_table``."""
        from .result import op_rows

        if phase not in ("prefill", "decode"):
            from ..errors import SpecError

            raise SpecError(f"phase must be 'prefill' or 'decode', got {phase!r:.40}")
        point = self._point(point)
        step = self.prefill_step if phase == "prefill" else self.decode_step
        total = float(np.ravel(np.broadcast_to(step.time_s, np.shape(self.ttft_s)))[point])
        rows = op_rows(step, point, total)
        if phase == "prefill":
            rows.append(self.transfer.row(point, total))
        return rows

    def first_feasible(self) -> int:
        """Index of the first grid point that runs (flat order)."""
        from .feasibility import first_feasible

        return first_feasible(self)

    def _columns(self) -> dict[str, np.ndarray]:
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x), shape))
        return {name: flat(value) for name, value in (
            ("prefill_batch", self.prefill_batch), ("decode_batch", self.decode_batch), ("isl", self.isl),
            ("osl", self.osl), ("ttft_s", self.ttft_s), ("prefill_s", self.prefill_s),
            ("kv_transfer_exposed_s", self._runs(self.transfer.exposed_s)),
            ("kv_transfer_s", self._runs(self.transfer.time_s)),
            ("tpot_s", self.tpot_s), ("output_tokens_per_s", self.output_tokens_per_s),
            ("output_tokens_per_s_per_gpu", self.output_tokens_per_s_per_gpu), ("pd_ratio", self.pd_ratio),
            ("usd_per_million_output", self.usd_per_million_output), ("bottleneck", self.bottleneck),
            ("feasible", self.feasible), ("reason", np.asarray(self.reason, dtype=object)))}

    def _runs(self, x: Any) -> np.ndarray:
        """``x`` on the grid, NaN where the point does not run (as its times are)."""
        shape = np.shape(self.ttft_s)
        return np.where(np.broadcast_to(self.feasible, shape), np.broadcast_to(np.asarray(x, float), shape), np.nan)

    def to_dict(self) -> dict[str, Any]:
        """Plain floats (lists for grids), seconds and tokens/s; None (null) for a number that
        does not exist (a point that does not run, a cost without a price); counts (tokens,
        batches, sequences) as integers where whole."""
        val = _plain
        need = self.gpus_needed
        shape = np.shape(self.ttft_s)
        mem = lambda plan: {"capacity_bytes": plan.capacity, "weights_bytes": plan.weights,
                            "kv_budget_bytes": val(plan.kv_budget), "kv_batch_bytes": val(plan.kv_batch),
                            "max_sequences": whole(val(plan.max_sequences)), "used_bytes": val(plan.used)}
        return {
            "model": self.prefill_deployment.model.id or self.prefill_deployment.model.name,
            "disaggregation": str(self.disaggregation), "num_gpus": self.num_gpus,
            "engines": {"prefill": self.engines[0], "decode": self.engines[1]},
            "isl": whole(val(self.isl)), "osl": whole(val(self.osl)), "prefill_batch": whole(val(self.prefill_batch)),
            "decode_batch": whole(val(self.decode_batch)),
            "feasible": _plain(np.broadcast_to(self.feasible, shape)),
            "reason": _plain(np.broadcast_to(np.asarray(self.reason, dtype=object), shape)),
            "ttft_s": val(self.ttft_s), "prefill_s": val(self.prefill_s),
            "kv_transfer_s": val(self._runs(self.transfer.time_s)),
            "kv_transfer_exposed_s": val(self._runs(self.transfer.exposed_s)),
            "kv_transfer_bytes": val(self._runs(self.transfer.bytes)), "kv_link": self.transfer.link.name,
            "kv_link_bytes_per_s": self.transfer.bandwidth, "first_token_step_s": val(self.first_token_step_s),
            "tpot_s": val(self.tpot_s), "output_tokens_per_s": val(self.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": val(self.output_tokens_per_s_per_gpu),
            "balanced_output_tokens_per_s_per_gpu": val(self.balanced_output_tokens_per_s_per_gpu),
            "pd_ratio": val(self.pd_ratio), "bottleneck": val(self.bottleneck),
            "request_rate": None if self.request_rate is None else val(self.request_rate),
            "gpus_needed": None if need is None else {k: val(v) for k, v in need.items()},
            "memory": {"prefill": mem(self.prefill_memory), "decode": mem(self.decode_memory)},
            "cost": {"usd_per_gpu_hour": {"prefill": val(self.usd_per_gpu_hour[0]),
                                          "decode": val(self.usd_per_gpu_hour[1])},
                     "usd_per_hour": val(self.usd_per_hour),
                     "usd_per_million_output": val(self.usd_per_million_output),
                     "balanced_usd_per_million_output": val(self.balanced_usd_per_million_output)},
            "interval": interval_dict(self),
            "notes": self.notes,
            **inputs_dict(self.inputs),
        }

    def to_frame(self):
        """A pandas DataFrame, one row per grid point (``<NA>`` metrics where a point does not run)."""
        try:
            import pandas as pd
        except ImportError:  # pandas is the optional "frames" extra
            from ..errors import InferlabError

            raise InferlabError("to_frame() needs pandas: pip install 'inferlab[frames]'") from None
        cols = self._columns()
        return pd.DataFrame({k: pd.array(v.astype(float), dtype="Float64") if v.dtype.kind == "f" else v
                             for k, v in cols.items()})

    HEADERS = ["P batch", "D batch", "isl", "osl", "TTFT ms", "prefill ms", "KV ms", "TPOT ms", "tok/s",
               "tok/s/GPU", "$/M out", "P:D", "bound"]

    def summary_rows(self) -> list[list[str]]:
        """Key metrics as text rows, one per grid point; ``-`` where a point does not run."""
        c = self._columns()
        rows = []
        for j in range(len(c["isl"])):
            head = [f"{c['prefill_batch'][j]:.0f}", f"{c['decode_batch'][j]:.0f}", f"{c['isl'][j]:.0f}",
                    f"{c['osl'][j]:.0f}"]
            if not c["feasible"][j]:
                rows.append(head + ["-"] * (len(self.HEADERS) - len(head)))
                continue
            usd = c["usd_per_million_output"][j]
            rows.append(head + [f"{c['ttft_s'][j] * 1e3:.1f}", f"{c['prefill_s'][j] * 1e3:.1f}",
                                f"{c['kv_transfer_exposed_s'][j] * 1e3:.2f} / {c['kv_transfer_s'][j] * 1e3:.2f}",
                                f"{c['tpot_s'][j] * 1e3:.2f}", f"{c['output_tokens_per_s'][j]:.0f}",
                                f"{c['output_tokens_per_s_per_gpu'][j]:.0f}",
                                f"{usd:.3f}" if np.isfinite(usd) else "-", f"{c['pd_ratio'][j]:.2f}",
                                str(c["bottleneck"][j])])
        return rows

    def infeasible_lines(self) -> list[str]:
        """One line per grid point that does not run: its inputs and the reason."""
        c = self._columns()
        return [f"prefill batch {c['prefill_batch'][j]:.0f}, decode batch {c['decode_batch'][j]:.0f}, isl "
                f"{c['isl'][j]:.0f}, osl {c['osl'][j]:.0f} does not run: {c['reason'][j]}"
                for j in np.flatnonzero(~c["feasible"].astype(bool))]

    def _head(self) -> str:
        d, t = self.disaggregation, self.transfer
        return (f"{self.prefill_deployment.model.id or self.prefill_deployment.model.name} disaggregated: prefill "
                f"{d.prefill}, decode {d.decode}, {self.prefill_deployment.precision}; KV over {t.link.name} at "
                f"{t.bandwidth / 1e9:.0f} GB/s, overlap {'on' if d.overlap else 'off'} (KV ms: exposed / total)")

    def __str__(self) -> str:
        table = text_table(self.HEADERS, self.summary_rows(), right=set(range(len(self.HEADERS) - 1)))
        return "\n".join([self._head(), table, *self.infeasible_lines(), *self.notes])

    def _repr_html_(self) -> str:
        from ..results.html import html_table

        return html_table(self.HEADERS, self.summary_rows(), caption=self._head(),
                          notes=self.infeasible_lines() + self.notes)

    def __repr__(self) -> str:
        return f"<DisaggEstimate {self._head()}>"

    def explain(self, point: int | None = None) -> str:
        """A plain-language diagnosis of one grid point (by default the first that runs): what
        each part of TTFT is, what bounds each pool's step, which pool limits, memory, cost."""
        from .disaggregated_explain import explain_disaggregated

        return explain_disaggregated(self, self._point(point))

    def _point(self, point: int | None) -> int:
        from .feasibility import grid_point

        return grid_point(self, point)
