"""Hardware catalog: every spec loads, headline figures match the datasheets."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab import Q, UnknownNameError, hardware_ids, load_hardware

REQUIRED_IDS = {
    "a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h100-nvl", "h800", "h20", "gh200", "h200-sxm",
    "b200", "b300", "gb200", "gb300", "rubin", "rubin-cpx", "l40s", "l4", "rtx-3090-ti", "rtx-4090", "rtx-5090",
    "rtx-pro-6000", "mi300x", "mi325x", "mi355x", "tpu-v5e", "tpu-v6e",
}


def test_catalog_has_every_required_device():
    assert REQUIRED_IDS <= set(hardware_ids())


@pytest.mark.parametrize("hw_id", sorted(REQUIRED_IDS))
def test_every_spec_is_complete_and_sane(hw_id):
    hw = load_hardware(hw_id)
    assert hw.id == hw_id
    assert hw.memory_capacity.si > 0 and hw.memory_bandwidth.si > 0
    assert hw.usable_memory_capacity.si <= 1.1 * hw.memory_capacity.si
    assert hw.flops, "at least one dense tensor rate"
    for path, fig in hw.figures():
        assert fig.source in hw.sources, path
        assert fig.si >= 0, path
    # a 2:4 sparse headline is never below the dense rate
    for prec, fig in hw.sparse_flops.items():
        if prec in hw.flops:
            assert fig.si >= hw.flops[prec].si
    if hw.price is not None:
        assert hw.price.as_of


def _si(hw_id, path):
    obj = load_hardware(hw_id)
    for part in path.split("."):
        obj = obj[part] if isinstance(obj, dict) else getattr(obj, part)
    return obj.si


# Datasheet figures, written here from the vendors' tables (dense = sparse headline / 2).
DATASHEET = [
    # NVIDIA A100 80GB datasheet: 2,039 GB/s (SXM); BF16 312 TF dense (624 sparse); NVLink 600 GB/s; 400 W
    ("a100-sxm-80gb", "memory_bandwidth", "2039 GB/s"),
    ("a100-sxm-80gb", "flops.bf16", "312 TFLOPS"),
    ("a100-sxm-80gb", "sparse_flops.bf16", "624 TFLOPS"),
    ("a100-sxm-80gb", "flops.int8", "624 TOPS"),
    ("a100-sxm-80gb", "scale_up.bandwidth", "300 GB/s"),
    ("a100-sxm-80gb", "tdp", "400 W"),
    # NVIDIA H100 product page, SXM column: 3.35 TB/s; BF16 1,979* TF; FP8 3,958* TF (* with sparsity); 700 W
    ("h100-sxm", "memory_bandwidth", "3.35 TB/s"),
    ("h100-sxm", "flops.bf16", "989 TFLOPS"),
    ("h100-sxm", "flops.fp8", "1979 TFLOPS"),
    ("h100-sxm", "sparse_flops.fp8", "3958 TFLOPS"),
    ("h100-sxm", "scale_up.bandwidth", "450 GB/s"),
    ("h100-sxm", "tdp", "700 W"),
    ("h100-sxm", "memory_capacity", "80 GB"),
    # NVIDIA H200 product page: 141 GB HBM3e, 4.8 TB/s, same tensor rates as H100 SXM
    ("h200-sxm", "memory_capacity", "141 GB"),
    ("h200-sxm", "memory_bandwidth", "4.8 TB/s"),
    ("h200-sxm", "flops.bf16", "989 TFLOPS"),
    ("h200-sxm", "flops.fp8", "1979 TFLOPS"),
    ("h200-sxm", "usable_memory_capacity", "143771 MiB"),  # nvidia-smi total
    # NVIDIA HGX B200 (per GPU, 1000 W): 8 TB/s; FP4 18 PF sparse / 9 PF dense; FP8 4.5 PF dense; BF16 2.25 PF dense
    ("b200", "memory_bandwidth", "8 TB/s"),
    ("b200", "flops.bf16", "2.25 PFLOPS"),
    ("b200", "flops.fp8", "4.5 PFLOPS"),
    ("b200", "flops.fp4", "9 PFLOPS"),
    ("b200", "sparse_flops.fp4", "18 PFLOPS"),
    ("b200", "scale_up.bandwidth", "900 GB/s"),
    # AMD Instinct MI300X: 5.3 TB/s; FP16/BF16 1,307.4 TF dense; FP8 2,614.9 TF dense; 750 W
    ("mi300x", "memory_bandwidth", "5.3 TB/s"),
    ("mi300x", "flops.bf16", "1307.4 TFLOPS"),
    # AMD ROCm blog "Measuring Max-Achievable FLOPs - Part 2": MI300X (750 W, ROCm 6.3.0) sustains
    # 708 TF BF16 and 1,273 TF FP8 on its best hipBLASLt GEMM shape
    ("mi300x", "achievable_flops.bf16", "708 TFLOPS"),
    ("mi300x", "achievable_flops.fp8", "1273 TFLOPS"),
    ("mi300x", "flops.fp8", "2614.9 TFLOPS"),
    ("mi300x", "tdp", "750 W"),
    ("mi300x", "scale_up.peer_bandwidth", "64 GB/s"),
]


@pytest.mark.parametrize("hw_id, path, expected", DATASHEET)
def test_datasheet_figures(hw_id, path, expected):
    assert _si(hw_id, path) == pytest.approx(Q(expected).to_base_units().to(_canonical(expected)).magnitude, rel=1e-3)


def _canonical(text):
    q = Q(text)
    for unit in ("byte/second", "flop/second", "byte", "watt"):
        if q.dimensionality == Q(1, unit).dimensionality:
            return unit
    raise AssertionError(text)


def test_ridge_point_h100_bf16():
    # 989e12 FLOP/s / 3.35e12 B/s = 295.2 FLOP/B
    assert load_hardware("h100-sxm").ridge_point("bf16").magnitude == pytest.approx(295.22, abs=0.01)


def test_a100_has_no_fp8_and_blackwell_ultra_int8_is_not_fp8():
    assert "fp8" not in load_hardware("a100-sxm-80gb").flops
    b300 = load_hardware("b300")
    assert b300.flops["int8"].si < 0.1 * b300.flops["fp8"].si
    with pytest.raises(UnknownNameError, match="tensor precision"):
        load_hardware("a100-sxm-80gb").peak_flops("fp8")


def test_capacity_keeps_the_stated_unit():
    # ROCm lists MI300X VRAM in GiB; NVIDIA labels H100 in GB
    assert load_hardware("mi300x").memory_capacity.stated == "192 GiB"
    assert load_hardware("mi300x").memory_capacity.si == 192 * 2**30
    assert load_hardware("h100-sxm").memory_capacity.stated == "80 GB"
    assert load_hardware("h100-sxm").usable_memory_capacity.si == 81559 * 2**20


def test_nic_bandwidth_is_bits():
    # ConnectX-7 is 400 Gb/s = 50 GB/s per direction
    assert load_hardware("h100-sxm").scale_out.bandwidth.si == pytest.approx(50e9)


def test_unknown_hardware_suggests():
    with pytest.raises(UnknownNameError) as info:
        load_hardware("h100")
    assert "h100-sxm" in str(info.value)


def test_no_tensor_op_is_timed_faster_than_the_part_was_measured_to_run():
    # AMD measured the MI300X's best FP8 GEMM at 1,273 TFLOPS (its clock under load, not the
    # 2,100 MHz boost behind the 2,615 TFLOPS peak): a large FP8 GEMM (M = N = K = 16,384,
    # 8.8 TFLOP) takes at least 8.8e12 / 1.273e15 = 6.9 ms, where the generic fraction of the
    # datasheet peak alone would allow about 4.8 ms. A GPU with no such figure keeps its curve.
    from inferlab.calibration.profile import load_profile
    from inferlab.core.ops import Gemm
    from inferlab.core.timing import time_op
    from inferlab.specs.hardware import HardwareSpec

    mi300x = load_hardware("mi300x")
    gemm = Gemm("big", m=16384, n=16384, k=16384, weight_bytes_per_element=1.0, act_bytes_per_element=1.0,
                precision="fp8")
    flops = 2 * 16384**3
    t = time_op(gemm, mi300x, load_profile("default", engine="generic", hardware_id="mi300x", family="cdna"),
                "prefill")
    assert float(t.compute_s) >= flops / 1.273e15 * (1 - 1e-9)
    unbounded = mi300x.model_copy(update={"achievable_flops": {}})
    t_free = time_op(gemm, unbounded, load_profile("default", engine="generic", hardware_id="mi300x",
                                                   family="cdna"), "prefill")
    assert float(t_free.compute_s) < flops / 1.273e15  # the bound binds here
    import yaml
    from pathlib import Path

    data = yaml.safe_load((Path(__file__).parents[1] / "hardware_specs" / "mi300x.yaml").read_text())
    for bad in ("3000 TFLOPS", "0 TFLOPS"):
        data["achievable_flops"]["fp8"] = {"value": bad, "source": "amd_maf"}
        with pytest.raises(ValueError, match="must be above zero with a dense peak at or above it"):
            HardwareSpec.model_validate(data)


def test_every_timing_path_keeps_the_achievable_bound():
    # The serving simulation's attention, the modality passes and the static estimate all stop
    # at the MI300X's measured 1,273 TFLOPS FP8 (and INT8, its same MFMA rate): with the
    # roofline profile (every fraction 1) a 32k-token FP8 prompt's prefill is the same whether
    # estimated or served, and a W8A8 INT8 prefill is no faster than the FP8 one.
    import inferlab

    kw = dict(profile="roofline", precision="fp8", isl=32768, osl=2)
    est = inferlab.estimate("llama-3.1-8b", "mi300x", batch_size=1, **kw)
    served = inferlab.serve("llama-3.1-8b", "mi300x", rate=0.01, num_requests=1, **kw)
    assert np.isclose(float(served.ttft_s[0]), float(est.ttft_s), rtol=0.05)
    fp8 = inferlab.estimate("llama-3.1-8b", "mi300x", batch_size=8, isl=1024, osl=2, precision="fp8")
    int8 = inferlab.estimate("llama-3.1-8b", "mi300x", batch_size=8, isl=1024, osl=2, precision="int8")
    assert float(int8.ttft_s) >= 0.95 * float(fp8.ttft_s)
    from inferlab.modalities.diffusion import diffuse  # a diffusion transformer's GEMMs are compute-bound

    bounded = diffuse("flux.1-dev", "mi300x")
    free = diffuse("flux.1-dev", load_hardware("mi300x").model_copy(update={"achievable_flops": {}}))
    assert bounded.denoise_s > 1.2 * free.denoise_s


def test_a_sixteen_bit_float_without_a_path_runs_at_the_other_ones_rate():
    """The RTX 2080 Ti (Turing) has FP16 tensor cores (53.8 dense TFLOPS, FP32 accumulate) and no
    BF16 path: a BF16 model runs as FP16 at that rate, not at its INT8 rate (215 TOPS) halved,
    which had made BF16 embeddings 1.8x faster than FP16 on it. A phone listing FP16 only runs BF16
    at that rate; a Zen 4 CPU listing BF16 only (AVX512-BF16 dot products) runs FP16 on its FP32
    FMAs, half the BF16 rate."""
    from inferlab.core.quantization import tensor_flops_per_s
    from inferlab.modalities.embeddings import embed

    turing = load_hardware("rtx-2080-ti")
    assert tensor_flops_per_s(turing, "bf16") == tensor_flops_per_s(turing, "fp16") == pytest.approx(53.8e12, rel=0.01)
    bf16, fp16 = (embed("bge-large-en-v1.5", "rtx-2080-ti", precision=p) for p in ("bf16", "fp16"))
    assert float(bf16.latency_s) == pytest.approx(float(fp16.latency_s))
    phone = load_hardware("snapdragon-8-gen-3")
    assert tensor_flops_per_s(phone, "bf16") == tensor_flops_per_s(phone, "fp16") == phone.flops["fp16"].si
    zen4 = load_hardware("epyc-9654")
    assert tensor_flops_per_s(zen4, "fp16") == pytest.approx(zen4.flops["bf16"].si / 2)


def test_every_tensor_rates_sibling_is_a_catalog_gpu_of_the_same_architecture():
    # a derived rate (explain's "tensor rate: ... derived") is only as good as its sibling: a typo here
    # would surface as an unknown-hardware error at the first estimate, a cross-architecture sibling
    # would borrow another die's ratios
    derived = [load_hardware(i) for i in hardware_ids() if load_hardware(i).tensor_rates_like]
    assert derived, "rubin-cpx names rubin"
    for hw in derived:
        sibling = load_hardware(hw.tensor_rates_like)
        family = lambda h: h.architecture.split()[0].split("-")[0]  # "Rubin (2 dies...)", "Rubin-family die"
        assert family(sibling) == family(hw) and sibling.id != hw.id
        assert not sibling.tensor_rates_like  # published rates, not derived ones
