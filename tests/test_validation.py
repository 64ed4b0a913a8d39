"""Validation: case files, case predictions, error summaries, op-level predictions, the CLI.

The op predictions are checked on hand-derived roofline values; the case predictions of
the shipped profile are checked against the public measurements with stated tolerances.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from inferlab import InferlabError, SpecError, estimate
from inferlab.calibration.profile import load_profile, profile_file
from inferlab.cli.validate import add_parsers
from inferlab.validation.cases import Case, case_engine, case_precision, case_version, load_cases
from inferlab.validation.predict import predict_case, predict_cases
from inferlab.validation.serving import serving_unsupported_reason
from inferlab.validation.support import unsupported_reason
from inferlab.validation.ops import read_ops, predict_ops
from inferlab.validation.summary import error_stats, percent_errors, summarize

SHARED = Path(__file__).resolve().parents[2] / "shared" / "validation"
OPS_PUBLIC = SHARED / "ops" / "ops-public.csv"

BASE = {
    "id": "h100-llama-3.1-8b-fp8-bs8", "regime": "static_batch", "model": "llama-3.1-8b", "hardware": "h100-sxm",
    "num_gpus": 1, "parallelism": {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "attention_dp": False},
    "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": None}, "engine": "trtllm",
    "isl": 512, "osl": 64, "load": {"batch_size": 8}, "speculative": None,
    "metric": "output_tokens_per_s", "measured": 1000.0,
}


def case(**changes) -> Case:
    return Case(**{**BASE, **changes})


def write_cases(tmp_path: Path, cases: list, schema: str = "inferlab-cases/1") -> Path:
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"schema": schema, "cases": cases}), encoding="utf-8")
    return path


# --- case files --------------------------------------------------------------------------


def test_shipped_public_cases_load():
    cases = load_cases()
    assert len(cases) == 888 + 854
    assert len({c.id for c in cases}) == len(cases)
    assert {c.regime for c in cases} == {"static_batch", "offline", "online", "closed_loop"}


def test_case_file_errors_name_the_problem(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_cases(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: [unclosed", encoding="utf-8")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_cases(bad)
    with pytest.raises(SpecError, match="expected 'schema: inferlab-cases/1'"):
        load_cases(write_cases(tmp_path, [BASE], schema="inferlab-cases/0"))
    with pytest.raises(SpecError, match=r"h100-llama-3.1-8b-fp8-bs8\): measured: required field is missing"):
        load_cases(write_cases(tmp_path, [{k: v for k, v in BASE.items() if k != "measured"}]))
    with pytest.raises(SpecError, match="regime: Input should be"):
        load_cases(write_cases(tmp_path, [{**BASE, "regime": "burst"}]))
    with pytest.raises(SpecError, match="duplicate case id"):
        load_cases(write_cases(tmp_path, [BASE, BASE]))
    with pytest.raises(SpecError, match="'cases' must be a list"):
        load_cases(write_cases(tmp_path, {"a": 1}))  # type: ignore[arg-type]


# --- case predictions --------------------------------------------------------------------


@pytest.mark.parametrize("changes, reason", [
    ({"regime": "offline", "load": {"offline": True}, "prefix_cache": {"cached_tokens": 100}},
     "prefix_cache: unknown key(s) cached_tokens (hit_rate or prompts)"),
    ({"regime": "closed_loop", "load": {"concurrency": 4},
      "speculative": {"method": "draft", "draft_tokens": 3, "acceptance_length": 2.5}},
     "speculative decoding as given cannot be modelled"),
    ({"regime": "closed_loop", "load": {"batch_size": 8}}, "expected concurrency"),
    ({"parallelism": {"tp": 4, "ep": 8}, "num_gpus": 4}, "ep=8 does not divide tp=4"),
    ({"model": "mixtral-8x7b", "parallelism": {"tp": 4, "moe_tp": 1}, "num_gpus": 4},
     "moe_tp=1 x ep=1 differs from tp=4"),
    ({"parallelism": {"tp": 4, "attention_dp": True, "attention_dp_size": 2}, "num_gpus": 4},
     "num_gpus=4 differs from tp x pp x dp = 8"),  # two attention ranks of TP4 are 8 GPUs
    ({"num_gpus": 2}, "differs from tp x pp x dp = 1"),
    ({"speculative": {"method": "draft", "draft_tokens": 3, "acceptance_length": 2.5}},
     "speculative decoding as given cannot be modelled"),  # a draft model must be named
    ({"prefix_cache": {"cached_tokens": 100}}, "prefix_cache: unknown key(s) cached_tokens (hit_rate or prompts)"),
    ({"disaggregation": {"prefill": {}, "decode": {}}}, "disaggregated prefill and decode"),
])
def test_unsupported_cases_carry_a_reason(changes, reason):
    c = case(**changes)
    assert reason in unsupported_reason(c)
    assert predict_case(c) == (None, unsupported_reason(c))


def test_a_case_with_moe_weights_is_predicted_with_its_experts_format():
    # gpt-oss-120b as shipped: BF16 attention, MXFP4 experts; KV not stated: BF16 next to BF16 activations
    precision = {"weights": "bf16", "moe_weights": "mxfp4", "activations": "bf16", "kv_cache": None}
    c = case(model="gpt-oss-120b", precision=precision)
    assert unsupported_reason(c) is None
    assert case_precision(c) == {"weights": "bf16", "moe_weights": "mxfp4", "activations": "bf16", "kv_cache": "bf16"}
    offline = case(model="gpt-oss-120b", regime="offline", load={"offline": True}, precision=precision)
    assert serving_unsupported_reason(offline) is None
    value, reason = predict_case(c)
    assert reason is None
    # BF16 experts (234 GB) would not fit one H100: the MXFP4 experts make this case predictable
    with pytest.raises(InferlabError, match="does not fit"):
        estimate("gpt-oss-120b", "h100-sxm", precision="bf16", isl=512, osl=64, batch_size=8, engine="trtllm")
    mxfp4 = estimate("gpt-oss-120b", "h100-sxm", precision="w:bf16 moe:mxfp4 a:bf16 kv:bf16", isl=512, osl=64,
                     batch_size=8, engine="trtllm")
    assert value == pytest.approx(float(np.ravel(mxfp4.output_tokens_per_s)[0]), rel=1e-9)



def test_infeasible_case_reports_the_model_error():
    predicted, reason = predict_case(case(model="llama-3.1-405b", hardware="l40s", precision={"weights": "bf16"}))
    assert predicted is None and "does not fit on l40s" in reason


def test_metrics_map_onto_the_estimate():
    est = estimate("llama-3.1-8b", "h100-sxm", precision="fp8", isl=512, osl=64, batch_size=8, engine="trtllm",
                   waves=True)  # the case's KV is not stated: FP8 next to FP8 activations
    tput, tpot = float(est.output_tokens_per_s), float(est.tpot_s)
    expected = {
        "output_tokens_per_s": tput, "output_tokens_per_s_per_gpu": tput, "output_tokens_per_s_per_user": 1 / tpot,
        "ttft_ms": float(est.ttft_s) * 1e3, "tpot_ms": tpot * 1e3, "itl_ms": tpot * 1e3,
        "tpot_p50_ms": float(est.decode_step.time_s) * 1e3,
    }
    for metric, value in expected.items():
        assert predict_case(case(metric=metric))[0] == pytest.approx(value, rel=1e-12), metric
    # Per GPU divides by the GPUs of the case (TP=2: the system's rate over 2).
    two = case(metric="output_tokens_per_s_per_gpu", parallelism={"tp": 2}, num_gpus=2)
    system = case(metric="output_tokens_per_s", parallelism={"tp": 2}, num_gpus=2)
    assert predict_case(two)[0] == pytest.approx(predict_case(system)[0] / 2)


def test_engines_without_a_profile_use_generic():
    mlc = predict_case(case(engine="mlc"))[0]
    generic = estimate("llama-3.1-8b", "h100-sxm", precision="fp8", isl=512, osl=64, batch_size=8, engine="generic",
                       waves=True)
    assert mlc == pytest.approx(float(generic.output_tokens_per_s))


def test_grouped_predictions_equal_single_ones():
    cases = [case(id=f"c{b}-{m}", load={"batch_size": b}, metric=m)
             for b in (1, 8, 64) for m in ("ttft_ms", "output_tokens_per_s")]
    assert [p for p, _ in predict_cases(cases)] == pytest.approx([predict_case(c)[0] for c in cases], rel=1e-12)


def test_a_batch_whose_kv_does_not_fit_runs_in_waves():
    predicted, reason = predict_case(case(load={"batch_size": 4096}, isl=4096, osl=4096))
    assert reason is None and predicted > 0


# --- summaries ---------------------------------------------------------------------------


def test_summary_statistics_by_hand():
    # Errors +10, -10, +50, 0, -20 %: |e| sorted 0 10 10 20 50 -> median 10; e sorted -20 -10 0 10 50
    # -> bias 0; within 25%: 4 of 5.
    records = [{"regime": "static_batch", "metric": "ttft_ms", "measured": 100.0, "predicted": p}
               for p in (110.0, 90.0, 150.0, 100.0, 80.0)]
    # A second group: errors -50, -40 and one skipped -> median |e| 45, bias -45, none within 25%.
    records += [{"regime": "offline", "metric": "output_tokens_per_s", "measured": 10.0, "predicted": p}
                for p in (5.0, 6.0, None)]
    offline, static = summarize(records)
    assert (static.count, static.skipped) == (5, 0)
    assert static.median_abs_error_pct == pytest.approx(10.0)
    assert static.bias_pct == pytest.approx(0.0)
    assert static.within_25_pct == pytest.approx(0.8)
    assert (offline.regime, offline.count, offline.skipped) == ("offline", 2, 1)
    assert offline.median_abs_error_pct == pytest.approx(45.0)
    assert offline.bias_pct == pytest.approx(-45.0)
    assert offline.within_25_pct == 0.0
    assert percent_errors(75.0, 50.0) == pytest.approx(50.0)
    assert np.isnan(error_stats([]).median_abs_error_pct)


def _pooled(cases, predictions, metrics):
    return [float(percent_errors(p, c.measured)) for c, (p, _) in zip(cases, predictions)
            if p is not None and c.metric in metrics]


def test_shipped_profile_meets_the_static_batch_target():
    """Target: median |error| <= 15% on throughput and <= 25% on TTFT, all public static-batch cases
    and the held-out half alone (measured when written: about 8% and 15%; held out 6% and 14%)."""
    cases = [c for c in load_cases() if c.regime == "static_batch"]
    predictions = predict_cases(cases)
    throughput = ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user")
    for chosen in (cases, [c for c in cases if c.holdout_half == 1]):
        preds = [p for c, p in zip(cases, predictions) if c in chosen]
        tput = _pooled(chosen, preds, throughput)
        ttft = _pooled(chosen, preds, ("ttft_ms",))
        assert len(tput) > 50 and len(ttft) > 25
        assert np.median(np.abs(tput)) <= 15.0
        assert np.median(np.abs(ttft)) <= 25.0
    supported = [p for p, _ in predictions if p is not None]
    assert len(supported) >= len(cases) - 3  # at most the speculative DeepSeek-R1 cases are unsupported


# --- op-level predictions ----------------------------------------------------------------

OPS_HEADER = "op,hardware,engine,dtype,m,n,k,kv_dtype,batch,seq_len,kv_len,num_heads,num_kv_heads,head_dim,window," \
             "num_gpus,message_bytes,measured_ms\n"


def write_ops(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "ops.csv"
    path.write_text(OPS_HEADER + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def test_op_rows_under_the_roofline_by_hand(tmp_path):
    path = write_ops(
        tmp_path,
        "gemm,h100-sxm,trtllm,bf16,8192,8192,8192,,,,,,,,,,,1.0",
        "gemm,h100-sxm,trtllm,bf16,1,8192,8192,,,,,,,,,,,1.0",
        "gemm,h100-sxm,vllm,fp8,8192,8192,8192,,,,,,,,,,,1.0",
        "attention_decode,h100-sxm,trtllm,bf16,,,,bf16,8,,1023,32,8,128,0,,,1.0",
        "all_reduce,h100-sxm,nccl,fp16,,,,,,,,,,,,8,1073741824,1.0",
    )
    got = predict_ops(read_ops(path), "roofline")
    peak_bf16, peak_fp8, dram, nvlink = 989e12, 1979e12, 3.35e12, 450e9  # h100-sxm datasheet [FLOP/s, B/s]
    expected = [
        2 * 8192**3 / peak_bf16,  # compute-bound: 1.11 ms of FLOPs vs 0.12 ms of bytes
        (8192 * 8192 * 2 + 8192 * 2 + 8192 * 2) / dram,  # weights + activations in + out, 16-bit
        2 * 8192**3 / peak_fp8,  # FP8 runs at the FP8 peak
        # q in and out (8 x 32 heads x 128 x 2 B each), KV read (8 seqs x 1024 tokens x 2 x 8 x 128 x 2 B)
        # and KV written for the new token (8 x 2 x 8 x 128 x 2 B).
        (2 * 8 * 32 * 128 * 2 + 8 * 1024 * 4096 + 8 * 4096) / dram,
        2 * 7 / 8 * 2**30 / nvlink,  # ring all-reduce over 8 GPUs, no latency under the roofline
    ]
    assert got == pytest.approx(expected, rel=1e-12)


def test_sliding_window_caps_the_keys_read(tmp_path):
    full = "attention_decode,h100-sxm,trtllm,bf16,,,,bf16,8,,32767,32,8,128,{},,,1.0"
    got = predict_ops(read_ops(write_ops(tmp_path, full.format(0), full.format(4096))), "roofline")
    kv_full, kv_window = 8 * 32768 * 4096, 8 * 4096 * 4096
    other = 2 * 8 * 32 * 128 * 2 + 8 * 4096
    assert got[1] / got[0] == pytest.approx((kv_window + other) / (kv_full + other))


@pytest.mark.parametrize("row, message", [
    ("mystery,h100-sxm,trtllm,bf16,1,1,1,,,,,,,,,,,1.0", "line 2: unknown op 'mystery'"),
    ("gemm,h100-sxm,trtllm,bf17,1,1,1,,,,,,,,,,,1.0", "unknown GEMM dtype 'bf17'"),
    ("gemm,h100-sxm,trtllm,bf16,1,,1,,,,,,,,,,,1.0", "gemm needs n"),
    ("gemm,h100-sxm,trtllm,bf16,1,x,1,,,,,,,,,,,1.0", "column n must be a number"),
    ("gemm,h100-sxm,trtllm,bf16,1,1,1,,,,,,,,,,,0", "measured_ms must be > 0"),
    # sizes an op cannot have, and a latency that is no measurement, had been timed as given
    # (an all-reduce over one GPU predicted 0 s, whose log made `calibrate` a scipy traceback)
    ("gemm,h100-sxm,trtllm,bf16,1,1,1,,,,,,,,,,,inf", "measured_ms must be > 0 and at most 1e\\+06 .*, got inf"),
    # 1e300 ms had pinned every fitted term of `calibrate --ops` at its bound, with exit 0
    ("gemm,h100-sxm,trtllm,bf16,1,1,1,,,,,,,,,,,1e300", "a quarter of an hour for one op: a unit slip\\), got 1e\\+300"),
    # a cell that reads 'nan' is not a missing one: it had been named as missing
    ("gemm,h100-sxm,trtllm,bf16,1,1,1,,,,,,,,,,,nan", "column measured_ms must be a number, got 'nan'"),
    ("gemm,h100-sxm,trtllm,bf16,0,1,1,,,,,,,,,,,1.0", "line 2: m must be a whole number >= 1, got 0"),
    ("gemm,h100-sxm,trtllm,bf16,16.5,1,1,,,,,,,,,,,1.0", "m must be a whole number >= 1, got 16.5"),
    ("attention_decode,h100-sxm,trtllm,bf16,,,,bf16,8,,inf,32,8,128,,,,1.0", "kv_len must be a whole number"),
    ("all_reduce,h100-sxm,nccl,bf16,,,,,,,,,,,,1,1024,0.01", "an all_reduce over one GPU moves nothing"),
    ("all_reduce,h100-sxm,nccl,bf16,,,,,,,,,,,,8,-5,0.01", "message_bytes must be a finite number >= 1"),
])
def test_op_file_errors(tmp_path, row, message):
    with pytest.raises(SpecError, match=message):
        read_ops(write_ops(tmp_path, row))


def test_op_file_without_rows(tmp_path):
    """A header and no row had calibrated the step terms alone for minutes, as if no file were given."""
    with pytest.raises(SpecError, match="no measurements below the header"):
        read_ops(write_ops(tmp_path))


def test_op_file_missing_column(tmp_path):
    path = tmp_path / "ops.csv"
    path.write_text("op,hardware\ngemm,h100-sxm\n", encoding="utf-8")
    with pytest.raises(SpecError, match="missing column"):
        read_ops(path)


def test_sample_ops_predicted_with_the_shipped_profile(data_dir):
    table = read_ops(data_dir / "ops-sample.csv")
    predicted = predict_ops(table)
    errors = percent_errors(predicted, table.measured_s)
    assert np.all(np.isfinite(predicted)) and np.all(predicted > 0)
    assert np.median(np.abs(errors)) < 30.0


@pytest.mark.skipif(not OPS_PUBLIC.is_file(), reason="the shared op-level file is not checked out")
def test_public_op_table_in_sample_errors():
    """In-sample median |error| per op kind of the shipped profile (when written: GEMM 16%,
    decode attention 16%, prefill attention 20%, all-reduce 25%)."""
    table = read_ops(OPS_PUBLIC)
    errors = percent_errors(predict_ops(table), table.measured_s)
    limits = {"gemm": 20.0, "attention_decode": 20.0, "attention_prefill": 25.0, "all_reduce": 30.0}
    for kind, limit in limits.items():
        assert np.median(np.abs(errors[table["op"] == kind])) <= limit, kind


def test_datasheet_only_gpus_use_their_measured_siblings_curves():
    """An H200 (no op rows) runs the H100's kernels (same GH100 die); a GPU of a family never
    measured by an engine gets the engine-wide medians, and one nobody measured the generic ones."""
    data = yaml.safe_load(profile_file("default").read_text(encoding="utf-8"))
    assert "h200-sxm" not in data["hardware"] and "rtx-4090" not in data["hardware"]
    trtllm_h200 = load_profile("default", "trtllm", "h200-sxm", "hopper")
    trtllm_h100 = data["overrides"]["trtllm"]["h100-sxm"]["gemm"]["kernels"]["fp8"]
    assert trtllm_h200.gemm.kernels["fp8"].peak_fraction == trtllm_h100["peak_fraction"]
    assert trtllm_h200.name.endswith("trtllm/hopper")
    engine_wide = data["overrides"]["trtllm"]["all"]["gemm"]["kernels"]["fp8"]
    mi300x = load_profile("default", "trtllm", "mi300x", "cdna")
    assert mi300x.gemm.kernels["fp8"].peak_fraction == engine_wide["peak_fraction"]
    generic = load_profile("default", "generic", "mi300x", "cdna")
    assert generic.gemm.kernels["bf16"].peak_fraction == data["generic"]["gemm"]["kernels"]["bf16"]["peak_fraction"]
    measured = load_profile("default", "trtllm", "h100-sxm", "hopper")
    assert measured.gemm.kernels["fp8"].peak_fraction == trtllm_h100["peak_fraction"]


# --- CLI -----------------------------------------------------------------------------------


def run_cli(capsys, *argv: str) -> str:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true")
    parser = argparse.ArgumentParser(prog="inferlab")
    add_parsers(parser.add_subparsers(dest="command", required=True), common)
    args = parser.parse_args(list(argv))
    args.func(args)
    return capsys.readouterr().out


def test_cli_validate_text_and_json(capsys, data_dir):
    sample = str(data_dir / "cases-sample.yaml")
    out = run_cli(capsys, "validate", sample, "--ops", str(data_dir / "ops-sample.csv"))
    assert "lmdeploy-a100-llama-2-7b-fp16-tp1-bs1-128-128" in out and "error %" in out
    assert "offline       output_tokens_per_s" in out and "median |err| %" in out and "attention_decode" in out
    rows = json.loads(run_cli(capsys, "validate", sample, "--json"))
    assert {tuple(r) for r in rows} == {("id", "regime", "metric", "measured", "predicted", "reason")}
    assert all(r["predicted"] > 0 for r in rows)  # the offline case through the serving simulation


def test_cli_validate_bad_input_raises_an_inferlab_error(capsys, tmp_path):
    with pytest.raises(InferlabError, match="cannot read"):
        run_cli(capsys, "validate", str(tmp_path / "none.yaml"))


@pytest.mark.xfail(strict=True, reason=(
    "level reached 24.2% (MTP k=1/2/4 +18%, +19%, +29%; the unoptimized EP8 baseline +92%): these "
    "min-latency DeepSeek-R1 B200 steps are latency-bound (about 160 us per layer measured). The graph has MLA's "
    "latent norms and rope and MoE routing and permutation as kernels of their own, the engines' own all-reduce "
    "kernels (5.9 us, not NCCL's 15-25 us), and the blog's recipe's BF16 attention weights (its source-family "
    "precision; 31.5% before). Missing still: the MTP module's own kernels and its BF16 weights (issue 10)"))
def test_technique_cases_are_predicted():
    """Speculative (MTP) and expert-parallel DeepSeek-R1 rows of the public set now get numbers."""
    cases = [c for c in load_cases() if c.regime == "static_batch" and (c.speculative or c.parallelism.ep > 1)]
    assert len(cases) >= 4
    predictions = predict_cases(cases)
    assert all(p is not None for p, _ in predictions)
    errors = [abs(p / c.measured - 1) for c, (p, _) in zip(cases, predictions)]
    # measured MTP speed-ups: 198, 250, 245 tok/s per user (k = 1, 2, 4) over a 67 tok/s baseline
    assert np.median(errors) <= 0.20


def test_every_versioned_tensorrt_llm_source_family_is_listed():
    # a family whose name carries a release tag (-v1.1-) and whose cases state no engine_version
    # must be in SOURCE_VERSIONS, or its cases would silently run the C++ runtime's host terms
    import re

    from inferlab.validation.cases import SOURCE_VERSIONS

    tagged = {c.source for c in load_cases() if c.engine == "trtllm" and not c.engine_version
              and re.search(r"(?:^|[-_])v\d+\.\d+", c.source)}
    assert tagged and tagged <= set(SOURCE_VERSIONS)


def test_tensorrt_llm_1x_cases_run_the_pytorch_runtime_with_the_trtllm_kernels():
    base = next(c for c in load_cases() if c.engine == "trtllm")
    assert case_engine(base.model_copy(update={"engine_version": None})) == "trtllm"
    assert case_engine(base.model_copy(update={"engine_version": "0.20.0"})) == "trtllm"
    assert case_engine(base.model_copy(update={"engine_version": "1.1.0rc2.post2"})) == "trtllm-pytorch"
    # no version stated: the one the source family names (TensorRT-LLM 1.0's performance overview
    # ran trtllm-bench, whose default backend from 1.0 is PyTorch; the aiconfigurator sample's
    # untagged TensorRT-LLM rows were measured in October and November 2025, after 1.0); none
    # named: the C++ runtime
    for source, version, engine in (("trtllm-perf-overview-v1.0-offline", "1.0", "trtllm-pytorch"),
                                    ("trtllm-perf-overview-v0.17-offline", "0.17", "trtllm"),
                                    ("trtllm-blog-falcon180b-h200-v0.7a", "0.7", "trtllm"),
                                    ("aiconfigurator-silicon-sample", "1.0", "trtllm-pytorch"),
                                    ("vendor-dev-blog", None, "trtllm")):
        untagged = base.model_copy(update={"engine_version": None, "source": source})
        assert (case_version(untagged), case_engine(untagged)) == (version, engine)
    # a family's TensorRT-LLM release is not its other engines'
    sglang = next(c for c in load_cases() if c.engine == "sglang")
    assert case_version(sglang.model_copy(update={"engine_version": None,
                                                   "source": "aiconfigurator-silicon-sample"})) is None
    # a model's version in a family's name is not the engine's (a v1.0+ tag would pick the PyTorch runtime)
    for source in ("trtllm-blog-llama-v3.1-h100", "trtllm-deepseek-v3.1-blog", "trtllm-qwen-v2.5-72b",
                   "trtllm-vicuna-v1.5-13b", "trtllm-blog-2024.05-v2"):
        untagged = base.model_copy(update={"engine_version": None, "source": source})
        assert (case_version(untagged), case_engine(untagged)) == (None, "trtllm"), source
    # a release's performance-overview page not listed yet still names the engine's release
    later = base.model_copy(update={"engine_version": None, "source": "trtllm-perf-overview-v1.2-offline"})
    assert (case_version(later), case_engine(later)) == ("1.2", "trtllm-pytorch")
    stated = base.model_copy(update={"engine_version": "0.20.0", "source": "trtllm-perf-overview-v1.0-offline"})
    assert case_engine(stated) == "trtllm"   # a stated version wins over the source's
    data = yaml.safe_load(profile_file("default").read_text(encoding="utf-8"))
    pytorch = load_profile("default", "trtllm-pytorch", "h100-sxm", "hopper")
    cpp = load_profile("default", "trtllm", "h100-sxm", "hopper")
    assert pytorch.gemm == cpp.gemm and pytorch.attention == cpp.attention   # same kernels
    # not the C++ runtime's host side: its step overhead is the generic one, not trtllm's
    assert pytorch.step_overhead_s == data["generic"]["step_overhead_s"] != cpp.step_overhead_s
    assert pytorch.request_overhead_s == data["overrides"]["trtllm-pytorch"]["all"]["request_overhead_s"]


def _dumped(**fields) -> dict:
    """A closed-loop row of aiconfigurator's silicon sample as its database dump writes it."""
    return {"id": "d", "regime": "closed_loop", "model": "deepseek-v3", "hardware": "b200", "num_gpus": 64,
            "parallelism": {"tp": 64, "pp": 1, "ep": 8, "dp": 1, "attention_dp": False, "attention_dp_size": 1,
                            "moe_tp": 8},
            "precision": {"weights": "nvfp4"}, "engine": "sglang", "engine_version": "0.5.9", "isl": 1024,
            "osl": 1024, "load": {"concurrency": 64}, "metric": "tpot_ms", "measured": 16.31,
            "source": "aiconfigurator-silicon-sample", **fields}


def test_an_inflated_dump_layout_reads_as_the_run():
    """Config 201 of aiconfigurator's sample (SGLang v0.5.9, DeepSeek-R1 NVFP4, 64 clients, TPOT
    16.31 ms) is dumped as tp 64 = moe_tp 8 x moe_ep 8 over 64 GPUs; the sample's other copy of the
    same run says tp 8, moe_ep 8 on 8 B200s, one HGX node. Read as the run: 8 GPUs, each an
    attention rank and an expert group (moe_tp 1); the attention-DP form (64 ranks) likewise."""
    case = Case(**_dumped())
    assert case.num_gpus == 8 and (case.parallelism.tp, case.parallelism.ep, case.parallelism.moe_tp) == (8, 8, 1)
    ranks = Case(**_dumped(engine="trtllm", engine_version="1.2.0rc6.post2",
                           parallelism={"tp": 1, "ep": 8, "attention_dp": True, "attention_dp_size": 64, "moe_tp": 8}))
    assert ranks.num_gpus == 8
    assert (ranks.parallelism.tp, ranks.parallelism.attention_dp_size, ranks.parallelism.moe_tp) == (1, 8, 1)
    # the run's TPOT at its own layout: inferlab gives about 18 ms on 8 GPUs, where the 64 of the
    # dump (eight nodes, every layer's all-reduce between them) gave 21
    predicted, reason = predict_case(case)
    assert reason is None and predicted == pytest.approx(16.31, rel=0.2)


@pytest.mark.parametrize("fields", [
    {"source": "vendor-blog"},  # another source family's 64-GPU layout is as written
    {"hardware": "gb200", "num_gpus": 64},  # 64 GPUs in one NVL72 domain: a layout that can be one
    {"parallelism": {"tp": 64, "ep": 64, "moe_tp": 1}},  # experts over every GPU: not the dump's pattern
    {"parallelism": {"tp": 4, "ep": 2, "moe_tp": 2}, "num_gpus": 4}])  # within one node: could be as written
def test_layouts_outside_the_dump_pattern_stay_as_written(fields):
    written = _dumped(**fields)
    case = Case(**written)
    assert case.num_gpus == written["num_gpus"]
    assert (case.parallelism.tp, case.parallelism.moe_tp) == (written["parallelism"]["tp"],
                                                              written["parallelism"]["moe_tp"])


def test_nvidias_deepseek_fp4_runs_keep_their_attention_projections_in_bf16():
    # nvidia/DeepSeek-R1-0528-FP4 stores every self_attn projection BF16 and every MLP NVFP4: the
    # min-latency and max-throughput blogs' cases state "nvfp4" for all and run that checkpoint
    runs = [c for c in load_cases() if c.source in ("trtllm-deepseek-r1-min-latency",
                                                    "trtllm-deepseek-r1-max-throughput")]
    assert {c.source for c in runs} == {"trtllm-deepseek-r1-min-latency", "trtllm-deepseek-r1-max-throughput"}
    assert all(case_precision(c)["attention_weights"] == "bf16" for c in runs)
    # per layer q_a 7168x1536 + q_b 1536x24576 + kv_a 7168x576 + kv_b 512x32768 + o 16384x7168 =
    # 187,105,280 weights, x 61 layers = 11.41e9; BF16 (2 B) instead of NVFP4 (4.5 bits): +16.4 GB on
    # each attention-DP rank, which holds every projection
    kw = dict(tp=8, ep=8, attention_dp=True, batch_size=8, isl=1024, osl=2048)
    fp4 = estimate("deepseek-v3", "b200", precision={"weights": "nvfp4", "activations": "nvfp4"}, **kw)
    mixed = estimate("deepseek-v3", "b200", precision={"weights": "nvfp4", "activations": "nvfp4",
                                                       "attention_weights": "bf16"}, **kw)
    assert mixed.memory.weights - fp4.memory.weights == pytest.approx(11.41e9 * (2 - 4.5 / 8), rel=0.01)
