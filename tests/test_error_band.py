"""Error bands: quantiles by hand, pooling and widening rules, intervals of estimates and serve
results, and the coverage of the 80% band on the held-out half of the public cases."""

from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import yaml

import inferlab
from inferlab.calibration.band_files import band_file, parse_table, read_table, table_yaml
from inferlab.calibration.error_band import (
    LEVELS, ErrorBandTable, MissingBandError, Residual, build_table, coverage, weibull_quantiles)
from inferlab.fitting.error_bands import residuals, without_family
from inferlab.calibration.profile import profile_file
from inferlab.cli.main import main
from inferlab.errors import InferlabError, SpecError, UnknownNameError

#: Twenty residuals -0.95, -0.85, ..., 0.95 (steps of 0.1).
TWENTY = [(k - 10.5) / 10 for k in range(1, 21)]


def test_weibull_quantiles_by_hand():
    # 1..9: rank p (n + 1) = 10 p. p = 0.05 -> 0.5, clipped to the smallest; 0.1 -> rank 1 -> 1;
    # 0.25 -> rank 2.5 -> 2.5; 0.5 -> 5; 0.75 -> 7.5; 0.9 -> 9; 0.95 -> 9.5, clipped to 9.
    assert weibull_quantiles(range(1, 10)) == pytest.approx((1, 1, 2.5, 5, 7.5, 9, 9))
    # 0, 1, 2, 10 (given unsorted): rank 5 p. p = 0.25 -> 1.25 -> 0 + 0.25 x 1 = 0.25;
    # 0.5 -> 2.5 -> 1.5; 0.75 -> 3.75 -> 2 + 0.75 x 8 = 8.
    assert weibull_quantiles([10, 0, 2, 1], (0.25, 0.5, 0.75)) == pytest.approx((0.25, 1.5, 8.0))
    with pytest.raises(InferlabError, match="no residuals"):
        weibull_quantiles([])


def _synthetic() -> ErrorBandTable:
    hopper = [Residual("tpot", "static_batch", "hopper", "trtllm", x) for x in TWENTY]
    ampere = [Residual("tpot", "static_batch", "ampere", "lmdeploy", 0.5) for _ in range(5)]
    left_out = [Residual("tpot", "static_batch", "hopper", "trtllm", 2 * x) for x in TWENTY]
    return build_table(hopper + ampere, gpu_left_out=left_out, source="synthetic")


def test_band_of_a_full_cell_by_hand():
    # 80%: p = 0.1 at rank 2.1 -> -0.85 + 0.1 x 0.1 = -0.84; p = 0.9 at rank 18.9 -> 0.75 + 0.9 x 0.1 = 0.84.
    band = _synthetic().band("tpot", "static_batch", "hopper", "trtllm", 0.8)
    assert (band.low, band.high) == pytest.approx((-0.84, 0.84))
    assert band.widened == ()
    assert band.describe() == "from 20 static-batch cases of trtllm on hopper GPUs"


def test_a_small_cell_falls_back_to_the_pool():
    # 5 ampere/lmdeploy residuals: their cell, the lmdeploy and the ampere pools are below 20
    # cases, so the band is the static-batch pool of all 25: TWENTY and five 0.5.
    band = _synthetic().band("tpot", "static_batch", "ampere", "lmdeploy", 0.8)
    expected = weibull_quantiles(TWENTY + [0.5] * 5, (0.1, 0.9))
    assert (band.low, band.high) == pytest.approx(expected, abs=1e-4)
    assert band.describe() == "from 25 static-batch cases of any engine on any GPU"


def test_a_gpu_without_calibration_data_gets_the_left_out_band_too():
    # cdna is not in the table: the trtllm cell (-0.84, 0.84) joined with the left-out
    # residuals 2 x TWENTY, whose 80% band is (-1.68, 1.68).
    band = _synthetic().band("tpot", "static_batch", "cdna", "trtllm", 0.8)
    assert (band.low, band.high) == pytest.approx((-1.68, 1.68))
    assert band.widened == ("gpu",)
    assert "no calibration data for cdna GPUs" in band.wider()


def test_the_band_contains_the_point_estimate_when_every_residual_has_one_sign():
    table = build_table([Residual("ttft", "serving", "hopper", "vllm", 0.2 + x / 10) for x in TWENTY])
    band = table.band("ttft", "serving", "hopper", "vllm", 0.8)
    assert band.low == 0.0 and band.high > 0.2


residual_sets = st.lists(st.floats(-3, 3, allow_nan=False), min_size=20, max_size=60)


@settings(max_examples=60, deadline=None)
@given(residual_sets, residual_sets, st.sampled_from(["hopper", "cdna"]), st.sampled_from(["trtllm", "generic"]))
def test_bands_hold_zero_and_nest_by_level(values, left_out, family, engine):
    table = build_table([Residual("tpot", "serving", "hopper", "trtllm", v) for v in values],
                        gpu_left_out=[Residual("tpot", "serving", "hopper", "trtllm", v) for v in left_out],
                        engine_left_out=[Residual("tpot", "serving", "hopper", "trtllm", v) for v in left_out])
    bands = [table.band("tpot", "serving", family, engine, level) for level in LEVELS]
    for band in bands:
        assert band.low <= 0.0 <= band.high
    for inner, outer in zip(bands, bands[1:]):
        assert outer.low <= inner.low and inner.high <= outer.high
    calibrated = table.band("tpot", "serving", "hopper", "trtllm", 0.8)
    assert bands[1].low <= calibrated.low and calibrated.high <= bands[1].high


def test_unknown_levels_and_names_are_clear_errors():
    table = _synthetic()
    with pytest.raises(InferlabError, match=r"level 0\.7 .*allowed: 0\.5, 0\.8, 0\.9"):
        table.band("tpot", "static_batch", "hopper", "trtllm", 0.7)
    with pytest.raises(UnknownNameError, match="did you mean 'tpot'"):
        table.band("tpott", "static_batch", "hopper", "trtllm")
    with pytest.raises(InferlabError, match="no ttft residuals"):
        table.band("ttft", "static_batch", "hopper", "trtllm")


def test_table_yaml_round_trip_and_bad_files():
    table = _synthetic()
    back = parse_table(table_yaml(table), "test")
    assert back.cells == table.cells and back.families == table.families and back.engines == table.engines
    with pytest.raises(SpecError, match="expected 'schema: inferlab-error-bands/1'"):
        parse_table("cells: []\n", "bad.yaml")
    broken = table_yaml(table).replace("count: 20,", "", 1)
    with pytest.raises(SpecError, match=r"bad.yaml, cell \d+: malformed"):
        parse_table(broken, "bad.yaml")


def test_a_hand_edited_table_with_impossible_cells_is_refused():
    """Quantiles out of order (an interval whose low end is above its high), a NaN, or a count
    below one are no residuals' quantiles: each is refused naming its cell (they had been read
    and turned into reversed or NaN intervals)."""
    text = table_yaml(_synthetic())
    first = text[text.index("  - {"):].splitlines()[0]
    cell = yaml.safe_load(first[4:])
    cases = {"reversed": {**cell, "log_ratio": list(reversed(cell["log_ratio"]))},
             "nan": {**cell, "log_ratio": [float("nan")] + cell["log_ratio"][1:]},
             "count": {**cell, "count": 0}}
    for what, bad in cases.items():
        edited = text.replace(first, "  - " + yaml.safe_dump(bad, default_flow_style=True, width=1000).strip(), 1)
        said = "count must be at least 1" if what == "count" else "log_ratio must be finite and non-decreasing"
        named = re.escape(f"bad.yaml, cell 0 ({cell['quantity']}, {cell['regime']}, {cell['family']}, {cell['engine']}): ")
        with pytest.raises(SpecError, match=named + said):
            parse_table(edited, "bad.yaml")
    # a count is a whole number: 12.0 reads as 12; 12.9, 0.5 or true are no count
    assert parse_table(text.replace(first, "  - " + yaml.safe_dump({**cell, "count": float(cell["count"])},
                                                                    default_flow_style=True, width=1000).strip(), 1),
                       "ok.yaml").cells[0].count == cell["count"]
    for bad in (12.9, 0.5, True):
        edited = text.replace(first, "  - " + yaml.safe_dump({**cell, "count": bad}, default_flow_style=True,
                                                             width=1000).strip(), 1)
        with pytest.raises(SpecError, match="is not a whole number"):
            parse_table(edited, "bad.yaml")


def test_without_family_drops_the_familys_fits_only():
    profile = {"generic": {}, "hardware": {"hopper": {"a": 1}, "h100-sxm": {"a": 2}, "b200": {"a": 3}},
               "overrides": {"trtllm": {"all": {"b": 1}, "h200-sxm": {"b": 2}, "blackwell": {"b": 3}}}}
    out = without_family(profile, "hopper")
    assert out["hardware"] == {"b200": {"a": 3}}
    assert out["overrides"] == {"trtllm": {"all": {"b": 1}, "blackwell": {"b": 3}}}


# --- intervals of real predictions -------------------------------------------------------

def _width(bounds) -> float:
    low, _, high = bounds.at(0)
    return high / low


def test_estimate_interval_contains_the_point_and_nests_by_level():
    est = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", isl=2048, osl=256,
                            batch_size=[1, 8, 64], engine="trtllm")
    intervals = [est.interval(level) for level in LEVELS]
    for iv in intervals:
        for b in (iv.ttft, iv.tpot, iv.throughput):
            assert np.all(b.low <= b.point) and np.all(b.point <= b.high)
    for inner, outer in zip(intervals, intervals[1:]):
        assert np.all(outer.tpot.low <= inner.tpot.low) and np.all(inner.tpot.high <= outer.tpot.high)
    assert est.interval().tpot.point is est.tpot_s


def test_the_tpot_interval_never_falls_below_the_weight_reads():
    # Llama-3.1-8B in BF16 on an L4 (300 GB/s, datasheet), batch 1: a decode step reads every
    # weight but the embedding table, 2 B x (8.030e9 - 128,256 x 4,096) = 15.01 GB, so no TPOT
    # is below 15.01 GB / 300 GB/s = 50.0 ms. The band alone (the point x exp(low)) went below it.
    est = inferlab.estimate("llama-3.1-8b", "l4", precision="bf16", isl=512, osl=256, batch_size=1)
    iv = est.interval(0.8)
    floor = 2.0 * (8.030e9 - 128_256 * 4_096) / 300e9
    assert floor == pytest.approx(0.0500, abs=1e-4)
    assert floor * 0.999 <= iv.tpot.low <= iv.tpot.point
    assert iv.tpot.low < floor * 1.02  # held at the floor: the weights and this batch's small KV cache
    assert iv.tpot.point * np.exp(iv.tpot.band.low) < floor  # the case the floor is for


def test_the_tpot_floor_counts_every_pipeline_stage():
    # Llama-3.1-70B in BF16 over 4 pipeline stages of one H100 (3.35 TB/s): a token passes every
    # stage, so the whole model's weights but the embedding, 2 B x (70.554e9 - 128,256 x 8,192) =
    # 139.0 GB, are read per token: 41.5 ms, though one stage's ops read a quarter of them
    est = inferlab.estimate("llama-3.1-70b", "h100-sxm", pp=4, precision="bf16", isl=512, osl=256, batch_size=1)
    floor = 2.0 * (70.554e9 - 128_256 * 8_192) / 3.35e12
    assert floor == pytest.approx(0.0415, abs=1e-4)
    assert floor <= est.interval(0.8).tpot.low <= est.tpot_s
    assert floor * 0.999 <= est._tpot_floor_s <= est.tpot_s  # the floor the band is held above (one stage: 10.4 ms)


def test_the_served_tpot_interval_never_falls_below_the_weight_reads():
    # the same 50.0 ms floor (see above) for the mean TPOT of a lightly loaded L4
    iv = inferlab.serve("llama-3.1-8b", "l4", precision="bf16", isl=512, osl=128, rate=0.1,
                        num_requests=50).interval(0.8)
    assert 0.0500 * 0.999 <= iv.tpot.low <= iv.tpot.point


# Llama-3.1-8B (32 layers, hidden 4,096, 32 query and 8 KV heads of 128, MLP 14,336, vocabulary
# 128,256): each layer's projections hold 2 x 4,096^2 + 2 x 4,096 x 1,024 + 3 x 4,096 x 14,336 =
# 218.1M weights, 6.979e9 over 32 layers, so a prompt of n tokens costs 2 x 6.979e9 x n FLOPs in
# GEMMs; causal attention 4 x 32 heads x 128 x 32 layers x n(n+1)/2; the LM head one token's
# 2 x 4,096 x 128,256. At n = 8,192: 1.1435e14 + 1.7594e13 + 1.05e9 = 1.3195e14 FLOPs, 133.4 ms at
# the H100 SXM's 989 dense BF16 TFLOPS (NVIDIA H100 page).
def _llama_8b_prefill_flops(n: float) -> float:
    return 2 * 6.979e9 * n + 4 * 32 * 128 * 32 * n * (n + 1) / 2 + 2 * 4_096 * 128_256


def test_the_served_ttft_interval_never_falls_below_one_prompts_flops_at_peak():
    floor = _llama_8b_prefill_flops(8_192) / 989e12
    assert floor == pytest.approx(0.1334, abs=2e-4)
    result = inferlab.serve("llama-3.1-8b", "h100-sxm", precision="bf16", engine="vllm", rate=0.2, isl=8_192, osl=64,
                            num_requests=40)
    iv = result.interval(0.8)
    assert floor * 0.995 <= iv.ttft.low <= iv.ttft.point
    assert iv.ttft.point * np.exp(iv.ttft.band.low) < floor * 0.95  # the band alone went below it
    assert iv.ttft.low < floor * 1.005  # held at the floor, not above it


def test_the_estimated_ttft_floor_is_one_prompts_share_of_the_batch():
    # a batch of 4 such prompts prefilled together: each prompt's share is the one prompt's FLOPs
    from inferlab.phases.interval import ttft_floor_s

    est = inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="bf16", isl=4_096, osl=64, batch_size=[1, 4])
    floor = np.ravel(ttft_floor_s(est.deployment, est.prefill_step.ops, est.wave_batch))
    assert floor == pytest.approx([_llama_8b_prefill_flops(4_096) / 989e12] * 2, rel=5e-3)  # 62.3 ms
    assert np.all(np.ravel(est.interval(0.8).ttft.low) >= floor * 0.999)
    assert np.all(np.ravel(est.ttft_s) >= floor)  # the model's own point is above physics' floor


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "gpt-oss-120b"]),
       gpu=st.sampled_from(["h100-sxm", "b200", "mi300x", "h200-sxm"]), precision=st.sampled_from([None, "fp8"]),
       engine=st.sampled_from(["generic", "vllm", "sglang"]), batch=st.integers(1, 64),
       isl=st.integers(16, 16_384))
def test_no_predicted_ttft_is_below_one_prompts_prefill_at_peak(model, gpu, precision, engine, batch, isl):
    from inferlab.phases.interval import ttft_floor_s

    tp = 1 if model == "llama-3.1-8b" else 2  # gpt-oss-120b in FP8 is 118 GB
    # in waves where the batch's KV cache does not fit at once (57 x 7,873 tokens of Llama-3.1-8B
    # BF16 on an H100 had refused the point): the floor is a wave's prefill
    est = inferlab.estimate(model, gpu, tp=tp, precision=precision, engine=engine, batch_size=batch, isl=isl, osl=32,
                            waves=True)
    floor = float(ttft_floor_s(est.deployment, est.prefill_step.ops, est.wave_batch))
    assert floor > 0.0
    assert float(est.ttft_s) >= floor
    assert est.interval(0.8).ttft.low >= floor * (1 - 1e-12)


@pytest.mark.parametrize("gpu, engine", [("mi300x", "vllm"), ("rubin", "trtllm")])  # TensorRT-LLM: NVIDIA only
def test_a_gpu_without_calibration_data_gets_a_wider_band_than_h100(gpu, engine):
    def interval(hardware):
        return inferlab.estimate("llama-3.1-8b", hardware, precision="fp8", isl=1024, osl=128, batch_size=8,
                                 engine=engine).interval(0.8)

    known, unknown = interval("h100-sxm"), interval(gpu)
    assert "gpu" in unknown.tpot.band.widened and "gpu" not in known.tpot.band.widened
    for name in ("ttft", "tpot"):
        assert _width(getattr(unknown, name)) > _width(getattr(known, name))
    # vLLM has no static-batch fits: its H100 throughput band is already the widest of any family
    assert _width(unknown.throughput) >= _width(known.throughput) * (1 - 1e-12)


def test_explain_and_to_dict_show_the_interval():
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="fp8", batch_size=8, engine="trtllm")
    text = est.explain()
    assert re.search(r"TPOT [\d.]+ ms \(80%: [\d.]+-[\d.]+ ms, from \d+ static-batch cases", text)
    d = est.to_dict()["interval"]
    assert d["level"] == 0.8 and d["tpot_s"]["low"] <= d["tpot_s"]["point"] <= d["tpot_s"]["high"]


def test_serve_result_interval():
    result = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=2, isl=512, osl=64, num_requests=200, engine="vllm")
    iv = result.interval(0.9)
    assert iv.regime == "serving"
    assert iv.ttft.low <= np.nanmean(result.ttft_s) <= iv.ttft.high
    assert iv.throughput.low <= result.output_tokens_per_s <= iv.throughput.high
    assert "80% interval of the mean TTFT" in result.explain()
    assert result.to_dict()["interval"]["output_tokens_per_s"]["unit"] == "tok/s"


@pytest.mark.parametrize("level", ["x", "0.8", None, True, [0.8], 0.95, float("nan")])
def test_a_level_the_table_does_not_hold_is_one_clean_error(level):
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm")
    result = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=2, num_requests=20)
    for source in (est, result):
        with pytest.raises(InferlabError, match="is not in the error band table; allowed: 0.5, 0.8, 0.9"):
            source.interval(level)


def test_a_profile_without_a_table_says_so():
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm", profile="roofline")
    with pytest.raises(MissingBandError, match="no error band table for profile 'roofline'"):
        est.interval()
    assert "no error band table" in est.to_dict()["interval"]["unavailable"]
    assert "no 80% interval" in est.explain()


def test_cli_estimate_text_json_and_bad_level(capsys):
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--engine", "trtllm", "--batch", "1,8"]) == 0
    out = capsys.readouterr().out
    assert "80% interval from the validation residuals:" in out
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--json"]) == 0
    assert '"interval"' in capsys.readouterr().out
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "2", "--num-requests", "100", "--engine", "vllm"]) == 0
    assert "80% interval of the mean TTFT and TPOT and the throughput" in capsys.readouterr().out


# --- the shipped table and the public cases ----------------------------------------------

def test_shipped_table_was_built_from_the_shipped_profile():
    # After `inferlab calibrate`, regenerate: inferlab error-bands --out src/inferlab/calibration/profiles/default-error-bands.yaml
    table = read_table(str(band_file("default")))
    digest = hashlib.sha256(profile_file("default").read_text(encoding="utf-8").encode("utf-8")).hexdigest()[:12]
    assert f"sha256 {digest}" in table.source, "the error-band table is stale: regenerate it (see the comment above)"


@pytest.fixture(scope="module")
def public_residuals(public_predictions) -> tuple[list[Residual], list[Residual]]:
    """Residuals of the public cases under the shipped profile: (fit half, held-out half)."""
    cases, predictions = public_predictions
    halves = [([c for c in cases if c.holdout_half == h], [p for c, p in zip(cases, predictions) if c.holdout_half == h])
              for h in (0, 1)]
    return residuals(*halves[0]), residuals(*halves[1])


def test_the_80_percent_band_covers_75_to_85_percent_of_held_out_cases(public_residuals):
    fit, held_out = public_residuals
    assert len(held_out) > 500
    built = build_table(fit)
    assert 0.75 <= coverage(built, held_out, 0.8) <= 0.85
    assert coverage(built, held_out, 0.5) < coverage(built, held_out, 0.8) < coverage(built, held_out, 0.9)
    shipped = read_table(str(band_file("default")))
    assert 0.75 <= coverage(shipped, held_out, 0.8) <= 0.85, \
        "regenerate the shipped table: inferlab error-bands --out src/inferlab/calibration/profiles/default-error-bands.yaml"


def test_cli_error_bands_bad_input_is_one_line(capsys, tmp_path, data_dir):
    out = tmp_path / "bands.yaml"
    assert main(["error-bands", str(data_dir / "cases-sample.yaml"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "too few predicted cases" in err and "at least 20" in err
    assert main(["error-bands", "--profile", "roofline", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "profile 'roofline' is not a shipped profile" in err


@pytest.mark.parametrize("text, message", [
    ("- generic\n", "expected a mapping with 'generic'"),
    ("generic:\n  kernel_flor_s: 1.0e-6\n", "kernel_flor_s: unknown key"),
    (b"generic: \xff\n", "is not UTF-8 text (byte 9)"),
])
def test_cli_error_bands_says_what_is_wrong_with_the_profile(capsys, tmp_path, data_dir, text, message):
    """A malformed profile file had left every case unpredicted, reported as 'the fit half has
    too few predicted cases' after predicting them all; the file's own error comes first."""
    profile = tmp_path / "profile.yaml"
    profile.write_bytes(text) if isinstance(text, bytes) else profile.write_text(text)
    assert main(["error-bands", str(data_dir / "cases-sample.yaml"), "--profile", str(profile),
                 "--out", str(tmp_path / "bands.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "too few" not in err
