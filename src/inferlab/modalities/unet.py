"""Op graphs of a latent-diffusion UNet (Stable Diffusion XL style) and of its VAE decoder.

Convolutions run as implicit GEMMs: a ``k x k`` convolution from ``c_in`` to ``c_out``
channels over ``H x W`` pixels is ``M = batch H W``, ``N = c_out``, ``K = k^2 c_in``, so
``2 batch H W k^2 c_in c_out`` FLOPs [1]. The UNet walks down its resolution levels
(ResNet blocks, transformer blocks where the level's type says ``CrossAttn``, a stride-2
convolution between levels), through the middle block, and back up, each up-level taking
``layers_per_block + 1`` ResNet blocks whose inputs concatenate the skip connection saved
on the way down [2]. A transformer block at ``C`` channels holds self-attention over the
``H W`` latent pixels, cross-attention to the text tokens and a GEGLU feed-forward
(``C -> 8C``, ``4C -> C``) [2].

The graph is what a compiler leaves: elementwise work fused into the GEMMs and norms around
it. Run eagerly (diffusers without ``torch.compile``), every elementwise op is its own
kernel and its own pass over the activations [3]: a ResNet block adds two SiLUs, the
broadcast add of the time embedding, the residual add and the division by
``output_scale_factor`` (four without a time embedding, in the VAE); a spatial transformer
adds its group norm, the two layout copies around ``proj_in``/``proj_out`` and its residual
add; each of its blocks adds three residual adds, per attention the copy that merges the
heads and the division by ``rescale_output_factor``, GEGLU's GELU and product, and the
separate launches of its query, key and value projections. Each such kernel costs a launch
floor plus its bytes.

References
----------
.. [1] Chetlur et al., "cuDNN: efficient primitives for deep learning", 2014 (convolution
   as a matrix multiply).
.. [2] Podell et al., "SDXL: improving latent diffusion models for high-resolution image
   synthesis", ICLR 2024, Table 1; diffusers ``UNet2DConditionModel``.
.. [3] diffusers ``ResnetBlock2D.forward``, ``Transformer2DModel`` (continuous input, linear
   projections), ``BasicTransformerBlock.forward``, ``AttnProcessor2_0`` and ``GEGLU``.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..core.ops import Elementwise, Gemm, Op
from .passes import FullAttention, norm


def conv(name: str, pixels: float, c_in: float, c_out: float, precision: str, *, kernel: int = 3) -> Gemm:
    """A ``kernel x kernel`` convolution over ``pixels`` output positions as one GEMM."""
    return Gemm(name, m=pixels, n=c_out, k=kernel * kernel * c_in, precision=precision)


def resnet(name: str, pixels: float, c_in: int, c_out: int, precision: str, *, eager: bool = False,
           temb: bool = True) -> list[Op]:
    """A ResNet block: two 3x3 convolutions, group norms and a 1x1 shortcut when widths differ;
    ``eager`` adds the elementwise kernels a compiler would fuse (module notes)."""
    ops: list[Op] = [conv(f"{name}.conv1", pixels, c_in, c_out, precision),
                     conv(f"{name}.conv2", pixels, c_out, c_out, precision),
                     norm(f"{name}.norms", pixels, c_in + c_out)]
    if c_in != c_out:
        ops.append(conv(f"{name}.shortcut", pixels, c_in, c_out, precision, kernel=1))
    if eager:  # SiLU on the input; time-embedding add, SiLU, scale division on the output; residual add
        ops += [norm(f"{name}.eager_silu_in", pixels, c_in, passes=1.0),
                norm(f"{name}.eager_out", pixels, c_out, count=3 if temb else 2, passes=1.0),
                norm(f"{name}.eager_residual", pixels, c_out)]
    return ops


def transformer(name: str, batch: float, pixels: float, width: int, layers: int, heads: int,
                text_tokens: int, text_width: int, precision: str, *, eager: bool = False) -> list[Op]:
    """A spatial transformer of ``layers`` blocks over ``pixels`` latent positions per image;
    ``eager`` adds the elementwise kernels a compiler would fuse (module notes)."""
    rows = batch * pixels
    g = dict(count=layers, precision=precision)
    hd = width / heads
    eager_ops: list[Op] = [
        norm(f"{name}.eager_group_norm_residual", rows, width, count=2),
        norm(f"{name}.eager_layout_copies", rows, width, count=2, passes=1.0),
        norm(f"{name}.eager_block_residuals", rows, width, count=3 * layers),
        norm(f"{name}.eager_head_merges_and_rescales", rows, width, count=4 * layers, passes=1.0),
        norm(f"{name}.eager_geglu", rows, 4 * width, count=2 * layers, passes=1.5),
        # to_q, to_k, to_v and the cross-attention's to_q apart from to_out, to_k apart from to_v
        Elementwise(f"{name}.eager_separate_projections", elements_read=0.0, elements_written=0.0,
                    count=4 * layers),
    ] if eager else []
    return eager_ops + [
        Gemm(f"{name}.proj_in_out", m=rows, n=width, k=width, count=2, precision=precision),
        Gemm(f"{name}.self_qkv", m=rows, n=3 * width, k=width, **g),
        FullAttention(f"{name}.self_attention", batch=batch, seq=pixels, heads=heads, head_dim=hd, count=layers),
        Gemm(f"{name}.self_o", m=rows, n=width, k=width, **g),
        Gemm(f"{name}.cross_q_o", m=rows, n=2 * width, k=width, **g),
        Gemm(f"{name}.cross_kv", m=batch * text_tokens, n=2 * width, k=text_width, **g),
        FullAttention(f"{name}.cross_attention", batch=batch, seq=pixels, kv_seq=text_tokens, heads=heads,
                      head_dim=hd, count=layers),
        Gemm(f"{name}.ff_geglu", m=rows, n=8 * width, k=width, **g),
        Gemm(f"{name}.ff_out", m=rows, n=width, k=4 * width, **g),
        norm(f"{name}.norms", rows, width, count=3 * layers),
    ]


def unet_ops(cfg: Mapping[str, Any], batch: float, lat_h: int, lat_w: int, precision: str, *,
             eager: bool = False) -> tuple[Op, ...]:
    """Ops of one UNet pass over ``batch`` latents of ``lat_h x lat_w`` (``eager``: unfused)."""
    ch = list(cfg["block_out_channels"])
    layers = int(cfg["layers_per_block"])
    depth = list(cfg["transformer_layers_per_block"])
    heads = list(cfg["attention_head_dim"])
    text = (int(cfg["text_tokens"]), int(cfg["cross_attention_dim"]))
    h, w, c = lat_h, lat_w, ch[0]
    ops: list[Op] = [conv("conv_in", batch * h * w, cfg["in_channels"], c, precision)]
    skips = [c]
    for i, kind in enumerate(cfg["down_block_types"]):
        for j in range(layers):
            ops += resnet(f"down{i}.res{j}", batch * h * w, c, ch[i], precision, eager=eager)
            c = ch[i]
            if "CrossAttn" in kind:
                ops += transformer(f"down{i}.attn{j}", batch, h * w, c, depth[i], heads[i], *text, precision,
                                   eager=eager)
            skips.append(c)
        if i < len(ch) - 1:
            h, w = h // 2, w // 2
            ops.append(conv(f"down{i}.downsample", batch * h * w, c, c, precision))
            skips.append(c)
    ops += resnet("mid.res0", batch * h * w, c, c, precision, eager=eager)
    ops += transformer("mid.attn", batch, h * w, c, depth[-1], heads[-1], *text, precision, eager=eager)
    ops += resnet("mid.res1", batch * h * w, c, c, precision, eager=eager)
    for i, kind in enumerate(cfg["up_block_types"]):
        level = len(ch) - 1 - i
        for j in range(layers + 1):
            ops += resnet(f"up{i}.res{j}", batch * h * w, c + skips.pop(), ch[level], precision, eager=eager)
            c = ch[level]
            if "CrossAttn" in kind:
                ops += transformer(f"up{i}.attn{j}", batch, h * w, c, depth[level], heads[level], *text, precision,
                                   eager=eager)
        if i < len(ch) - 1:
            h, w = h * 2, w * 2
            ops.append(conv(f"up{i}.upsample", batch * h * w, c, c, precision))
    ops.append(conv("conv_out", batch * h * w, c, cfg["in_channels"], precision))
    return tuple(ops)


def vae_decoder_ops(vae: Mapping[str, Any], batch: float, lat_h: int, lat_w: int, precision: str, *,
                    eager: bool = False) -> tuple[Op, ...]:
    """Ops of the VAE decoder turning ``batch`` latents into images (8x per side for 4 levels).

    The decoder mirrors ``block_out_channels``: a middle block (two ResNet blocks around a
    one-head attention over the latent pixels), then per level ``layers_per_block + 1``
    ResNet blocks and a 2x upsampling convolution, widest level first.
    """
    ch = list(reversed(vae["block_out_channels"]))
    layers = int(vae["layers_per_block"]) + 1
    h, w, c = lat_h, lat_w, ch[0]
    ops: list[Op] = [conv("vae.conv_in", batch * h * w, vae["latent_channels"], c, precision)]
    r = dict(eager=eager, temb=False)
    ops += resnet("vae.mid.res0", batch * h * w, c, c, precision, **r)
    ops += [Gemm("vae.mid.attn_proj", m=batch * h * w, n=c, k=c, count=4, precision=precision),
            FullAttention("vae.mid.attention", batch=batch, seq=h * w, heads=1, head_dim=c)]
    ops += resnet("vae.mid.res1", batch * h * w, c, c, precision, **r)
    for i, width in enumerate(ch):
        for j in range(layers):
            ops += resnet(f"vae.up{i}.res{j}", batch * h * w, c, width, precision, **r)
            c = width
        if i < len(ch) - 1:
            h, w = h * 2, w * 2
            ops.append(conv(f"vae.up{i}.upsample", batch * h * w, c, c, precision))
    ops.append(conv("vae.conv_out", batch * h * w, c, 3, precision))
    return tuple(ops)
