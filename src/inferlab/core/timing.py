"""Roofline timing of ops with an efficiency profile.

``time = max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory
efficiency), comm bytes / (link x efficiency) + latency) + kernel floor``, per op and
vectorized over the sweep grid. The label says which term set the time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..calibration.profile import GemmCurve, Profile
from ..specs.hardware import HardwareSpec
from ..techniques.quantization import tensor_flops_per_s
from .interconnect import all_gather_s, all_reduce_s, all_to_all_s, p2p_s
from .ops import Attention, Collective, Elementwise, Gemm, Op

BOUNDS = ("compute", "memory", "communication", "overhead")
#: Rows of one MMA tile on Hopper and Blackwell tensor cores (wgmma 64 per warpgroup, 128 per
#: CTA tile; tcgen05 128): up to it engines run small-M tactics in a step (:func:`in_step_curve`).
M_TILE = 128.0
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
        compute = op.flops / (peak * curve.compute_fraction(rows, outputs))
        memory = op.bytes / (bw * curve.bandwidth_fraction)
        tuned = curve if standalone else in_step_curve(curve, profile)
        if tuned is not curve:
            # up to one tile of rows the engine's small-M tactic runs; above it the large-tile
            # kernel the op rows measured takes over as (M_TILE / rows)^2 (continuous at M_TILE)
            w = np.minimum(1.0, (M_TILE / rows) ** 2)
            compute = (1.0 - w) * compute + w * op.flops / (peak * tuned.compute_fraction(rows, outputs))
            memory = (1.0 - w) * memory + w * op.bytes / (bw * tuned.bandwidth_fraction)
        saturated = np.asarray(op.flops / (peak * curve.peak_fraction), float)
        # A kernel timed on its own quantizes its input itself; inside a step an engine may
        # have fused that into the norm or activation before it.
        share = 1.0 if standalone else profile.gemm_fixed_fraction
        overhead = floor + curve.fixed_s * share if curve.fixed_s else floor
        return OpTime(op, np.asarray(compute, float), np.asarray(memory, float), zero, overhead, saturated)
    if isinstance(op, Attention):
        a = profile.attention
        compute = op.flops / (tensor_flops_per_s(hw, op.precision) * a.peak_fraction(phase))
        memory = op.bytes / (bw * a.bandwidth_fraction(phase))
        overhead = floor + a.fixed_s + a.per_sequence_head_s * op.batch * op.kv_heads
        return OpTime(op, np.asarray(compute, float), np.asarray(memory, float), zero, np.asarray(overhead, float))
    if isinstance(op, Collective):
        comm = _collective_s(op, hw, profile)
        return OpTime(op, zero, zero, np.asarray(comm, float), floor)
    if isinstance(op, Elementwise):
        memory = op.bytes / (bw * profile.elementwise_bandwidth_fraction)
        return OpTime(op, zero, np.asarray(memory, float), zero, floor * profile.elementwise_floor_fraction)
    raise TypeError(f"no timing rule for {type(op).__name__}")


def in_step_curve(curve: GemmCurve, profile: Profile) -> GemmCurve:
    """The curve of a scaled-format GEMM at a few rows inside an engine's step: its format's
    own peak share and fixed cost, with occupancy terms (``m_half``, ``n_half``) and a bandwidth
    share no worse than those of the next wider format's kernel on the same GPU (NVFP4 and
    MXFP4: FP8's, itself so tied; FP8 and the integer kernels: BF16's). Returns ``curve`` itself
    where that changes nothing.

    ``m_half`` and ``n_half`` say how badly a kernel fills the GPU with few rows or narrow
    outputs (padded MMA tiles; too few output tiles for the SMs, each streaming its slice of
    the weights at one SM's share of the bandwidth). Standalone scaled-format kernels in the
    op-level benchmarks run without split-K at a few rows (NVFP4 rows on the B200 reach 5-25%
    of the memory roofline at M <= 16, where BF16 reaches 40-80%), which the fit turns into
    large ``m_half``/``n_half`` and a low bandwidth share. Engines tune their scaled GEMMs per
    shape (TensorRT-LLM's autotuner, vLLM's per-M CUTLASS configurations, swap-AB and split-K
    for decode), and the tile geometry (rows x output features per MMA) is the same for every
    element width: only the K-depth per instruction grows as elements narrow. Weights stream
    from DRAM in the same 128-byte transactions whatever the element width. So at a few rows a
    scaled kernel fills the SMs and streams its weights at least as well as the wider format's
    kernel, and a memory-bound step with narrower weights, moving fewer bytes, is never slower.

    :func:`time_op` hands over from this curve to the fitted one above one MMA tile of rows
    (:data:`M_TILE`), where the op rows' large-tile kernels run (offline NVFP4 throughput on the
    B200 matches the fitted curve there); op-level (standalone) timing keeps the fitted curve.
    """
    ref = _wider(curve, profile)
    if ref is None or (curve.m_half <= ref.m_half and curve.n_half <= ref.n_half
                       and curve.bandwidth_fraction >= ref.bandwidth_fraction):
        return curve
    return _tied(curve, ref)


def _wider(curve: GemmCurve, profile: Profile) -> GemmCurve | None:
    """The in-step curve of the next wider format's kernel, or None for a 16-bit kernel."""
    kernels = profile.gemm.kernels
    sixteen = kernels.get("bf16") or kernels.get("default")
    if curve is sixteen or sixteen is None or any(curve is kernels.get(k) for k in ("fp16", "default")):
        return None
    if any(curve is kernels.get(k) for k in ("nvfp4", "mxfp4")) and "fp8" in kernels:
        return in_step_curve(kernels["fp8"], profile)
    return sixteen


@functools.lru_cache(maxsize=256)
def _tied(curve: GemmCurve, ref: GemmCurve) -> GemmCurve:
    return curve.model_copy(update={"m_half": min(curve.m_half, ref.m_half), "n_half": min(curve.n_half, ref.n_half),
                                    "bandwidth_fraction": max(curve.bandwidth_fraction, ref.bandwidth_fraction)})


def _collective_s(op: Collective, hw: HardwareSpec, profile: Profile) -> np.ndarray:
    """Time of a collective on the links it crosses (:mod:`.interconnect`)."""
    if op.collective == "all_reduce":
        return all_reduce_s(op.message_bytes, op.group_size, hw, profile)
    if op.collective == "all_gather":
        return all_gather_s(op.message_bytes, op.group_size, hw, profile)
    if op.collective == "all_to_all":
        return all_to_all_s(op.message_bytes, op.group_size, hw, profile)
    return p2p_s(op.message_bytes, op.crosses_nodes, hw, profile)


def time_ops(ops: tuple[Op, ...], hw: HardwareSpec, profile: Profile, phase: str) -> tuple[OpTime, ...]:
    """Time every op of a step."""
    return tuple(time_op(op, hw, profile, phase) for op in ops)


def broadcast_sum(arrays: list[np.ndarray]) -> np.ndarray:
    """Sum of arrays of different broadcast shapes, smallest first, so that small terms
    are added to each other before they meet the full grid."""
    total = np.zeros(())
    for arr in sorted(arrays, key=np.size):
        total = total + arr
    return total


def step_time(times: tuple[OpTime, ...], profile: Profile, *, cuda_graphs: bool = True) -> np.ndarray:
    """Time of a whole step: ops in sequence plus the per-step (and per-launch) overhead [s]."""
    total = broadcast_sum([t.total_s for t in times])
    kernels = sum(t.op.count for t in times)
    launch = 0.0 if cuda_graphs else profile.launch_overhead_s * kernels
    return np.asarray(total + profile.step_overhead_s + launch, float)
