"""The plain settings of a :class:`~inferlab.inputs.deployment.Deployment`: its parallel layout,
and its engine with the scheduler limits set on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .. import checks
from ..engines.scheduler import MAX_SEQS, STATE_LIMITS, USER_LIMITS
from ..engines.scheduler import MAX_TOKENS as SCHEDULER_MAX_TOKENS
from ..engines.window_options import window_kinds, window_ratio
from ..errors import SpecError
from . import resolve as inputs
from .techniques import FROZEN

#: Scheduler limits a user sets (and a hybrid model's state pool, SGLang's); None: the engine's.
ENGINE_LIMITS = USER_LIMITS + STATE_LIMITS


class Layout(BaseModel):
    """How the GPUs split the model (:class:`~inferlab.techniques.parallelism.Parallelism`).

    Parameters
    ----------
    tp : int [GPU]
        Tensor-parallel GPUs per pipeline stage.
    pp : int [stage]
        Pipeline stages.
    ep : int [group]
        Expert-parallel groups within a stage (divides ``tp``).
    dp : int [replica]
        Data-parallel replicas.
    attention_dp : bool
        Attention data-parallel over a stage's GPUs.
    attention_tp : int [GPU]
        With ``attention_dp``, the GPUs each attention rank splits its heads over (1: one GPU a rank).
    expert_imbalance : float [1]
        Load of the busiest expert group over the mean.
    micro_batches : int, optional
        Pipeline micro-batches (None: ``pp``).
    """

    model_config = FROZEN
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    attention_dp: bool = False
    expert_imbalance: float = 1.0
    micro_batches: int | None = None
    attention_tp: int = 1

    @property
    def num_gpus(self) -> int:
        """``tp x pp x dp`` [GPU]."""
        return self.tp * self.pp * self.dp


class Engine(BaseModel):
    """The serving engine and the scheduler limits set on it (None: the engine's default).

    Parameters
    ----------
    name : str
        One of :data:`inferlab.inputs.resolve.ENGINES`.
    version : str, optional
        The engine release, as recorded (informational).
    max_num_seqs : int, optional [request]
    max_num_batched_tokens : int, optional [token]
        Tokens per step (a static batch's prefill chunk, ``max_num_tokens`` of estimate).
    max_prefill_tokens : int, optional [token]
        Prompt tokens after which a serving iteration starts no further prompt (SGLang's
        ``--max-prefill-tokens``; see :class:`~inferlab.engines.scheduler.SchedulerConfig`).
    chunked_prefill : bool, optional
    mixed_prefill : bool, optional
        The running requests decode in the iterations that prefill (False: SGLang's default).
    gpu_memory_utilization : float, optional [1]
    kv_block_size : int, optional [token]
    graph_max_batch : int, optional [request]
        Largest decode batch run from a CUDA graph; larger ones run eagerly (SGLang's
        ``--cuda-graph-max-bs``; 0: ``--disable-cuda-graph``).
    prefill_graph_tokens : int, optional [token]
        Iterations with prompt tokens of at most this many tokens run in piecewise CUDA graphs,
        without the host's eager floor (SGLang's ``--piecewise-cuda-graph-max-tokens``); None:
        eagerly where the engine graphs decode only.
    max_model_len : int, optional [token]
        Longest prompt plus output the engine accepts (``--max-model-len``, ``--context-length``).
    reserve_output : bool, optional
        Admit a request only when the KV of its whole output is free (TensorRT-LLM's
        ``GUARANTEED_NO_EVICT``, its default), or on its prompt, preempting when the cache
        fills (``MAX_UTILIZATION``; vLLM's and SGLang's way).
    overlap_host : bool, optional
        The host prepares the next iteration while the GPU runs this one (SGLang's and
        TensorRT-LLM's PyTorch runtime's overlap scheduler, on by default; vLLM's
        ``--async-scheduling``); see :class:`~inferlab.engines.scheduler.SchedulerConfig`.
    state_pool_ratio, state_pool_slots, state_slots, hybrid_overlap : optional
        A hybrid model's state pool of its own (SGLang's ``--mamba-full-memory-ratio``,
        ``--max-mamba-cache-size``, ``--mamba-scheduler-strategy``); see
        :class:`~inferlab.engines.scheduler.SchedulerConfig`.
    window_kv : list of str, optional
        The windowed attention kinds (``sliding``, ``chunked``) whose KV the engine frees beyond
        their window; empty: every layer keeps every token (SGLang's ``--disable-hybrid-swa-memory``,
        vLLM's ``--disable-hybrid-kv-cache-manager``).
    window_pool_ratio : float, optional [1]
        The windowed layers' pool of their own, in (0, 1] tokens for each of the full layers'
        (SGLang's ``--swa-full-tokens-ratio``); see :mod:`~inferlab.engines.window_options`.
    balance_timeout_iters : int, optional [iteration]
        Attention-DP context balancing (TensorRT-LLM's ``attention_dp_config``), 0 off; see
        :class:`~inferlab.engines.scheduler.SchedulerConfig`.
    """

    model_config = FROZEN
    name: str = "generic"
    version: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_prefill_tokens: int | None = None
    chunked_prefill: bool | None = None
    mixed_prefill: bool | None = None
    gpu_memory_utilization: float | None = None
    kv_block_size: int | None = None
    graph_max_batch: int | None = None
    prefill_graph_tokens: int | None = None
    max_model_len: int | None = None
    reserve_output: bool | None = None
    overlap_host: bool | None = None
    state_pool_ratio: float | None = None
    state_pool_slots: int | None = None
    state_slots: int | None = None
    hybrid_overlap: bool | None = None
    window_kv: tuple[str, ...] | None = None
    window_pool_ratio: float | None = None
    balance_timeout_iters: int | None = None

    def limits(self) -> dict[str, Any]:
        """The limits set, by :data:`ENGINE_LIMITS` name."""
        return {k: getattr(self, k) for k in ENGINE_LIMITS if getattr(self, k) is not None}


def engine_of(value: Any) -> Engine:
    """An :class:`Engine` from one, a name, or a mapping of its fields, each limit checked."""
    if isinstance(value, Engine):
        return value
    fields = dict(value) if isinstance(value, Mapping) else {"name": value}
    unknown = sorted(str(k) for k in set(fields) - set(Engine.model_fields))
    if unknown:
        raise SpecError(f"engine: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(Engine.model_fields)}")
    fields["name"] = inputs.engine_name(fields.get("name", "generic"))
    if fields.get("version") is not None:
        fields["version"] = str(fields["version"])
    for key in ENGINE_LIMITS:
        raw = fields.get(key)
        if raw is None:
            continue
        if key in ("chunked_prefill", "mixed_prefill", "reserve_output", "overlap_host", "hybrid_overlap"):
            fields[key] = checks.boolean(key, raw)
        elif key == "window_kv":
            fields[key] = window_kinds(raw, key)
        elif key == "window_pool_ratio":
            fields[key] = window_ratio(raw, key)
        elif key == "state_pool_ratio":
            fields[key] = checks.real(key, raw, minimum=0.0, include_minimum=False, maximum=1e3)
        elif key == "gpu_memory_utilization":
            fields[key] = checks.fraction(key, raw)
        elif key in ("graph_max_batch", "balance_timeout_iters"):
            what = {"graph_max_batch": "requests", "balance_timeout_iters": "iterations"}[key]
            fields[key] = checks.integer(key, raw, minimum=0, maximum=MAX_SEQS, what=what, whole_floats=True)
        elif key in ("max_model_len", "prefill_graph_tokens"):
            fields[key] = checks.integer(key, raw, maximum=SCHEDULER_MAX_TOKENS, what="tokens", whole_floats=True)
        else:
            fields[key] = checks.integer(key, raw, maximum=inputs.MAX_TOKENS, what="", whole_floats=True)
    return Engine(**fields)


def layout_fields(value: Any) -> dict[str, Any]:
    """The fields of a :class:`Layout` from one or a mapping (unknown fields refused), defaults filled in."""
    if isinstance(value, Layout):
        return value.model_dump()
    if not isinstance(value, Mapping):
        raise SpecError(f"layout must be a mapping of {', '.join(Layout.model_fields)}, got {value!r:.60}")
    unknown = sorted(str(k) for k in set(value) - set(Layout.model_fields))
    if unknown:
        raise SpecError(f"layout: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(Layout.model_fields)}")
    return {**Layout().model_dump(), **value}
