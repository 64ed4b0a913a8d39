"""MIG slices as hardware views: figures from the MIG user guide, and the slice's speed limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import estimate
from inferlab.errors import SpecError, UnknownNameError
from inferlab.specs.catalog import load_hardware


def test_h100_3g40gb_view_from_the_guide():
    # MIG user guide: 3g profile = 3/7 of the SMs and 4/8 of the memory slices; 40 GB.
    h = load_hardware("h100-sxm:3g.40gb")
    assert h.memory_capacity.stated == "40 GB"
    assert h.memory_bandwidth.si == pytest.approx(3.35e12 / 2)
    assert h.flops["bf16"].si == pytest.approx(989e12 * 3 / 7)
    assert h.scale_up.kind == "none" and h.scale_up.domain_size.si == 1
    assert h.price.si == pytest.approx(load_hardware("h100-sxm").price.si / 2)


def test_1g10gb_is_one_seventh_compute_one_eighth_memory():
    h = load_hardware("A100-SXM-80GB:1g.10gb")
    full = load_hardware("a100-sxm-80gb")
    assert h.flops["bf16"].si == pytest.approx(full.flops["bf16"].si / 7)
    assert h.memory_bandwidth.si == pytest.approx(full.memory_bandwidth.si / 8)


def test_bad_slice_names_say_what_is_allowed():
    with pytest.raises(UnknownNameError, match="did you mean '3g.40gb'"):
        load_hardware("h100-sxm:3g.4gb")
    with pytest.raises(SpecError, match="l4 has no MIG profiles"):
        load_hardware("l4:1g.10gb")
    with pytest.raises(UnknownNameError, match="unknown hardware 'h100-sxx'"):
        load_hardware("h100-sxx:3g.40gb")


@settings(max_examples=12, deadline=None)
@given(batch=st.sampled_from([1, 4, 8]), isl=st.sampled_from([512, 2048, 4096]))
def test_3g_slice_serves_no_faster_than_three_sevenths_of_the_gpu(batch, isl):
    # The slice has 3/7 of the FLOP/s and 1/2 of the bandwidth. The FLOP rate its prefill
    # reaches is at most 3/7 of the whole GPU's dense peak, and every phase takes at least
    # twice as long as on the whole GPU (speed of light on both: profile "roofline").
    full = estimate("llama-3.1-8b", "h100-sxm", isl=isl, osl=64, batch_size=batch, profile="roofline")
    part = estimate("llama-3.1-8b", "h100-sxm:3g.40gb", isl=isl, osl=64, batch_size=batch, profile="roofline")
    prefill_flops = sum(row["flops"] for row in part.op_table("prefill"))
    gpu_peak = load_hardware("h100-sxm").flops["bf16"].si
    assert prefill_flops / float(part.ttft_s) <= 3 / 7 * gpu_peak * (1 + 1e-9)
    assert float(part.ttft_s) >= 2.0 * float(full.ttft_s) * (1 - 1e-9)
    assert float(part.tpot_s) >= 2.0 * float(full.tpot_s) * (1 - 1e-9)


def test_a_replica_cannot_span_mig_slices_or_single_devices():
    """MIG slices have no NVLink or peer-to-peer between them (NVIDIA MIG user guide), and an
    M-series Mac is one device: tp or pp > 1 is refused, replicas (dp) on separate slices are not."""
    from inferlab.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match="MIG slice.*peer-to-peer.*h100-sxm:<profile>"):
        estimate("llama-3.1-8b", "h100-sxm:3g.40gb", tp=2)
    with pytest.raises(InfeasibleError, match="m2-ultra has no link to another device"):
        estimate("llama-3.1-8b", "m2-ultra", pp=2)
    assert estimate("llama-3.1-8b", "h100-sxm:3g.40gb", dp=2).deployment.parallel.dp == 2


def test_a_model_too_big_for_a_slice_is_not_told_to_use_tensor_parallelism():
    """Llama-3.1-70B in BF16 is 141 GB of weights; a 3g.40gb slice has 40 GB: the hint is a
    narrower format (no slice holds it), never tp=N across slices."""
    from inferlab.errors import InfeasibleError

    with pytest.raises(InfeasibleError) as info:
        estimate("llama-3.1-70b", "h100-sxm:3g.40gb")
    assert "tp=" not in str(info.value).split(";")[-1] and "no slice of h100-sxm holds it" in str(info.value)
    assert info.value.suggestion == {}


def test_a_slice_keeps_its_share_of_a_measured_achievable_rate():
    # a 3g slice has 3/7 of the SMs: a full part measured at 700 TFLOPS BF16 sustains 300 on it
    from inferlab.specs.figure import Figure
    from inferlab.specs.mig import mig_view

    full = load_hardware("h100-sxm")
    measured = Figure(si=700e12, unit="flop/second", stated="700 TFLOPS", source=next(iter(full.sources)))
    view = mig_view(full.model_copy(update={"achievable_flops": {"bf16": measured}}), "3g.40gb")
    assert view.achievable_flops["bf16"].si == pytest.approx(300e12)


def test_a_slice_too_small_names_the_smallest_that_holds_the_model():
    # Llama-3.1-8B in BF16 needs 18.3 GB (16.1 of weights): 2g.20gb leaves 0.9 x 20 = 18 GB, so
    # the smallest H100 slice that holds it is 3g.40gb; 70B in FP8 (75.9 GB) fits no slice, not
    # even 7g.80gb (72 GB usable)
    from inferlab import InfeasibleError, estimate

    with pytest.raises(InfeasibleError, match=r"use h100-sxm:3g\.40gb \(the smallest slice that holds it\)"):
        estimate("llama-3.1-8b", "h100-sxm:1g.10gb", precision="bf16")
    with pytest.raises(InfeasibleError, match=r"no slice of h100-sxm holds it \(the largest is 7g\.80gb\)"):
        estimate("llama-3.1-70b", "h100-sxm:1g.10gb", precision="fp8")
