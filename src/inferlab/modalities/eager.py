"""Eager PyTorch: the host enqueues every op of a pass in order, the GPU runs them as they come.

Physics
-------
Without CUDA graphs every PyTorch op a module calls costs the host (CPU) time: the Python
call, the dispatcher, and for an op that launches a kernel the launch itself; views,
reshapes, transposes and splits launch nothing but cost the host all the same. The GPU runs
the kernels in order on one stream. With ``h_i`` the host time of op ``i`` and ``g_i`` its GPU
time (its roofline time plus the per-kernel floor of :class:`~.passes.Efficiency`, 0 for an
op without a kernel), op ``i`` is enqueued at ``H_i = h_1 + ... + h_i`` and runs from
``max(E_{i-1}, H_i)`` to ``E_i = max(E_{i-1}, H_i) + g_i``; the pass ends at the last ``E``. An
op that reads a GPU value on the host (``.item()``, ``.tolist()``) also makes the host wait
for ``E_i`` before it enqueues the next one. When the kernels are long the host runs ahead
and the pass takes its GPU time; when they are short the GPU waits for the host and the
pass takes about the host's time. It is never shorter than either sum (:func:`eager_end`).

Under CUDA graphs the host launches the captured pass once and the per-op host term is
absent: the pass takes its GPU time (:class:`~.passes.PassTime`), which is the
``execution="graph"`` path of :func:`~.vision.vlm_ttft`. The serving engines run their vision
encoders eagerly unless told otherwise: vLLM captures the ViT only when
``compile_mm_encoder`` or ``cudagraph_mm_encoder`` is set in ``--compilation-config`` [2], SGLang
only with ``SGLANG_VIT_ENABLE_CUDA_GRAPH`` [3]; transformers never captures.

The host time of a call is two published measurements. Every call costs PyTorch's dispatch
[1]: 280 thousand tiny-tensor operations a second, 3.6 us each
(:attr:`~.passes.Efficiency.host_op_s`). He does not name the device. That the experiment ran
on CPU tensors, and so launched nothing, is inferred here, not stated: his flame graph of one
addition shows the addition computed on the host, and 3.6 us is below the published
host times per kernel of eager PyTorch on a GPU (9.4 us on an H100, NVIDIA/Fuser issue #3507).
A call that launches a kernel therefore adds the CUDA launch API's host time,
:attr:`~.passes.Efficiency.launch_s` = 5 us: the mean time inside the launch API over one
eager forward traced with Nsight Systems 2026.1.3 on an L20X [4], 31.8 ms over the 6,372
kernels of the whole captured CFG-1 forward (among them its two prefix forwards' 4,204 and
its denoise's 1,877). That source does not state the host CPU, and a tracer may lengthen the API
times it records. Other published launch times span 3-8 us [5]: 3.0 us for a raw
``cuLaunchKernel`` on a GB200, 4 us inside nvFuser's executor, a mean of 8.2 us over 188,492
``cudaLaunchKernel`` calls serving Qwen3-Omni; 5 us lies inside.

The host time of op ``i`` is ``calls_i x host_op_s + kernels_i x launch_s``, where
``kernels_i`` counts the kernels of the graph the step launches (:class:`Step`), not every
kernel the PyTorch calls launch. It is a floor on three counts. The module calls around the
ops and the Python in the modules' ``forward`` are not counted. The calls that launch kernels
the graph leaves out pay the dispatch but no launch: transformers' RMSNorm launches 8 kernels
where the graph holds 6 (the per-row statistics' epsilon and rsqrt), its float32 rotary about
16 where the graph holds 6 (the casts, products, negations, cats and sums of q and k), the
subtraction and maximum before each layer's ``.item()`` and the copy that reads it back, the
attention output's copy, the gate projection apart from the up projection (one GEMM of twice
the width in the graph); under the engines, the patch embedding's cast. And a library call
that launches more than one kernel (a cuBLAS split-K reduction, an SDPA backend's preparation)
is charged one.

Ops per encoder layer
---------------------
The ops one encoder layer issues, in order, counted from the implementations' modeling code
(:func:`layer_program`; each :class:`Step` names the graph op whose kernels it launches, how
many, and how many PyTorch calls it makes in all):

``sglang`` and ``fused`` (the serving engines: SGLang's ``SiglipEncoderLayer`` with its
``VisionAttention`` on the SDPA path, and vLLM's ``Qwen2_5_VisionBlock``, whose rotary steps add
7 and whose flash-attention path makes about 6 attention calls where SGLang's SDPA path makes
10, not told apart), 26 calls, 33 with rotary embeddings; the two differ in the split alone:

===================  =======  =====  ===========================================================
step                 kernels  calls  what
===================  =======  =====  ===========================================================
norm1                1        1      LayerNorm or the engine's RMSNorm
qkv                  1        1      one fused projection
split (``sglang``)   3        7      split into q, k, v, three reshapes to heads, three copies to
                                     contiguous tensors (the graph's ``qkv_copies``)
split (``fused``)    0        7      vLLM: chunk, three views, three rearranges, all views (vLLM
                                     PR #27106 removed the copies)
rotary (if any)      6        7      vLLM: cat of q and k (the one packed copy of q and k that
                                     vLLM PR #51537 describes), cos, sin, a float copy, the
                                     rotary kernel, the cast back, chunk
attention            1        10     SGLang's SDPA path: reshape and transpose q, k, v (6), SDPA,
                                     the output's transpose and reshape (2), a reshape to rows
                                     (vLLM's flash path: about 6, counted as 10)
o_proj, add, norm2   3        3
mlp_up, act, down    3        3      the activation one kernel (GELU, SiLU-and-mul)
add                  1        1
===================  =======  =====  ===========================================================

``transformers`` (the reference modules of ``modeling_qwen2_5_vl.py``: ``Qwen2RMSNorm``,
``Qwen2_5_VLVisionAttention`` on the flash-attention-2 branch, ``Qwen2_5_VLMLP``), 71 calls:
each RMSNorm 8 (to float32, pow, mean, add eps, rsqrt, multiply, to BF16, weight; the graph's
six kernels over the activations among them), qkv 1, its reshape, permute and unbind 3, the
rotary embedding on float32 copies 22 (q and k to float32, cos and sin unsqueezed and cast,
per tensor two multiplies, two slices, a negation, a cat and an add, back to BF16), q, k, v
transposed and unsqueezed 6, the maximum sequence length read with ``.item()`` 5 (a host
wait every layer), the flash-attention call with its transposes and reshapes 8, the output's
reshape and copy 2, o_proj 1, the residual adds 1 each, gate and up projections 2 (one GEMM of
twice the width in the graph), SiLU and the product 2, down 1. With LayerNorm and GELU (SigLIP
under transformers) a norm is 1 call and the activation 1, as the graph has them.

Before the layers the patch embedding (4 calls: view, cast, projection, view) and after them
the projector (3). Not counted: the module calls themselves, the per-pass set-up on the host
(position ids, Qwen2.5-VL's window index and its gather and scatter), and the GPU time of the
small kernels the graph leaves out (transformers' output copy, the RMSNorm's per-row statistics).

References
----------
.. [1] Horace He, "Making Deep Learning Go Brrrr From First Principles" (2022), section
   Overhead: "If you perform the same experiment with PyTorch, we can only get 280 thousand
   operations per second." https://horace.io/brrr_intro.html
.. [2] vLLM pull requests #33232 (piecewise CUDA graphs for the Qwen2.5-VL and Qwen3-VL ViT,
   enabled by ``compile_mm_encoder``) and #35963 (full ViT CUDA graphs, ``cudagraph_mm_encoder``);
   #44394: "vLLM's LLM decoder already benefits from CUDA graphs, but the vision encoder runs
   eagerly".
.. [3] SGLang pull request #25986 (ViT CUDA graphs behind ``--enable-vit-cuda-graph``, keeping
   ``SGLANG_VIT_ENABLE_CUDA_GRAPH=1`` as the environment switch).
.. [4] vllm-project/vllm-omni pull request #6516 (SenseNova-U1.5; Nsight Systems 2026.1.3 on
   an L20X, one captured forward of a 1024 x 1024 step): "CFG-1 averages an 8.9 µs kernel, ~5 µs
   inside each launch API, and 31-35 µs between launches"; its CFG-1 row: 6,372 kernels, 31.8 ms
   of launch API (5.0 us each), over the two prefix forwards (4,204 kernels) and the denoise
   (1,877) and whatever else the forward launched.
.. [5] meta-pytorch/tritonbench pull request #1017 (GB200): cuLaunchKernel at 3.0µs,
   "(irreducible CUDA driver cost)"; NVIDIA/Fuser issue #4927: "cuLaunchKernel takes 4us";
   sgl-project/sglang-omni issue #379 (Qwen3-Omni on MMMU): ``cudaLaunchKernel``, 188,492
   calls, 1.55 s, mean 8.2 µs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .passes import PassTime


def eager_end(gpu_s: Sequence[float], host_s: Sequence[float], sync: Sequence[bool] | None = None) -> float:
    """End of a pass whose ops the host enqueues in order [s].

    Op ``i`` is enqueued once the host has spent ``host_s[:i + 1]``; the GPU starts it when
    both that has happened and op ``i - 1`` has ended, and runs it for ``gpu_s[i]``. After an op
    with ``sync[i]`` the host waits for it to end. Never below ``sum(gpu_s)`` nor ``sum(host_s)``.
    """
    host = end = 0.0
    for i, (g, h) in enumerate(zip(gpu_s, host_s, strict=True)):
        host += h
        end = max(end, host) + g
        if sync is not None and sync[i]:
            host = end
    return end


@dataclass(frozen=True)
class Step:
    """PyTorch calls of one encoder layer, in order.

    Attributes
    ----------
    op : str or None
        The graph op (:func:`~.vision.vision_ops` name) whose kernels the step launches; None:
        none of the graph's.
    kernels : int
        Kernels of that op the step launches (its share of the op's per-layer count).
    calls : int
        PyTorch calls the step makes, its kernels included; each costs the host ``host_op_s``.
    sync : bool
        The last call reads a GPU value on the host, which waits for the GPU.
    """

    op: str | None
    kernels: int = 1
    calls: int = 1
    sync: bool = False


def layer_program(vc: Mapping[str, Any], implementation: str = "fused") -> tuple[Step, ...]:
    """The calls of one encoder layer in order (module notes: the counts and their sources)."""
    rope = bool(vc.get("rope"))
    gated = vc.get("hidden_act") == "silu"
    if implementation in ("fused", "sglang"):
        rotary = (Step("rotary", 6, 7),) if rope else ()
        split = Step("qkv_copies", 3, 7) if implementation == "sglang" else Step(None, 0, 7)
        return (Step("norms"), Step("qkv"), split, *rotary, Step("attention", 1, 10), Step("o_proj"),
                Step("residual_adds"), Step("norms"), Step("mlp_up"), Step("activation"), Step("mlp_down"),
                Step("residual_adds"))
    norm = Step("norms", 6, 8) if vc.get("norm", "layernorm") == "rmsnorm" else Step("norms")
    rotary = (Step("rotary", 6, 22),) if rope else ()
    mlp = (Step("mlp_up", 1, 2), Step("activation", 2, 2)) if gated else (Step("mlp_up"), Step("activation"))
    # Qwen2.5-VL's flash path reads its window lengths back with .item(); SigLIP's modules do not
    seqlens = Step(None, 0, 5, sync=True) if rope else Step(None, 0, 5)
    return (norm, Step("qkv"), Step(None, 0, 3), *rotary, Step(None, 0, 6), seqlens,
            Step("attention", 1, 8), Step(None, 0, 2), Step("o_proj"), Step("residual_adds"), norm, *mlp,
            Step("mlp_down"), Step("residual_adds"))


#: Calls before the layers (the patch embedding) and after them (the projector).
PROLOGUE = (Step("patch_embed", 1, 4),)
EPILOGUE = (Step("projector", 1, 3),)


def encoder_schedule(timed: PassTime, vc: Mapping[str, Any], implementation: str, op_floor_s: float
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The encoder pass as issued: GPU time [s], PyTorch calls, kernel launches and host waits
    per issued item.

    Every kernel of ``timed`` appears once, at its roofline time per kernel plus ``op_floor_s``,
    as one call that launches it, so the GPU times sum to ``timed.time_s``; the calls a step
    makes beyond its kernels come first, as items of no GPU time and no launch.
    """
    names = [op.name for op in timed.ops]
    per_kernel = {op.name: float(max(c, m)) / op.count + op_floor_s
                  for op, c, m in zip(timed.ops, timed.compute_s, timed.memory_s)}
    depth = int(vc["depth"])
    full = set(vc.get("fullatt_block_indexes", ())) if "attention_window" in names else set(range(depth))
    items: list[tuple[float, int, int, bool]] = []  # GPU time, calls, launches, host wait

    def issue(step: Step, layer: int = -1) -> None:
        name = step.op
        if name == "attention":
            name = "attention_full" if layer in full else "attention_window"
        if step.calls > step.kernels:
            items.append((0.0, step.calls - step.kernels, 0, step.sync))
        if step.kernels:
            items.extend([(per_kernel[name], 1, 1, False)] * step.kernels)

    for step in PROLOGUE:
        issue(step)
    program = layer_program(vc, implementation)
    for layer in range(depth):
        for step in program:
            issue(step, layer)
    for step in EPILOGUE:
        issue(step)
    gpu, calls, launches, sync = zip(*items)
    return np.asarray(gpu), np.asarray(calls, dtype=float), np.asarray(launches, dtype=float), np.asarray(sync)


def eager_pass_s(timed: PassTime, vc: Mapping[str, Any], implementation: str, *, host_op_s: float,
                 launch_s: float, op_floor_s: float) -> float:
    """Wall time of the encoder pass ``timed`` run eagerly under ``implementation`` [s]: each
    issued item costs the host ``calls x host_op_s + launches x launch_s``."""
    gpu, calls, launches, sync = encoder_schedule(timed, vc, implementation, op_floor_s)
    return eager_end(gpu, calls * host_op_s + launches * launch_s, sync)
