"""Image and video generation: a denoiser run ``steps`` times, then a VAE decode.

Physics
-------
A diffusion sampler calls the denoiser (a UNet or a diffusion transformer, DiT) once per
step over the whole latent: no KV cache, every token attends to every token, so a pass
at image or video sizes is compute-bound. Classifier-free guidance (CFG) runs each step
twice, with and without the prompt, and mixes the two predictions [1]: ``steps x 2``
passes (engines batch the pair into one pass of twice the batch). Turning guidance off for
the last fraction ``f`` of the steps leaves ``steps x (2 - f)`` passes: off for the last
20% saves 10% of the work [2]. Guidance-distilled models (FLUX.1 [dev]) take the scale as
an input and run one pass per step.

The op graphs are what a compiler leaves (``execution="compiled"``: elementwise work fused
around the GEMMs). ``execution="eager"`` runs the UNet and its VAE as diffusers does without
``torch.compile``, every elementwise op its own kernel and pass (:mod:`.unet`), and FLUX's
blocks likewise (:func:`flux_eager_ops`); the video DiT's are not counted yet.

Quantizing the denoiser to FP8 moves its GEMMs to the faster FP8 tensor path; the bytes it
saves hardly matter, since the pass is compute-bound (attention stays in 16 bits here).

Tokens: an image of ``H x W`` pixels is ``(H / v p) x (W / v p)`` latent patches for a VAE
factor ``v`` and patch ``p`` (FLUX: 8 and 2, so 4096 tokens at 1024 x 1024). A video of
``F`` frames adds a time axis compressed ``v_t`` times: ``(1 + (F - 1) / v_t)`` latent frames
(Wan2.1: ``v_t = 4``, 81 frames at 832 x 480 -> 21 x 30 x 52 = 32,760 tokens). Self-attention
grows with the square of that, so video is dominated by attention.

Context parallelism splits one request's tokens over ``cp`` GPUs (Ulysses sequence
parallelism [3]): each GPU runs ``1/cp`` of the GEMM rows and of the attention queries
against all keys, and each layer exchanges its activations in four all-to-alls (Q, K, V
in, the output back), ``4 (cp - 1) / cp x (T / cp) x D`` elements per GPU per layer.

References
----------
.. [1] Ho & Salimans, "Classifier-free diffusion guidance", 2022, Eq. 6.
.. [2] Baseten, "SDXL inference in under 2 seconds": "Set classifier free guidance (CFG) to
   zero after 8 steps" (of 20), at no visible cost in quality.
.. [3] Jacobs et al., "DeepSpeed Ulysses", 2023, Section 3.
.. [4] diffusers ``FluxTransformerBlock``, ``FluxSingleTransformerBlock``,
   ``FluxAttnProcessor2_0``, ``RMSNorm`` and ``apply_rotary_emb`` (``use_real=True``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import numpy as np

from ..core.interconnect import node_size
from ..core.ops import Elementwise, Gemm, Op
from ..checks import real
from ..errors import SpecError, option, option_name
from ..precision import number_format
from ..specs.hardware import HardwareSpec
from .catalog import ModalitySpec, load_modality
from .passes import DATASHEET, Efficiency, FullAttention, PassTime, check_fits, norm, time_pass
from .unet import unet_ops, vae_decoder_ops


def guided_passes(steps: int, guidance: str, cfg_off_fraction: float = 0.0) -> tuple[int, int]:
    """``(steps with CFG, steps without)`` for a sampler of ``steps`` steps.

    Examples
    --------
    >>> guided_passes(50, "cfg", 0.2)  # 40 x 2 + 10 x 1 = 90 passes of work, not 100
    (40, 10)
    >>> guided_passes(28, "distilled")
    (0, 28)
    """
    if guidance != "cfg":
        return 0, steps
    off = int(round(steps * cfg_off_fraction))
    return steps - off, off


def _tokens(cfg: Mapping[str, Any], height: int, width: int, frames: int) -> tuple[float, int, int]:
    """``(tokens per sample, latent height, latent width)``."""
    if "vae_stride" in cfg:
        st, sh, sw = cfg["vae_stride"]
        pt, ph, pw = cfg["patch_size"]
        lat_f = 1 + (frames - 1) // st
        return float(lat_f // pt * (height // sh // ph) * (width // sw // pw)), height // sh, width // sw
    v = int(cfg["vae_scale_factor"])
    p = int(cfg.get("patch_size", 1))
    return float((height // v // p) * (width // v // p)), height // v, width // v


def flux_ops(cfg: Mapping[str, Any], batch: float, tokens: float, precision: str, cp: int, *,
             eager: bool = False) -> tuple[Op, ...]:
    """One pass of a FLUX-style MMDiT: double-stream blocks, then single-stream blocks
    (``eager``: with the unfused kernels of :func:`flux_eager_ops`)."""
    d = int(cfg["num_attention_heads"]) * int(cfg["attention_head_dim"])
    mlp = int(d * float(cfg["mlp_ratio"]))
    heads, hd = int(cfg["num_attention_heads"]), int(cfg["attention_head_dim"])
    txt = int(cfg["text_tokens"])
    n2, n1 = int(cfg["num_layers"]), int(cfg["num_single_layers"])
    img_rows, txt_rows = batch * tokens / cp, batch * txt / cp
    all_tokens = tokens + txt
    ops: list[Op] = []
    for stream, rows in (("image", img_rows), ("text", txt_rows)):
        g = dict(count=n2, precision=precision)
        ops += [Gemm(f"double.{stream}.qkv", m=rows, n=3 * d, k=d, **g),
                Gemm(f"double.{stream}.o", m=rows, n=d, k=d, **g),
                Gemm(f"double.{stream}.mlp_up", m=rows, n=mlp, k=d, **g),
                Gemm(f"double.{stream}.mlp_down", m=rows, n=d, k=mlp, **g),
                Gemm(f"double.{stream}.modulation", m=batch, n=6 * d, k=d, **g),
                norm(f"double.{stream}.norms", rows, d, count=4 * n2)]
    ops.append(FullAttention("double.joint_attention", batch=batch, seq=all_tokens / cp, kv_seq=all_tokens,
                             heads=heads, head_dim=hd, count=n2))
    rows = batch * all_tokens / cp
    g = dict(count=n1, precision=precision)
    ops += [Gemm("single.qkv_mlp", m=rows, n=3 * d + mlp, k=d, **g),
            FullAttention("single.attention", batch=batch, seq=all_tokens / cp, kv_seq=all_tokens, heads=heads,
                          head_dim=hd, count=n1),
            Gemm("single.out", m=rows, n=d, k=d + mlp, **g),
            Gemm("single.modulation", m=batch, n=3 * d, k=d, **g),
            norm("single.norms", rows, d, count=2 * n1)]
    if eager:
        ops += flux_eager_ops(d, mlp, n2, n1, img_rows, txt_rows, rows)
    return tuple(ops)


def flux_eager_ops(d: int, mlp: int, n2: int, n1: int, img_rows: float, txt_rows: float,
                   rows: float) -> list[Op]:
    """The kernels diffusers' FLUX blocks run unfused when not compiled [4].

    Per stream of a double block: the two adaLN modulations (a product and a sum each), the
    two gated residuals (a product and a sum), the feed-forward's GELU, RMSNorm of the
    queries and keys (8 kernels each through float32: about 34 bytes per element) and the
    separate launches of the key and value projections; over the joint sequence, the three
    concatenations of queries, keys and values, the rotary embedding of the queries and keys
    (8 kernels each through float32: about 52 bytes per element) and the copy merging the
    heads. A single block has one modulation, one gated residual, the MLP's GELU, the same
    norms, rotary embedding and head merge, the concatenation of attention and MLP outputs
    and three separate projection launches.
    """
    ops: list[Op] = []
    for name, r, n in (("double.image", img_rows, n2), ("double.text", txt_rows, n2), ("single", rows, n1)):
        double = name.startswith("double")
        ops += [norm(f"{name}.eager_modulate_gate", r, d, count=n * (6 if double else 3), passes=1.0),
                norm(f"{name}.eager_residual", r, d, count=n * (2 if double else 1)),
                norm(f"{name}.eager_gelu", r, mlp, count=n, passes=1.0),
                norm(f"{name}.eager_qk_rmsnorm", r, d, count=n * 16, passes=17 / 8 - 1),
                Elementwise(f"{name}.eager_separate_projections", elements_read=0.0, elements_written=0.0,
                            count=n * (2 if double else 3))]
    for name, n in (("double.joint", n2), ("single", n1)):
        ops += [norm(f"{name}.eager_qk_rope", rows, d, count=n * 16, passes=26 / 8 - 1),
                norm(f"{name}.eager_concat_merge", rows, d, count=n * (4 if name.startswith("double") else 1),
                     passes=1.0)]
    ops.append(norm("single.eager_concat_attention_mlp", rows, d + mlp, count=n1, passes=1.0))
    return ops


def video_dit_ops(cfg: Mapping[str, Any], batch: float, tokens: float, precision: str, cp: int) -> tuple[Op, ...]:
    """One pass of a Wan-style video DiT: self-attention, text cross-attention, FFN per block."""
    d, f, n = int(cfg["dim"]), int(cfg["ffn_dim"]), int(cfg["num_layers"])
    heads = int(cfg["num_heads"])
    txt = int(cfg["text_tokens"])
    rows = batch * tokens / cp
    g = dict(count=n, precision=precision)
    return (
        Gemm("text_embedding", m=batch * txt, n=d, k=int(cfg["text_dim"]), precision=precision),
        Gemm("self_qkv", m=rows, n=3 * d, k=d, **g),
        FullAttention("self_attention", batch=batch, seq=tokens / cp, kv_seq=tokens, heads=heads,
                      head_dim=d / heads, count=n),
        Gemm("self_o", m=rows, n=d, k=d, **g),
        Gemm("cross_q_o", m=rows, n=2 * d, k=d, **g),
        Gemm("cross_kv", m=batch * txt, n=2 * d, k=d, **g),
        FullAttention("cross_attention", batch=batch, seq=tokens / cp, kv_seq=txt, heads=heads, head_dim=d / heads,
                      count=n),
        Gemm("ffn_up", m=rows, n=f, k=d, **g),
        Gemm("ffn_down", m=rows, n=d, k=f, **g),
        norm("norms", rows, d, count=3 * n),
    )


def denoiser_ops(spec: ModalitySpec, batch: float, height: int, width: int, frames: int = 1,
                 precision: str = "bf16", cp: int = 1, *, eager: bool = False) -> tuple[Op, ...]:
    """One denoiser pass over ``batch`` samples, as seen by one of ``cp`` GPUs (``eager``: a
    UNet's unfused elementwise kernels too)."""
    cfg = spec.config
    tokens, lat_h, lat_w = _tokens(cfg, height, width, frames)
    fmt = number_format(precision)
    if cfg.get("_class_name") == "UNet2DConditionModel":
        if cp != 1:
            raise SpecError(f"{spec.id} is a UNet: context parallelism splits a transformer's tokens; use {option('cp', 1)}")
        ops = unet_ops(cfg, batch, lat_h, lat_w, fmt.compute, eager=eager)
    elif cfg.get("_class_name") == "FluxTransformer2DModel":
        ops = flux_ops(cfg, batch, tokens, fmt.compute, cp, eager=eager)
    else:
        ops = video_dit_ops(cfg, batch, tokens, fmt.compute, cp)
    # the weights are stored in the format (FP8 FLUX holds 11.8 GB, not BF16's 23.7)
    return tuple(replace(op, weight_bytes_per_element=fmt.bytes_per_element) if isinstance(op, Gemm) else op
                 for op in ops)


@dataclass(frozen=True)
class DiffusionResult:
    """Latency of one generation request (``batch`` images or videos together).

    Attributes
    ----------
    guided_steps, plain_steps : int
        Steps run with the CFG pair and with one pass.
    guided_pass, plain_pass : PassTime
        A step's pass at ``2 batch`` and at ``batch`` samples.
    comm_s, guided_comm_s : float
        Context-parallel all-to-alls of one pass at ``batch`` and at the CFG pair's ``2 batch`` [s].
    decode : PassTime or None
        The VAE decode (image models; video VAEs are not modelled).
    """

    model: str
    hardware: str
    cp: int
    batch: int
    tokens: float
    guided_steps: int
    plain_steps: int
    guided_pass: PassTime
    plain_pass: PassTime
    comm_s: float
    decode: PassTime | None
    guided_comm_s: float = 0.0

    @property
    def step_s(self) -> float:
        """Time of a step with guidance (the common step) [s]."""
        if self.guided_steps:
            return float(self.guided_pass.time_s) + self.guided_comm_s
        return float(self.plain_pass.time_s) + self.comm_s

    @property
    def denoise_s(self) -> float:
        """All denoising steps [s]."""
        return (self.guided_steps * (float(self.guided_pass.time_s) + self.guided_comm_s)
                + self.plain_steps * (float(self.plain_pass.time_s) + self.comm_s))

    @property
    def latency_s(self) -> float:
        """Denoising plus VAE decode [s] (text encoding not included)."""
        return self.denoise_s + (float(self.decode.time_s) if self.decode else 0.0)

    @property
    def passes(self) -> float:
        """Denoiser passes of work, a CFG pair counting two [1]."""
        return 2.0 * self.guided_steps + self.plain_steps

    @property
    def weight_bytes(self) -> float:
        """Weights of the denoiser on each GPU [B]."""
        return float(sum(float(np.sum(op.byte_parts()["weight_read"])) * op.count for op in self.plain_pass.ops))


def _check_size(spec: ModalitySpec, height: int, width: int, frames: int) -> None:
    """Refuse a size the model's latent grid does not divide: its pipeline would resize it (FLUX
    floors to 16 pixels, Wan rounds ``frames - 1`` to a multiple of 4), so the work estimated
    would not be for the size asked."""
    cfg = spec.config
    if "vae_stride" in cfg:
        (st, sh, sw), (pt, ph, pw) = cfg["vae_stride"], cfg["patch_size"]
        steps = {"height": sh * ph, "width": sw * pw}
        if frames > 1 and ((frames - 1) % st or (1 + (frames - 1) // st) % pt):
            low = 1 + (frames - 1) // (st * pt) * st * pt
            raise SpecError(f"frames {frames}: {spec.id} encodes 1 + a multiple of {st * pt} frames ({low} or "
                            f"{low + st * pt})")
    else:
        step = int(cfg["vae_scale_factor"]) * int(cfg.get("patch_size", 1))
        steps = {"height": step, "width": step}
    for name, value in (("height", height), ("width", width)):
        if value % steps[name]:
            low = value // steps[name] * steps[name]
            raise SpecError(f"{name} {value}: {spec.id} works in {steps[name]}-pixel steps (its VAE and patch grid): "
                            f"{low} or {low + steps[name]}")


def _whole(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise SpecError(f"{option_name(name)} must be a whole number from {low} to {high:,}, got {value!r:.40}")
    return int(value)


def diffuse(model: str | ModalitySpec, hardware: str | HardwareSpec, *, steps: int = 50, height: int = 1024,
            width: int = 1024, frames: int = 1, batch: int = 1, cfg_off_fraction: float = 0.0,
            precision: str = "bf16", cp: int = 1, execution: str = "compiled",
            efficiency: Efficiency = DATASHEET) -> DiffusionResult:
    """Latency of generating ``batch`` images (or videos of ``frames`` frames) of ``height x width``.

    Parameters
    ----------
    steps : int
        Sampler steps.
    cfg_off_fraction : float
        Share of the last steps run without classifier-free guidance (0: guided throughout).
    precision : str
        Denoiser GEMM format (``bf16``, ``fp8``...); attention stays 16-bit.
    cp : int
        GPUs splitting one request's tokens (context parallelism, DiTs only).
    execution : str
        ``compiled`` (elementwise work fused) or ``eager`` (module notes).
    """
    from ..inputs.resolve import resolve_hardware

    spec = model if isinstance(model, ModalitySpec) else load_modality(model, "diffusion")
    hw = resolve_hardware(hardware)
    steps = _whole("steps", steps, 1, 10_000)
    batch = _whole("batch", batch, 1, 4096)
    cp = _whole("cp", cp, 1, 1024)
    frames = _whole("frames", frames, 1, 100_000)
    for name, v in (("height", height), ("width", width)):
        _whole(name, v, 64, 16_384)
    fmt = number_format(precision)
    if fmt.gguf:
        raise SpecError(f"precision {precision!r}: GGUF types are llama.cpp's LLM formats; diffusion denoisers run "
                        "16-bit, FP8, FP4 or INT8 (W8A8) GEMMs")
    if fmt.weight_only:
        raise SpecError(f"precision {precision!r}: weight-only integers (16-bit compute on narrower weights) have no "
                        "denoiser kernels; diffusion denoisers run 16-bit, FP8, FP4 or INT8 (W8A8) GEMMs")
    cfg_off_fraction = real(option_name("cfg_off_fraction"), cfg_off_fraction, minimum=0.0, maximum=1.0)
    if float(cfg_off_fraction) and spec.config.get("guidance", "cfg") != "cfg":
        raise SpecError(f"cfg_off_fraction: {spec.id} runs no classifier-free guidance (its guidance is "
                        f"{spec.config.get('guidance')}: one pass a step), so there is none to turn off")
    if execution not in ("compiled", "eager"):
        raise SpecError(f"execution must be 'compiled' or 'eager', got {execution!r:.40}")
    eager = execution == "eager"
    guided, plain = guided_passes(steps, str(spec.config.get("guidance", "cfg")), float(cfg_off_fraction))
    if frames > 1 and "vae_stride" not in spec.config:
        raise SpecError(f"{spec.id} generates images: frames must be 1, got {frames} (video models: "
                        f"{', '.join(sorted(_video_models()))})")
    _check_size(spec, height, width, frames)
    tokens, lat_h, lat_w = _tokens(spec.config, height, width, frames)
    _check_cp(spec, cp)
    widest = denoiser_ops(spec, 2 * batch if guided else batch, height, width, frames, precision, cp)
    check_fits(f"{spec.id} at {width}x{height}" + (f"x{frames} frames" if frames > 1 else "") + f", batch {batch}",
               hw, widest)
    guided_pass = time_pass(denoiser_ops(spec, 2 * batch, height, width, frames, precision, cp, eager=eager), hw,
                            efficiency)
    plain_pass = time_pass(denoiser_ops(spec, batch, height, width, frames, precision, cp, eager=eager), hw,
                           efficiency)
    comm = _ulysses_s(spec.config, hw, batch * tokens, cp, efficiency)
    vae = spec.config.get("vae")
    decode = time_pass(vae_decoder_ops(vae, batch, lat_h, lat_w, "bf16", eager=eager), hw, efficiency) if vae else None
    return DiffusionResult(spec.id, hw.id, cp, batch, tokens, guided, plain, guided_pass, plain_pass, comm, decode,
                           _ulysses_s(spec.config, hw, 2 * batch * tokens, cp, efficiency))


def _check_cp(spec: ModalitySpec, cp: int) -> None:
    """Ulysses gives each of the ``cp`` GPUs whole attention heads: ``cp`` must divide them."""
    heads = spec.config.get("num_attention_heads") or spec.config.get("num_heads")
    if cp > 1 and heads and int(heads) % cp:
        sizes = [str(c) for c in range(1, int(heads) + 1) if int(heads) % c == 0]
        raise SpecError(f"{option('cp', cp)}: context parallelism (Ulysses) gives each GPU whole attention heads, and {spec.id} "
                        f"has {heads}; cp must divide them: {', '.join(sizes)}")


def _ulysses_s(cfg: Mapping[str, Any], hw: HardwareSpec, tokens: float, cp: int, efficiency: Efficiency) -> float:
    """All-to-all time of one pass split over ``cp`` GPUs [s] (0 for ``cp = 1``): over the
    scale-up link within its domain, beyond it the share of peers across nodes over the NIC."""
    if cp == 1:
        return 0.0
    d = int(cfg.get("dim") or int(cfg["num_attention_heads"]) * int(cfg["attention_head_dim"]))
    layers = int(cfg.get("num_layers", 0)) + int(cfg.get("num_single_layers", 0))
    link = hw.scale_up.bandwidth or (hw.pcie.bandwidth if hw.pcie else None)
    if link is None:
        raise SpecError(f"{hw.id} lists no scale-up or PCIe bandwidth; context parallelism needs a link")
    per_layer = 4.0 * (cp - 1) / cp * tokens / cp * d * 2.0
    local = min(cp, node_size(hw))
    if local == cp:
        return layers * per_layer / (link.si * efficiency.bandwidth_fraction)
    if hw.scale_out is None:
        raise SpecError(f"{option('cp', cp)} spans more than the {local} GPUs of one {hw.id} node, and {hw.id} lists no "
                        f"network interface to cross nodes; give cp of at most {local}")
    remote = (cp - local) / (cp - 1)  # the share of each GPU's peers (and bytes) in other nodes
    return layers * per_layer * max((1.0 - remote) / link.si, remote / hw.scale_out.bandwidth.si) \
        / efficiency.bandwidth_fraction


def _video_models() -> list[str]:
    from .catalog import modality_ids

    return [m for m in modality_ids("diffusion") if "vae_stride" in load_modality(m).config]
