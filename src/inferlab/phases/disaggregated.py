"""``inferlab.estimate_disaggregated``: prefill and decode served by separate pools.

Composes two :class:`~inferlab.techniques.step.ResolvedDeployment` (one per pool, each timed by the
core) with the KV transfer of :mod:`inferlab.techniques.disaggregation`, and sizes the
pools: TTFT with the transfer, TPOT free of prefill interference, the P:D ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .. import checks
from ..calibration.profile import Profile
from ..core.graph import Step
from ..core.memory import MemoryPlan, plan_memory, require_weights_fit
from ..engines.scheduler import checked_graph_limit, decode_graph_limit, default_scheduler, memory_keywords, token_budget
from ..errors import CombinationError, InfeasibleError, SpecError
from ..inputs.record import inputs_dict
from ..inputs.resolve import MAX_BATCH, MAX_TOKENS, deployment, memory_options
from ..results.render import text_table
from ..specs.catalog import load_model
from ..specs.model import ModelSpec
from ..techniques.disaggregation import Disaggregation
from ..techniques.kv_transfer import KvTransfer, kv_transfer
from ..techniques.prefix_cache import PrefixCache, effective_cached_tokens
from ..techniques.step import (ResolvedDeployment, StepResult, chunked_prefill_s, decode, graph_limited_decode_s,
                               mean_decode_step_s, run_step)
from ..units import Q, to_si_array
from ..results.record import array_record


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
    them so that neither waits.
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
        """Time per output token after the first, on the decode pool (pint, ms)."""
        return Q(_scalar(self.tpot_s), "s").to("ms")

    @property
    def throughput(self):
        """Output tokens/s of the pools as given, per GPU of both pools, and per user (pint)."""
        with np.errstate(divide="ignore"):
            per_user = np.where(self.tpot_s > 0, 1.0 / self.tpot_s, np.nan)
        return {"system": Q(_scalar(self.output_tokens_per_s), "tok/s"),
                "per_gpu": Q(_scalar(self.output_tokens_per_s_per_gpu), "tok/s"),
                "per_user": Q(_scalar(per_user), "tok/s")}

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
        """``prefill`` or ``decode``: the pool that limits the given pools' request rate."""
        return np.where(self.prefill_requests_per_s < self.decode_requests_per_s, "prefill", "decode")

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

    @property
    def notes(self) -> list[str]:
        """What of the deployment the estimate did not use (the engine limits that only serving
        applies, a Deployment's ``max_num_seqs`` among them: the pools run the batches given)."""
        from ..engines.scheduler import unused_limits_notes

        return unused_limits_notes(self.inputs[0].engine.limits(), disaggregated=True) if self.inputs is not None \
            else []

    def to_dict(self) -> dict[str, Any]:
        """Plain floats (lists for grids), seconds and tokens/s."""
        val = lambda x: (lambda s: s.tolist() if isinstance(s, np.ndarray) else s)(_scalar(x))
        need = self.gpus_needed
        return {
            "model": self.prefill_deployment.model.id or self.prefill_deployment.model.name,
            "disaggregation": str(self.disaggregation), "num_gpus": self.num_gpus,
            "isl": val(self.isl), "osl": val(self.osl), "prefill_batch": val(self.prefill_batch),
            "decode_batch": val(self.decode_batch), "ttft_s": val(self.ttft_s), "prefill_s": val(self.prefill_s),
            "kv_transfer_s": val(self.transfer.time_s), "kv_transfer_exposed_s": val(self.transfer.exposed_s),
            "kv_transfer_bytes": val(self.transfer.bytes), "kv_link": self.transfer.link.name,
            "kv_link_bytes_per_s": self.transfer.bandwidth, "first_token_step_s": val(self.first_token_step_s),
            "tpot_s": val(self.tpot_s), "output_tokens_per_s": val(self.output_tokens_per_s),
            "output_tokens_per_s_per_gpu": val(self.output_tokens_per_s_per_gpu),
            "balanced_output_tokens_per_s_per_gpu": val(self.balanced_output_tokens_per_s_per_gpu),
            "pd_ratio": val(self.pd_ratio), "bottleneck": val(self.bottleneck),
            "request_rate": None if self.request_rate is None else val(self.request_rate),
            "gpus_needed": None if need is None else {k: val(v) for k, v in need.items()},
            "notes": self.notes,
            **inputs_dict(self.inputs),
        }

    HEADERS = ["P batch", "D batch", "isl", "osl", "TTFT ms", "prefill ms", "KV ms", "TPOT ms", "tok/s",
               "tok/s/GPU", "P:D", "bound"]

    def __str__(self) -> str:
        d, t = self.disaggregation, self.transfer
        head = (f"{self.prefill_deployment.model.id or self.prefill_deployment.model.name} disaggregated: prefill "
                f"{d.prefill}, decode {d.decode}, {self.prefill_deployment.precision}; KV over {t.link.name} at "
                f"{t.bandwidth / 1e9:.0f} GB/s, overlap {'on' if d.overlap else 'off'} (KV ms: exposed / total)")
        shape = np.shape(self.ttft_s)
        flat = lambda x: np.ravel(np.broadcast_to(np.asarray(x), shape))
        cols = [self.prefill_batch, self.decode_batch, self.isl, self.osl, self.ttft_s * 1e3, self.prefill_s * 1e3,
                t.exposed_s * 1e3, t.time_s * 1e3, self.tpot_s * 1e3, self.output_tokens_per_s,
                self.output_tokens_per_s_per_gpu, self.pd_ratio, self.bottleneck]
        c = [flat(col) for col in cols]
        rows = [[f"{c[0][j]:.0f}", f"{c[1][j]:.0f}", f"{c[2][j]:.0f}", f"{c[3][j]:.0f}", f"{c[4][j]:.1f}",
                 f"{c[5][j]:.1f}", f"{c[6][j]:.2f} / {c[7][j]:.2f}", f"{c[8][j]:.2f}", f"{c[9][j]:.0f}",
                 f"{c[10][j]:.0f}", f"{c[11][j]:.2f}", str(c[12][j])] for j in range(int(np.prod(shape)))]
        table = text_table(self.HEADERS, rows, right=set(range(len(self.HEADERS) - 1)))
        return "\n".join([head, table, *self.notes])

    def __repr__(self) -> str:
        return f"<DisaggEstimate {str(self).splitlines()[0]}>"


def _scalar(x: Any) -> Any:
    arr = np.asarray(x)
    return arr.item() if arr.size == 1 else arr


def _plan(dep: ResolvedDeployment, engine: str, batch: np.ndarray, context: np.ndarray, step_tokens: float, what: str,
          **kw: Any) -> MemoryPlan:
    """Memory of one pool's replica, held as its engine holds it; raises when its batch does not fit."""
    plan = plan_memory(dep.model, dep.hardware, dep.precision, tp=dep.tp, batch=batch, context=context,
                       **memory_keywords(default_scheduler(engine), step_tokens, 1), **kw)
    require_weights_fit(plan, dep.model, dep.hardware, dep.tp)
    if not np.all(plan.fits):
        largest = int(np.min(plan.max_sequences))
        need, free = float(np.max(plan.kv_batch)), float(np.min(plan.kv_budget))
        raise InfeasibleError(
            f"the {what} pool's batch of {int(np.max(batch))} sequences of {int(np.max(context))} tokens needs "
            f"{need / 1e9:.1f} GB of KV cache per GPU but {free / 1e9:.1f} GB is free after weights on "
            f"{dep.hardware.id} at tp={dep.tp}; the largest {what} batch that fits is {largest}",
            needed_bytes=need, available_bytes=free, suggestion={f"{what}_batch": largest})
    return plan


def pool_deployments(model: str | ModelSpec, disagg: Disaggregation | str, *, engine: str,
                     profile: str | Path | Profile, precision: Any) -> tuple[Disaggregation, ResolvedDeployment, ResolvedDeployment]:
    """The pools (parsed if given as text) and one replica's deployment of each; pools that
    name no precision, engine or profile take the ones given here."""
    d = disagg if isinstance(disagg, Disaggregation) else Disaggregation.parse(disagg)
    m = load_model(model) if isinstance(model, (str, Path)) else model

    def one(side: str, pool: Any) -> ResolvedDeployment:
        try:
            return deployment(m, pool.hardware, tp=int(pool.tp or 1), ep=pool.ep, attention_dp=pool.attention_dp,
                              precision=pool.precision if pool.precision is not None else precision,
                              engine=pool.engine or engine, profile=profile if pool.profile is None else pool.profile)
        except (SpecError, InfeasibleError) as exc:  # say which pool (other errors name their own subject)
            if type(exc) is SpecError:
                raise SpecError(f"{side} pool {pool}: {exc}") from None
            if type(exc) in (InfeasibleError, CombinationError):
                kind: type[InfeasibleError] = type(exc)  # type: ignore[assignment]
                raise kind(f"{side} pool {pool}: {exc}", needed_bytes=exc.needed_bytes,  # type: ignore[union-attr]
                           available_bytes=exc.available_bytes, suggestion=exc.suggestion) from None
            raise

    return d, one("prefill", d.prefill), one("decode", d.decode)


def estimate_disaggregated(model: str | ModelSpec, disagg: Disaggregation | str, *, isl: Any = 1024, osl: Any = 128,
                           prefill_batch: Any = 1, decode_batch: Any = 1, request_rate: Any = None,
                           engine: str = "generic", profile: str | Path | Profile = "default",
                           prefix_cache: PrefixCache | str | None = None, gpu_memory_utilization: float = 0.9,
                           kv_block_size: int = 16, max_num_tokens: int | None = None, precision: Any = None,
                           allow_long_context: bool = False, graph_max_batch: int | None = None) -> DisaggEstimate:
    """Predict serving with prefill and decode on separate pools.

    Parameters
    ----------
    model : str or ModelSpec
    disagg : Disaggregation or str
        Pools and link, or their text (:meth:`Disaggregation.parse`).
    isl, osl : int or array [token]
    prefill_batch : int or array [request]
        Prompts prefilled together on one prefill replica.
    decode_batch : int or array [request]
        Sequences decoded together on one decode replica.
    request_rate : float, str or array, optional [request/s]
        Arrival rate to size the pools for (:attr:`DisaggEstimate.gpus_needed`).
    engine, profile
        Defaults for pools that name neither.
    prefix_cache : PrefixCache or str, optional
        Cached prefixes shorten the prefill; the whole prompt's KV is still sent (the
        decode pool is assumed not to hold the prefix).
    gpu_memory_utilization, kv_block_size, max_num_tokens
        As in :func:`inferlab.estimate`; ``max_num_tokens`` chunks the prefill (default: the
        engine's on the prefill pool's GPU).
    graph_max_batch : int, optional
        The decode pool's largest decode batch run from a CUDA graph (default its engine's).
    allow_long_context : bool
        Accept ``isl + osl`` beyond the model's ``max_position_embeddings`` (RoPE scaling).

    Raises
    ------
    InfeasibleError
        A pool's weights or batch does not fit, or the link is impossible.
    """
    d, dep_p, dep_d = pool_deployments(model, disagg, engine=engine, profile=profile, precision=precision)
    bp, bd, i, o = checks.grid(
        prefill_batch=checks.count_array("prefill_batch", prefill_batch, maximum=MAX_BATCH, unit="request"),
        decode_batch=checks.count_array("decode_batch", decode_batch, maximum=MAX_BATCH, unit="request"),
        isl=checks.count_array("isl", isl, maximum=MAX_TOKENS, unit="token"),
        osl=checks.count_array("osl", osl, maximum=MAX_TOKENS, unit="token"))
    checks.context_within_model(dep_d.model, i, o, allow_long_context=allow_long_context)
    mem = memory_options(gpu_memory_utilization, kv_block_size, max_num_tokens)
    max_num_tokens = mem.pop("max_num_tokens")
    engine_p, engine_d = d.prefill.engine or engine, d.decode.engine or engine
    graph_max_batch = checked_graph_limit(graph_max_batch, dep_d.profile, engine_d)
    # a given budget holds for both pools, as serve()'s limits do; else each pool's engine's on its GPU
    budget_d = max_num_tokens or token_budget(engine_d, dep_d.hardware)
    if max_num_tokens is None:
        max_num_tokens = token_budget(engine_p, dep_p.hardware)
    # each pool's engine reserves activation memory for its whole token budget at start-up, as serve()'s pools
    plan_p = _plan(dep_p, engine_p, bp, i, float(max_num_tokens), "prefill", **mem)
    plan_d = _plan(dep_d, engine_d, bd, i + o, float(budget_d), "decode", **mem)
    cache = None if prefix_cache is None else PrefixCache.of(prefix_cache)
    cached = 0.0 if cache is None else effective_cached_tokens(i, cache, block_size=kv_block_size)
    pre = run_step(dep_p, Step.prefill(bp, i, cached))
    chunks = np.ceil(bp * (i - cached) / max_num_tokens)
    prefill_s = chunked_prefill_s(dep_p, pre, chunks)
    transfer = kv_transfer(d, dep_p, dep_d, bp, i, prefill_s)
    step_d = graph_limited_decode_s(dep_d, bd, decode_graph_limit(engine_d, dep_d.hardware, dep_d.parallel.tp,
                                                                  graph_max_batch),
                                    lambda d: mean_decode_step_s(d, bd, i, o))
    tpot = np.where(o > 1, step_d, 0.0)
    first = decode(dep_d, bd, i - 1.0).time_s if d.first_token == "decode" else np.zeros(np.shape(i))
    rate = None if request_rate is None else (
        to_si_array(Q(request_rate) if isinstance(request_rate, str) else request_rate, "request/second",
                    "request_rate"))
    if rate is not None and (np.any(rate <= 0) or not np.all(np.isfinite(rate))):
        raise SpecError(f"request_rate must be > 0 requests/s, got {request_rate!r}")
    return DisaggEstimate(d, dep_p, dep_d, i, o, bp, bd, pre, transfer, np.asarray(prefill_s, float),
                          np.asarray(first, float), np.asarray(tpot, float), plan_p, plan_d, rate)
