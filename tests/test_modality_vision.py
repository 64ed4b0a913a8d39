"""VLMs: image tokens as the processors count them, growth with resolution, TTFT with images."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError
from inferlab.modalities.catalog import load_modality
from inferlab.modalities.vision import image_layout, vlm_ttft

QWEN = load_modality("qwen2.5-vl-7b")


def test_qwen25vl_tokens_by_hand():
    # 448 x 448: multiples of 28 already; 16 x 16 merged tokens = 256 (32 x 32 = 1024 patches).
    assert image_layout(QWEN, 448, 448).tokens == 256
    assert image_layout(QWEN, 448, 448).patches == 1024
    # 1024 x 1024: round(1024 / 28) = 37 -> 1036 px per side -> 37 x 37 = 1369 tokens.
    assert image_layout(QWEN, 1024, 1024).tokens == 1369
    # Tiny images are scaled up to min_pixels = 3136 = 56 x 56 -> 2 x 2 = 4 tokens.
    assert image_layout(QWEN, 20, 20).tokens == 4
    # 8000 x 4000 (32 MP) is scaled under max_pixels 12,845,056 by beta = sqrt(32e6 / 12,845,056)
    # = 1.5784: floor(8000 / 1.5784 / 28) = floor(181.02) = 181, floor(4000 / 1.5784 / 28) = 90.
    assert image_layout(QWEN, 8000, 4000).tokens == 181 * 90


def test_gemma3_is_fixed_and_llama4_tiles():
    gemma, llama = load_modality("gemma-3-27b"), load_modality("llama-4-scout")
    assert image_layout(gemma, 300, 300).tokens == image_layout(gemma, 3000, 2000).tokens == 256
    assert image_layout(gemma, 3000, 2000, crops=2).tokens == 768  # pan and scan: 256 per crop
    # One 336 x 336 tile: 24 x 24 = 576 patches, pixel shuffle 0.5 -> 144 tokens, no thumbnail.
    assert image_layout(llama, 336, 336).tokens == 144
    # 672 x 336: 2 tiles + global thumbnail = 3 x 144.
    assert image_layout(llama, 336, 672).tokens == 432


@settings(max_examples=60, deadline=None)
@given(h=st.integers(56, 4000), w=st.integers(56, 4000), scale=st.floats(1.05, 3.0))
def test_image_tokens_grow_with_resolution(h, w, scale):
    small = image_layout(QWEN, h, w).tokens
    big = image_layout(QWEN, int(h * scale), int(w * scale)).tokens
    # above max_pixels (12,845,056 = 16,384 tokens) the processor scales both images into the
    # cap and floors each side to 28 pixels: the count stays within 2% below the cap, and a
    # larger image may land a row of tokens lower (3570 x 3571 gives 16,384, twice it 16,256)
    cap = 12_845_056 / 784
    assert big >= small or (big >= 0.98 * cap and small <= cap)
    # and track the pixel count: within the rounding to 28-pixel multiples
    hh, ww = int(h * scale), int(w * scale)
    if hh * ww < 12_845_056:
        assert big == pytest.approx(hh * ww / 784, rel=0.25, abs=4)


def test_host_processing_by_hand():
    # 1024 x 1024 -> 1036 x 1036 written = 1.073296 MP; torchvision 0.078 s/MP -> 83.7 ms,
    # PIL 0.19 s/MP -> 203.9 ms; an image processed elsewhere costs the host nothing.
    r = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=1)
    assert r.host_s == pytest.approx(1.073296 * 0.078)
    assert vlm_ttft("qwen2.5-vl-7b", "h100-sxm", processor="pil").host_s == pytest.approx(1.073296 * 0.19)
    none = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", processor="none")
    assert none.host_s == 0.0 and none.ttft_s == pytest.approx(r.ttft_s - r.host_s)
    with pytest.raises(SpecError, match="processor"):
        vlm_ttft("qwen2.5-vl-7b", "h100-sxm", processor="opencv")


@settings(max_examples=20, deadline=None)
@given(images=st.integers(0, 6), h=st.integers(56, 3000), w=st.integers(56, 3000))
def test_host_processing_is_per_pixel_and_independent_of_the_gpu(images, h, w):
    a = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=images, height=h, width=w, text_tokens=16)
    b = vlm_ttft("qwen2.5-vl-7b", "l4", images=images, height=h, width=w, text_tokens=16)
    assert a.host_s == b.host_s == pytest.approx(images * a.layout.megapixels(14) * 0.078)
    assert vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=images, height=h, width=w, text_tokens=16,
                    processor="pil").host_s >= a.host_s


def test_four_images_cost_four_times_the_tokens_and_more_ttft():
    one = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=1)
    four = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=4)
    assert four.image_tokens == 4 * one.image_tokens
    assert four.ttft_s > one.ttft_s > vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=0).ttft_s


def test_bad_input():
    with pytest.raises(SpecError, match="height must be a whole number"):
        image_layout(QWEN, 0, 100)
    with pytest.raises(SpecError, match="images"):
        vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=-1)


def test_an_image_qwens_processor_refuses_is_refused():
    """Qwen2-VL's smart resize raises on an aspect ratio above 200 (transformers, qwen-vl-utils'
    MAX_RATIO); a 1024 x 1 image had been 37 tokens. 200:1 itself is taken, whichever side is long."""
    for h, w, ratio in ((1, 1024, "1,024"), (100_000, 100, "1,000")):
        with pytest.raises(SpecError, match=rf"refuses an aspect ratio above 200:1 \(this one is {ratio}:1\)"):
            image_layout(QWEN, h, w)
    assert image_layout(QWEN, 28, 5600).tokens == image_layout(QWEN, 5600, 28).tokens > 0


def test_a_four_image_request_is_its_own_serving_workload():
    from inferlab.modalities.vision import serve_images

    r = serve_images("qwen2.5-vl-7b", "h100-sxm", images=4, rate=1, num_requests=40)
    ttft = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=4)
    # the prompt holds 256 text + 4 x 1369 image tokens; the encoder runs on the GPU (in the server's
    # TTFT, each request's at least), users wait for the host's image processing too
    assert r.workload.isl.value == 256 + 4 * 1369
    assert float(r.ttft_s.min()) >= float(ttft.encoder.time_s)
    assert float(r.user.ttft_s.mean()) >= float(r.ttft_s.mean()) + ttft.host_s * (1 - 1e-9)


def test_the_vision_encoder_takes_gpu_time_from_the_replica_under_load():
    """Far past capacity, a replica completes requests no faster than its GPU can run each one's
    encoder pass and prefill in turn: the encoder (74.8 ms here, for 4 images of 1024x1024) plus
    the prompt's matrix FLOPs at the dense BF16 peak, 2 x 7.616e9 parameters x 5,732 tokens /
    989 TFLOPS = 88.3 ms: at most 1 / 0.163 s = 6.1 requests/s. With the encoder outside the GPU
    (as it had been) the same run reported 7.8."""
    from inferlab.modalities.vision import serve_images

    enc = float(vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=4).encoder.time_s)
    r = serve_images("qwen2.5-vl-7b", "h100-sxm", images=4, rate=15, num_requests=300, osl=16)
    prefill_floor = 2 * 7.616e9 * 5732 / 989e12
    assert r.requests_per_s <= 1.0 / (enc + prefill_floor)


def test_no_image_costs_no_encoder_and_crops_are_gemma_s():
    from inferlab.errors import SpecError
    from inferlab.modalities.vision import vlm_ttft

    r = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=0)
    assert r.encoder_s == 0.0 and r.ttft_s == r.prefill_s
    with pytest.raises(SpecError, match="crops .pan and scan. apply to a processor that crops"):
        vlm_ttft("qwen2.5-vl-7b", "h100-sxm", crops=3)


def test_layer_passes_by_hand():
    """Bytes of one encoder layer's memory-bound passes per patch (see layer_passes' notes):
    Qwen2.5-VL (h 1280, f 3420, RMSNorm, gated SiLU, rotary), Gemma 3's SigLIP (h 1152,
    f 4304, LayerNorm, GELU, no rotary)."""
    from inferlab.modalities.vision import layer_passes

    def per_layer(model, implementation):
        vc = load_modality(model).field("vision_config")
        ops = layer_passes(vc, 1.0, implementation)
        depth = int(vc["depth"])
        return sum(op.bytes * op.count for op in ops) / depth, sum(op.count for op in ops) / depth

    # fused (vLLM): norms 2 x 4 h, residual adds 2 x 6 h, SiLU-and-mul 6 f, rotary 2 x 20 h; no q/k/v copies
    assert per_layer("qwen2.5-vl-7b", "fused") == pytest.approx((60 * 1280 + 6 * 3420, 11))
    # sglang: the same and its q/k/v copies 3 x 4 h in 3 kernels
    assert per_layer("qwen2.5-vl-7b", "sglang") == pytest.approx((72 * 1280 + 6 * 3420, 14))
    # transformers: float32 RMSNorm 2 x 36 h in 12 kernels, the gate apart from its product 10 f, no copies
    assert per_layer("qwen2.5-vl-7b", "transformers") == pytest.approx((124 * 1280 + 10 * 3420, 22))
    # LayerNorm and GELU run the same kernels every way: 8 h + 12 h + 4 f; SGLang adds the copies' 12 h
    for implementation in ("fused", "transformers"):
        assert per_layer("gemma-3-27b", implementation) == pytest.approx((20 * 1152 + 4 * 4304, 5))
    assert per_layer("gemma-3-27b", "sglang") == pytest.approx((32 * 1152 + 4 * 4304, 8))
    with pytest.raises(SpecError, match="implementation must be one of fused, sglang, transformers"):
        vlm_ttft("qwen2.5-vl-7b", "h100-sxm", implementation="eager")


def test_attention_kernels_from_published_figures():
    from inferlab.modalities.attention_kernels import attention_fraction, kernel_head_dim
    from inferlab.specs.catalog import load_hardware

    h100, a100, b200, rtx5090, l40s, turing, mi300x = (load_hardware(h) for h in (
        "h100-sxm", "a100-sxm-80gb", "b200", "rtx-5090", "l40s", "rtx-2080-ti", "mi300x"))
    # pytorch/pytorch #142132 on an H100 (989 dense BF16 TFLOPS): SDPA (FlashAttention-2) 329.5,
    # cuDNN 631.3, FlashAttention-3 631.8 TFLOPS
    assert attention_fraction("fa2", h100, 0.55) == pytest.approx(329.483 / 989.0, abs=0.005)
    assert attention_fraction("fa3", h100, 0.55) == pytest.approx(631.827 / 989.0, abs=0.005)
    assert attention_fraction("cudnn", h100, 0.55) == pytest.approx(631.338 / 989.0, abs=0.005)
    # FlashAttention-2 paper: 50-73% of the A100's peak, 0.6 taken, for the sm80 code on Ampere, Ada and
    # the sm_120 Blackwell parts; the datacenter Blackwell runs it at Hopper's share
    for gpu in (a100, l40s, rtx5090):
        assert attention_fraction("fa2", gpu, 0.55) == 0.6
    assert attention_fraction("fa2", b200, 0.55) == attention_fraction("fa2", h100, 0.55)
    # no published share: the datasheet's, head dims as they are
    for kernel, gpu in (("cudnn", a100), ("fa2", mi300x), ("datasheet", h100)):
        assert attention_fraction(kernel, gpu, 0.55) == 0.55
        assert kernel_head_dim(kernel, 72, gpu) == 72
    # a kernel the GPU does not run is refused: FlashAttention-3 is built for Hopper (sm_90) only,
    # cuDNN is NVIDIA's, none of them runs on an Apple GPU
    m2 = load_hardware("m2-ultra")
    for kernel, gpu, message in (("fa3", a100, "FlashAttention-3 runs on Hopper GPUs only"),
                                 ("fa3", b200, "FlashAttention-3 runs on Hopper GPUs only"),
                                 ("cudnn", mi300x, "cudnn is NVIDIA's library"), ("fa2", m2, "does not run")):
        with pytest.raises(SpecError, match=message):
            attention_fraction(kernel, gpu, 0.55)
    with pytest.raises(SpecError, match="--execution graph|execution='graph'"):
        vlm_ttft("qwen2.5-vl-7b", "m2-ultra", execution="graph")
    # head dims as compiled: FlashAttention-2 in steps of 32 up to 192, then 256; FlashAttention-3
    # 64/96/128/192/256; cuDNN multiples of 8
    assert [kernel_head_dim("fa2", d, h100) for d in (64, 72, 80, 128, 130, 200)] == [64, 96, 96, 128, 160, 256]
    assert [kernel_head_dim("fa3", d, h100) for d in (64, 72, 80, 160)] == [64, 96, 96, 192]
    assert kernel_head_dim("cudnn", 72, h100) == 72 and kernel_head_dim("cudnn", 70, h100) == 72
    with pytest.raises(SpecError, match="head dims up to 256"):
        kernel_head_dim("fa2", 512, h100)
    with pytest.raises(SpecError, match="Ampere or later"):
        attention_fraction("fa2", turing, 0.6)
    with pytest.raises(SpecError, match="attention kernel must be one of"):
        vlm_ttft("gemma-3-27b", "h100-sxm", attention_kernel="flash4")


def test_siglip_tower_on_fa2_by_hand():
    """Gemma 3's SigLIP tower on an H100 under FlashAttention-2: 27 layers of attention over
    4,096 patches, 16 heads computed at head dim 96 (72 padded): 4 x 4096^2 x 16 x 96 x 27 FLOPs
    at 0.33 of 989 TFLOPS; FlashAttention-3 (0.64, head dim 96) takes about half of that."""
    fa2 = vlm_ttft("gemma-3-27b", "h100-sxm", text_tokens=0, processor="none", attention_kernel="fa2")
    fa3 = vlm_ttft("gemma-3-27b", "h100-sxm", text_tokens=0, processor="none", attention_kernel="fa3")
    attention = 4 * 4096**2 * 16 * 96 * 27 / (0.33 * 989e12)
    names = [op.name for op in fa2.encoder.ops]
    assert fa2.encoder.compute_s[names.index("attention_full")] == pytest.approx(attention, rel=0.01)
    assert fa2.encoder_s - fa3.encoder_s == pytest.approx(attention * (1 - 0.33 / 0.64), rel=0.02)


def test_the_language_model_takes_a_narrower_format():
    """The error on a slice too small for BF16 weights advises a narrower weight format; vlm
    now takes one for its language model (an FP8 or AWQ checkpoint; the encoder stays 16-bit).
    Qwen2.5-VL-7B's BF16 language model is 15.2 GB, more than the 9.0 GB a 1g.10gb slice gives;
    INT4 weights (0.5 byte a parameter, the 16-bit embedding and LM head aside) fit."""
    from inferlab.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match="narrower weight format"):
        vlm_ttft("qwen2.5-vl-7b", "h100-sxm:1g.10gb")
    small = vlm_ttft("qwen2.5-vl-7b", "h100-sxm:1g.10gb", precision="int4")
    assert small.prefill_s > 0
    bf16, fp8 = (vlm_ttft("qwen2.5-vl-7b", "h100-sxm", precision=p) for p in (None, "fp8"))
    assert fp8.encoder_s == bf16.encoder_s  # the encoder is not quantized
    assert fp8.prefill_s < bf16.prefill_s  # FP8 GEMMs at twice the BF16 rate on an H100


def test_vlm_json_records_the_language_models_format(capsys):
    import json

    from inferlab.cli.main import main

    assert main(["vlm", "qwen2.5-vl-7b", "h100-sxm", "--precision", "fp8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["precision"] == "fp8"
