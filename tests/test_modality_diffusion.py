"""Diffusion: hand-derived token counts and FLOPs, the CFG relations, context parallelism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError
from inferlab.modalities.catalog import load_modality
from inferlab.modalities.diffusion import denoiser_ops, diffuse, guided_passes


def _flops(ops, prefix=""):
    return sum(float(op.flops) * op.count for op in ops if op.name.startswith(prefix))


def test_flux_single_block_flops_by_hand():
    # FLUX.1-dev at 1024 x 1024: 1024/8/2 = 64 -> 64 x 64 = 4096 image tokens + 512 text = 4608.
    # d = 24 x 128 = 3072, MLP 4d = 12288. A single-stream block:
    #   fused in-projection 3072 x (3 x 3072 + 12288) = 66,060,288 weights
    #   out-projection (3072 + 12288) x 3072        = 47,185,920 weights
    #   GEMMs 2 x 4608 x 113,246,208                = 1,043,677,052,928 FLOP
    #   attention 2 x 24 heads x 4608^2 x (128 + 128) = 260,919,263,232 FLOP
    # modulation 2 x 1 x 3072 x 9216 = 56,623,104 FLOP
    ops = denoiser_ops(load_modality("flux.1-dev"), 1, 1024, 1024)
    per_block = _flops(ops, "single.") / 38
    assert per_block == pytest.approx(1_043_677_052_928 + 260_919_263_232 + 56_623_104, rel=1e-9)


def test_video_tokens_by_hand():
    # Wan2.1 at 832 x 480, 81 frames: latent frames 1 + 80 / 4 = 21; 480 / 8 / 2 = 30; 832 / 8 / 2 = 52.
    r = diffuse("wan2.1-t2v-1.3b", "h100-sxm", steps=1, height=480, width=832, frames=81)
    assert r.tokens == 21 * 30 * 52 == 32_760


def test_parameter_counts_match_the_model_cards():
    # SDXL paper (Podell et al. 2023, Table 1): UNet 2.6B parameters.
    # FLUX.1 [dev] model card: "a 12 billion parameter rectified flow transformer".
    assert diffuse("sdxl", "h100-sxm", steps=1).weight_bytes / 2 == pytest.approx(2.6e9, rel=0.03)
    assert diffuse("flux.1-dev", "h100-sxm", steps=1).weight_bytes / 2 == pytest.approx(12e9, rel=0.03)


def test_cfg_doubles_passes_and_off_for_last_20_percent_saves_10_percent():
    full = diffuse("sdxl", "h100-sxm", steps=50)
    assert full.passes == 100  # 50 steps x (1 + 1 guidance pass)
    assert full.guided_pass.flops == pytest.approx(2 * full.plain_pass.flops)
    cut = diffuse("sdxl", "h100-sxm", steps=50, cfg_off_fraction=0.2)
    work = lambda r: r.guided_steps * r.guided_pass.flops + r.plain_steps * r.plain_pass.flops  # noqa: E731
    assert work(cut) / work(full) == pytest.approx(0.9)
    assert cut.denoise_s < full.denoise_s
    assert guided_passes(28, "distilled") == (0, 28)  # FLUX.1 [dev]: one pass per step


@settings(max_examples=20, deadline=None)
@given(model=st.sampled_from(["sdxl", "flux.1-dev", "wan2.1-t2v-1.3b"]),
       gpu=st.sampled_from(["h100-sxm", "a100-sxm-80gb", "l40s", "b200"]),
       side=st.sampled_from([1024, 1536]))
def test_a_diffusion_pass_is_compute_bound(model, gpu, side):
    # At its native size and up; SDXL at 512 x 512 on an H100 is not (its 1280-wide level
    # then sees 16 x 16 = 256 rows, below the ridge point).
    r = diffuse(model, gpu, steps=1, height=side, width=side, frames=9 if model.startswith("wan") else 1)
    assert r.plain_pass.bound == "compute"


def test_fp8_buys_a_faster_compute_path():
    bf16 = diffuse("flux.1-dev", "h100-sxm", steps=28)
    fp8 = diffuse("flux.1-dev", "h100-sxm", steps=28, precision="fp8")
    # GEMMs move to the 2x FP8 tensor rate; attention stays 16-bit, so less than 2x overall.
    assert 1.3 < bf16.denoise_s / fp8.denoise_s < 2.0


def test_context_parallelism_splits_one_video_over_gpus():
    one = diffuse("wan2.1-t2v-14b", "h100-sxm", steps=50, height=720, width=1280, frames=81)
    eight = diffuse("wan2.1-t2v-14b", "h100-sxm", steps=50, height=720, width=1280, frames=81, cp=8)
    assert eight.plain_pass.flops < one.plain_pass.flops / 7.5  # each GPU 1/8 of the work (+ text ops)
    assert eight.comm_s > 0
    assert one.latency_s / 8 < eight.latency_s < one.latency_s / 6


def test_context_parallelism_takes_whole_heads_and_crosses_nodes_over_the_network():
    """Ulysses hands each GPU whole heads: Wan2.1-14B has 40, so cp=16 cannot run (it had been
    priced). Beyond the H100's 8-GPU NVLink domain the all-to-all goes over the NIC: at cp=10,
    2 of each GPU's 9 peers are in the other node, and 2/9 of its bytes at 400 Gb/s (50 GB/s)
    take longer than 7/9 at NVLink's 450 GB/s, though each GPU holds fewer tokens than at cp=8."""
    kw = dict(steps=50, height=720, width=1280, frames=81)
    with pytest.raises(SpecError, match="has 40; cp must divide them: 1, 2, 4, 5, 8, 10, 20, 40"):
        diffuse("wan2.1-t2v-14b", "h100-sxm", cp=16, **kw)
    eight = diffuse("wan2.1-t2v-14b", "h100-sxm", cp=8, **kw)
    ten = diffuse("wan2.1-t2v-14b", "h100-sxm", cp=10, **kw)
    # bytes per GPU per layer: 4 (cp - 1) / cp x T / cp x D x 2; cp=10: 0.36 T D x 2, cp=8: 0.4375 T D x 2
    nvlink, nic = 450e9, 50e9
    assert ten.comm_s / eight.comm_s == pytest.approx((0.36 * 2 / 9 / nic) / (0.4375 / nvlink), rel=1e-6)


def test_bad_input():
    with pytest.raises(SpecError, match="UNet"):
        diffuse("sdxl", "h100-sxm", cp=2)
    with pytest.raises(SpecError, match="cfg_off_fraction"):
        diffuse("sdxl", "h100-sxm", cfg_off_fraction=1.5)
    with pytest.raises(SpecError, match="steps must be a whole number"):
        diffuse("sdxl", "h100-sxm", steps=0)


def test_what_diffusion_cannot_run_is_refused():
    from inferlab.errors import InfeasibleError, SpecError
    from inferlab.modalities.diffusion import diffuse

    with pytest.raises(SpecError, match="sdxl generates images: frames must be 1"):
        diffuse("sdxl", "h100-sxm", frames=81)
    with pytest.raises(SpecError, match="GGUF types are llama.cpp.s LLM formats"):
        diffuse("sdxl", "h100-sxm", precision="q4_k_m")
    # Wan2.1 14B: 14 B parameters x 2 B = 28 GB of BF16 weights, more than a 24 GB L4 or a
    # 10 GB MIG slice holds
    for gpu in ("l4", "h100-sxm:1g.10gb"):
        with pytest.raises(InfeasibleError, match="does not fit"):
            diffuse("wan2.1-t2v-14b", gpu, steps=2)


def test_eager_adds_the_unfused_kernels_by_hand():
    # An eager ResNet block of 64 -> 128 channels over 100 pixels adds a SiLU over its input
    # (100 x 64 read and written), three passes over its output (time-embedding add, SiLU,
    # scale division: 100 x 128 each) and the residual add (two reads, one write): 5 kernels.
    from inferlab.modalities.unet import resnet

    fused = resnet("r", 100, 64, 128, "bf16")
    eager = resnet("r", 100, 64, 128, "bf16", eager=True)
    extra = eager[len(fused):]
    assert sum(op.count for op in extra) == 5
    moved = sum(float(op.bytes) * op.count for op in extra) / 2  # bf16 elements
    assert moved == pytest.approx(2 * 100 * 64 + 3 * 2 * 100 * 128 + 3 * 100 * 128)
    # the VAE's blocks have no time embedding: one kernel fewer
    assert sum(op.count for op in resnet("r", 100, 64, 128, "bf16", eager=True, temb=False)[len(fused):]) == 4


@settings(max_examples=10, deadline=None)
@given(steps=st.integers(1, 60), side=st.sampled_from([512, 768, 1024]))
def test_eager_is_never_faster_than_compiled(steps, side):
    for model in ("sdxl", "flux.1-dev"):
        c = diffuse(model, "a100-sxm-80gb", steps=steps, height=side, width=side)
        e = diffuse(model, "a100-sxm-80gb", steps=steps, height=side, width=side, execution="eager")
        assert e.latency_s >= c.latency_s * (1 - 1e-12)
    with pytest.raises(SpecError, match="execution"):
        diffuse("sdxl", "a100-sxm-80gb", execution="jit")


def test_flux_eager_kernels_by_hand():
    # FLUX.1-dev: 19 double blocks (74 unfused kernels each: per stream 6 modulation/gate
    # products, 2 residual adds, a GELU, 16 RMSNorm kernels, 2 separate projections; over the
    # joint sequence 16 rotary kernels, 3 concatenations, a head merge) and 38 single blocks
    # (3 + 1 + 1 + 16 + 3 + 16 + 1 + 1 = 42): 19 x 74 + 38 x 42 = 3,002 kernels.
    flux = load_modality("flux.1-dev")
    fused = denoiser_ops(flux, 1, 512, 512)
    eager = denoiser_ops(flux, 1, 512, 512, eager=True)
    assert sum(op.count for op in eager) - sum(op.count for op in fused) == 19 * 74 + 38 * 42


def test_fp8_weights_are_stored_in_fp8():
    """FLUX.1-dev's denoiser holds 11.8 B weights in its GEMMs: 23.7 GB in BF16, half in FP8, so
    an FP8 FLUX fits a 20 GB MIG slice that a BF16 one does not."""
    bf16 = diffuse("flux.1-dev", "h100-sxm", precision="bf16")
    fp8 = diffuse("flux.1-dev", "h100-sxm", precision="fp8")
    assert fp8.weight_bytes == pytest.approx(bf16.weight_bytes / 2, rel=1e-6)
    assert diffuse("flux.1-dev", "h100-sxm:2g.20gb", precision="fp8").weight_bytes < 20e9


def test_a_guided_step_all_to_alls_twice_the_tokens():
    """Ulysses moves each pass's tokens; a CFG pair is one pass of 2 x batch samples."""
    r = diffuse("wan2.1-t2v-14b", "h100-sxm", frames=81, height=480, width=832, cp=2)
    assert r.guided_comm_s == pytest.approx(2 * r.comm_s) and r.guided_steps == 50
    assert r.denoise_s == pytest.approx(50 * (float(r.guided_pass.time_s) + r.guided_comm_s))


@pytest.mark.parametrize("kwargs, message", [
    ({"model": "flux.1-dev", "precision": "int4"}, "weight-only integers .* have no denoiser kernels"),
    ({"model": "flux.1-dev", "cfg_off_fraction": 0.5}, "runs no classifier-free guidance"),
])
def test_options_that_do_nothing_for_the_model_are_refused(kwargs, message):
    with pytest.raises(SpecError, match=message):
        diffuse(hardware="h100-sxm", **kwargs)


@pytest.mark.parametrize("precision, weight_bytes", [("int8", 1.0), ("fp32", 4.0), ("mxfp8", 1.03125)])
def test_formats_with_denoiser_kernels_run(precision, weight_bytes):
    """INT8 W8A8 (TensorRT's INT8 diffusion), FP32 and MXFP8 GEMMs run, their weights in their format."""
    bf16 = diffuse("flux.1-dev", "b200", precision="bf16").weight_bytes
    assert diffuse("flux.1-dev", "b200", precision=precision).weight_bytes == pytest.approx(bf16 * weight_bytes / 2,
                                                                                          rel=1e-6)


@pytest.mark.parametrize("model, kw, match", [
    # FLUX: VAE factor 8 x 2x2 packing = 16 pixels a latent token; 1000 = 62 x 16 + 8
    ("flux.1-dev", {"height": 1000}, "height 1000: flux.1-dev works in 16-pixel steps .*: 992 or 1008"),
    # SDXL: VAE factor 8, no packing; 1020 = 127 x 8 + 4
    ("sdxl", {"width": 1020}, "width 1020: sdxl works in 8-pixel steps .*: 1016 or 1024"),
    # Wan2.1: temporal stride 4: 1 + 4k frames; 80 = 1 + 4 x 19 + 3
    ("wan2.1-t2v-14b", {"frames": 80, "height": 480, "width": 832}, "frames 80: .* 1 \\+ a multiple of 4 frames \\(77 or 81\\)"),
    ("wan2.1-t2v-14b", {"frames": 81, "height": 480, "width": 830}, "width 830: .* 16-pixel steps .*: 816 or 832"),
])
def test_a_size_the_latent_grid_does_not_divide_is_refused(model, kw, match):
    """The pipelines resize such inputs (FLUX floors to 16 pixels, Wan rounds frames - 1 to a
    multiple of 4); the estimate had floored them silently, timing another size than asked."""
    with pytest.raises(SpecError, match=match):
        diffuse(model, "h100-sxm", **kw)


def test_a_size_on_the_grid_is_estimated_at_its_own_tokens():
    # 1008 x 1024 at 16 pixels a token: 63 x 64 = 4,032 tokens
    assert diffuse("flux.1-dev", "h100-sxm", height=1008, width=1024).tokens == 4032
