"""Vision-language models: image tokens from the processor, the vision encoder, TTFT with images.

Physics
-------
An image enters the language model as soft tokens whose count the processor decides [1-3]:

- ``dynamic`` (Qwen2.5-VL): the image is resized to multiples of ``patch x merge`` = 28
  pixels per side, keeping its aspect ratio, scaled into ``[min_pixels, max_pixels]``; each
  14-pixel patch is a ViT position and each 2 x 2 group of them one token:
  ``tokens = (H' / 28) (W' / 28)``. Tokens grow with the pixel count.
- ``tiles`` (Llama 4): the image is cut into 336 x 336 tiles (up to 16, here ``ceil`` per
  side, the longer side shrunk until the cap holds), each tile 24 x 24 = 576 patches that a
  pixel shuffle of ratio 0.5 turns into 144 tokens, plus a global thumbnail tile when there
  is more than one.
- ``fixed`` (Gemma 3): every image is resized to 896 x 896 (64 x 64 patches) and pooled to
  256 tokens; pan-and-scan adds 256 per extra crop.

The vision encoder is a ViT over the patches (full attention per image or tile; Qwen2.5-VL
attends within 112-pixel windows, 8 x 8 patches, except in its four full-attention
layers), then a projector into the language model's width. Time to first token is the
host's image processing, the encoder pass and the language model's prefill of text and
image tokens together.

Beside its GEMMs and attention, every encoder layer runs memory-bound passes whose cost
depends on the implementation (:func:`layer_passes`): a serving engine's fused norm and
SiLU-and-mul kernels, or transformers' reference modules, whose RMSNorm goes through float32
in six kernels (36 bytes per element against 4). The attention runs at the share of peak of
the kernel the implementation calls, where it is known (:mod:`.attention_kernels`):
FlashAttention-2 reaches a third of an H100's peak and computes SigLIP's head dim of 72 as 96.

The engines and transformers run the encoder in eager PyTorch (no CUDA graphs unless asked
for), so the host issues its ops one by one and a small image's pass waits on the host
(:mod:`.eager`): at 256 patches a SigLIP layer's kernels take the GPU less time than the
host takes to issue its 26 PyTorch calls.

Before the GPU sees an image, the processor resizes, rescales, normalizes and cuts it into
patches on the host CPU, one image after another: a cost per megapixel of the resized image
that depends on the processor's implementation, not on the GPU. For Qwen2-VL's processor
the published figures are about 0.19 s per megapixel for the PIL/NumPy implementation (a
1024 x 1024 image in about 200 ms under vLLM [4]), and transformers' torchvision
implementations run 1.95-3.09x faster than the PIL ones on PIL input [5] (2.45x taken, the
geometric mean: 0.078 s per megapixel); Hugging Face made the torchvision one the default
for Qwen2-VL and Qwen2.5-VL in 2025 [6]. A catalog entry without a published figure adds
no host time.

Under load (:func:`serve_images`) a request with images is its own workload: a prompt of
text plus image tokens in the serving simulation, the encoder pass added to each request
as a serial cost before its prefill (engines run the encoder in the same GPU steps; this
leaves out its contention with other requests' decode, about 1% of an H100 step per
image).

References
----------
.. [1] Bai et al., "Qwen2.5-VL technical report", 2025, Section 2.1; transformers
   ``Qwen2VLImageProcessor.smart_resize``.
.. [2] Meta, Llama 4 model card and transformers ``Llama4ImageProcessor`` (tile 336,
   max_patches 16, pixel_shuffle_ratio 0.5).
.. [3] Gemma Team, "Gemma 3 technical report", 2025, Section 2.1 (896 x 896 SigLIP, 256
   tokens, pan and scan).
.. [4] QwenLM/Qwen3-VL issue #491 (2024): "Small images like a 1k square takes around
   200ms to process", on vLLM, the time in the image preprocessor.
.. [5] huggingface/transformers pull request #28847, fast image processor benchmark: "1.9541
   times faster" and "3.0876 times faster" for lists of PIL images.
.. [6] huggingface/transformers pull request #39591 (2025): Qwen2-VL and Qwen2.5-VL load
   the fast image processor by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping

from ..core.ops import Elementwise, Gemm, Op
from ..errors import SpecError, option, option_name
from ..specs.hardware import HardwareSpec
from .catalog import ModalitySpec, load_modality
from .eager import eager_pass_s
from .passes import DATASHEET, Efficiency, FullAttention, PassTime, time_pass


#: Longest side over shortest that Qwen2-VL's smart resize takes (transformers
#: ``image_processing_qwen2_vl.smart_resize`` and qwen-vl-utils' ``MAX_RATIO``: a larger one
#: raises "absolute aspect ratio must be smaller than 200").
MAX_ASPECT_RATIO = 200


def _dynamic_size(h: int, w: int, factor: int, lo: int, hi: int) -> tuple[int, int]:
    """Qwen2-VL's smart resize: multiples of ``factor``, pixels within ``[lo, hi]``."""
    hh, ww = max(factor, round(h / factor) * factor), max(factor, round(w / factor) * factor)
    if hh * ww > hi:
        beta = math.sqrt(h * w / hi)
        hh, ww = math.floor(h / beta / factor) * factor, math.floor(w / beta / factor) * factor
    elif hh * ww < lo:
        beta = math.sqrt(lo / (h * w))
        hh, ww = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hh, ww


def _tiles(h: int, w: int, tile: int, cap: int) -> tuple[int, int]:
    rows, cols = math.ceil(h / tile), math.ceil(w / tile)
    while rows * cols > cap:
        if rows >= cols:
            rows -= 1
        else:
            cols -= 1
    return rows, cols


@dataclass(frozen=True)
class ImageLayout:
    """How one image reaches the model: encoder sequences and language-model tokens.

    Attributes
    ----------
    sequences : int
        ViT sequences (tiles or crops; 1 for a dynamic-resolution image).
    patches : int
        ViT positions per sequence.
    tokens : int
        Soft tokens the language model reads for this image.
    """

    sequences: int
    patches: int
    tokens: int

    def megapixels(self, patch: int) -> float:
        """Pixels the processor writes for this image (every patch of ``patch`` pixels a
        side) [MP]."""
        return self.sequences * self.patches * patch * patch / 1e6


def image_layout(spec: ModalitySpec, height: int, width: int, *, crops: int = 0) -> ImageLayout:
    """Encoder sequences, patches and language-model tokens of one ``height x width`` image.

    Examples
    --------
    >>> image_layout(load_modality("qwen2.5-vl-7b"), 1024, 1024).tokens  # 1036 / 28 = 37 per side
    1369
    """
    for name, v in (("height", height), ("width", width)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 100_000:
            raise SpecError(f"{option_name(name)} must be a whole number of pixels from 1 to 100,000, got {v!r:.40}")
    if isinstance(crops, bool) or not isinstance(crops, int) or not 0 <= crops <= 1000:
        raise SpecError(f"{option_name('crops')} must be a whole number from 0 to 1,000, got {crops!r:.40}")
    vc, pc = spec.field("vision_config"), spec.field("processor")
    if crops and (pc["scheme"] != "fixed" or not pc.get("pan_and_scan")):
        raise SpecError(f"{option_name('crops')} (pan and scan) apply to a processor that crops, such as Gemma 3's; "
                        f"{spec.id}'s {pc['scheme']}-size processor has none")
    patch = int(vc["patch_size"])
    if pc["scheme"] == "dynamic":
        if max(height, width) > MAX_ASPECT_RATIO * min(height, width):
            raise SpecError(f"a {width}x{height} image: {spec.id}'s processor refuses an aspect ratio above "
                            f"{MAX_ASPECT_RATIO}:1 (this one is {max(height, width) / min(height, width):,.0f}:1); "
                            "crop or pad it to a shape it takes")
        merge = int(vc["spatial_merge_size"])
        hh, ww = _dynamic_size(height, width, patch * merge, int(pc["min_pixels"]), int(pc["max_pixels"]))
        return ImageLayout(1, (hh // patch) * (ww // patch), (hh // patch // merge) * (ww // patch // merge))
    side = int(vc["image_size"]) // patch
    if pc["scheme"] == "tiles":
        rows, cols = _tiles(height, width, int(vc["image_size"]), int(pc["max_tiles"]))
        n = rows * cols + (1 if rows * cols > 1 else 0)
        per_tile = int(side * side * float(vc["pixel_shuffle_ratio"]) ** 2)
        return ImageLayout(n, side * side, n * per_tile)
    per_image = int(spec.field("mm_tokens_per_image"))
    return ImageLayout(1 + crops, side * side, (1 + crops) * per_image)


#: How an encoder layer's memory-bound passes run: ``fused`` (a serving engine's kernels: one
#: pass per norm, the gated activation fused with its product, q, k and v handed to the
#: attention as views, as vLLM's Qwen2.5-VL does), ``sglang`` (the same kernels plus the three
#: q/k/v copies to contiguous tensors of SGLang's ``VisionAttention``) or ``transformers`` (the
#: reference modules: RMSNorm in float32, the gate's activation and product apart).
IMPLEMENTATIONS = ("fused", "sglang", "transformers")


def layer_passes(vc: Mapping[str, Any], rows: float, implementation: str = "fused") -> list[Elementwise]:
    """The memory-bound passes of every encoder layer over ``rows`` patches, each a kernel
    (``count``: layers x kernels) whose bytes are its reads and writes.

    Notes
    -----
    Per layer, over the width ``h`` and the MLP width ``f`` (bytes per element, B):

    - two norms: one kernel each, reading and writing BF16 (4); the reference RMSNorm
      (Qwen2.5-VL's, transformers' ``Qwen2RMSNorm``) converts to float32 and back in six
      kernels over the activations (two more over the per-row statistics, negligible): to
      float32 (2 + 4), square (4 + 4), mean (4), scale (4 + 4), to BF16 (4 + 2), weight
      (2 + 2): 36;
    - two residual adds (2 + 2 read, 2 written): 6 each;
    - the activation over ``f``: a gated one fused with its product reads both halves and
      writes one (4 + 2), or apart, the activation (2 + 2) then the product (4 + 2); GELU
      (2 + 2);
    - with rotary position embeddings (``rope``: Qwen2.5-VL, Llama 4), queries and keys each
      converted to float32 (2 + 4), rotated in float32 (4 + 4) and converted back (4 + 2): 20
      each (Qwen2.5-VL under vLLM and transformers' flash-attention path call flash-attention's
      rotary kernel; Llama 4 multiplies by complex rotations, the same traffic);
    - under ``sglang``, q, k and v copied to contiguous tensors before the attention kernel
      (SGLang's ``VisionAttention`` splits the packed projection and calls ``.contiguous()`` on
      all three; sglang PR #35336, merged in August 2026, passes the strided views to the fa3,
      fa4, triton_attn and amx_attn backends instead, SDPA keeps the copies): three kernels,
      each reading and writing ``h`` (4): 12. ``fused`` copies nothing there: vLLM's Qwen2.5-VL
      ``VisionAttention`` lost its three copies in vLLM PR #27106 (October 2025) and rearranges
      q, k and v as views; the one copy it keeps, of q and k packed together before the rotary
      kernel (described in vLLM PR #51537, open), is the rotary step's first kernel, the cat of
      q and k. transformers' modules hand the attention strided views too.
    """
    if implementation not in IMPLEMENTATIONS:
        raise SpecError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, got {implementation!r:.40}")
    h, n, f = float(vc["hidden_size"]), int(vc["depth"]), float(vc["intermediate_size"])
    reference_rms = implementation == "transformers" and vc.get("norm", "layernorm") == "rmsnorm"
    passes = [("norms", 2 * (36.0 if reference_rms else 4.0) * h, 2 * (6 if reference_rms else 1)),
              ("residual_adds", 2 * 6.0 * h, 2)]
    if vc.get("hidden_act") == "silu":  # gated
        passes.append(("activation", 10.0 * f, 2) if implementation == "transformers" else ("activation", 6.0 * f, 1))
    else:
        passes.append(("activation", 4.0 * f, 1))
    if vc.get("rope"):
        passes.append(("rotary", 2 * 20.0 * h, 6))
    if implementation == "sglang":
        passes.append(("qkv_copies", 3 * 4.0 * h, 3))
    return [Elementwise(name, elements_read=rows * per_row / kernels, bytes_per_element=1.0, count=n * kernels)
            for name, per_row, kernels in passes]


def vision_ops(spec: ModalitySpec, layout: ImageLayout, images: int, llm_hidden: int,
               implementation: str = "fused") -> tuple[Op, ...]:
    """The vision encoder and projector for ``images`` images of ``layout`` (``implementation``:
    :data:`IMPLEMENTATIONS`)."""
    vc: Mapping[str, Any] = spec.field("vision_config")
    h, n, f = int(vc["hidden_size"]), int(vc["depth"]), int(vc["intermediate_size"])
    heads, patch = int(vc["num_heads"]), int(vc["patch_size"])
    seqs = images * layout.sequences
    rows = seqs * layout.patches
    gated = vc.get("hidden_act") == "silu"
    full = len(vc.get("fullatt_block_indexes", ())) or n
    window = (int(vc["window_size"]) // patch) ** 2 if "window_size" in vc else layout.patches
    temporal = int(vc.get("temporal_patch_size", 1))
    ops: list[Op] = [
        Gemm("patch_embed", m=rows, n=h, k=3 * temporal * patch * patch),
        Gemm("qkv", m=rows, n=3 * h, k=h, count=n),
        FullAttention("attention_full", batch=seqs, seq=layout.patches, heads=heads, head_dim=h / heads, count=full),
        Gemm("o_proj", m=rows, n=h, k=h, count=n),
        Gemm("mlp_up", m=rows, n=(2 if gated else 1) * f, k=h, count=n),
        Gemm("mlp_down", m=rows, n=h, k=f, count=n),
        *layer_passes(vc, rows, implementation),
        Gemm("projector", m=images * layout.tokens, n=llm_hidden, k=h * rows // max(images * layout.tokens, 1)),
    ]
    if full < n:
        ops.append(FullAttention("attention_window", batch=rows / window, seq=window, heads=heads,
                                 head_dim=h / heads, count=n - full))
    return tuple(ops)


@dataclass(frozen=True)
class VisionResult:
    """Time to first token of one request with images."""

    model: str
    hardware: str
    images: int
    layout: ImageLayout
    text_tokens: int
    encoder: PassTime
    prefill_s: float
    host_s: float = 0.0
    encoder_eager_s: float | None = None

    @property
    def image_tokens(self) -> int:
        """Soft tokens of all images [token]."""
        return self.images * self.layout.tokens

    @property
    def encoder_s(self) -> float:
        """The vision encoder's time [s]: its eager wall time where run eagerly, else its GPU
        time; none without images."""
        if not self.images:
            return 0.0
        return float(self.encoder.time_s) if self.encoder_eager_s is None else self.encoder_eager_s

    @property
    def ttft_s(self) -> float:
        """Host image processing, vision encoder and language-model prefill [s]."""
        return self.host_s + self.encoder_s + self.prefill_s


def vlm_ttft(model: str | ModalitySpec, hardware: str | HardwareSpec, *, images: int = 1, height: int = 1024,
             width: int = 1024, text_tokens: int = 256, crops: int = 0, tp: int = 1,
             efficiency: Efficiency = DATASHEET, processor: str = "torchvision", implementation: str = "fused",
             attention_kernel: str | None = None, execution: str = "eager", precision: Any = None,
             allow_long_context: bool = False) -> VisionResult:
    """TTFT of one request with ``images`` images of ``height x width`` and ``text_tokens`` of text.

    The language model's prefill is :func:`inferlab.estimate`'s (its calibrated profile);
    the vision encoder is this module's datasheet roofline on one GPU, its memory-bound passes
    as ``implementation`` runs them (:data:`IMPLEMENTATIONS`) and its attention at
    ``attention_kernel``'s share of peak (``fa2``, ``fa3``, ``cudnn``;
    :mod:`.attention_kernels`; None: ``efficiency``'s); the host's image processing is the
    catalog's time per megapixel for ``processor`` (``torchvision``, ``pil``, or ``none`` for
    images processed elsewhere). ``execution``: ``eager`` (the default of vLLM, SGLang and
    transformers: the host issues every op, :mod:`.eager`) or ``graph`` (CUDA graphs: the GPU
    time alone). ``precision``: the language model's formats, as :func:`inferlab.estimate` takes
    them (``fp8``, ``int4``: an FP8 or AWQ checkpoint); the encoder stays 16-bit, as the engines
    run it (their quantized VLM checkpoints leave the vision tower unquantized).
    """
    from ..phases.estimate import estimate
    from ..inputs.resolve import resolve_hardware
    from ..specs.catalog import load_model

    spec = model if isinstance(model, ModalitySpec) else load_modality(model, "vision")
    hw = resolve_hardware(hardware)
    if isinstance(images, bool) or not isinstance(images, int) or not 0 <= images <= 1000:
        raise SpecError(f"{option_name('images')} must be a whole number from 0 to 1,000, got {images!r:.40}")
    if isinstance(text_tokens, bool) or not isinstance(text_tokens, int) or not 0 <= text_tokens <= 10_000_000:
        raise SpecError(f"{option_name('text_tokens')} must be a whole number from 0 to 10,000,000, got {text_tokens!r:.40}")
    if execution not in ("eager", "graph"):
        raise SpecError(f"execution must be 'eager' or 'graph', got {execution!r:.40}")
    if execution == "graph" and (hw.kind != "gpu" or hw.vendor not in ("NVIDIA", "AMD")):  # CUDA or HIP graphs
        raise SpecError(f"{option('execution', 'graph')}: a CUDA (or HIP) graph of the encoder, which {hw.id} "
                        f"({hw.vendor}, {hw.kind}) does not run: use eager")
    layout = image_layout(spec, height, width, crops=crops)
    if text_tokens + images * layout.tokens == 0:
        raise SpecError(f"a request of no images and no text has no prompt to prefill: give {option_name('images')} "
                        f">= 1 or {option_name('text_tokens')} >= 1")
    llm = load_model(str(spec.field("llm")))
    if attention_kernel is not None:
        efficiency = replace(efficiency, attention_kernel=attention_kernel)
    encoder = time_pass(vision_ops(spec, layout, images, llm.hidden_size, implementation), hw, efficiency)
    eager_s = eager_pass_s(encoder, spec.field("vision_config"), implementation, host_op_s=efficiency.host_op_s,
                           launch_s=efficiency.launch_s, op_floor_s=efficiency.op_floor_s
                           ) if execution == "eager" and images else None
    isl = text_tokens + images * layout.tokens
    prefill = float(estimate(llm, hw, isl=isl, osl=1, tp=tp, precision=precision,
                             allow_long_context=allow_long_context).ttft_s)
    host = images * layout.megapixels(int(spec.field("vision_config")["patch_size"])) * host_s_per_megapixel(
        spec, processor)
    return VisionResult(spec.id, hw.id, images, layout, text_tokens, encoder, prefill, host, eager_s)


def host_s_per_megapixel(spec: ModalitySpec, processor: str = "torchvision") -> float:
    """Host time of ``spec``'s image processor per megapixel written [s/MP] (0 without a
    published figure)."""
    per = spec.field("processor").get("host_s_per_megapixel") or {}
    if processor == "none":
        return 0.0
    if processor not in ("torchvision", "pil"):
        raise SpecError(f"processor must be 'torchvision', 'pil' or 'none', got {processor!r:.40}")
    return float(per.get(processor, 0.0))


def serve_images(model: str | ModalitySpec, hardware: str | HardwareSpec, *, images: int = 4, height: int = 1024,
                 width: int = 1024, text_tokens: int = 256, osl: int = 256, rate: float | None = None,
                 concurrency: int | None = None, num_requests: int = 200, tp: int = 1, crops: int = 0,
                 efficiency: Efficiency = DATASHEET, implementation: str = "fused", attention_kernel: str | None = None,
                 execution: str = "eager", precision: Any = None, allow_long_context: bool = False):
    """Serve requests of ``images`` images plus ``text_tokens`` of text (:func:`inferlab.serve`).

    Each request's vision encoder pass runs on the replica's GPUs in the iteration that starts
    its prefill (``prompt_gpu_s``, as vLLM and SGLang schedule it), so it takes GPU time from
    every request in that iteration and bounds the rate the replica carries; its host image
    processing (the API server's CPU) comes before it reaches the engine. Returns the serving
    result; its user-side latencies (``result.user``) add the host processing.
    """
    from ..serving.serve import serve
    from ..serving.overheads import ClientOverheads
    from ..specs.catalog import load_model

    one = vlm_ttft(model, hardware, images=images, height=height, width=width, text_tokens=text_tokens, crops=crops,
                   tp=tp, efficiency=efficiency, implementation=implementation, attention_kernel=attention_kernel,
                   execution=execution, precision=precision, allow_long_context=allow_long_context)
    llm = load_model(str((model if isinstance(model, ModalitySpec) else load_modality(model, "vision")).field("llm")))
    return serve(llm, hardware, tp=tp, precision=precision, isl=text_tokens + one.image_tokens, osl=osl, rate=rate,
                 concurrency=concurrency,
                 num_requests=num_requests, overheads=ClientOverheads(client_s_per_request=one.host_s),
                 allow_long_context=allow_long_context, prompt_gpu_s=one.encoder_s)
