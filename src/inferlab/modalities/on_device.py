"""Batch-1 decode on a laptop, a workstation card, a Mac, a CPU or a phone, as llama.cpp runs it.

Physics
-------
At batch 1 each generated token reads every weight once (the token embedding table only
by its one row, unless the output layer is that table: tied embeddings) and the KV cache so
far (a sliding-window layer's up to its window); the arithmetic is two FLOPs per weight, far below
any device's ridge point, so a token takes the bytes over the bandwidth the kernels reach
plus the fixed cost of the kernels a step launches [1]:

``t_token = (W + KV(c)) / (B x f_bw) + L x k x t_kernel``

with ``W`` the weight bytes in the file's format (GGUF Q4_K_M about 4.85 bits per weight,
Q8_0 8.5), ``B`` the datasheet memory bandwidth (unified memory on Apple M-series), ``L``
layers, ``k`` kernels per layer and ``t_kernel`` the fixed cost of one. Quantization is the
precondition to fit: the weights must sit in the memory the GPU may use (on a Mac about 3/4
of the unified memory by default).

On a CPU (a server or desktop socket, or the CPU cores of a phone-class SoC, where llama.cpp
and ExecuTorch run by default on Android) the same formula holds with the bandwidth the cores
reach: ``f_bw = f_stream x f_llama``. ``f_stream`` is the share of the DRAM channels' peak a
read-only STREAM-like kernel sustains: 66%, measured on 16 channels of DDR4-2666 (226.2 of
341 GB/s, "the usual achieved fraction on this platform") [2], and 68% on a Raspberry Pi 5's
LPDDR4X (11.59 GB/s read-only with 4 threads of 17.07 GB/s) [3]; 66% is taken. ``f_llama`` is
the share of that STREAM bandwidth llama.cpp's decode reaches: 84-91% across Q2_K to Q8_0,
88% at Q4_K_M [3]; 88% is taken. So a CPU decodes at 0.66 x 0.88 = 58% of its channels' peak.
Neither figure is fitted to a case.

Prompt processing (``pp``) is compute-bound: ``2 x active params`` FLOPs per token at the
device's 16-bit rate (on a CPU its SIMD units' derived peak).

References
----------
.. [1] ggml-org/llama.cpp, "metal : Q6_K implementation" (commit message, 2023): on a
   30-core M2 Max, "~19 ms for the matrix multiplications. The model is ~5.5 GB, so we are
   getting 1000 / 19 * 5.5 = 290 GB/s" of its 400 GB/s, i.e. 72% of the bandwidth.
.. [2] kvcache-ai/ktransformers PR #2175 (2026), comment measuring 2x EPYC 7452: read-only
   streaming "226.2 GB/s" on both nodes; "Theoretical for 16 channels of DDR4-2666 is 341 GB/s,
   so this is 66% of paper - the usual achieved fraction on this platform".
   https://github.com/kvcache-ai/ktransformers/pull/2175
.. [3] ggml-org/llama.cpp issue #26484 (2026), "Arm CPU backend: Effective decode bandwidth
   stays near 10 GB/s across quantizations on Pi 5": STREAM v5.10 read-only 11.59 GB/s at 4
   threads; llama.cpp decode at "about 84-91% of the measured 4-thread" read-only bandwidth
   (Q4_K_M 88%). https://github.com/ggml-org/llama.cpp/issues/26484
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import SpecError, option_name
from ..precision import number_format
from ..specs.hardware import HardwareSpec
from ..specs.model import ModelSpec


@dataclass(frozen=True)
class LlamaCpp:
    """A llama.cpp-like engine at batch 1; every field keyword-only.

    Attributes
    ----------
    bandwidth_fraction : float
        Share of memory bandwidth its quantized matrix-vector kernels reach (72% on an M2
        Max, [1]).
    kernels_per_layer : int
        Kernels a decode step launches per layer (norms, 7 projections, RoPE, attention,
        activation, residual adds: about 14).
    kernel_s : float
        Fixed cost of one small kernel [s]: launch latency plus the ramp and tail of a
        kernel too short to reach full bandwidth (a few microseconds on CUDA and Metal; 5 us
        taken, a round figure, not fitted per device).
    gemm_fraction : float
        Share of the 16-bit peak its prompt-processing matrix multiplies reach.
    kv_precision : str
        KV-cache format (llama.cpp's default ``f16``).
    cpu_stream_fraction : float
        Share of a CPU's DRAM peak a read-only STREAM kernel sustains (66%, [2]).
    cpu_share_of_stream : float
        Share of STREAM bandwidth llama.cpp's CPU decode reaches (88%, [3]).
    """

    bandwidth_fraction: float = field(default=0.72, kw_only=True)
    kernels_per_layer: int = field(default=14, kw_only=True)
    kernel_s: float = field(default=5e-6, kw_only=True)
    gemm_fraction: float = field(default=0.5, kw_only=True)
    kv_precision: str = field(default="fp16", kw_only=True)
    cpu_stream_fraction: float = field(default=0.66, kw_only=True)
    cpu_share_of_stream: float = field(default=0.88, kw_only=True)

    def bandwidth_share(self, hw: HardwareSpec) -> float:
        """Share of ``hw``'s datasheet bandwidth a decode step reaches: the GPU kernels' share,
        or on a CPU (``kind`` cpu or phone-soc) STREAM's share of the peak times llama.cpp's of STREAM."""
        if hw.kind == "gpu":
            return self.bandwidth_fraction
        return self.cpu_stream_fraction * self.cpu_share_of_stream


LLAMA_CPP = LlamaCpp()


@dataclass(frozen=True)
class OnDeviceResult:
    """Batch-1 speed and fit of one model file on one device.

    Attributes
    ----------
    weight_bytes : float
        The model's weights in ``precision`` [B].
    token_bytes : float
        Bytes read per generated token [B] (weights less the embedding table unless the output
        layer shares it, plus KV).
    usable_bytes : float
        Memory the device lets the GPU use [B] (a CPU's or a phone's memory).
    decode_s : float
        Time per generated token [s].
    prefill_tokens_per_s : float
        Prompt tokens per second of a 512-token prompt after ``context`` tokens [token/s].
    """

    model: str
    hardware: str
    precision: str
    weight_bytes: float
    token_bytes: float
    usable_bytes: float
    decode_s: float
    prefill_tokens_per_s: float
    kv_bytes: float = 0.0
    device_kind: str = "gpu"

    @property
    def fits(self) -> bool:
        """Whether the weights and the KV cache of the context fit the memory the GPU may use."""
        return self.weight_bytes + self.kv_bytes <= self.usable_bytes

    @property
    def reason(self) -> str:
        """Why the format does not fit (``""`` when it does)."""
        if self.fits:
            return ""
        where = "the GPU may use" if self.device_kind == "gpu" else "of memory"
        return (f"{self.precision}: weights {self.weight_bytes / 1e9:,.1f} GB + KV cache {self.kv_bytes / 1e9:,.1f} GB "
                f"> {self.usable_bytes / 1e9:,.1f} GB {where}")

    @property
    def decode_tokens_per_s(self) -> float:
        """Generated tokens per second at batch 1 [token/s]."""
        return 1.0 / self.decode_s


#: Weight formats on-device runtimes store: GGUF quantization types and plain floats (llama.cpp),
#: group-quantized integers (ExecuTorch's XNNPACK, MLX). Not the datacenter scaled formats
#: (FP8, NVFP4, MX), which these runtimes do not run.
LLAMA_CPP_FORMATS = ("q4_0", "q4_k_m", "q5_k_m", "q8_0", "int4", "int8", "bf16", "fp16", "fp32")


def on_device(model: str | ModelSpec, hardware: str | HardwareSpec, *, precision: str = "q4_k_m",
              context: int = 128, engine: LlamaCpp = LLAMA_CPP) -> OnDeviceResult:
    """Batch-1 decode and prompt speed of ``model`` stored in ``precision`` on ``hardware``.

    Parameters
    ----------
    model : str or ModelSpec
        A catalog LLM (``llama-2-7b``) or a config.json path.
    hardware : str or HardwareSpec
        A Mac (``m2-ultra``), a consumer or datacenter GPU, a MIG slice, a CPU socket
        (``epyc-9554``) or a phone SoC (``snapdragon-8-gen-3``).
    precision : str
        Weight format: a GGUF type (``q4_k_m``, ``q5_k_m``, ``q8_0``, ``q4_0``) or ``bf16``...
    context : int
        Tokens in the KV cache while decoding [token] (llama-bench's tg128 averages 64), and
        before the prompt (llama-bench's depth, ``-d``): a 512-token prompt after them attends
        to them all.
    """
    from ..inputs.resolve import resolve_hardware, resolve_model

    m = resolve_model(model)
    hw = resolve_hardware(hardware)
    fmt = number_format(precision)
    if fmt.name not in LLAMA_CPP_FORMATS:
        raise SpecError(f"precision {precision!r}: on-device runtimes store weights as "
                        f"{', '.join(LLAMA_CPP_FORMATS)} (GGUF types, integers, floats), not {fmt.name}")
    if "TPU" in hw.architecture:
        raise SpecError(f"{hw.id} is a TPU: llama.cpp-like runtimes have no TPU backend (JAX or vLLM's TPU backend "
                        "serve it: inferlab estimate)")
    if not isinstance(engine, LlamaCpp):
        raise SpecError(f"engine must be a LlamaCpp (the runtime's rates; LLAMA_CPP by default), got {engine!r:.60}")
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise SpecError(f"{option_name('context')} must be a whole number of tokens >= 0, got {context!r:.40}")
    longest = m.max_position_embeddings
    if longest and context > longest:
        raise SpecError(f"{option_name('context')} {context:,} tokens is longer than {m.id or m.name} reads ({longest:,} positions)")
    pc = m.param_counts
    weights = m.weight_bytes(fmt.name)
    per_weight = weights / pc.total
    kv = float(m.kv_cache_bytes(context, engine.kv_precision))  # sliding-window layers hold their window
    # the embedding table is read by one row; the logits read the output matrix, which is the
    # embedding table itself where the model ties them (lm_head counts 0 parameters then)
    token_bytes = (pc.active - (pc.embedding if pc.lm_head else 0)) * per_weight + kv
    bw = hw.memory_bandwidth.si * engine.bandwidth_share(hw)
    decode_s = token_bytes / bw + m.num_hidden_layers * engine.kernels_per_layer * engine.kernel_s
    from ..core.quantization import tensor_flops_per_s

    peak = tensor_flops_per_s(hw, "fp16" if "fp16" in hw.flops else "bf16") * engine.gemm_fraction
    prefill = peak / (2.0 * pc.active + attention_flops_per_prompt_token(m, context))
    return OnDeviceResult(m.id or m.name, hw.id, fmt.name, weights, token_bytes, hw.usable_memory_capacity.si,
                          decode_s, prefill, kv, hw.kind)


#: Tokens of the prompt whose rate is given (llama-bench's pp512).
PROMPT_TOKENS = 512


def attention_flops_per_prompt_token(m: ModelSpec, context: int) -> float:
    """Attention FLOPs of one prompt token [FLOP]: q.k and p.v over the keys before it, on
    average ``context + PROMPT_TOKENS / 2`` of them, fewer in a layer with a window; none in a
    linear-attention layer (its state update is in the projections)."""
    span = context + PROMPT_TOKENS / 2.0
    width = m.num_attention_heads * m.head_dim
    return sum(4.0 * width * count * (min(span, layer.window) if layer.window else span)
               for layer, count in m.layer_groups if layer.attention != "linear")
