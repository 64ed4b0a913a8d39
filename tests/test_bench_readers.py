"""Benchmark readers: each tool's fixture read as the tool wrote it, a wrong file refused in one
line naming the tool and the field, and the runs mapped to cases with the stated deployment.

Expected values are the fixtures' own recorded numbers (tests/data/bench/)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.errors import SpecError
from inferlab.validation.bench import (BenchFormatError, bench_cases, detect_format, given_deployment, read_bench)
from inferlab.validation.bench import vllm_bench
from inferlab.validation.cases import case_engine

from conftest import DATA

BENCH = DATA / "bench"
FIXTURES = {"vllm-bench-serve.json": "vllm", "sglang-bench-serving.jsonl": "sglang",
            "genai-perf-profile-export.json": "genai-perf", "aiperf-profile-export.json": "genai-perf",
            "guidellm-report.json": "guidellm", "trtllm-bench-report.json": "trtllm-bench",
            "trtllm-bench.log": "trtllm-bench"}
VLLM_8B = "vllm serve meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize("name, fmt", FIXTURES.items())
def test_each_fixture_is_told_by_its_content(name, fmt):
    assert detect_format((BENCH / name).read_text(encoding="utf-8")) == fmt


def test_vllm_result():
    (run,) = read_bench(BENCH / "vllm-bench-serve.json")
    # total_input_tokens 163840 / completed 160; total_output_tokens 40960 / 160
    assert (run.isl, run.osl, run.concurrency, run.request_rate, run.num_requests) == (1024, 256, 16, None, 160)
    assert dict(run.metrics) == pytest.approx({"ttft_ms": 48.62, "tpot_ms": 7.41, "itl_ms": 7.4, "tpot_p50_ms": 7.38,
                                               "output_tokens_per_s": 2071.8957957814864})
    assert run.model == "meta-llama/Llama-3.1-8B-Instruct" and run.regime_and_load() == ("closed_loop",
                                                                                         {"concurrency": 16,
                                                                                          "num_requests": 160})


def test_sglang_lines_are_runs():
    first, second = read_bench(BENCH / "sglang-bench-serving.jsonl")
    # line 1: request_rate Infinity with max_concurrency 8: a closed loop; line 2: 4 requests/s, 200 completed
    assert first.regime_and_load() == ("closed_loop", {"concurrency": 8, "num_requests": 80})
    assert second.regime_and_load() == ("online", {"request_rate": 4.0, "num_requests": 200})
    assert (first.isl, first.osl, second.isl, second.osl) == (2048, 128, 512, 256)
    assert dict(first.metrics)["ttft_ms"] == 61.3 and first.engine == "sglang" and first.model is None


def test_genai_perf_and_aiperf_exports():
    (gp,) = read_bench(BENCH / "genai-perf-profile-export.json")
    assert (gp.isl, gp.osl, gp.concurrency, gp.request_rate, gp.num_requests) == (512, 128, 4, None, None)
    assert gp.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert dict(gp.metrics)["ttft_ms"] == 29.8 and dict(gp.metrics)["tpot_ms"] == 6.95
    (ap,) = read_bench(BENCH / "aiperf-profile-export.json")
    assert ap.regime_and_load() == ("online", {"request_rate": 3.0, "num_requests": 240})
    assert ap.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_genai_perf_time_units(tmp_path):
    data = json.loads((BENCH / "genai-perf-profile-export.json").read_text())
    data["time_to_first_token"] = {"unit": "ns", "avg": 29_800_000.0}  # 29.8 ms
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data))
    assert dict(read_bench(path)[0].metrics)["ttft_ms"] == pytest.approx(29.8)


@pytest.mark.parametrize("key, metric, message", [
    ("output_token_throughput", {"unit": "tokens/ms", "avg": 1.2}, "output_token_throughput.unit 'tokens/ms' is not tokens a second"),
    ("input_sequence_length", {"unit": "tokens", "avg": 0.3}, "input_sequence_length.avg 0.3 is under one token a request"),
    ("output_sequence_length", {"unit": "tokens", "avg": 0.3}, "output_sequence_length.avg 0.3 is under one token"),
    # a latency without its unit had been taken as ms: 0.03 (seconds?) read as a 30 us TPOT
    ("inter_token_latency", {"avg": 0.03}, "inter_token_latency has no unit (the tools write one: ns, us, ms, s"),
])
def test_genai_perf_rates_and_lengths_are_checked(tmp_path, key, metric, message):
    # a rate per millisecond had been read as one per second, a 0.3-token output as a run
    data = {**json.loads((BENCH / "genai-perf-profile-export.json").read_text()), key: metric}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data))
    with pytest.raises(BenchFormatError, match=re.escape(message)):
        read_bench(path)


def test_guidellm_benchmarks_are_runs():
    concurrent, constant = read_bench(BENCH / "guidellm-report.json")
    assert concurrent.regime_and_load() == ("closed_loop", {"concurrency": 8, "num_requests": 120})
    assert constant.regime_and_load() == ("online", {"request_rate": 2.0, "num_requests": 120})
    assert dict(concurrent.metrics)["itl_ms"] == 7.08 and "tpot_ms" not in dict(concurrent.metrics)
    assert (concurrent.isl, concurrent.osl) == (1024, 256)


def test_trtllm_report_and_log():
    (report,) = read_bench(BENCH / "trtllm-bench-report.json")
    assert dict(report.layout) == {"tp": 4, "pp": 1, "ep": 1}
    assert dict(report.precision) == {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}
    assert dict(report.metrics) == {"tpot_ms": 52.05, "output_tokens_per_s": 9090.87}
    assert report.regime_and_load() == ("offline", {"offline": True, "num_requests": 2000})  # request_info
    (log,) = read_bench(BENCH / "trtllm-bench.log")
    assert dict(log.layout) == {"tp": 1, "pp": 1}  # EP Size: None
    assert dict(log.metrics) == {"output_tokens_per_s": 16466.1888} and (log.isl, log.osl) == (128, 128)
    assert log.model == "meta-llama/Llama-3.1-8B-Instruct" and log.engine_version == "1.0.0"


@pytest.mark.parametrize("fmt, wrong, field", [
    ("vllm", "guidellm-report.json", "completed"),
    ("sglang", "genai-perf-profile-export.json", "completed"),
    ("genai-perf", "vllm-bench-serve.json", "output_token_throughput"),  # TTFT is optional: an unstreamed run lacks it
    ("guidellm", "vllm-bench-serve.json", "benchmarks"),
    ("trtllm-bench", "vllm-bench-serve.json", "performance.system_output_throughput_tok_s"),
    ("trtllm-bench", "../cases-sample.yaml", "Total Output Throughput (tokens/sec)"),
])
def test_a_wrong_file_is_one_line_naming_tool_and_field(fmt, wrong, field):
    with pytest.raises(BenchFormatError) as err:
        read_bench(BENCH / wrong, fmt)
    message = str(err.value)
    tool = {"vllm": "vllm bench serve", "sglang": "sglang bench_serving", "genai-perf": "genai-perf/aiperf"}.get(fmt, fmt)
    assert "\n" not in message and message.startswith(f"{tool}: ") and repr(field) in message


def test_a_file_read_as_another_tool_says_whose_output_it_is():
    # SGLang's reader takes a vLLM result's shared fields; it had gone on to "does not record the model"
    with pytest.raises(BenchFormatError) as err:
        read_bench(BENCH / "vllm-bench-serve.json", "sglang")
    assert str(err.value) == (f"sglang bench_serving: {BENCH / 'vllm-bench-serve.json'}: not sglang bench_serving "
                              "output; it reads as vllm bench serve output: give --format vllm, or leave --format out")
    with pytest.raises(BenchFormatError, match=r"no field 'benchmarks'; not a guidellm output file\? It reads as vllm "
                                               r"bench serve output: give --format vllm"):
        read_bench(BENCH / "vllm-bench-serve.json", "guidellm")


def test_a_time_no_gpu_allows_is_said(tmp_path):
    """Llama-3.1-8B (8.030e9 parameters, of which the embedding and the LM head 128,256 x 4,096 =
    5.253e8 each) on one H100 (1,979 TFLOPS dense FP8, 3.35 TB/s): a 1,024-token prompt is
    2 x (6.980e9 x 1,024 + 5.253e8) = 1.43e13 FLOPs, 7.22 ms at the fastest rate; a decode
    step reads at least 7.505e9 weights at 4 bits, 3.75 GB, 1.12 ms. Seconds written as
    milliseconds (0.0486 and 0.0074) fall below both and are said."""
    def seconds(d):
        d.update(mean_ttft_ms=0.04862, mean_tpot_ms=0.0074)
    path = _rewritten(tmp_path, "vllm-bench-serve.json", "s.json", seconds)
    _, notes = bench_cases([path], given_deployment(gpu="h100-sxm"))
    assert any("ttft_ms 0.0486 ms is below the 7.22 ms one uncached 1,024-token prompt needs on 1 h100-sxm" in n
               for n in notes)
    assert any("tpot_ms 0.0074 ms is below the 1.12 ms a decode step of the weights needs" in n for n in notes)
    _, notes = bench_cases([BENCH / "vllm-bench-serve.json"], given_deployment(gpu="h100-sxm"))
    assert not any("is below the" in n for n in notes)  # the real times (48.6 and 7.41 ms) are above


def test_the_cli_offers_every_format():
    from inferlab.cli.bench_cmd import FORMAT_NAMES
    from inferlab.validation.bench import FORMATS

    assert FORMAT_NAMES == tuple(sorted(FORMATS))


def test_a_file_of_no_tool_lists_the_tools():
    with pytest.raises(SpecError, match="not the output of a known benchmark tool .*give --format"):
        read_bench(DATA / "cases-sample.yaml")


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(vllm_bench.REQUIRED))
def test_a_missing_required_field_is_named(field):
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text())
    del data[field]
    with pytest.raises(BenchFormatError, match=f"vllm bench serve: x.json: no field '{field}'"):
        vllm_bench.read(data, "x.json")


def test_cases_take_the_recorded_deployment_first():
    given = given_deployment(engine_args=VLLM_8B, gpu="h100-sxm")
    cases, notes = bench_cases([BENCH / "trtllm-bench-report.json"], given)
    # the report's model, layout and formats win over the engine args
    assert {c.metric for c in cases} == {"tpot_ms", "output_tokens_per_s"}  # offline: its TTFT is not used
    case = cases[0]
    assert (case.model, case.num_gpus, case.parallelism.tp, case_engine(case)) == ("llama-3.1-70b", 4, 4,
                                                                                  "trtllm-pytorch")
    assert any("TTFT" in n for n in notes)
    assert any("the file records its deployment, of the model meta-llama/Llama-3.1-70B-Instruct" in n for n in notes)
    # nothing of the 8B command reaches the 70B report's cases: not its dp, formats or memory share
    odd = given_deployment(engine_args=VLLM_8B + " -dp 2 --quantization fp8 --gpu-memory-utilization 0.5",
                           gpu="h100-sxm")
    (theirs, *_), _ = bench_cases([BENCH / "trtllm-bench-report.json"], odd)
    (own, *_), _ = bench_cases([BENCH / "trtllm-bench-report.json"], given_deployment(gpu="h100-sxm"))
    assert (theirs.num_gpus, theirs.precision, theirs.scheduler) == (own.num_gpus, own.precision, own.scheduler)


def test_cases_take_the_model_from_engine_args_or_a_deployment_file(tmp_path):
    cases, _ = bench_cases([BENCH / "sglang-bench-serving.jsonl"],
                           given_deployment(engine_args=VLLM_8B + " -tp 2", gpu="h100-sxm"))
    assert {(c.model, c.num_gpus, c.engine) for c in cases} == {("llama-3.1-8b", 2, "sglang")}
    dep = tmp_path / "dep.yaml"
    dep.write_text("model: llama-3.1-8b\nhardware: h200-sxm\ntp: 2\nprecision: fp8\n")
    cases, _ = bench_cases([BENCH / "sglang-bench-serving.jsonl"], given_deployment(deployment=str(dep)))
    assert {(c.hardware, c.num_gpus, c.precision["weights"]) for c in cases} == {("h200-sxm", 2, "fp8")}
    with pytest.raises(SpecError, match="--gpu h100-sxm contradicts the deployment file"):
        given_deployment(deployment=str(dep), gpu="h100-sxm")


@pytest.mark.parametrize("given, message", [
    (dict(), "does not record the GPU; give --gpu"),
    (dict(gpu="h100-sxm"), "does not record the model; give --engine-args"),
])
def test_what_no_source_gives_is_one_line(given, message):
    with pytest.raises(SpecError, match=message):
        bench_cases([BENCH / "sglang-bench-serving.jsonl"], given_deployment(**given))


def test_vllm_means_are_of_the_completed_requests_even_with_details(tmp_path):
    """vLLM's totals count the completed requests; a detailed save lists every request, a failed
    one with a 0-token output (vllm/benchmarks/serve.py, calculate_metrics), which had shortened
    the mean output (3 completed of 60, 90, 120 and one failed: 67.5, not 90)."""
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text())
    data.update(completed=3, failed=1, total_input_tokens=900, total_output_tokens=270,
                input_lens=[100, 200, 600, 500], output_lens=[60, 90, 120, 0], ttfts=[0.04, 0.05, 0.06, 0.0],
                itls=[[0.007] * 59, [0.007] * 89, [0.007] * 119, []])
    path = tmp_path / "detailed.json"
    path.write_text(json.dumps(data))
    (run,) = read_bench(path)
    assert (run.isl, run.osl) == (300, 90) and any("1 request(s) failed" in n for n in run.notes)


def test_a_ramped_vllm_rate_is_not_read_as_one_load(tmp_path):
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text())
    data.update(request_rate="inf", max_concurrency=None, ramp_up_strategy="linear", ramp_up_start_rps=1,
                ramp_up_end_rps=20)
    path = tmp_path / "ramp.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match="a ramped rate"):  # had been read as every request at once
        read_bench(path)


def test_vllm_append_result_holds_a_run_a_line(tmp_path):
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text())
    path = tmp_path / "appended.json"
    path.write_text("\n".join(json.dumps({**data, "max_concurrency": c}) for c in (4, 16)))
    assert [r.concurrency for r in read_bench(path)] == [4, 16]


def test_genai_perf_before_0_0_10_kept_its_settings_flat(tmp_path):
    data = json.loads((BENCH / "genai-perf-profile-export.json").read_text())
    data["input_config"] = {"model": ["meta-llama/Llama-3.1-70B-Instruct"], "concurrency": 8, "request_count": 50}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    (run,) = read_bench(path)
    assert (run.model, run.concurrency, run.num_requests) == ("meta-llama/Llama-3.1-70B-Instruct", 8, 50)


def test_guidellm_before_0_4_kept_strategy_and_model_per_benchmark(tmp_path):
    data = json.loads((BENCH / "guidellm-report.json").read_text())
    old = {"benchmarks": [{"type_": "generative_benchmark", "args": {"strategy": b["config"]["strategy"]},
                           "worker": {"backend_model": "meta-llama/Llama-3.1-70B-Instruct"}, "metrics": b["metrics"]}
                          for b in data["benchmarks"]]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    concurrent, constant = read_bench(path)
    assert concurrent.concurrency == 8 and constant.request_rate == 2.0
    assert concurrent.model == "meta-llama/Llama-3.1-70B-Instruct"


def test_engine_limits_reach_the_cases_and_their_simulation(tmp_path):
    from inferlab.validation.predict import predict_cases

    given = given_deployment(engine_args=VLLM_8B + " --max-num-seqs 2 --gpu-memory-utilization 0.8", gpu="h100-sxm")
    cases, _ = bench_cases([BENCH / "sglang-bench-serving.jsonl"], given)
    assert {tuple(sorted(c.scheduler.items())) for c in cases} == {(("gpu_memory_utilization", 0.8),
                                                                   ("max_num_seqs", 2))}
    # two running requests at most: the others queue, so TTFT grows past the default limits' by
    # at least a whole request's decode for any run with more than two requests in flight
    loaded = [c for c in cases if c.metric == "ttft_ms" and c.load.get("concurrency", 0) > 2]
    assert loaded
    limited = [p for p, _ in predict_cases(loaded)]
    default = [p for p, _ in predict_cases([c.model_copy(update={"scheduler": None}) for c in loaded])]
    assert all(a > b for a, b in zip(limited, default))


def test_a_case_refuses_unknown_or_impossible_limits():
    from inferlab.validation.cases import Case

    base = dict(id="x", regime="closed_loop", model="llama-3.1-8b", hardware="h100-sxm", num_gpus=1,
                precision={"weights": "bf16"}, engine="vllm", isl=100, osl=10, load={"concurrency": 4},
                metric="ttft_ms", measured=1.0)
    with pytest.raises(ValueError, match="unknown scheduler limits \\['max_seq'\\]; allowed: max_num_seqs"):
        Case(**base, scheduler={"max_seq": 4})
    with pytest.raises(ValueError, match="max_num_seqs"):
        Case(**base, scheduler={"max_num_seqs": 0})


def test_a_rate_with_a_concurrency_cap_is_simulated_with_the_cap(tmp_path):
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text())
    data.update(request_rate=4.0, max_concurrency=8)
    path = tmp_path / "capped.json"
    path.write_text(json.dumps(data))
    cases, notes = bench_cases([path], given_deployment(engine_args=VLLM_8B, gpu="h100-sxm"))
    assert {c.regime for c in cases} == {"online"}
    assert {c.load["max_concurrency"] for c in cases} == {8}
    assert not any("rate alone" in n for n in notes)  # the cap had been dropped with a note


def test_trtllm_bench_limits_reach_the_cases():
    # the report records max_batch_size and max_num_tokens under world_info: the runtime ran
    # at most that many sequences, so the simulation does too
    data = json.loads((BENCH / "trtllm-bench-report.json").read_text())
    world = data["world_info"]
    cases, _ = bench_cases([BENCH / "trtllm-bench-report.json"], given_deployment(gpu="h100-sxm"))
    assert {c.scheduler["max_num_seqs"] for c in cases} == {int(world["max_batch_size"])}
    assert {c.scheduler["max_num_batched_tokens"] for c in cases} == {int(world["max_num_tokens"])}
    # trtllm-bench never refuses a prompt for its budget (it chunks, or by release raises
    # max_num_tokens to the longest prompt) and the report records neither: read as chunked
    assert {c.scheduler["chunked_prefill"] for c in cases} == {True}


def test_an_engine_the_file_records_wins_over_the_engine_args_and_is_said_to():
    cases, notes = bench_cases([BENCH / "sglang-bench-serving.jsonl"], given_deployment(engine_args=VLLM_8B,
                                                                                       gpu="h100-sxm"))
    assert {c.engine for c in cases} == {"sglang"}
    assert any("records the sglang engine, the --engine-args vllm: predicted as sglang" in n for n in notes)


def test_a_deployment_files_serving_limits_reach_the_cases(tmp_path):
    # the engine args' serving limits (a flat file), the typed file's engine limits, and a flat
    # file's max_num_tokens as the token budget: none dropped on the way to the cases
    flat = tmp_path / "flat.yaml"
    flat.write_text("hardware: h100-sxm\nengine_args: vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 64 "
                    "--max-num-batched-tokens 2048\n")
    assert given_deployment(deployment=str(flat)).scheduler == {"max_num_seqs": 64, "max_num_batched_tokens": 2048}
    typed = tmp_path / "typed.yaml"
    typed.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: {name: sglang, max_num_seqs: 32, "
                     "max_prefill_tokens: 4096}\n")
    assert given_deployment(deployment=str(typed)).scheduler == {"max_num_seqs": 32, "max_prefill_tokens": 4096}
    budget = tmp_path / "budget.yaml"
    budget.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nmax_num_tokens: 4096\n")
    assert given_deployment(deployment=str(budget)).scheduler == {"max_num_batched_tokens": 4096}


SGLANG_EAGLE = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                "--speculative-algorithm EAGLE --speculative-draft-model-path yuhuili/EAGLE3-LLaMA3.1-Instruct-8B "
                "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


def _sglang_runs(tmp_path, accept_length):
    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    for data in lines:
        data["accept_length"] = accept_length
    path = tmp_path / "spec.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    return path


def test_a_drafter_in_the_engine_args_takes_the_acceptance_sglang_recorded(tmp_path):
    from inferlab.validation.predict import predict_cases

    given = given_deployment(engine_args=SGLANG_EAGLE, gpu="h100-sxm")
    cases, notes = bench_cases([_sglang_runs(tmp_path, 2.5)], given)
    assert {tuple(sorted(c.speculative.items())) for c in cases} == {
        (("acceptance_length", 2.5), ("draft_tokens", 3), ("method", "eagle"))}
    assert not any("speculat" in n for n in notes)
    # 2.5 tokens a verification step at 8 clients: TPOT well under the plain decode's (an
    # EAGLE step costs the target's step plus a small head, so at least 1.5x faster here)
    tpot = [c for c in cases if c.metric == "tpot_ms" and c.load.get("concurrency") == 8]
    (spec,), (plain,) = ([p for p, _ in predict_cases(cs)] for cs in (
        tpot, [c.model_copy(update={"speculative": None}) for c in tpot]))
    assert spec < plain / 1.5


def test_a_drafter_without_an_acceptance_runs_at_the_engines_limits_for_one(tmp_path):
    cases, notes = bench_cases([_sglang_runs(tmp_path, None)], given_deployment(engine_args=SGLANG_EAGLE,
                                                                                 gpu="h100-sxm"))
    # SGLang resets its running requests to 48 for an EAGLE drafter and turns its overlap
    # scheduler off (server_args): the run without the drafter is simulated so
    assert {c.speculative for c in cases} == {None}
    assert {c.scheduler["max_num_seqs"] for c in cases} == {48}
    assert {c.scheduler["overlap_host"] for c in cases} == {False}
    assert any("neither it nor the file gives an acceptance: simulated without the drafter, at the limits sglang "
               "sets for one (max_num_seqs=48, overlap_host=False)" in n for n in notes)
    # at 96 clients the 48 running requests queue the others: TTFT grows well past the same run
    # without the drafter's limit (the whole prefill of a second wave at least)
    from inferlab.validation.predict import predict_cases

    loaded = [c.model_copy(update={"load": {"concurrency": 96}}) for c in cases
              if c.metric == "ttft_ms" and c.load.get("concurrency")]
    (capped,), (free,) = ([p for p, _ in predict_cases(cs)] for cs in (
        loaded, [c.model_copy(update={"scheduler": None}) for c in loaded]))
    assert capped > 1.5 * free
    # a limit the command sets wins
    cases, _ = bench_cases([_sglang_runs(tmp_path, None)], given_deployment(
        engine_args=SGLANG_EAGLE + " --max-running-requests 16", gpu="h100-sxm"))
    assert {c.scheduler["max_num_seqs"] for c in cases} == {16}
    # vLLM runs an n-gram drafter without async scheduling and keeps its own sequence limit
    ngram = VLLM_8B + """ --speculative-config '{"method": "ngram", "num_speculative_tokens": 3}'"""
    cases, notes = bench_cases([BENCH / "vllm-bench-serve.json"], given_deployment(engine_args=ngram, gpu="h100-sxm"))
    assert {tuple(c.scheduler.items()) for c in cases} == {(("overlap_host", False),)}
    assert any("at the limits vllm sets for one (overlap_host=False)" in n for n in notes)


def test_an_acceptance_without_a_drafter_is_named_not_guessed(tmp_path):
    cases, notes = bench_cases([_sglang_runs(tmp_path, 2.5)], given_deployment(engine_args=VLLM_8B, gpu="h100-sxm"))
    assert {c.speculative for c in cases} == {None}
    assert any("accept_length 2.5) without a drafter named" in n for n in notes)


def test_a_deployment_files_drafter_and_acceptance_reach_the_cases(tmp_path):
    dep = tmp_path / "dep.yaml"
    dep.write_text(f"engine_args: {SGLANG_EAGLE}\nhardware: h100-sxm\n")
    cases, _ = bench_cases([_sglang_runs(tmp_path, 3.0)], given_deployment(deployment=str(dep)))
    assert {c.speculative["acceptance_length"] for c in cases} == {3.0}
    dep.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: sglang\n"
                   "speculative: {method: eagle, k: 3, acceptance: 0.6}\n")
    cases, _ = bench_cases([_sglang_runs(tmp_path, None)], given_deployment(deployment=str(dep)))
    assert {tuple(sorted(c.speculative.items())) for c in cases} == {
        (("acceptance", 0.6), ("draft_tokens", 3), ("method", "eagle"))}


def test_a_flat_deployment_files_speculative_text_or_preset_reaches_the_cases(tmp_path):
    # a flat file keeps the speculative block as text (a preset name or inferlab's spec); the
    # preset's measured acceptance and its head's 32,000-token vocabulary reach the cases unless
    # the run recorded an acceptance of its own
    dep = tmp_path / "flat.yaml"
    dep.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: sglang\nspeculative: eagle:k=3,accept=0.7\n")
    cases, _ = bench_cases([_sglang_runs(tmp_path, None)], given_deployment(deployment=str(dep)))
    assert {tuple(sorted(c.speculative.items())) for c in cases} == {
        (("acceptance", 0.7), ("draft_tokens", 3), ("method", "eagle"))}
    dep.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: sglang\nspeculative: eagle3-llama-3.1-8b\n")
    cases, _ = bench_cases([_sglang_runs(tmp_path, 2.5)], given_deployment(deployment=str(dep)))
    assert {(c.speculative["acceptance_length"], c.speculative["draft_vocab_size"]) for c in cases} == {(2.5, 32000)}


def test_an_acceptance_a_drafter_cannot_reach_is_named_and_the_other_runs_predicted(tmp_path):
    from inferlab.validation.predict import predict_cases

    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0]["accept_length"], lines[1]["accept_length"] = 6.0, 2.5  # k=3 emits at most 4 tokens a step
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    cases, notes = bench_cases([path], given_deployment(engine_args=SGLANG_EAGLE, gpu="h100-sxm"))
    assert any("accept_length 6 is more than the 4 tokens a step of a drafter with k=3 can emit" in n for n in notes)
    predicted = {c.id.split(":")[0]: p for c, (p, _) in zip(cases, predict_cases(cases))}
    assert predicted[f"{path}#1"] is None and predicted[f"{path}#2"] is not None


@pytest.mark.parametrize("value, message", [(-3, "must be the tokens a step emitted"), (0.5, "(>= 1)"),
                                            ("nan", "must be a finite number, got")])
def test_an_impossible_recorded_acceptance_is_one_line(tmp_path, value, message):
    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0]["accept_length"] = value
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    # the bad run is skipped with its reason, the file's other runs are read (as a case file's)
    runs = read_bench(path)
    assert len(runs) == len(lines) - 1 and any(message in note and "run skipped" in note for note in runs[0].notes)
    path.write_text(json.dumps(lines[0]))  # the only run: nothing to read
    with pytest.raises(SpecError, match=message.replace("(", "\\(").replace(")", "\\)")):
        read_bench(path)


@pytest.mark.parametrize("fixture, path, value, message", [
    ("vllm-bench-serve.json", ("max_concurrency",), 0, "max_concurrency 0 is not a number of clients"),
    ("vllm-bench-serve.json", ("max_concurrency",), 2.5, "max_concurrency 2.5 is not a number of clients"),
    ("vllm-bench-serve.json", ("request_rate",), -2, "request_rate -2 is not a request rate"),
    # a fractional count had divided the token totals into 204,800-token prompts
    ("vllm-bench-serve.json", ("completed",), 0.5, "'completed' is a count: a whole number >= 1, got 0.5"),
    ("trtllm-bench-report.json", ("world_info", "tp_size"), 2.5, "'world_info.tp_size' is a count: a whole number"),
    ("vllm-bench-serve.json", ("request_rate",), "fast", "request_rate 'fast' is not a request rate"),
    ("genai-perf-profile-export.json", ("input_config", "perf_analyzer", "stimulus", "concurrency"), "x",
     "concurrency 'x' is not a number of clients"),
    ("genai-perf-profile-export.json", ("input_config", "request_count"), "lots", "request_count 'lots' is not a"),
    ("genai-perf-profile-export.json", ("input_config", "model_names"), [42], "the recorded model 42 is not a name"),
])
def test_a_malformed_load_is_one_line_not_an_offline_run(tmp_path, fixture, path, value, message):
    # a load field that is not a number had been read as "every request at once" (an offline run),
    # and a request count or model of the wrong type raised a traceback
    data = json.loads((BENCH / fixture).read_text(encoding="utf-8"))
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    bad = tmp_path / fixture
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BenchFormatError, match="^" + fixture.split("-")[0]) as err:
        read_bench(bad)
    assert message in str(err.value)
    (run,) = read_bench(BENCH / "vllm-bench-serve.json")  # an infinite rate is every request at once
    assert run.request_rate is None


def test_a_file_of_another_model_than_the_engine_args_is_not_predicted_with_them(tmp_path):
    # the 8B command's layout and flags are another run's: a 70B file read with them had been
    # predicted as the 70B on the 8B's one GPU; alone it is refused in one line, beside a file of
    # the command's model it is left out with the reason and the other is predicted
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text(encoding="utf-8"))
    data["model_id"] = "meta-llama/Llama-3.1-70B-Instruct"
    path = tmp_path / "seventy.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    given = given_deployment(engine_args=VLLM_8B, gpu="h100-sxm")
    with pytest.raises(SpecError, match=r"records the model meta-llama/Llama-3.1-70B-Instruct \(llama-3.1-70b\), "
                                        r"the --engine-args llama-3.1-8b: give the deployment that ran the file"):
        bench_cases([path], given)
    cases, notes = bench_cases([path, BENCH / "vllm-bench-serve.json"], given)
    assert {c.model for c in cases} == {"llama-3.1-8b"} and any(n.endswith("; not predicted") for n in notes)
    same, quiet = bench_cases([BENCH / "vllm-bench-serve.json"], given)
    assert not any("records the model" in n for n in quiet)
    alone, _ = bench_cases([path], given_deployment(gpu="h100-sxm"))  # no command: the file's own model
    assert {c.model for c in alone} == {"llama-3.1-70b"}


def test_a_json_lines_file_with_a_bad_line_names_it(tmp_path):
    first = (BENCH / "sglang-bench-serving.jsonl").read_text(encoding="utf-8").splitlines()[0]
    path = tmp_path / "runs.jsonl"
    path.write_text(first + "\n{not json\n", encoding="utf-8")
    with pytest.raises(BenchFormatError, match=r"runs.jsonl: line 2 is not a JSON object"):
        read_bench(path)


def test_a_closed_loop_over_data_parallel_replicas_predicts_the_replicas_throughput():
    # the Little's-law throughput counts the simulated replica's own clients (8 of the 16 with dp=2);
    # counting all 16 had doubled the prediction
    from inferlab import serve
    from inferlab.validation.predict import predict_cases

    for dp in (1, 2):
        cases, _ = bench_cases([BENCH / "vllm-bench-serve.json"], given_deployment(engine_args=f"{VLLM_8B} -dp {dp}",
                                                                                    gpu="h100-sxm"))
        (case,) = [c for c in cases if c.metric == "output_tokens_per_s"]
        (predicted, _), = predict_cases([case])
        served = serve("llama-3.1-8b", "h100-sxm", engine="vllm", dp=dp, concurrency=16, isl=1024, osl=256,
                       num_requests=48).output_tokens_per_s
        assert predicted == pytest.approx(served, rel=0.1)


def test_a_vllm_run_without_chunked_prefill_is_predicted_at_the_engines_budget():
    from inferlab.validation.predict import predict_cases

    cases, _ = bench_cases([BENCH / "vllm-bench-serve.json"],
                           given_deployment(engine_args=f"{VLLM_8B} --no-enable-chunked-prefill", gpu="h100-sxm"))
    assert all(p is not None for p, _ in predict_cases(cases))


def test_a_synthetic_prompt_pool_is_read_and_reaches_the_cases(tmp_path):
    # genai-perf and AIPerf reuse --num-dataset-entries synthetic prompts (100 by default); the
    # genai-perf fixture records its 100, the AIPerf fixture records no pool
    (gp,) = read_bench(BENCH / "genai-perf-profile-export.json")
    (ap,) = read_bench(BENCH / "aiperf-profile-export.json")
    assert (gp.prompts, ap.prompts) == (100, None)
    cases, notes = bench_cases([BENCH / "genai-perf-profile-export.json"], given_deployment(gpu="h100-sxm"))
    assert {tuple(c.prefix_cache.items()) for c in cases} == {(("prompts", 100),)}
    assert any("100 distinct" in n for n in notes)
    # a dataset file, or a pool as large as the run, repeats no prompt
    data = json.loads((BENCH / "genai-perf-profile-export.json").read_text())
    data["input_config"]["input"]["prompt_source"] = "file"
    path = tmp_path / "file.json"
    path.write_text(json.dumps(data))
    assert read_bench(path)[0].prompts is None
    data = json.loads((BENCH / "aiperf-profile-export.json").read_text())
    data["input_config"]["input"]["conversation"] = {"num_dataset_entries": 500}  # AIPerf's key, 240 requests
    path = tmp_path / "aiperf.json"
    path.write_text(json.dumps(data))
    (run,) = read_bench(path)
    assert run.prompts == 500
    cases, _ = bench_cases([path], given_deployment(gpu="h100-sxm"))
    assert all(c.prefix_cache is None for c in cases)


@pytest.mark.parametrize("fmt", [None, "vllm"])
def test_a_file_cut_short_is_named_as_invalid_json(tmp_path, fmt):
    path = tmp_path / "cut.json"
    path.write_text((BENCH / "vllm-bench-serve.json").read_text()[:300])
    with pytest.raises(SpecError, match=r"it starts as JSON but is not valid JSON: .* \(line \d+, column \d+\); "
                                        r"cut short\?"):
        read_bench(path, fmt)


def test_a_tensorrt_llm_log_without_its_report_says_so_not_that_it_is_broken_json(tmp_path):
    # its lines open with "[12/01/2026-...]", which reads as the start of a JSON array
    path = tmp_path / "oom.log"
    path.write_text("[12/01/2026-16:20:05] [TRT-LLM] [I] Preparing to run throughput benchmark...\n"
                    "[12/01/2026-16:20:41] [TRT-LLM] [E] CUDA out of memory\n")
    with pytest.raises(SpecError, match=r"a TensorRT-LLM log without trtllm-bench's report .* did the run stop before "
                                        r"it finished\? Its last error line: .*CUDA out of memory"):
        read_bench(path)


def _rewritten(tmp_path, fixture, name, change):
    data = json.loads((BENCH / fixture).read_text())
    change(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_trtllm_backend_names_the_runtime_and_quant_algos_of_its_recipes(tmp_path):
    """engine.backend says which runtime ran, whatever the version; TensorRT-LLM's QuantAlgo
    values for gpt-oss (W4A8_MXFP4_FP8: MXFP4 experts, FP8 activations) and per-channel FP8 read."""
    def trt(d):
        d["engine"]["backend"] = "TRT"
    (run,) = read_bench(_rewritten(tmp_path, "trtllm-bench-report.json", "trt.json", trt))
    (cases, _) = bench_cases([tmp_path / "trt.json"], given_deployment(gpu="h100-sxm"))
    assert run.engine == "trtllm-cpp" and case_engine(cases[0]) == "trtllm"  # 1.0.0 but the compiled engine
    (pyt,) = read_bench(BENCH / "trtllm-bench-report.json")
    assert pyt.engine == "trtllm-pytorch"

    def mxfp4(d):
        d["engine"].update(model="openai/gpt-oss-120b", quantization="W4A8_MXFP4_FP8", kv_cache_dtype=None)
    (gpt,) = read_bench(_rewritten(tmp_path, "trtllm-bench-report.json", "gptoss.json", mxfp4))
    assert dict(gpt.precision) == {"moe_weights": "mxfp4", "activations": "fp8"}


def test_a_trtllm_log_with_two_reports_gives_two_runs(tmp_path):
    text = (BENCH / "trtllm-bench.log").read_text()
    path = tmp_path / "two.log"
    path.write_text(text + "\n" + text.replace("Number of requests:", "Number of requests:   1", 1))
    runs = read_bench(path)
    assert [r.id for r in runs] == [f"{path}#1", f"{path}#2"]  # the first had been overwritten by the second


def test_a_trtllm_run_far_below_its_batch_limit_is_flagged(tmp_path):
    """64 in flight on average of 640 requests and a batch limit of 512: a --concurrency cap the
    report does not record; the fixture's 498.7 of 2000 and 512 is an offline run."""
    def capped(d):
        d["request_info"].update(num_requests=640, avg_num_concurrent_requests=63.8)
    (run,) = read_bench(_rewritten(tmp_path, "trtllm-bench-report.json", "capped.json", capped))
    assert any("client cap" in n for n in run.notes)
    (offline,) = read_bench(BENCH / "trtllm-bench-report.json")
    assert not any("client cap" in n for n in offline.notes)


def test_guidellm_throughput_with_a_concurrency_cap_is_a_closed_loop(tmp_path):
    def capped(d):
        d["benchmarks"][0]["config"]["strategy"] = {"type_": "throughput", "max_concurrency": 64}
    runs = read_bench(_rewritten(tmp_path, "guidellm-report.json", "tp.json", capped))
    # had been read as offline; 120 requests over 64 clients
    assert runs[0].regime_and_load() == ("closed_loop", {"concurrency": 64, "num_requests": 120})


def test_an_export_without_a_load_is_refused_and_aiperf_phases_are_read(tmp_path):
    def no_load(d):
        d["input_config"] = {"endpoint": {"model_names": ["meta-llama/Llama-3.1-8B-Instruct"]}}
    with pytest.raises(SpecError, match="records no load"):  # had been simulated as every request at once
        read_bench(_rewritten(tmp_path, "aiperf-profile-export.json", "none.json", no_load))

    def phases(d):
        d["input_config"] = {"models": {"items": [{"name": "meta-llama/Llama-3.1-8B-Instruct"}]},
                             "phases": [{"type": "concurrency", "concurrency": 2, "exclude_from_results": True},
                                        {"type": "concurrency", "concurrency": 16, "requests": 240}]}
    (run,) = read_bench(_rewritten(tmp_path, "aiperf-profile-export.json", "phases.json", phases))
    assert run.concurrency == 16 and run.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_quantized_checkpoint_name_in_the_file_sets_its_format(tmp_path):
    def fp8(d):
        d["model_id"] = "RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8"
    path = _rewritten(tmp_path, "vllm-bench-serve.json", "fp8.json", fp8)
    cases, notes = bench_cases([path], given_deployment(gpu="h100-sxm"))
    assert cases[0].precision == {"weights": "fp8", "activations": "fp8"} and any("is fp8 by its name" in n
                                                                                   for n in notes)


def test_sglang_server_info_is_the_deployment_and_unstreamed_runs_drop_ttft(tmp_path):
    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0]["server_info"] = {"model_path": "meta-llama/Llama-3.1-70B-Instruct", "tp_size": 4, "dp_size": 1,
                               "quantization": "fp8", "kv_cache_dtype": "fp8_e4m3", "max_running_requests": 128,
                               "version": "0.5.2"}
    lines[1].update(mean_tpot_ms=0, mean_itl_ms=0)  # --disable-stream: "TTFT" is the whole latency
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    first, second = read_bench(path)[:2]
    assert first.model == "meta-llama/Llama-3.1-70B-Instruct" and dict(first.layout) == {"tp": 4}
    assert dict(first.precision) == {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}
    assert dict(first.scheduler) == {"max_num_seqs": 128} and first.engine_version == "0.5.2"
    assert "ttft_ms" not in dict(second.metrics) and any("not streamed" in n for n in second.notes)


def test_a_recorded_deployment_over_contradicting_engine_args_is_said_and_formats_merge(tmp_path):
    """The file's server_info records tp 2 and an FP8 KV cache; the engine args say tp 4 and FP8
    weights. What ran is the file's layout (said, it had been silent), and the weights the file
    does not record come from the engine args (they had been dropped: predicted in BF16)."""
    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0]["server_info"] = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 2,
                               "kv_cache_dtype": "fp8_e4m3"}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(lines[0]))
    given = given_deployment(engine_args="python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                                         "--tp 4 --quantization fp8", gpu="h100-sxm")
    cases, notes = bench_cases([path], given)
    assert {c.parallelism.tp for c in cases} == {2}
    assert any("the file records tp 2, the deployment given says 4: predicted with the file's" in n for n in notes)
    assert all(c.precision == {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"} for c in cases)


def test_sglang_server_info_names_the_drafter_and_the_radix_cache(tmp_path):
    """A run with accept_length 2.6 whose server_info records EAGLE3 with 3 steps is predicted with
    that drafter (it had been simulated without one, "without a drafter named"); its
    disable_radix_cache is read as prefix caching off."""
    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0].update(accept_length=2.6)
    lines[0]["server_info"] = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 1,
                               "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
                               "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                               "speculative_draft_model_path": "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B",
                               "disable_radix_cache": True}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(lines[0]))
    (run,) = read_bench(path)
    assert run.prefix_caching is False and dict(run.speculative)["draft_tokens"] == 3
    cases, notes = bench_cases([path], given_deployment(gpu="h100-sxm"))
    assert cases and all(c.speculative is not None and c.speculative["draft_tokens"] == 3
                         and c.speculative["acceptance_length"] == pytest.approx(2.6) for c in cases)
    assert not any("without a drafter named" in n for n in notes)


def test_a_recorded_drafter_keeps_the_acceptance_the_deployment_gives():
    """The file records EAGLE with k=3 and no accept_length; the deployment names the same method
    with an acceptance length of 2.8: simulated with both (the recorded drafter had dropped the
    deployment's acceptance, and with it the drafter)."""
    from types import SimpleNamespace

    from inferlab.validation.bench.deployment import GivenDeployment, _run_speculation

    run = SimpleNamespace(id="r0", speculative=(("method", "eagle"), ("draft_tokens", 3)), accept_length=None,
                          engine_version=None, scheduler=())
    given = GivenDeployment(hardware="h100-sxm", speculative={"method": "eagle", "draft_tokens": 3,
                                                              "acceptance_length": 2.8})
    spec, _, notes = _run_speculation(run, given, "sglang")
    assert spec == {"method": "eagle", "draft_tokens": 3, "acceptance_length": 2.8} and not notes


def test_an_unreadable_file_among_several_is_named_and_the_others_read(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    cases, notes = bench_cases([BENCH / "vllm-bench-serve.json", bad], given_deployment(gpu="h100-sxm"))
    assert cases and any(n.startswith(f"{bad}: not read:") for n in notes)
    with pytest.raises(SpecError):
        bench_cases([bad], given_deployment(gpu="h100-sxm"))


def test_a_metric_that_is_not_a_number_is_noted_not_dropped_silently(tmp_path):
    def nan_tpot(d):
        d["mean_tpot_ms"] = float("nan")
    (run,) = read_bench(_rewritten(tmp_path, "vllm-bench-serve.json", "nan.json", nan_tpot))
    assert "tpot_ms" not in dict(run.metrics) and any("mean_tpot_ms (nan) not a measured number" in n for n in run.notes)

    def nan_ttft(d):  # the same for the TTFT (it had refused the whole run)
        d["mean_ttft_ms"] = float("nan")
    (run,) = read_bench(_rewritten(tmp_path, "vllm-bench-serve.json", "nan-ttft.json", nan_ttft))
    assert "ttft_ms" not in dict(run.metrics) and "tpot_ms" in dict(run.metrics)
    assert any("mean_ttft_ms (nan) not a measured number" in n for n in run.notes)


@pytest.mark.parametrize("fixture", ["vllm-bench-serve.json", "sglang-bench-serving.jsonl"])
def test_a_zero_time_is_noted_and_a_negative_one_refused(tmp_path, fixture):
    """A streamed run's mean TPOT of 0 is no measurement: left out and said (it had been dropped
    silently); -7 ms is no time a run records: one line (it had been dropped silently too)."""
    lines = (BENCH / fixture).read_text().splitlines()

    def written(value):
        first = {**json.loads(lines[0]), "mean_tpot_ms": value} if len(lines) > 1 else None
        data = json.dumps(first) + "\n" + "\n".join(lines[1:]) if first else \
            json.dumps({**json.loads("\n".join(lines)), "mean_tpot_ms": value})
        path = tmp_path / f"{value}{Path(fixture).suffix}"
        path.write_text(data)
        return path

    run = read_bench(written(0))[0]
    assert "tpot_ms" not in dict(run.metrics) and "ttft_ms" in dict(run.metrics)
    assert any("mean_tpot_ms (0) not a measured number: not compared" in n for n in run.notes)
    if len(lines) == 1:
        with pytest.raises(BenchFormatError, match="field 'mean_tpot_ms' must be >= 0, got -7"):
            read_bench(written(-7))
    else:  # a file of several runs keeps the others and names the one it skips
        runs = read_bench(written(-7))
        assert len(runs) == len(lines) - 1
        assert any("field 'mean_tpot_ms' must be >= 0, got -7: run skipped" in n for n in runs[0].notes)


def test_sglang_server_info_reads_as_the_launch_flags_it_records(tmp_path):
    """server_info holds SGLang's server arguments, read by the launch command's own parser: an
    all-to-all MoE backend sets the expert-parallel size to the TP size, a -1 chunk prefills
    prompts whole (the budget then max_prefill_tokens), the memory fraction is read; and a TP
    size that the attention-DP size does not divide is that line's reason, not a wrong layout."""
    lines = [json.loads(line) for line in (BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0]["server_info"] = {"model_path": "deepseek-ai/DeepSeek-V3", "tp_size": 8, "dp_size": 8,
                               "enable_dp_attention": True, "moe_a2a_backend": "deepep", "ep_size": 1,
                               "chunked_prefill_size": -1, "max_prefill_tokens": 16384,
                               "mem_fraction_static": 0.8, "quantization": None}
    lines[1]["server_info"] = {"model_path": "/models/local-checkpoint", "tp_size": 6, "dp_size": 4,
                               "enable_dp_attention": True}
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    runs = read_bench(path)
    first = runs[0]
    assert dict(first.layout) == {"tp": 8, "ep": 8, "attention_dp": True, "attention_tp": 1} and \
        dict(first.precision) == {}
    assert dict(first.scheduler) == {"max_num_batched_tokens": 16384, "chunked_prefill": False,
                                     "gpu_memory_utilization": 0.8}
    assert any("--moe-a2a-backend deepep: SGLang sets the expert-parallel size to --tp (8)" in n for n in first.notes)
    assert len(runs) == len(lines) - 1 and any(
        "#2: server_info: --tp 6 with --dp 4 --enable-dp-attention: SGLang requires" in n for r in runs for n in r.notes)


def test_a_throughput_no_gpu_reaches_without_a_prefix_cache_is_said(tmp_path):
    """The fixture: 160 requests of 1,024 prompt tokens at 2,071.9 output tokens/s (256 a
    request): 8.09 requests/s x 1,024 x 2 x 8.03 B active parameters = 0.133 PFLOP/s of prefill on
    one H100, whose highest dense tensor rate is 1.979 (FP8): no note. The same run recording
    20,000-token prompts: 8.093 x 20,000 x 2 x 8.030e9 = 2.60 PFLOP/s, more than any H100
    prefills: its prompts must have been cached (vLLM caches prefixes by default)."""
    plain = BENCH / "vllm-bench-serve.json"
    _, notes = bench_cases([plain], given_deployment(engine_args=VLLM_8B, gpu="h100-sxm"))
    assert not any("PFLOP/s of prefill" in n for n in notes)
    data = json.loads(plain.read_text())
    data.update(total_input_tokens=160 * 20_000)
    path = tmp_path / "cached.json"
    path.write_text(json.dumps(data))
    _, notes = bench_cases([path], given_deployment(engine_args=VLLM_8B, gpu="h100-sxm"))
    (note,) = [n for n in notes if "PFLOP/s of prefill" in n]
    assert "8.09 requests/s of 20,000-token prompts imply 2.6 PFLOP/s" in note and "1.98 PFLOP/s" in note


def test_a_tensorrt_llm_report_without_its_backend_runs_the_pytorch_runtimes_drafter_limits(tmp_path):
    # a trtllm-bench report of 1.0 that does not name its backend is read as "trtllm" and runs as
    # the PyTorch runtime (case_engine, from 1.0); beside an n-gram drafter that runtime turns its
    # overlap scheduler off, so the run simulated without the drafter does too
    report = json.loads((BENCH / "trtllm-bench-report.json").read_text())
    report["engine"].pop("backend")
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    ngram = """cat > o.yml <<'EOF'
speculative_config:
  decoding_type: NGram
  max_draft_len: 3
EOF
trtllm-serve meta-llama/Llama-3.1-70B-Instruct --tp_size 4 --extra_llm_api_options o.yml"""
    cases, notes = bench_cases([path], given_deployment(engine_args=ngram, gpu="h100-sxm"))
    assert {(c.engine, c.engine_version) for c in cases} == {("trtllm", "1.0.0")}
    assert {c.scheduler.get("overlap_host") for c in cases} == {False}
    assert any("overlap_host=False" in n for n in notes)


@pytest.mark.parametrize("changes, message", [
    ({"total_input_tokens": 1.5}, "'total_input_tokens' 1.5 over 160 completed requests is 0.00937 tokens a request"),
    ({"total_output_tokens": 100}, "'total_output_tokens' 100 over 160 completed requests is 0.625 tokens a request"),
    ({"total_output_tokens": 1e30}, "is 6.25e+27 tokens a request; more than 100,000,000"),  # had been pydantic's line
    ({"completed": 10**12}, "field 'completed' 1,000,000,000,000 is past 1,000,000 requests"),
    ({"completed": True}, "field 'completed' is not a number (True)"),
    ({"duration": -5}, "field 'duration' must be >= 0, got -5"),
    ({"failed": -1}, "field 'failed' must be >= 0, got -1"),
])
def test_totals_that_leave_a_request_no_token_are_refused(tmp_path, changes, message):
    """A mean below one token a request had been predicted as a 0.01-token prompt; a count past a
    case's bound had surfaced as pydantic's text."""
    data = {**json.loads((BENCH / "vllm-bench-serve.json").read_text(encoding="utf-8")), **changes}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BenchFormatError, match=re.escape(message)):
        read_bench(path)


def test_a_benchmark_file_given_twice_is_refused(capsys):
    """It had been predicted twice (and would weigh twice in a fit)."""
    from inferlab.cli.main import main

    path = str(BENCH / "vllm-bench-serve.json")
    assert main(["validate", "--bench", path, path, "--engine-args", VLLM_8B, "--gpu", "h100-sxm"]) == 2
    assert "is given twice; each file once" in capsys.readouterr().err


def test_a_prompt_past_a_cases_bounds_is_one_plain_line(tmp_path):
    # 6.25e12-token prompts (the totals over 160 requests): one line naming the file's field and the
    # bound, not pydantic's text and its web link (nor the derived isl, which the file does not hold)
    data = {**json.loads((BENCH / "vllm-bench-serve.json").read_text()), "total_input_tokens": 6_250_000_000_000 * 160}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError) as info:
        bench_cases([path], given_deployment(gpu="h100-sxm"))
    assert "field 'total_input_tokens' 1000000000000000 over 160 completed requests is 6.25e+12 tokens a request; " \
           "more than 100,000,000" in str(info.value)
    assert "pydantic" not in str(info.value) and "type=" not in str(info.value)


def test_files_saved_with_a_byte_order_mark_read(tmp_path):
    # an editor's or a spreadsheet's "UTF-8 with BOM" had read as no known tool's output, and an
    # op file's first column as a column named '\ufeffop'
    from inferlab.validation.ops import read_ops

    bench = tmp_path / "bom.json"
    bench.write_bytes(b"\xef\xbb\xbf" + (BENCH / "vllm-bench-serve.json").read_bytes())
    (run,), (plain,) = read_bench(bench), read_bench(BENCH / "vllm-bench-serve.json")
    assert run.metrics == plain.metrics and (run.isl, run.osl, run.concurrency) == (plain.isl, plain.osl, plain.concurrency)
    ops = tmp_path / "ops.csv"
    ops.write_bytes(b"\xef\xbb\xbf" + (DATA / "ops-sample.csv").read_bytes())
    assert len(read_ops(ops).measured_s) == len(read_ops(DATA / "ops-sample.csv").measured_s) > 0


def test_sglang_server_info_reads_its_quantization_against_the_runs_own_model(tmp_path):
    # server_info of a DeepSeek-V3 run records quantization fp8, its checkpoint's own method: read
    # as the checkpoint's block-scaled FP8 (the flags had been read beside a placeholder Llama,
    # as per-tensor FP8); a model the catalog does not name still reads with the placeholder
    line = json.loads((BENCH / "sglang-bench-serving.jsonl").read_text().splitlines()[0])
    for model, weights in (("deepseek-ai/DeepSeek-V3", None), ("someone/unknown-model", "fp8")):
        info = {"model_path": model, "tp_size": 8, "quantization": "fp8"}
        path = tmp_path / "run.jsonl"
        path.write_text(json.dumps({**line, "server_info": info}) + "\n")
        (run,) = read_bench(path)
        assert dict(run.precision).get("weights") == weights
        assert not any("placeholder" in n or "Llama" in n for n in run.notes)


def test_a_guidellm_benchmark_whose_every_request_errored_is_said_to_have_failed(tmp_path):
    # it had read as a file missing 'time_to_first_token_ms.successful.mean' ("not a guidellm output file?")
    data = json.loads((BENCH / "guidellm-report.json").read_text())
    for metric in data["benchmarks"][0]["metrics"].values():
        if isinstance(metric, dict) and "successful" in metric:
            metric["errored"], metric["successful"] = metric["successful"], None
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))
    runs = read_bench(path)  # the second benchmark still reads, the first is skipped with its reason
    assert len(runs) == 1
    data["benchmarks"] = data["benchmarks"][:1]
    path.write_text(json.dumps(data))
    with pytest.raises(BenchFormatError, match=r"#1: no request succeeded \(120 errored\): a failed run"):
        read_bench(path)


def test_a_run_sending_every_request_at_once_keeps_its_request_count(tmp_path):
    # vllm bench serve at rate inf with no --max-concurrency: 160 requests at once. The count had
    # been dropped, the run predicted as the default offline batch (TPOT 68 ms against 24 ms for 160)
    data = {**json.loads((BENCH / "vllm-bench-serve.json").read_text()), "max_concurrency": None}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    (run,) = read_bench(path)
    assert run.regime_and_load() == ("offline", {"offline": True, "num_requests": 160})


def test_a_streamed_run_of_one_token_outputs_keeps_its_ttft(tmp_path):
    # one output token a request (a prefill measurement) records TPOT and ITL as 0 streamed or not:
    # it had been read as not streamed and its TTFT dropped
    data = json.loads((BENCH / "vllm-bench-serve.json").read_text())
    data["total_output_tokens"] = data["completed"]
    for key in [k for k in data if k.endswith(("_tpot_ms", "_itl_ms"))]:
        data[key] = 0
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    (run,) = read_bench(path)
    assert dict(run.metrics)["ttft_ms"] == data["mean_ttft_ms"] and run.osl == 1
    assert not any("not streamed" in n for n in run.notes)
