"""Phases of serving a static batch: prefill, decode steps over a growing context.

``ttft`` is the prefill of the prompt (the first token comes with it); each later token
costs one decode step at the current context; the decode time over ``osl - 1`` steps is
integrated with Gauss-Legendre quadrature over the context, not sampled at one point.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Callable, Literal

import numpy as np

from ..calibration.profile import Profile
from ..core.graph import Step, StepPrecision, build_graph
from ..core.interconnect import node_size
from ..core.ops import Attention, Op
from ..core.parallelism import Parallelism
from ..core.quantization import PrecisionConfig, decode_attention_precision, gemm_kernel, matmul_precision
from ..core.timing import OpTime, broadcast_sum, step_time, step_total, time_op, time_ops
from ..memo import array_key
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec
from .expert_parallel import apply_expert_parallel
from .pipeline import apply_pipeline, micro_batching, pipeline_step_s
from .tensor_parallel import apply_tensor_parallel
from ..results.record import array_record

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
        proj_gemm = matmul_precision(cfg.attention, cfg.activations, hw)
        attention = matmul_precision(cfg.activations, cfg.kv_cache, hw)
        return StepPrecision(
            config=cfg,
            gemm=gemm,
            attention=attention,
            decode_attention=decode_attention_precision(attention, cfg.kv_cache, hw),
            head=matmul_precision("bf16", "bf16", hw),
            kernel=gemm_kernel(cfg.weights, gemm),
            expert_gemm=expert_gemm,
            expert_kernel=gemm_kernel(cfg.experts, expert_gemm),
            proj_gemm=proj_gemm,
            proj_kernel=gemm_kernel(cfg.attention, proj_gemm),
        )


@array_record
@dataclass(frozen=True)
class StepResult:
    """Ops of one step on one GPU with their timing."""

    step: Step
    ops: tuple[Op, ...]
    times: tuple[OpTime, ...]
    time_s: np.ndarray

    @property
    def kernels(self) -> float:
        """Kernels the step launches on one GPU of one stage."""
        return float(sum(op.count for op in self.ops))


def run_step(dep: ResolvedDeployment, step: Step) -> StepResult:
    """Build one replica's step, apply the parallel techniques in a fixed order, time it.

    ``step.batch`` is the replica's batch. The ops and their times are those of one GPU
    in one pipeline stage for one micro-batch; ``time_s`` is the whole step's.

    A large grid whose rows repeat (a sweep's prefill: the rows of one batch and prompt
    length differ only in the output length) is timed on its distinct rows and spread back
    (:func:`_spread_step`).
    """
    if (getattr(step.batch, "size", 1) >= _SPREAD_MIN_ROWS or getattr(step.new_tokens, "size", 1) >= _SPREAD_MIN_ROWS
            or getattr(step.context, "size", 1) >= _SPREAD_MIN_ROWS):
        spread = _spread_step(dep, step)
        if spread is not None:
            return spread
    return _run_step(dep, step)


#: Grids at least this large are searched for repeated rows (smaller ones are cheap anyway).
_SPREAD_MIN_ROWS = 4096
#: ... and timed on their distinct rows when runs of equal rows are this long on average.
_SPREAD_MIN_RUN = 4


def row_runs(columns: list[np.ndarray], min_run: int = _SPREAD_MIN_RUN) -> tuple[np.ndarray, np.ndarray] | None:
    """First row of each run of equal rows of ``columns`` (1-D, equal lengths) and each row's
    run, or None when the runs are shorter than ``min_run`` rows on average.

    At least two runs are returned (a single one is listed twice): a one-row evaluation
    adds a step's terms in another order (:func:`~inferlab.core.timing.broadcast_sum` sorts
    them by size), so it would not give the same last bit.
    """
    n = columns[0].size
    change = np.empty(n, bool)
    change[0] = True
    change[1:] = False
    for c in columns:
        change[1:] |= c[1:] != c[:-1]
    starts = np.flatnonzero(change)
    if starts.size * min_run > n:
        return None
    inverse = np.cumsum(change) - 1
    if starts.size == 1:
        starts = np.zeros(2, starts.dtype)
    return starts, inverse


def _spread_step(dep: ResolvedDeployment, step: Step) -> StepResult | None:
    """The step timed on the distinct rows of its grid, when its arrays share one shape
    (or are scalars) and its rows repeat in runs; else None.

    Every op's terms are elementwise in the rows and the step's arrays all have the grid's
    shape, so each row's time is the same arithmetic on the same numbers (its last bit
    included) whether timed with the others or with the distinct rows alone. The ops and
    their times over the whole grid (for tables and diagnosis) are built when first asked for.
    """
    arrays = [np.asarray(x) for x in (step.batch, step.new_tokens, step.context)]
    shaped = [a for a in arrays if a.ndim]
    if not shaped or any(a.shape != shaped[0].shape for a in shaped):
        return None
    shape = shaped[0].shape
    runs = row_runs([a.ravel() for a in shaped])
    if runs is None:
        return None
    starts, inverse = runs
    rows = Step(step.phase, *(a.ravel()[starts] if a.ndim else a for a in arrays))
    distinct = _run_step(dep, rows)
    time_s = distinct.time_s
    if np.shape(time_s) != starts.shape:
        return None
    return _SpreadStepResult(step, time_s[inverse].reshape(shape), dep, distinct.kernels)


class _SpreadStepResult:
    """A :class:`StepResult` whose ``time_s`` came from the grid's distinct rows; its ops and
    their times over the whole grid are built on first use."""

    def __init__(self, step: Step, time_s: np.ndarray, dep: ResolvedDeployment, kernels: float) -> None:
        # the kernels a step launches are its graph's, whatever the rows (StepResult.kernels)
        self.step, self.time_s, self._dep, self.kernels = step, time_s, dep, kernels

    @cached_property
    def _whole(self) -> StepResult:
        return _run_step(self._dep, self.step)

    @property
    def ops(self) -> tuple[Op, ...]:
        return self._whole.ops

    @property
    def times(self) -> tuple[OpTime, ...]:
        return self._whole.times


def _run_step(dep: ResolvedDeployment, step: Step) -> StepResult:
    par = dep.parallel
    micro, m = micro_batching(step, par)
    local, gather = busiest_rank(micro, par)
    ops = _sharded_graph(dep, local, gather)
    times, stage = _timed(ops, dep, step.phase)
    once = _once_per_crossing([t.total_s for t in times], ops, dep.profile) if par.pp > 1 else 0.0
    return StepResult(step, ops, times, pipeline_step_s(stage, once, m, step.phase, par))


def _once_per_crossing(totals: list, ops: tuple[Op, ...], profile: Profile) -> np.ndarray:
    """What a micro-batch pays once over all pipeline stages: the model-level ops and the host's step."""
    return broadcast_sum([t for t, op in zip(totals, ops) if op.group == "model"] + [profile.step_overhead_s])


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
    stage = step_time(times, dep.profile, cuda_graphs=dep.cuda_graphs, phase=phase)
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


def busiest_rank(micro: Step, par: Parallelism) -> tuple[Step, Any]:
    """The step of the GPU that sets the time, and the stage's tokens per token it holds.

    With attention DP the ``g`` ranks share the sequences, whole ones each: the busiest holds
    ``ceil(B / g)`` (a lone prompt is one rank's alone, not an eighth of it on each of eight, as
    the serving simulation has it), while the routed experts see the stage's ``B`` (``gather =
    B / ceil(B / g)``: ``g`` when the sequences divide evenly)."""
    g = par.attention_groups
    if g == 1:
        return micro, 1.0
    batch = np.asarray(micro.batch, float)
    rank = np.maximum(np.ceil(batch / g - 1e-9), 1.0)
    return Step(micro.phase, rank, micro.new_tokens, micro.context), batch / rank


def _sharded_graph(dep: ResolvedDeployment, local: Step, gather: Any = None) -> tuple[Op, ...]:
    """The step's ops on one GPU: the graph :func:`on_one_gpu`, then pipeline parallelism applied."""
    gather = float(dep.parallel.attention_groups) if gather is None else gather
    shape = array_key((local.batch, local.new_tokens, local.context, gather), _GRAPH_MEMO_MAX_ELEMENTS)
    key = None
    if shape is not None:
        par = dep.parallel
        key = (id(dep.model), dep.step_precision, dep.attention, par, local.phase,
               node_size(dep.hardware) if par.pp > 1 else 0, shape)
        hit = _GRAPH_MEMO.get(key)
        if hit is not None and hit[0] is dep.model:
            _GRAPH_MEMO.move_to_end(key)
            return hit[1]
    ops = on_one_gpu(build_graph(dep.model, local, dep.step_precision, dep.attention), dep.model, dep.parallel, gather)
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


def on_one_gpu(ops: tuple[Op, ...], model: ModelSpec, par: Parallelism, gather: Any) -> tuple[Op, ...]:
    """A stage's ops on one GPU: experts over EP (``gather``: :func:`busiest_rank`'s), then the rest
    over TP (under attention DP, over a rank's ``attention_tp`` GPUs: ``head_split``)."""
    return apply_tensor_parallel(apply_expert_parallel(ops, model, par, gather=gather), par.head_split)


def prefill(dep: ResolvedDeployment, batch: np.ndarray, isl: np.ndarray) -> StepResult:
    """The prefill of ``batch`` prompts of ``isl`` tokens, as one step."""
    return run_step(dep, Step.prefill(batch, isl))


def decode(dep: ResolvedDeployment, batch: np.ndarray, context: np.ndarray) -> StepResult:
    """One decode step of ``batch`` sequences at ``context`` tokens."""
    return run_step(dep, Step.decode(batch, context))


def beyond_graphs(dep: ResolvedDeployment, batch: Any, graph_max_batch: float) -> np.ndarray:
    """Where a decode step of ``batch`` sequences runs without a CUDA graph: CUDA graphs on, and
    a pipeline micro-batch on one attention-DP rank past the engine's largest graph."""
    par = dep.parallel
    per_graph = np.ceil(np.asarray(batch, float) / par.attention_groups / (par.micro_batches or par.pp))
    return (per_graph > graph_max_batch) & dep.cuda_graphs


def graph_limited_decode_s(dep: ResolvedDeployment, batch: Any, graph_max_batch: float,
                           step_s: Callable[[ResolvedDeployment], Any]) -> np.ndarray:
    """``step_s(dep)``, a decode time of ``batch`` sequences, where the step replays a CUDA graph,
    and ``step_s`` of the deployment without graphs (at least the host's issue time of its
    kernels) where it runs past the engine's largest graph (:func:`beyond_graphs`) [s]."""
    graphed = np.asarray(step_s(dep), float)
    beyond = beyond_graphs(dep, batch, graph_max_batch)
    if not np.any(beyond):
        return graphed
    return np.where(beyond, step_s(replace(dep, cuda_graphs=False)), graphed)


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
    time_s = decode_time_s(dep, batch[..., None], contexts)
    times = np.broadcast_to(time_s, np.broadcast_shapes(time_s.shape, contexts.shape))
    return np.asarray(times @ QUADRATURE_WEIGHTS / 2.0, float)


def decode_time_s(dep: ResolvedDeployment, batch: np.ndarray, context: np.ndarray) -> np.ndarray:
    """``decode(dep, batch, context).time_s``, the same bits, with the ops that do not read the
    context (all but attention) timed on the distinct batch sizes of a large grid.

    ``batch`` has the grid's shape with a trailing axis of one, ``context`` a trailing axis of
    quadrature nodes (as :func:`mean_decode_step_s` asks). Each op's terms keep their shape
    (the batch's, gathered back from the distinct ones), so the step adds them in the same order.
    """
    b, c = np.asarray(batch, float), np.asarray(context, float)
    if b.size < _SPREAD_MIN_ROWS:  # a small grid (one estimate's): nothing to gain
        return _run_step(dep, Step.decode(b, c)).time_s
    runs = row_runs([b.ravel()]) if b.ndim and b.shape[-1] == 1 else None
    if runs is None:
        return decode(dep, b, c).time_s
    starts, inverse = runs
    par = dep.parallel
    micro, m = micro_batching(Step.decode(b, c), par)
    whole = _sharded_graph(dep, *busiest_rank(micro, par))
    distinct = Step.decode(b.ravel()[starts][:, None], np.zeros(()))
    micro_d, _ = micro_batching(distinct, par)
    few = _sharded_graph(dep, *busiest_rank(micro_d, par))
    few_times, _ = _timed(few, dep, "decode")
    if len(few) != len(whole):
        return decode(dep, b, c).time_s
    totals = []
    for op, t in zip(whole, few_times):
        if isinstance(op, Attention):
            totals.append(time_op(op, dep.hardware, dep.profile, "decode").total_s)
            continue
        term = t.total_s
        if np.ndim(term) == 0:
            totals.append(term)
        elif np.shape(term) == (starts.size, 1):
            totals.append(term[inverse].reshape(b.shape))
        else:  # a term of another shape: time the whole grid
            return decode(dep, b, c).time_s
    stage = step_total(totals, sum(op.count for op in whole), dep.profile, cuda_graphs=dep.cuda_graphs)
    once = _once_per_crossing(totals, whole, dep.profile) if par.pp > 1 else 0.0
    return pipeline_step_s(stage, once, m, "decode", par)
