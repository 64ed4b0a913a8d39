"""Inputs a review found answered with a wrong number, an ignored flag or an unclear message:
each is now refused with one line that says what, where and what would do, or answered right."""

from __future__ import annotations

import pytest

import inferlab
from inferlab.cli.main import main
from inferlab.errors import InfeasibleError, SpecError
from inferlab.modalities.tts import speak
from inferlab.serving.goodput import goodput
from inferlab.techniques.disaggregation import Disaggregation


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_serve_sizes_its_refusal_by_the_longest_request(capsys):
    # Llama-3.1-70B keeps 80 layers x 8 KV heads x 128 x 2 (K and V) x 2 bytes = 327,680 B a token;
    # a 100,000-token prompt and 128 outputs (100,128 tokens, a whole number of 16-token pages) hold
    # 32.81 GB: more than the 77 GB an H100 has beside 141 GB of weights even at tp=2 (70.6 GB of
    # weights a GPU), so the layout that holds it is tp=4, as estimate says.
    code, _, err = run(capsys, "serve", "llama-3.1-70b", "h100-sxm", "--rate", "1", "--isl", "100000",
                       "--num-requests", "5")
    assert code != 0
    assert "one sequence's KV 32.81 GB" in err and "tp=4 would fit" in err
    code, _, err = run(capsys, "serve", "llama-3.1-70b", "h100-sxm", "--rate", "1", "--isl", "100000",
                       "--num-requests", "5", "--tp", "2")
    assert code != 0 and "one sequence's KV 16.40 GB" in err and "tp=4 would fit" in err
    with pytest.raises(InfeasibleError) as exc:
        inferlab.serve("llama-3.1-70b", "h100-sxm", rate=1, isl=100_000, num_requests=5)
    assert exc.value.suggestion == {"tp": 4}


def test_a_precision_both_pools_override_is_refused():
    pools = "prefill=h200-sxmx4:fp8,decode=h200-sxmx8:fp8"
    with pytest.raises(SpecError, match=r"both pools name their formats .* \(bf16\) would be ignored"):
        inferlab.estimate("llama-3.1-70b", disaggregation=pools, precision="bf16")
    with pytest.raises(SpecError, match="both pools name their formats"):
        inferlab.serve("llama-3.1-70b", disaggregation=pools, precision="bf16", rate=1, num_requests=10)
    # the same formats given beside them change nothing: taken; a pool that names none takes them
    assert inferlab.estimate("llama-3.1-70b", disaggregation=pools, precision="fp8").ttft_s > 0
    assert inferlab.estimate("llama-3.1-70b", disaggregation="prefill=h200-sxmx4,decode=h200-sxmx8:fp8",
                             precision="fp8").ttft_s > 0


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "trtllm-pytorch", "lmdeploy"])
def test_a_prompt_token_limit_is_sglangs_alone(engine):
    with pytest.raises(SpecError, match="max_prefill_tokens 1: a prompt-token limit beside the token budget is SGLang's"):
        inferlab.serve("llama-3.1-8b", "h100-sxm", engine=engine, rate=4, num_requests=20, max_prefill_tokens=1)


def test_sglang_keeps_its_prompt_token_limit():
    r = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="sglang", rate=4, num_requests=20, max_prefill_tokens=4096)
    assert r.summary()["ttft"]["mean"] > 0


def test_bench_flags_without_bench_files_are_refused(capsys, data_dir):
    cases = str(data_dir / "cases-sample.yaml")
    code, _, err = run(capsys, "validate", cases, "--gpu", "h100-sxm")
    assert code != 0 and "--gpu describes --bench files" in err and "drop it" in err
    code, _, err = run(capsys, "validate", cases, "--format", "aiperf", "--gpu", "h100-sxm")
    assert code != 0 and "--format, --gpu describe --bench files" in err and "drop them" in err
    code, _, err = run(capsys, "calibrate", "--ops", "x.csv", "--out", "unused.yaml", "--deployment", "d.yaml")
    assert code != 0 and "--deployment describes --bench files" in err


@pytest.mark.parametrize("traffic", [
    {"rate": 0, "isl": 100, "osl": 10},
    [{"shape": "daily", "rate": 0}, {"shape": "burst", "rate": 0, "peak_rate": 0, "start_s": 10, "end_s": 20}],
])
def test_fleet_traffic_that_sends_nothing_is_refused(traffic):
    with pytest.raises(SpecError, match="every traffic class has rate 0"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", traffic=traffic, horizon_s=3600)


def test_a_burst_from_zero_still_runs():
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=60,
                       traffic={"shape": "burst", "rate": 0, "peak_rate": 2, "start_s": 10, "end_s": 40})
    assert len(r.arrival) > 0


def test_goodput_and_percentiles_say_what_they_take():
    with pytest.raises(SpecError, match="result must be a ServeResult"):
        goodput(5, 1.0, 0.05, 99)
    r = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=2, num_requests=20)
    for call in (lambda: r.itl_percentile(0.99), lambda: r.at_percentile(0.5)):
        with pytest.raises(SpecError, match="a percentile is out of 100"):
            call()
    assert r.itl_percentile(99) >= r.itl_percentile(50) > 0


@pytest.mark.parametrize("pool, message", [
    ("prefill=h200-sxmx8:tp8:tp4,decode=h200-sxmx8", "'tp4' sets tp a second time"),
    ("prefill=h200-sxmx4:adp:adp,decode=h200-sxmx8", "'adp' sets attention_dp a second time"),
    ("prefill=h200-sxmx4:fp8:bf16,decode=h200-sxmx8", "'bf16' sets precision a second time"),
    ("prefill=h200-sxmx4:3g.40gb,decode=h200-sxmx8", "'3g.40gb' is a MIG slice; a pool runs whole GPUs"),
    ("prefill=h200-sxmx4,decode=h200-sxmx8,latency=1e9s", "at most 10 s"),
])
def test_pool_text_that_would_be_read_otherwise_is_refused(pool, message):
    with pytest.raises(SpecError, match=message):
        Disaggregation.parse(pool)


def test_window_settings_an_engine_ignores_for_the_model_are_refused():
    with pytest.raises(SpecError, match="sglang keeps every token of gemma-3-27b's windowed layers"):
        inferlab.serve("gemma-3-27b", "h100-sxm", engine="sglang", window_pool_ratio=0.01, rate=1, num_requests=5)
    with pytest.raises(SpecError, match="drop it"):
        inferlab.estimate("gemma-3-27b", "h100-sxm", engine="sglang", window_kv="sliding")


def test_unit_and_parallelism_messages_read_plainly():
    with pytest.raises(inferlab.UnitError, match=r"unknown unit 'foo' in '1 foo'"):
        inferlab.Q("1 foo")
    # 8 GPUs cannot be split into 3 expert groups; no tp is named that the model's heads may refuse
    with pytest.raises(SpecError, match=r"e.g. ep in \[1, 2, 4, 8\], or a tp that is a multiple of 3$"):
        inferlab.estimate("qwen3-30b-a3b", "h100-sxm", tp=8, ep=3)


def test_engine_args_take_the_hardware_alone(capsys):
    code, _, err = run(capsys, "estimate", "--engine-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct", "h100-sxm",
                       "llama-3.1-70b")
    assert code != 0 and "give the HARDWARE alone (got h100-sxm and llama-3.1-70b)" in err


@pytest.mark.parametrize("text, message", [
    ("lognormal:mean=100,sigma=0.5,foo=1", "foo= is not a lognormal field"),
    ("lognormal:mean=100,sigam=0.5", "did you mean 'sigma'"),
    ("lognormal:sigma=0.5", "mean= is missing"),
])
def test_lognormal_lengths_name_the_field(text, message):
    with pytest.raises(SpecError, match=message):
        inferlab.serve("llama-3.1-8b", "h100-sxm", rate=1, num_requests=5, isl=text)


def test_a_deployment_files_speculative_field_is_named(tmp_path, capsys):
    path = tmp_path / "dep.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\n"
                    "speculative: {method: eagle, k: 4, acceptance: 0.7, bogus: 1}\n")
    code, _, err = run(capsys, "estimate", "--file", str(path))
    assert code != 0 and "speculative: unknown field 'bogus'; allowed: method, k," in err


def test_speak_checks_the_reply_against_the_llms_context():
    # Llama-3.1-8B was trained for 131,072 positions: a 512-token prompt and a 1,000,000-token reply do not fit
    with pytest.raises(SpecError, match="make 1,000,512 tokens, more than the 131,072 positions"):
        speak("orpheus-3b", "h100-sxm", llm="llama-3.1-8b", reply_tokens=1_000_000)


def test_plan_refuses_a_prefix_the_prompts_cannot_hold(tmp_path, capsys):
    base = ("name: t\nmodels: [llama-3.1-8b]\nhardware: [h100-sxm]\nslo: {ttft_ms: 2000, tpot_ms: 100}\n"
            "verify: 1\n")
    shared = tmp_path / "shared.yaml"
    shared.write_text(base + "traffic: {rate: 5, isl: 1000, osl: 100, prefix: 'shared:tokens=5000,groups=2'}\n")
    code, _, err = run(capsys, "plan", str(shared))
    assert code != 0 and "the shared prefix of 5,000 tokens is longer than every prompt (the longest has 1,000" in err
    # ten turns of 30,000 + 1,000 tokens end with a 310,000-token conversation: beyond 131,072 positions
    sessions = tmp_path / "sessions.yaml"
    sessions.write_text(base + "traffic: {rate: 5, isl: 30000, osl: 1000, prefix: 'sessions:turns=10,think=1'}\n")
    code, _, err = run(capsys, "plan", str(sessions))
    assert code != 0 and "10 x (isl + osl) = 310,000 tokens exceeds the 131,072 positions" in err
    assert "ruled out by its own values" in err and "relax the SLOs" not in err  # no SLO or layout changes it


def test_plan_reads_a_models_alias_as_its_id(tmp_path, capsys):
    path = tmp_path / "dup.yaml"
    path.write_text("name: t\nmodels: [llama-3.1-8b, meta-llama/Llama-3.1-8B]\nhardware: [h100-sxm]\n"
                    "traffic: {rate: 5, isl: 1000, osl: 100}\nverify: 0\n")
    code, _, err = run(capsys, "plan", str(path))
    assert code != 0 and "'llama-3.1-8b' is listed twice" in err


def test_a_burst_past_the_horizon_is_noted():
    # a day file run shortened with --hours keeps its classes; one that starts later is said, not run
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=600,
                       traffic=[{"rate": 1, "isl": 100, "osl": 10},
                                {"shape": "burst", "rate": 1, "peak_rate": 5, "start_s": 7200, "end_s": 7300}])
    assert "traffic class 1's burst starts at 7200 s, after the 600 s horizon: it is not sent" in r.notes[-1]


def test_a_deployment_past_a_million_gpus_is_refused():
    # each axis is within 2**20, their product (8 x 1,000,000 = 8,000,000 GPUs) is not
    with pytest.raises(SpecError, match="tp=8 x pp=1 x dp=1000000 is 8,000,000 GPUs, more than 1,048,576"):
        inferlab.estimate("llama-3.1-8b", "h100-sxm", tp=8, dp=1_000_000)
    assert inferlab.estimate("llama-3.1-8b", "h100-sxm", tp=8, dp=1000).deployment.num_gpus == 8000
