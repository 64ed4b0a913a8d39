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


def test_a_four_image_request_is_its_own_serving_workload():
    from inferlab.modalities.vision import serve_images

    r = serve_images("qwen2.5-vl-7b", "h100-sxm", images=4, rate=1, num_requests=40)
    ttft = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=4)
    # the prompt holds 256 text + 4 x 1369 image tokens; users wait for the host and encoder too
    assert r.workload.isl.value == 256 + 4 * 1369
    wait = ttft.host_s + float(ttft.encoder.time_s)
    assert float(r.user.ttft_s.mean()) >= float(r.ttft_s.mean()) + wait * (1 - 1e-9)


def test_no_image_costs_no_encoder_and_crops_are_gemma_s():
    from inferlab.errors import SpecError
    from inferlab.modalities.vision import vlm_ttft

    r = vlm_ttft("qwen2.5-vl-7b", "h100-sxm", images=0)
    assert r.encoder_s == 0.0 and r.ttft_s == r.prefill_s
    with pytest.raises(SpecError, match="crops .pan and scan. apply to fixed-size processors"):
        vlm_ttft("qwen2.5-vl-7b", "h100-sxm", crops=3)
