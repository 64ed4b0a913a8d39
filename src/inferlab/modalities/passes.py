"""One forward pass of a non-autoregressive network, timed on the roofline.

Embedding encoders, diffusion denoisers and speech encoders run a whole input through every
layer at once: no KV cache, no decode loop. Their ops are the core's
:class:`~inferlab.core.ops.Gemm` and :class:`~inferlab.core.ops.Elementwise` plus
:class:`FullAttention`, in which every token attends to every token of its sequence.

Each op takes ``max(FLOPs / (peak x compute_fraction), bytes / (bandwidth x
bandwidth_fraction)) + op_floor_s``. The fractions are named datasheet-only defaults
(:class:`Efficiency`), not fitted to the measurements these kinds are checked against.

References
----------
.. [1] Williams, Waterman, Patterson, "Roofline: an insightful visual performance model",
   CACM 52(4), 2009.
.. [2] Dao, "FlashAttention-2", ICLR 2024, Fig. 5-7: forward attention at 50-73% of A100
   peak for head dim 64-128.
.. [3] NVIDIA, "Matrix Multiplication Background User's Guide" (GEMM performance on
   Tensor Cores): large FP16 GEMMs reach about 70-80% of the dense peak.
.. [4] Horace He, "Making Deep Learning Go Brrrr From First Principles" (2022): "If you
   perform the same experiment with PyTorch, we can only get 280 thousand operations per
   second." https://horace.io/brrr_intro.html
.. [5] vllm-project/vllm-omni pull request #6516 (SenseNova-U1.5, Aug. 2026): one captured
   eager forward of a 1024 x 1024 step traced with Nsight Systems 2026.1.3 on an L20X, the
   host CPU not stated. Its CFG-1 row: 6,372 kernels and 31.8 ms inside the launch API (the
   whole captured forward: its two prefix forwards launch 4,204 kernels and its denoise
   1,877); "CFG-1 averages an 8.9 µs kernel, ~5 µs inside each launch API, and 31-35 µs
   between launches." A tracer's hooks may lengthen the API times it records.
   https://github.com/vllm-project/vllm-omni/pull/6516
.. [6] Other published launch times: meta-pytorch/tritonbench pull request #1017 (GB200):
   cuLaunchKernel at 3.0µs, "(irreducible CUDA driver cost)"; NVIDIA/Fuser issue #4927
   (a steady run of nvFuser's kernel executor): "cuLaunchKernel takes 4us";
   sgl-project/sglang-omni issue #379 (a profile of Qwen3-Omni serving MMMU): cudaLaunchKernel,
   188,492 calls, mean 8.2 µs. The 5 us taken lies inside their 3-8 us.
.. [7] NVIDIA/Fuser issue #3507 (DGX H100): its torch-eager row, 0.616 ms of CPU overhead
   over 65 kernels, "Overhead / Kernel (us)" 9.4.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.ops import BYTE_CATEGORIES, ArrayLike, Elementwise, Gemm, Op, OpKind, memoized
from ..core.quantization import achievable_flops_per_s, tensor_flops_per_s
from ..errors import InfeasibleError
from ..specs.hardware import HardwareSpec
from .attention_kernels import attention_fraction, kernel_head_dim


@dataclass(frozen=True)
class FullAttention(Op):
    """Bidirectional attention: each of ``seq`` tokens attends to ``kv_seq`` tokens.

    ``kv_seq`` defaults to ``seq`` (self-attention); a cross-attention to a text prompt sets
    it to the prompt length. Flash-style: scores stay on chip, Q, K, V are read and the
    output written once.

    Notes
    -----
    ``FLOPs = 2 x batch x heads x pairs x (qk_dim + v_dim)`` (QK^T and PV), with
    ``pairs = seq x kv_seq``, or ``seq (seq + 1) / 2`` for a causal mask (a decoder used as
    an embedder), whose masked blocks flash kernels skip.
    """

    batch: ArrayLike = 1.0
    seq: ArrayLike = 1.0
    kv_seq: ArrayLike = -1.0
    heads: float = 1.0
    head_dim: float = 64.0
    causal: bool = False
    act_bytes_per_element: float = 2.0
    kind: OpKind = field(init=False, default="attention")

    @property
    def keys(self) -> ArrayLike:
        """Keys each query sees [token]."""
        return np.where(np.asarray(self.kv_seq) < 0, self.seq, self.kv_seq)

    @memoized
    def flops(self) -> ArrayLike:
        pairs = self.seq * (self.seq + 1.0) / 2.0 if self.causal else self.seq * self.keys
        return 2.0 * self.batch * self.heads * pairs * 2.0 * self.head_dim

    def byte_parts(self) -> dict[str, ArrayLike]:
        width = self.heads * self.head_dim * self.act_bytes_per_element
        parts = dict.fromkeys(BYTE_CATEGORIES, 0.0)
        parts["act_read"] = self.batch * (self.seq + 2.0 * self.keys) * width
        parts["act_write"] = self.batch * self.seq * width
        return parts


@dataclass(frozen=True)
class Efficiency:
    """Datasheet-only shares of peak a forward pass reaches; every field keyword-only.

    Attributes
    ----------
    gemm_fraction : float
        Share of dense tensor peak a large GEMM reaches (70-80% [3]; 0.7 taken).
    attention_fraction : float
        Share of dense tensor peak of flash attention (50-73% [2], the top of the range at
        the long sequences of images and video; 0.6 taken).
    bandwidth_fraction : float
        Share of DRAM bandwidth a streaming kernel reaches (0.8, STREAM-like copies on HBM).
    op_floor_s : float
        The GPU's floor per kernel [s]: the time a kernel occupies the GPU beyond its roofline
        time, its start-up and tail on the device (about 5 us on a datacenter GPU). It is the
        GPU side only; the host's time to issue the kernel is ``launch_s``. An eager pass takes
        the later of the host's and the GPU's timelines (:func:`~.eager.eager_end`), not their
        sum, so the two are not counted twice.
    host_op_s : float
        Host time of one PyTorch call in eager execution [s]: 1 / 280,000 s, PyTorch's measured
        rate on tiny tensors [4]. The source names no device; that the tensors were on the CPU,
        so that no launch is in it, is inferred, not stated: the flame graph of one
        addition shows the addition computed on the host, and 3.6 us is below the published
        per-kernel host times of eager PyTorch on a GPU [7]. Only passes timed as eager use it
        (:mod:`.eager`).
    launch_s : float
        Host time of the CUDA launch API for each kernel an eager PyTorch call launches [s], on
        top of ``host_op_s``: 5 us, the mean Nsight Systems measured inside the launch API over
        one eager forward [5] (31.8 ms over 6,372 kernels on an L20X), within the 3-8 us other
        sources publish [6]. Charged per kernel of the graph, which holds fewer kernels than an
        eager pass launches, so a floor (:mod:`.eager`); only eager passes use it.
    attention_kernel : str
        The flash-attention kernel the implementation calls (``fa2``, ``fa3``, ``cudnn``): its
        published share of peak on the GPU's family and its padded head dim replace
        ``attention_fraction`` (:mod:`.attention_kernels`); ``datasheet``: not stated.
    """

    gemm_fraction: float = field(default=0.7, kw_only=True)
    attention_fraction: float = field(default=0.6, kw_only=True)
    bandwidth_fraction: float = field(default=0.8, kw_only=True)
    op_floor_s: float = field(default=5e-6, kw_only=True)
    host_op_s: float = field(default=1 / 280e3, kw_only=True)
    launch_s: float = field(default=5e-6, kw_only=True)
    attention_kernel: str = field(default="datasheet", kw_only=True)


DATASHEET = Efficiency()


@dataclass(frozen=True)
class PassTime:
    """Time of one forward pass, by op and in total [s]."""

    ops: tuple[Op, ...]
    compute_s: np.ndarray
    memory_s: np.ndarray
    floor_s: float

    @property
    def time_s(self) -> np.ndarray:
        """Whole pass [s]: each op its own roofline maximum, ops in sequence."""
        return np.maximum(self.compute_s, self.memory_s).sum(axis=0) + self.floor_s

    @property
    def flops(self) -> float:
        """FLOPs of the pass [FLOP]."""
        return float(sum(np.sum(op.flops) * op.count for op in self.ops))

    @property
    def bytes(self) -> float:
        """Bytes moved by the pass [B]."""
        return float(sum(np.sum(op.bytes) * op.count for op in self.ops))

    @property
    def compute_share(self) -> float:
        """Share of the pass time in ops whose compute term exceeds their memory term."""
        per_op = np.maximum(self.compute_s, self.memory_s)
        total = per_op.sum()
        return float(per_op[self.compute_s >= self.memory_s].sum() / total) if total > 0 else 0.0

    @property
    def bound(self) -> str:
        """``compute`` or ``memory``: which term takes most of the pass time."""
        return "compute" if self.compute_share >= 0.5 else "memory"


def time_pass(ops: tuple[Op, ...], hw: HardwareSpec, efficiency: Efficiency = DATASHEET) -> PassTime:
    """Roofline time of a forward pass made of ``ops`` on one device.

    Parameters
    ----------
    ops : tuple of Op
        Scalar-shaped ops; ``count`` repeats an op (layers).
    hw : HardwareSpec
    efficiency : Efficiency

    Returns
    -------
    PassTime
        ``compute_s`` and ``memory_s`` per op, all repetitions included [s].
    """
    bw = hw.memory_bandwidth.si * efficiency.bandwidth_fraction
    kernel = efficiency.attention_kernel
    compute, memory = [], []
    for op in ops:
        flops = float(np.sum(op.flops))
        if isinstance(op, Gemm):  # never faster than the part was measured to run (achievable_flops)
            rate = min(tensor_flops_per_s(hw, op.precision) * efficiency.gemm_fraction,
                       achievable_flops_per_s(hw, op.precision))
        elif isinstance(op, FullAttention):  # computed at the head dim the kernel is compiled for
            rate = min(tensor_flops_per_s(hw, op.precision) * attention_fraction(kernel, hw, efficiency.attention_fraction),
                       achievable_flops_per_s(hw, op.precision))
            flops *= kernel_head_dim(kernel, op.head_dim, hw) / op.head_dim
        else:
            rate = np.inf
        compute.append(flops / rate * op.count)
        memory.append(float(np.sum(op.bytes)) / bw * op.count)
    floor = efficiency.op_floor_s * sum(op.count for op in ops)
    return PassTime(tuple(ops), np.asarray(compute), np.asarray(memory), floor)


def norm(name: str, tokens: ArrayLike, width: float, *, count: int = 1, passes: float = 2.0) -> Elementwise:
    """A normalization, residual add or activation over ``tokens x width`` elements."""
    return Elementwise(name, elements_read=passes * tokens * width, elements_written=tokens * width, count=count)


def check_fits(what: str, hw: HardwareSpec, ops: tuple[Op, ...], extra_bytes: float = 0.0,
               extra_label: str = "", advice: str = "use a smaller batch or size, or a larger GPU") -> None:
    """Refuse a pass that cannot fit one GPU's usable memory.

    The floor counted: every weight the pass reads (once) plus the largest single op's
    activations in and out (live together while it runs), plus ``extra_bytes`` (a cache the
    pass keeps). A real run needs more (allocator, workspaces), so passing this check is
    necessary, not sufficient.
    """
    parts = [(op.byte_parts(), op.count) for op in ops]
    weights = float(sum(float(np.sum(p["weight_read"])) * count for p, count in parts))
    acts = max((float(np.sum(p["act_read"]) + np.sum(p["act_write"])) for p, _ in parts), default=0.0)
    need = weights + acts + extra_bytes
    usable = hw.usable_memory_capacity.si
    if need > usable:
        extra = f", {extra_label} {extra_bytes / 1e9:.1f} GB" if extra_bytes else ""
        raise InfeasibleError(f"{what} does not fit {hw.id}: it needs at least {need / 1e9:.1f} GB per GPU (weights "
                              f"{weights / 1e9:.1f} GB, the largest op's activations {acts / 1e9:.1f} GB{extra}) of "
                              f"{usable / 1e9:.1f} GB usable; {advice}")
