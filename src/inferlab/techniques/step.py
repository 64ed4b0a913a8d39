"""Phases of serving a static batch: prefill, decode steps over a growing context.

``ttft`` is the prefill of the prompt (the first token comes with it); each later token
costs one decode step at the current context; the decode time over ``osl - 1`` steps is
integrated with Gauss-Legendre quadrature over the context, not sampled at one point.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np

from ..calibration.profile import Profile
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from ..core.quantization import PrecisionConfig, gemm_kernel, matmul_precision
from .expert_parallel import apply_expert_parallel
from ..core.parallelism import Parallelism
from .pipeline import apply_pipeline, micro_batching
from .tensor_parallel import apply_tensor_parallel
from ..core.graph import Step, StepPrecision, build_graph
from ..core.interconnect import node_size
from ..core.ops import Op
from ..core.timing import OpTime, step_time, time_ops

#: Quadrature nodes for the decode integral: exact for polynomials up to degree 7. Decode
#: time is piecewise linear in the context (kinks where an op changes bound or a window
#: fills), so four nodes stay within a fraction of a percent of summing every step.
QUADRATURE_NODES, QUADRATURE_WEIGHTS = np.polynomial.legendre.leggauss(4)


@dataclass(frozen=True)
class ResolvedDeployment:
    """One model on GPUs of one kind, its names resolved into specs: parallel layout, formats
    and an efficiency profile (what the physics reads; :class:`inferlab.Deployment` is what
    a user writes, and :func:`inferlab.inputs.resolve.deployment` builds this from it).

    ``tp`` alone describes one tensor-parallel replica; ``parallel`` the full layout
    (pipeline, expert and data parallelism), its ``tp`` taking precedence.
    """

    model: ModelSpec
    hardware: HardwareSpec
    tp: int
    precision: PrecisionConfig
    profile: Profile
    attention: Literal["flash", "naive"] = "flash"
    cuda_graphs: bool = True
    parallel: Parallelism | None = None
    precision_notes: tuple[str, ...] = ()  # how the formats were chosen (checkpoint defaults, GPU limits)

    def __post_init__(self) -> None:
        if self.parallel is None:
            object.__setattr__(self, "parallel", Parallelism(tp=self.tp))
        elif self.parallel.tp != self.tp:
            object.__setattr__(self, "tp", self.parallel.tp)

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment (``tp x pp x dp``)."""
        return self.parallel.num_gpus

    @cached_property
    def step_precision(self) -> StepPrecision:
        """Tensor precision of GEMMs (routed experts apart), attention and the 16-bit head on this hardware
        (computed once per deployment: it keys the graph memo of every step)."""
        cfg, hw = self.precision, self.hardware
        gemm = matmul_precision(cfg.weights, cfg.activations, hw)
        expert_gemm = matmul_precision(cfg.experts, cfg.activations, hw)
        return StepPrecision(
            config=cfg,
            gemm=gemm,
            attention=matmul_precision(cfg.activations, cfg.kv_cache, hw),
            head=matmul_precision("bf16", "bf16", hw),
            kernel=gemm_kernel(cfg.weights, gemm),
            expert_gemm=expert_gemm,
            expert_kernel=gemm_kernel(cfg.experts, expert_gemm),
        )


@dataclass(frozen=True)
class StepResult:
    """Ops of one step on one GPU with their timing."""

    step: Step
    ops: tuple[Op, ...]
    times: tuple[OpTime, ...]
    time_s: np.ndarray


def run_step(dep: ResolvedDeployment, step: Step) -> StepResult:
    """Build one replica's step, apply the parallel techniques in a fixed order, time it.

    ``step.batch`` is the replica's batch. The ops and their times are those of one GPU
    in one pipeline stage for one micro-batch; ``time_s`` is the whole step's.
    """
    par = dep.parallel
    micro, stage_times = micro_batching(step, par)
    local = Step(micro.phase, micro.batch / par.attention_groups, micro.new_tokens, micro.context)
    ops = _sharded_graph(dep, local)
    times, stage = _timed(ops, dep, step.phase)
    return StepResult(step, ops, times, np.asarray(stage * stage_times, float))


#: Timings of memoized graphs, keyed by the identity of the graph, hardware and profile (each
#: entry holds them, so an id is not reused while its entry lives): a repeated step is timed once.
_TIMING_MEMO: OrderedDict[tuple, tuple[tuple, tuple[OpTime, ...], np.ndarray]] = OrderedDict()


def _timed(ops: tuple[Op, ...], dep: ResolvedDeployment, phase: str) -> tuple[tuple[OpTime, ...], np.ndarray]:
    """The ops' times and the step's time on ``dep``'s hardware and profile."""
    held = (ops, dep.hardware, dep.profile)
    key = (id(ops), id(dep.hardware), id(dep.profile), phase, dep.cuda_graphs)
    hit = _TIMING_MEMO.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], held)):
        _TIMING_MEMO.move_to_end(key)
        return hit[1], hit[2]
    times = time_ops(ops, dep.hardware, dep.profile, phase)
    stage = step_time(times, dep.profile, cuda_graphs=dep.cuda_graphs)
    if _GRAPH_MEMO_KEYS.get(id(ops)) is ops:  # a memoized graph: small, and likely to recur
        _TIMING_MEMO[key] = (held, times, stage)
        if len(_TIMING_MEMO) > _GRAPH_MEMO_SIZE:
            _TIMING_MEMO.popitem(last=False)
    return times, stage


#: Sharded graphs of recent small steps, keyed by everything they depend on (a planner times
#: the same graph on many GPUs); grids larger than this are built every time.
_GRAPH_MEMO: OrderedDict[tuple, tuple[ModelSpec, tuple[Op, ...]]] = OrderedDict()
_GRAPH_MEMO_SIZE = 1024
_GRAPH_MEMO_MAX_ELEMENTS = 4096
#: id -> graph of the graphs in the memo (which graphs may have their timing memoized).
_GRAPH_MEMO_KEYS: dict[int, tuple[Op, ...]] = {}


def _sharded_graph(dep: ResolvedDeployment, local: Step) -> tuple[Op, ...]:
    """The step's ops on one GPU: the graph with expert, tensor and pipeline parallelism applied."""
    arrays = [np.asarray(x) for x in (local.batch, local.new_tokens, local.context)]
    key = None
    if sum(a.size for a in arrays) <= _GRAPH_MEMO_MAX_ELEMENTS:
        par = dep.parallel
        key = (id(dep.model), dep.step_precision, dep.attention, par, local.phase,
               node_size(dep.hardware) if par.pp > 1 else 0,
               *((a.shape, a.dtype.str, a.tobytes()) for a in arrays))
        hit = _GRAPH_MEMO.get(key)
        if hit is not None and hit[0] is dep.model:
            _GRAPH_MEMO.move_to_end(key)
            return hit[1]
    ops = build_graph(dep.model, local, dep.step_precision, dep.attention)
    ops = apply_expert_parallel(ops, dep.model, dep.parallel)
    if not dep.parallel.attention_dp:
        ops = apply_tensor_parallel(ops, dep.parallel.tp)
    ops = apply_pipeline(ops, dep.parallel, dep.hardware, dep.model.hidden_size, local.tokens)
    if key is not None:
        replaced = _GRAPH_MEMO.get(key)  # another model object under a reused id
        if replaced is not None:
            _GRAPH_MEMO_KEYS.pop(id(replaced[1]), None)
        _GRAPH_MEMO[key] = (dep.model, ops)
        _GRAPH_MEMO_KEYS[id(ops)] = ops
        if len(_GRAPH_MEMO) > _GRAPH_MEMO_SIZE:
            _, (_, old) = _GRAPH_MEMO.popitem(last=False)  # least recently used
            _GRAPH_MEMO_KEYS.pop(id(old), None)
    return ops


def prefill(dep: ResolvedDeployment, batch: np.ndarray, isl: np.ndarray) -> StepResult:
    """The prefill of ``batch`` prompts of ``isl`` tokens, as one step."""
    return run_step(dep, Step.prefill(batch, isl))


def decode(dep: ResolvedDeployment, batch: np.ndarray, context: np.ndarray) -> StepResult:
    """One decode step of ``batch`` sequences at ``context`` tokens."""
    return run_step(dep, Step.decode(batch, context))


def mean_decode_step_s(dep: ResolvedDeployment, batch: np.ndarray, isl: np.ndarray, osl: np.ndarray) -> np.ndarray:
    """Mean decode-step time over contexts ``isl .. isl + osl - 2`` [s].

    Notes
    -----
    ``(1 / (b - a)) * integral_a^b t(L) dL`` with ``a = isl``, ``b = isl + osl - 1``, by
    8-point Gauss-Legendre on a trailing axis of the grid.
    """
    batch, isl, osl = (np.asarray(x, float) for x in (batch, isl, osl))
    a = isl[..., None]
    b = (isl + np.maximum(osl - 1.0, 0.0))[..., None]
    contexts = a + (b - a) * (QUADRATURE_NODES + 1.0) / 2.0
    step = decode(dep, batch[..., None], contexts)
    times = np.broadcast_to(step.time_s, np.broadcast_shapes(step.time_s.shape, contexts.shape))
    return np.asarray(times @ QUADRATURE_WEIGHTS / 2.0, float)
