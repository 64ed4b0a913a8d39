"""Roofline timing of ops with an efficiency profile.

``time = max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory
efficiency), comm bytes / (link x efficiency) + latency) + kernel floor``, per op and
vectorized over the sweep grid. The label says which term set the time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..calibration.profile import GemmCurve, Profile
from ..specs.hardware import HardwareSpec
from .interconnect import all_gather_s, all_reduce_s, all_to_all_s, p2p_s
from .ops import Attention, Collective, Elementwise, Gemm, Op
from .quantization import achievable_flops_per_s, tensor_flops_per_s

BOUNDS = ("compute", "memory", "communication", "overhead")
#: Rows of one MMA tile on Hopper and Blackwell tensor cores (wgmma 64 per warpgroup, 128 per
#: CTA tile; tcgen05 128): up to it engines run small-M tactics in a step (:func:`in_step_terms`).
M_TILE = 128.0
#: Row granularity of a small-M tactic: the MMA's N side (multiples of 8 on Hopper and
#: Blackwell) where swap-AB puts the tokens.
SMALL_M_ROWS = 8.0
#: Widest launch, in tiles of rows, that :func:`in_step_terms` weighs splitting a GEMM into.
SPLIT_TILES = 8.0
#: Kernels whose fitted curves hold in a step at every M (the 16-bit library GEMMs).
SIXTEEN_BIT = ("bf16", "fp16")
#: The zero term of ops without compute, memory or link time (shared, never written to).
_ZERO = np.zeros(())
_ZERO.setflags(write=False)


@dataclass(frozen=True)
class OpTime:
    """Timing of one op, per repetition [s] (arrays over the grid)."""

    op: Op
    compute_s: np.ndarray
    memory_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    #: Compute time at the kernel's large-shape efficiency; below ``compute_s`` when a small
    #: GEMM cannot fill the tensor cores (then the time is latency, not arithmetic).
    saturated_compute_s: np.ndarray | None = None

    @property
    def time_s(self) -> np.ndarray:
        """Time of one repetition [s]."""
        t = np.maximum(self.compute_s, self.memory_s)
        if self.comm_s is not _ZERO:  # ops without a link term skip a pass over the grid
            t = np.maximum(t, self.comm_s)
        return t + self.overhead_s

    @property
    def total_s(self) -> np.ndarray:
        """Time of all repetitions in the step [s]."""
        return self.time_s * self.op.count

    @property
    def bound(self) -> np.ndarray:
        """``compute``, ``memory``, ``communication`` or ``overhead``: the largest term.

        A compute term that is large only because the shape is too small to fill the
        tensor cores (its saturated compute time is below the memory or link time) is
        reported as ``overhead``: more FLOP/s would not help, fewer launches would.
        """
        terms = np.stack(np.broadcast_arrays(self.compute_s, self.memory_s, self.comm_s, self.overhead_s))
        label = np.asarray(BOUNDS)[np.argmax(terms, axis=0)]
        if self.saturated_compute_s is not None:
            starved = self.saturated_compute_s < np.maximum(self.memory_s, self.comm_s)
            label = np.where((label == "compute") & starved, "overhead", label)
        return label

    @property
    def intensity(self) -> np.ndarray:
        """Arithmetic intensity [FLOP/B] (inf for an op that moves no bytes)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(self.op.flops, float) / np.asarray(self.op.bytes, float)


def roofline_seconds(flops, bytes_moved, peak_flops_per_s, bandwidth):
    """Speed-of-light time of an op [s]: ``max(flops / peak, bytes / bandwidth)``.

    Parameters
    ----------
    flops : array [FLOP]
    bytes_moved : array [B]
    peak_flops_per_s : float [FLOP/s]
        Peak already scaled by the compute efficiency.
    bandwidth : float [B/s]
        Bandwidth already scaled by the memory efficiency.

    Works on plain floats and on pint quantities alike (a swapped argument is then a
    dimension error).
    """
    return np.maximum(flops / peak_flops_per_s, bytes_moved / bandwidth)


def time_op(op: Op, hw: HardwareSpec, profile: Profile, phase: str, standalone: bool = False) -> OpTime:
    """Roofline time of one op on one GPU.

    ``standalone``: the op is timed as an isolated kernel (an op-level benchmark), paying
    its whole fixed cost rather than the share a fused step pays.
    """
    bw = hw.memory_bandwidth.si
    zero = _ZERO
    floor = np.asarray(profile.kernel_floor_s, float)
    if isinstance(op, Gemm):
        curve = profile.gemm.curve(op.kernel or op.precision, op.precision)
        # A grouped GEMM (routed experts, per-head MLA projections) launches the tiles of all
        # its weight matrices at once: rows are padded per matrix, but the SMs are occupied
        # by the output tiles of every matrix together.
        rows, outputs = np.maximum(op.rows_per_weight, 1e-9), op.n * op.weight_copies
        peak = tensor_flops_per_s(hw, op.precision)
        scale = m_half_scale(curve.fitted_ridge, hw, peak)
        if not standalone and (op.kernel or op.precision) not in SIXTEEN_BIT:
            compute, memory = in_step_terms(op, rows, peak, curve, profile, hw, scale)
        else:  # the op rows' kernel: its fitted curve
            compute = op.flops / (peak * fitted_fraction(curve, rows, outputs, hw, scale))
            memory = op.bytes / (bw * curve.bandwidth_fraction)
        reached = op.flops / achievable_flops_per_s(hw, op.precision)  # no faster than measured at best
        if not standalone and (op.kernel or "").endswith("_wo"):  # (the op rows' own kernel: as fitted)
            reached = np.maximum(reached, weight_only_bound_s(op, peak, profile, hw))
        if curve.best_fraction:  # no faster than the kernel's own rows at best
            reached = np.maximum(reached, op.flops / (peak * curve.best_fraction))
        compute = np.maximum(compute, reached)
        saturated = np.asarray(np.maximum(op.flops / (peak * curve.peak_fraction), reached), float)
        # A kernel timed on its own quantizes its input itself; inside a step an engine may
        # have fused that into the norm or activation before it.
        share = 1.0 if standalone else profile.gemm_fixed_fraction
        overhead = floor + curve.fixed_s * share if curve.fixed_s else floor
        return OpTime(op, np.asarray(compute, float), np.asarray(memory, float), zero, overhead, saturated)
    if isinstance(op, Attention):
        a = profile.attention
        rate = mla_decode_flops_per_s(hw, op.heads, op.new_tokens) if on_mla_tiles(op, hw) else \
            tensor_flops_per_s(hw, op.precision) * a.peak_fraction(phase)
        compute = np.maximum(op.flops / rate, op.flops / achievable_flops_per_s(hw, op.precision))
        memory = op.bytes / (bw * a.bandwidth_fraction(phase))
        overhead = floor + a.fixed_s + a.per_sequence_head_s * op.batch * op.sequence_heads
        return OpTime(op, np.asarray(compute, float), np.asarray(memory, float), zero, np.asarray(overhead, float))
    if isinstance(op, Collective):
        comm = _collective_s(op, hw, profile)
        return OpTime(op, zero, zero, np.asarray(comm, float), floor)
    if isinstance(op, Elementwise):
        memory = op.bytes / (bw * profile.elementwise_bandwidth_fraction)
        share = 1.0 if op.own_kernel else profile.elementwise_floor_fraction
        return OpTime(op, zero, np.asarray(memory, float), zero, floor * share)
    raise TypeError(f"no timing rule for {type(op).__name__}")


#: MLA's absorbed decode runs kernels of its own (FlashMLA, FlashInfer's and TensorRT-LLM's MLA
#: kernels), not a GQA decode kernel: every query head of a sequence multiplies the one cached
#: latent, the heads stacked as the rows of 64-row tensor-core tiles. FlashMLA reaches 580
#: TFLOPS of the H800's 989 dense BF16 when its tiles are full (deepseek-ai/FlashMLA README,
#: compute-bound configuration, 2025-02); fewer heads per GPU (16 under TP8 of DeepSeek-V3's
#: 128) fill a tile's rows in proportion. The GQA fits' decode peak share (a few percent, set by
#: kernels that process each query head on its own past a small group) does not apply; a part
#: without tensor-core tiles (a CPU) keeps it.
MLA_DECODE_PEAK_FRACTION = 580.0 / 989.0
MLA_HEAD_TILE = 64.0
#: The same share on the tensor-core generations whose MLA decode kernels reach less of their
#: doubled peak, by a marker in their architecture: datacenter Blackwell's CUTLASS MLA decode
#: moves at most 4,124 GB/s of a BF16 latent (256 sequences of 8,192 tokens, 128 heads: 242
#: FLOP a byte, 998 TFLOPS) of the B200's 2,250 dense BF16 (sglang PR #6929, 2025-06);
#: TensorRT-LLM's own kernel 851 TFLOPS at 128 x 2,048 on a GB200 (2,500). Blackwell Ultra
#: doubled the exponent units, which MLA's 576-wide dot products do not wait on. Rubin, whose
#: MLA kernels are not published, takes the latest measured generation's share, not Hopper's.
MLA_DECODE_PEAK_FRACTION_BY_ARCH = {"sm_100": 998.0 / 2250.0, "sm_103": 998.0 / 2250.0, "Rubin": 998.0 / 2250.0}


def on_mla_tiles(op: Attention, hw: HardwareSpec) -> bool:
    """Whether ``op`` runs at MLA's absorbed-decode rate: a latent attention on a part with
    tensor-core tiles (elsewhere it keeps the profile's attention share)."""
    return bool(op.latent and hw.tiled_matrix_units)


def mla_tile_fill(heads: Any, new_tokens: Any = 1.0) -> Any:
    """Share of a 64-row tile MLA's query rows (``heads`` x ``new_tokens`` per sequence) fill."""
    return np.minimum(np.multiply(heads, new_tokens) / MLA_HEAD_TILE, 1.0)


def mla_decode_flops_per_s(hw: HardwareSpec, heads: Any, new_tokens: Any = 1.0) -> Any:
    """Rate of MLA's absorbed decode attention with ``heads`` query heads on a GPU and
    ``new_tokens`` per sequence [FLOP/s]: BF16 tensor peak (its kernels compute in BF16 over an
    FP8 or BF16 latent) x the share its kernels reach on the GPU's tensor-core generation
    (:data:`MLA_DECODE_PEAK_FRACTION_BY_ARCH`, else :data:`MLA_DECODE_PEAK_FRACTION`) x
    :func:`mla_tile_fill`."""
    share = next((f for mark, f in MLA_DECODE_PEAK_FRACTION_BY_ARCH.items() if mark in hw.architecture),
                 MLA_DECODE_PEAK_FRACTION)
    return tensor_flops_per_s(hw, "bf16") * share * mla_tile_fill(heads, new_tokens)


def in_step_terms(op: Gemm, rows: np.ndarray, peak: float, curve: GemmCurve, profile: Profile,
                  hw: HardwareSpec, m_half_scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Compute and memory time [s] of a scaled or weight-only GEMM inside an engine's step.

    Standalone scaled-format and weight-only kernels in the op-level benchmarks run without
    split-K at a few rows (NVFP4 rows on the B200 reach 5-25% of the memory roofline at M <= 16,
    where BF16 reaches 40-80%); the fit turns that into large ``m_half``/``n_half`` and a low
    bandwidth share. Engines run other tactics there (TensorRT-LLM's autotuner, vLLM's per-M
    CUTLASS configurations and Marlin-style weight-only kernels): swap-AB puts the tokens on
    the MMA's N side, padded to :data:`SMALL_M_ROWS` rows rather than a 64-128-row tile, and
    split-K spreads narrow outputs over every SM. So up to one tile of rows the compute is the
    shape padded to that granularity at the format's own peak share; above it the large-tile
    kernel the op rows measured takes over as ``(M_TILE / rows)^2``. At any M the weights
    stream at the better of the format's and the 16-bit kernel's share of bandwidth (DRAM moves
    the same 128-byte lines whatever the element width; a fitted share below it is the fit
    spending the standalone kernel's quantization and launch on the memory term: vLLM's
    block-scaled FP8 on the B200, 11%, had made a B200 prefill slower than an H200's). A
    memory-bound step with narrower weights then moves fewer bytes at the same share and is
    never slower; op-level (standalone) timing keeps the fitted curve, and BF16 kernels keep
    theirs (cuBLAS's small-M tactics are what the op rows measured).

    The rows of a GEMM are independent, so an engine could always run them as ``j`` launches of
    equal shares, each reading the weights again: a launch is never slower per row than full
    tiles of rows (``rows / M_TILE`` launches, counted as a fraction so that the time stays
    smooth in the rows), nor than 2, 4, 8... launches of one to :data:`SPLIT_TILES` tiles each,
    so doubling the rows never more than doubles the time. That bounds the large-tile curve
    where its fitted ``m_half`` (fitted where streaming the weights dominates, on the H100,
    B200, L40S and A100) outweighs a tile of rows on a GPU with less compute per byte (an H20
    at FP8: 256 rows had cost 3.2x 128; an A100 PCIe with a weight-only kernel).
    """
    outputs = op.n * op.weight_copies
    flops_per_row = op.flops / rows
    parts = op.byte_parts()
    sixteen = profile.gemm.kernels.get("bf16") or profile.gemm.kernels.get("default") or curve
    rate = hw.memory_bandwidth.si * max(curve.bandwidth_fraction, sixteen.bandwidth_fraction)
    per_row_bytes = (parts["act_read"] + parts["act_write"]) / rows
    small_rate = peak * curve.peak_fraction  # the small-M tactic: padded rows at the format's own share
    pad = SMALL_M_ROWS if hw.tiled_matrix_units else 0.0  # without tensor-core tiles (a CPU) no MMA to fill

    def launch(r, widest):  # compute and memory time of one launch of r rows (at most widest)
        small = flops_per_row * np.maximum(r, pad) / small_rate
        memory = (parts["weight_read"] + per_row_bytes * r) / rate
        if widest <= M_TILE:
            return small, memory
        w = np.minimum(1.0, (M_TILE / r) ** 2)
        large = flops_per_row * r / (peak * fitted_fraction(curve, r, outputs, hw, m_half_scale))
        return (1.0 - w) * large + w * small, memory

    finite = np.asarray(rows)[np.isfinite(rows)]
    widest, narrowest = (float(finite.max()), float(finite.min())) if finite.size else (0.0, 0.0)
    compute, memory = launch(rows, widest)
    if widest <= M_TILE:  # (non-finite rows come out non-finite, as the fitted curve gives them)
        return compute, memory
    # full tiles, and halves, quarters... into launches of 1-8 tiles each (past 8 tiles the
    # blend is the fitted curve, whose m_half already makes it subadditive); each row's own
    # candidates only, whatever else the grid holds
    split = rows / M_TILE * np.maximum(*launch(M_TILE, M_TILE))
    compute = np.where(rows > M_TILE, np.minimum(compute, split), compute)
    counts = [2.0**p for p in range(1, int(np.ceil(np.log2(widest / M_TILE))))
              if 2.0**p * SPLIT_TILES * M_TILE >= narrowest]  # the launch counts some row may take
    # a scalar grid: one count after another (a numpy scalar's ``** 2`` is libm's pow, an array's is
    # x * x, and the two differ in the last bit now and then)
    if np.ndim(rows) == 0:
        for launches in counts:
            split = launches * np.maximum(*launch(rows / launches, widest / launches))
            fits = (rows > launches * M_TILE) & (rows <= launches * SPLIT_TILES * M_TILE)
            compute = np.where(fits, np.minimum(compute, split), compute)
    elif counts:  # every count at once on a leading axis: each element the same arithmetic, far fewer calls
        ndim = max(np.ndim(compute), np.ndim(memory))  # every term's broadcast
        launches = np.array(counts).reshape((-1,) + (1,) * ndim)
        # (widest, not widest / launches: the blend's small-M weight is 1 wherever a launch holds
        # a tile or less, so it gives the small-M term the scalar branch takes there)
        split = launches * np.maximum(*launch(rows / launches, widest))
        fits = (rows > launches * M_TILE) & (rows <= launches * SPLIT_TILES * M_TILE)
        compute = np.minimum(compute, np.where(fits, split, np.inf).min(axis=0))
    return compute, memory


def weight_only_bound_s(op: Gemm, peak: float, profile: Profile, hw: HardwareSpec) -> Any:
    """The least compute time [s] of a weight-only GEMM (INT4/INT8/FP4 weights, 16-bit or FP8
    activations): it widens the weights and runs the activations' own tensor-core math, so
    where compute binds (many rows) it is no faster than that format's kernel on this GPU at
    many rows (its plateau for these outputs, no faster than its fastest row). The weight-only
    curves are fitted on A100 rows alone, their plateaus (W8A16 at 0.99 of the BF16 peak) past
    what their large rows measure (264 TFLOPS, BF16's 265-290); carried to an L40S or an H100,
    whose BF16 kernels reach 0.62-0.79, INT4 and INT8 weight-only prefills had run 5-25% faster
    than BF16. The A100's own W8A16 prefill is bound too: ~10% slower than its curve gave."""
    many_rows = 1e30  # the format's curve past any m_half: its share at these outputs
    curve = profile.gemm.curve(op.precision, op.precision)
    share = np.minimum(fitted_fraction(curve, many_rows, op.n * op.weight_copies, hw), curve.best_fraction or 1.0)
    return op.flops / (peak * share)


def fitted_fraction(curve: GemmCurve, rows: np.ndarray, outputs: np.ndarray, hw: HardwareSpec,
                    m_half_scale: float = 1.0) -> np.ndarray:
    """Share of peak the op rows' kernel reaches at ``rows`` per weight and ``outputs``: its
    fitted curve, the padding of tensor-core tiles; flat without tiles (a CPU)."""
    return curve.compute_fraction(rows, outputs, m_half_scale) if hw.tiled_matrix_units else curve.peak_fraction


def m_half_scale(fitted_ridge: float, hw: HardwareSpec, peak: float) -> float:
    """Factor on a GEMM curve's ``m_half`` on ``hw`` (``peak`` [FLOP/s] at the op's precision),
    for a curve fitted on GPUs of ridge point ``fitted_ridge`` [FLOP/B] (0: unknown, 1).

    The fitted ``m_half`` is the standalone kernel's fixed time per launch (streaming the
    weights at small M, filling the tiles) written in rows at the fitted GPU's rate: the rows
    its peak computes in that time. On a GPU with another balance of compute and memory the
    same time is other rows, so ``m_half`` scales with the ridge point of the GPU modelled over
    the fitted one's: on an H20 (148 dense BF16 TFLOPS at 4.0 TB/s) the H100's (989 at 3.35)
    BF16 ``m_half`` is 0.125 of its rows. Carried over as rows, TensorRT-LLM's L40S fits had
    made small GEMMs on an RTX 4090 compute-bound: Llama-3.1-8B's BF16 decode at batch 1 took
    37 ms a token, 2.3x streaming its weights. On the fitted GPU itself the factor is 1.
    """
    if not fitted_ridge:
        return 1.0
    return (peak / hw.memory_bandwidth.si) / fitted_ridge


def _collective_s(op: Collective, hw: HardwareSpec, profile: Profile) -> np.ndarray:
    """Time of a collective on the links it crosses (:mod:`.interconnect`)."""
    if op.collective == "all_reduce":
        return all_reduce_s(op.message_bytes, op.group_size, hw, profile, switch_reducible=op.switch_reducible)
    if op.collective == "all_gather":
        return all_gather_s(op.message_bytes, op.group_size, hw, profile)
    if op.collective == "all_to_all":
        return all_to_all_s(op.message_bytes, op.group_size, hw, profile)
    return p2p_s(op.message_bytes, op.crosses_nodes, hw, profile)


def time_ops(ops: tuple[Op, ...], hw: HardwareSpec, profile: Profile, phase: str) -> tuple[OpTime, ...]:
    """Time every op of a step."""
    return tuple(time_op(op, hw, profile, phase) for op in ops)


def unavoidable_memory_s(ops: tuple[Op, ...], hw: HardwareSpec) -> np.ndarray:
    """Least time the ops can take on one GPU [s]: the weights and KV cache they read, which
    no fusion removes, at the datasheet's memory bandwidth (activations are left out: fused
    kernels keep them on chip). A lower bound of a memory-bound step, e.g. a decode step."""
    parts = [op.byte_parts() for op in ops]
    read = [np.asarray(op.count * (b["weight_read"] + b["kv_read"]), float) for op, b in zip(ops, parts)]
    return broadcast_sum(read) / hw.memory_bandwidth.si


def unavoidable_compute_s(ops: tuple[Op, ...], hw: HardwareSpec) -> np.ndarray:
    """Least time the ops' matrix work can take on one GPU [s]: the FLOPs of their GEMMs and
    attention at the datasheet's dense tensor rate of each op's precision (elementwise work and
    collectives left out). A lower bound of a compute-bound step, e.g. a prefill."""
    work = [np.asarray(op.count * op.flops / tensor_flops_per_s(hw, op.precision), float)
            for op in ops if isinstance(op, (Gemm, Attention))]
    return broadcast_sum(work)


def broadcast_sum(arrays: list[np.ndarray]) -> np.ndarray:
    """Sum of arrays of different broadcast shapes, smallest first, so that small terms
    are added to each other before they meet the full grid."""
    total = np.zeros(())
    for arr in sorted(arrays, key=np.size):
        total = total + arr
    return total


def step_time(times: tuple[OpTime, ...], profile: Profile, *, cuda_graphs: bool = True,
              phase: str = "decode") -> np.ndarray:
    """Time of a whole step: ops in sequence plus the per-step (and per-launch) overhead [s];
    an eagerly run step lasts at least the host's issue time (:func:`step_total`)."""
    return step_total([t.total_s for t in times], sum(t.op.count for t in times), profile, cuda_graphs=cuda_graphs,
                      phase=phase)


def step_total(totals: list[np.ndarray], kernels: float, profile: Profile, *, cuda_graphs: bool = True,
               phase: str = "decode") -> np.ndarray:
    """:func:`step_time` from the ops' ``total_s`` and the kernels they launch [s].

    A step the engine runs eagerly (a prefill step of an engine that graphs decode only, or any
    step without CUDA graphs) lasts at least the host's issue time of its kernels
    (:func:`eager_floor`) where the profile knows the engine's rate; without it, a step without
    CUDA graphs pays ``launch_overhead_s`` per kernel on top of its ops."""
    total = broadcast_sum(totals)
    floor = eager_floor(kernels, profile, phase) if phase == "prefill" or not cuda_graphs else 0.0
    if floor:
        total = np.maximum(total, floor)
    launch = 0.0 if cuda_graphs or floor else profile.launch_overhead_s * kernels
    return np.asarray(total + profile.step_overhead_s + launch, float)


def eager_floor(kernels: float, profile: Profile, phase: str = "prefill") -> float:
    """Shortest time an eagerly run iteration of ``kernels`` kernels takes [s]: the host issues
    them one after another (``eager_host_per_kernel_s`` each, ``eager_decode_host_per_kernel_s``
    in a decode step where the profile has it) while the GPU runs behind, so the iteration ends
    no sooner than the last is issued."""
    rate = profile.eager_host_per_kernel_s
    if phase == "decode" and profile.eager_decode_host_per_kernel_s:
        rate = profile.eager_decode_host_per_kernel_s
    return kernels * rate
