"""What a benchmark file does not record is said, never assumed silently: a layout no file or
flag gives, speculative decoding, a cancelled or partly failed AIPerf run, an unstreamed run, a
GPU other than the one given, an offline run's TTFT; and another export of the same tool is
named with the file to give instead.

The files are written here in each tool's documented layout (``vllm bench serve
--save-result``, trtllm-bench ``--report_json``, AIPerf ``profile_export_aiperf.json``);
expected values are their own recorded numbers."""

from __future__ import annotations

import json

import pytest

from inferlab.cli.main import main
from inferlab.errors import SpecError
from inferlab.validation.bench import bench_cases, given_deployment, read_bench
from inferlab.validation.bench.deployment import gpu_mismatch
from inferlab.validation.bench.run import BenchRun

GPU = "h100-sxm"


def vllm_result(**changes) -> dict:
    """A ``vllm bench serve --save-result`` file: 320 requests of 1024 prompt and 256 output tokens,
    32 clients."""
    data = {"date": "20250901-101010", "endpoint_type": "openai", "label": None, "model_id": "Qwen/Qwen3-32B",
            "tokenizer_id": "Qwen/Qwen3-32B", "num_prompts": 320, "request_rate": "inf", "burstiness": 1.0,
            "max_concurrency": 32, "duration": 40.0, "completed": 320, "failed": 0, "total_input_tokens": 327680,
            "total_output_tokens": 81920, "request_throughput": 8.0, "output_throughput": 2048.0,
            "mean_ttft_ms": 85.0, "median_ttft_ms": 70.0, "mean_tpot_ms": 14.0, "median_tpot_ms": 13.5,
            "mean_itl_ms": 14.0, "median_itl_ms": 13.0}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def trtllm_report(**sections) -> dict:
    """A trtllm-bench ``--report_json`` of Llama-3.1-70B FP8 at tp 4: 2000 requests of 1024/512 tokens."""
    data = {"engine": {"model": "meta-llama/Llama-3.1-70B-Instruct", "version": "1.0.0", "backend": "Pytorch",
                       "dtype": "bfloat16", "kv_cache_dtype": "FP8", "quantization": "FP8"},
            "world_info": {"tp_size": 4, "pp_size": 1, "ep_size": 1, "max_batch_size": 512, "max_num_tokens": 8192},
            "request_info": {"num_requests": 2000, "avg_num_concurrent_requests": 498.7, "avg_input_length": 1024.0,
                             "avg_output_length": 512.0},
            "performance": {"request_throughput_req_s": 17.7556, "system_output_throughput_tok_s": 9090.87},
            "streaming_metrics": {"avg_ttft_ms": 1470.2, "avg_tpot_ms": 52.05}}
    data.update(sections)
    return data


def aiperf_export(**changes) -> dict:
    """An AIPerf ``profile_export_aiperf.json`` of a streamed run: 500 requests at 32 clients."""
    data = {"schema_version": "1.5", "aiperf_version": "0.14.0",
            "request_throughput": {"unit": "requests/sec", "avg": 6.2},
            "request_latency": {"unit": "ms", "avg": 5200.0, "p50": 5044.0},
            "time_to_first_token": {"unit": "ms", "avg": 180.0, "p50": 174.6},
            "inter_token_latency": {"unit": "ms", "avg": 9.8, "p50": 9.506},
            "output_token_throughput": {"unit": "tokens/sec", "avg": 3150.0},
            "output_sequence_length": {"unit": "tokens", "avg": 510.0},
            "input_sequence_length": {"unit": "tokens", "avg": 2000.0},
            "request_count": {"unit": "requests", "avg": 500.0},
            "input_config": {"endpoint": {"model_names": ["meta-llama/Llama-3.1-8B-Instruct"], "type": "chat",
                                          "streaming": True},
                             "loadgen": {"concurrency": 32, "request_count": 500}},
            "was_cancelled": False}
    data.update(changes)
    return {k: v for k, v in data.items() if v is not ...}


def write(tmp_path, name, data) -> str:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


# 1. a layout neither the file nor the flags give

def test_a_layout_nothing_records_is_said_with_how_to_give_it(tmp_path):
    path = write(tmp_path, "vllm.json", vllm_result())
    cases, notes = bench_cases([path], given_deployment(gpu=GPU))
    assert {c.num_gpus for c in cases} == {1}
    assert (f"{path}: the file records no parallelism or precision, and no --engine-args or --deployment is given: "
            "modelled as tp 1 on one GPU in the checkpoint's own formats; if it ran otherwise, give the launch command "
            "(--engine-args 'vllm serve Qwen/Qwen3-32B -tp 4') or --deployment FILE") in notes
    cases, notes = bench_cases([path], given_deployment(engine_args="vllm serve Qwen/Qwen3-32B -tp 4", gpu=GPU))
    assert {c.num_gpus for c in cases} == {4} and not any("records no parallelism" in n for n in notes)


def test_the_layout_note_is_said_once_for_a_sweep_and_not_for_a_file_that_records_it(tmp_path):
    paths = [write(tmp_path, f"c{c}.json", vllm_result(max_concurrency=c)) for c in (4, 16, 64)]
    _, notes = bench_cases(paths, given_deployment(gpu=GPU))
    said = [n for n in notes if "no parallelism" in n]
    assert len(said) == 1 and said[0].startswith(f"{paths[0]} and 2 other run(s): their files record no parallelism")
    _, notes = bench_cases([write(tmp_path, "trt.json", trtllm_report())], given_deployment(gpu=GPU))
    assert not any("no parallelism" in n for n in notes)  # world_info.tp_size 4


def test_an_sglang_line_whose_server_info_lacks_the_layout_names_sglangs_flag(tmp_path):
    # server_info records the model but no tp_size (a line without server_info names no model,
    # so its deployment is always given)
    line = {"backend": "sglang", "dataset_name": "random", "request_rate": "inf", "max_concurrency": 8,
            "completed": 80, "total_input_tokens": 163840, "total_output_tokens": 10240, "output_throughput": 1500.0,
            "mean_ttft_ms": 61.3, "mean_tpot_ms": 5.1, "mean_itl_ms": 5.0, "median_tpot_ms": 5.0,
            "server_info": {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "version": "0.5.0"}}
    path = write(tmp_path, "sgl.jsonl", json.dumps(line) + "\n")
    _, notes = bench_cases([path], given_deployment(gpu=GPU))
    assert any(n.startswith(f"{path}#1: the file records no parallelism") and "(--engine-args 'python -m "
               "sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 4')" in n for n in notes)


def test_calibrate_refuses_to_fit_an_assumed_layout(tmp_path):
    path = write(tmp_path, "vllm.json", vllm_result())
    with pytest.raises(SpecError) as err:
        bench_cases([path], given_deployment(gpu=GPU), require_layout=True)
    assert str(err.value) == (
        f"calibrate: {path}: the file records no parallelism or precision, and no --engine-args or --deployment is "
        "given: a profile fitted to an assumed layout (tp 1 on one GPU in the checkpoint's own formats) would fold "
        "the wrong deployment into its efficiencies; give the launch command (--engine-args 'vllm serve "
        "Qwen/Qwen3-32B -tp 4') or --deployment FILE")
    cases, _ = bench_cases([path], given_deployment(engine_args="vllm serve Qwen/Qwen3-32B -tp 2", gpu=GPU),
                           require_layout=True)
    assert {c.num_gpus for c in cases} == {2}
    cases, _ = bench_cases([write(tmp_path, "trt.json", trtllm_report())], given_deployment(gpu=GPU),
                           require_layout=True)  # the report records its layout
    assert {c.num_gpus for c in cases} == {4}


def test_cli_validate_warns_of_the_assumed_layout(tmp_path, capsys):
    path = write(tmp_path, "vllm.json", vllm_result())
    assert main(["validate", "--bench", path, "--gpu", GPU]) == 0
    assert "inferlab: warning: " + path + ": the file records no parallelism or precision" in capsys.readouterr().err


def test_cli_calibrate_refuses_an_assumed_layout(tmp_path, capsys):
    path = write(tmp_path, "vllm.json", vllm_result())
    assert main(["calibrate", "--bench", path, "--gpu", GPU, "--out", str(tmp_path / "p.yaml")]) == 2
    assert "calibrate: " in capsys.readouterr().err and not (tmp_path / "p.yaml").exists()


# 2. trtllm-bench's speculative decoding

def test_trtllm_decoding_stats_are_the_runs_acceptance_length(tmp_path):
    stats = {"mode": "MTP", "acceptance_length_percentiles": {"average": 2.6, "p50": 2.7}}
    path = write(tmp_path, "trt.json", trtllm_report(decoding_stats=stats))
    (run,) = read_bench(path)
    assert run.accept_length == 2.6
    _, notes = bench_cases([path], given_deployment(gpu=GPU))
    assert (f"{path}: speculative decoding (accept_length 2.6) without a drafter named: simulated without it; give the "
            "engine's speculative flags in --engine-args or the deployment's speculative") in notes
    deployment = write(tmp_path, "d.yaml",
                       "model: llama-3.1-70b\nhardware: h100-sxm\nspeculative: 'mtp:k=3,length=2.0'\n")
    cases, _ = bench_cases([path], given_deployment(deployment=deployment))
    assert cases[0].speculative == {"method": "mtp", "draft_tokens": 3, "acceptance_length": 2.6}  # the run's


@pytest.mark.parametrize("stats, expected", [
    ({"mode": "MTP"}, "speculative decoding (MTP) without an acceptance length "
                      "(decoding_stats.acceptance_length_percentiles.average): simulated without it"),
    ({"mode": "NONE"}, None),
])
def test_trtllm_speculation_without_a_length_is_said(tmp_path, stats, expected):
    path = write(tmp_path, "trt.json", trtllm_report(decoding_stats=stats))
    (run,) = read_bench(path)
    assert run.accept_length is None
    assert (f"{path}: {expected}" in run.notes) if expected else not any("speculative" in n for n in run.notes)


def test_trtllm_acceptance_length_under_one_token_is_refused(tmp_path):
    path = write(tmp_path, "trt.json", trtllm_report(
        decoding_stats={"mode": "Eagle", "acceptance_length_percentiles": {"average": 0.4}}))
    with pytest.raises(SpecError, match=r"acceptance_length_percentiles.average' must be the tokens a step emitted "
                                        r"\(>= 1\), got 0.4"):
        read_bench(path)


# 3. AIPerf: a cancelled run, failed requests

def test_a_cancelled_aiperf_run_is_refused(tmp_path):
    path = write(tmp_path, "a.json", aiperf_export(was_cancelled=True))
    with pytest.raises(SpecError) as err:
        read_bench(path)
    assert str(err.value) == (f"genai-perf/aiperf: {path}: the run was cancelled before it finished (was_cancelled: "
                              "true): a partial run's figures are no steady state; not predicted (give a run that "
                              "completed)")


def test_aiperf_failed_requests_are_noted(tmp_path):
    errors = [{"error_details": {"code": 500, "type": "ServerError"}, "count": 200},
              {"error_details": {"code": 408, "type": "Timeout"}, "count": 5}]
    (run,) = read_bench(write(tmp_path, "a.json", aiperf_export(error_summary=errors)))
    assert f"{tmp_path / 'a.json'}: 205 request(s) failed (error_summary); the means are of the 500 completed" \
        in run.notes
    (run,) = read_bench(write(tmp_path, "b.json", aiperf_export(error_summary=[])))
    assert not any("failed" in n for n in run.notes)


# 4. an unstreamed AIPerf run

def test_an_unstreamed_aiperf_export_gives_its_throughput(tmp_path):
    path = write(tmp_path, "a.json", aiperf_export(time_to_first_token=..., inter_token_latency=...))
    (run,) = read_bench(path)
    assert dict(run.metrics) == {"output_tokens_per_s": 3150.0} and (run.isl, run.osl) == (2000.0, 510.0)
    assert (f"{path}: not streamed (no time_to_first_token or inter_token_latency): TTFT and TPOT not measured; "
            "its output throughput is compared") in run.notes


# 5. other exports named; a vLLM file without TTFT read

@pytest.mark.parametrize("name, text, said", [
    ("profile_export_aiperf.csv",
     "Metric,avg,min,max,p99,p90,p50,std\nTime to First Token (ms),180.00,90.00,360.00,270.00,220.00,174.60,18.00\n"
     "\nMetric,Value\nOutput Token Throughput (tokens/sec),3150.00\n",
     "a genai-perf/AIPerf CSV export (profile_export_aiperf.csv, profile_export_genai_perf.csv): give the JSON export "
     "beside it (profile_export_aiperf.json, profile_export_genai_perf.json)"),
    ("profile_export.jsonl",
     '{"metadata": {"x_request_id": "r0", "benchmark_phase": "profiling"}, "metrics": {"time_to_first_token": '
     '{"value": 150.0, "unit": "ms"}}, "error": null}\n' * 2,
     "AIPerf's per-request records (profile_export.jsonl): give the run's summary beside it, "
     "profile_export_aiperf.json"),
    ("profile_export_aiperf_aggregate.json",
     '{"schema_version": "1.0", "time_to_first_token": {"unit": "ms", "mean": 180.0, "std": 3.0, "cv": 0.01, '
     '"ci_low": 175, "ci_high": 185}}',
     "AIPerf's aggregate over several runs (profile_export_aiperf_aggregate.json: means with confidence intervals): "
     "give one run's own profile_export_aiperf.json"),
])
def test_another_aiperf_export_is_named(tmp_path, name, text, said):
    path = write(tmp_path, name, text)
    with pytest.raises(SpecError) as err:
        read_bench(path)
    assert str(err.value).endswith(f"{path}: {said}")
    assert "not the output of a known benchmark tool" not in str(err.value)
    with pytest.raises(SpecError) as err:  # read as AIPerf's on purpose: the same line
        read_bench(path, "aiperf")
    assert str(err.value).endswith(f"{path}: {said}")


def test_a_vllm_result_without_ttft_is_read(tmp_path):
    # --percentile-metrics tpot,itl: no ttft means written
    path = write(tmp_path, "v.json", vllm_result(mean_ttft_ms=..., median_ttft_ms=...))
    (run,) = read_bench(path)
    assert dict(run.metrics) == {"tpot_ms": 14.0, "itl_ms": 14.0, "tpot_p50_ms": 13.5, "output_tokens_per_s": 2048.0}
    assert (f"{path}: no mean_ttft_ms in the file (the run's --percentile-metrics left out ttft): not compared"
            in run.notes)
    (run,) = read_bench(write(tmp_path, "w.json", vllm_result(mean_ttft_ms=..., mean_tpot_ms=..., mean_itl_ms=...,
                                                              median_tpot_ms=...)))
    assert dict(run.metrics) == {"output_tokens_per_s": 2048.0}
    assert any("no mean_ttft_ms, mean_tpot_ms, mean_itl_ms in the file (the run's --percentile-metrics left out "
               "ttft,tpot,itl)" in n for n in run.notes)


# 6. the GPU a trtllm-bench report records

def test_a_recorded_gpu_other_than_the_one_given_is_said(tmp_path):
    path = write(tmp_path, "trt.json", trtllm_report(machine={"name": "NVIDIA H200", "memory.total": 139.8}))
    _, notes = bench_cases([path], given_deployment(gpu=GPU))
    assert (f"{path}: the file records the run on NVIDIA H200 (machine.name), not the h100-sxm given: predicted on "
            "h100-sxm; check --gpu") in notes
    _, notes = bench_cases([path], given_deployment(gpu="h200-sxm"))
    assert not any("machine.name" in n for n in notes)
    with pytest.raises(SpecError, match=r"not record the GPU as a catalog id \(it names NVIDIA H200\); give --gpu"):
        bench_cases([path], given_deployment())


@pytest.mark.parametrize("recorded, hardware, differs", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm", False),  # the SXM part as the driver names it
    ("NVIDIA H100 PCIe", "h100-sxm", True),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb", False),
    ("NVIDIA A100-SXM4-80GB", "a100-pcie-80gb", True),
    ("NVIDIA H200", "h20", True),
    ("NVIDIA H20", "h20", False),
    ("NVIDIA GH200 480GB", "h200-sxm", True),
    ("NVIDIA GeForce RTX 4090", "rtx-4090", False),
])
def test_gpu_names_are_matched_by_chip_and_form_factor(recorded, hardware, differs):
    run = BenchRun(tool="trtllm-bench", id="r", isl=1, osl=1, metrics=(), gpu=recorded)
    assert (gpu_mismatch(run, hardware) is not None) == differs


# 7. an offline vLLM run's TTFT

def test_an_offline_runs_ttft_is_kept_with_its_request_count(tmp_path):
    """Every request sent at once: the mean TTFT grows with the count (the last prompts wait for
    all before them), so it is a case where the file gives the count (vLLM's completed requests),
    simulated with exactly that count. trtllm-bench's TTFT stays unused: its report's own numbers
    (2,000 requests, a batch limit of 512, about 500 in flight, 52 ms a token over 512 tokens) do
    not fit a TTFT counted from one submission of them all (1.5 s measured where the last wave
    alone starts some 50 s in), and its clock's start is not documented."""
    from inferlab.validation.serving import serving_group_key, serving_unsupported_reason, serving_workload
    from inferlab.inputs.resolve import deployment

    data = vllm_result(max_concurrency=None, model_id="meta-llama/Llama-3.1-8B-Instruct")
    path = write(tmp_path, "v.json", data)
    cases, notes = bench_cases([path], given_deployment(engine_args="vllm serve meta-llama/Llama-3.1-8B-Instruct",
                                                        gpu=GPU))
    (ttft,) = [c for c in cases if c.metric == "ttft_ms"]
    assert ttft.regime == "offline" and ttft.load["num_requests"] == data["completed"]
    assert serving_unsupported_reason(ttft) is None
    load = serving_group_key(ttft)[7]  # the simulated load: every request at once, the run's count
    assert load == ("offline", data["completed"])
    assert serving_workload(deployment("llama-3.1-8b", GPU), "vllm", ttft.isl, ttft.osl, load) == \
        {"offline": True, "num_requests": data["completed"]}
    assert not any("TTFT" in n for n in notes)
    cases, notes = bench_cases([write(tmp_path, "t.json", trtllm_report())], given_deployment(gpu=GPU))
    assert "ttft_ms" not in {c.metric for c in cases} and any("TTFT" in n for n in notes)


@pytest.mark.parametrize("spec", ["'mtp:k=3'", "{method: mtp, k: 3}"])
def test_a_deployment_drafter_without_acceptance_takes_the_runs(tmp_path, spec):
    # the file names the drafter only; trtllm-bench's decoding stats give the acceptance length (2.6)
    stats = {"mode": "MTP", "acceptance_length_percentiles": {"average": 2.6, "p50": 2.7}}
    path = write(tmp_path, "trt.json", trtllm_report(decoding_stats=stats))
    deployment = write(tmp_path, "d.yaml", f"model: llama-3.1-70b\nhardware: h100-sxm\nspeculative: {spec}\n")
    cases, _ = bench_cases([path], given_deployment(deployment=deployment))
    assert cases[0].speculative == {"method": "mtp", "draft_tokens": 3, "acceptance_length": 2.6}


def test_a_deployment_drafter_without_acceptance_is_still_checked(tmp_path):
    for spec, said in [("'mtp:k=0'", "k"), ("{method: mtp, k: 3, depth: 2}", "depth"), ("'mpt:k=3'", "mpt")]:
        deployment = write(tmp_path, "d.yaml", f"model: llama-3.1-70b\nhardware: h100-sxm\nspeculative: {spec}\n")
        with pytest.raises(SpecError, match=said):
            given_deployment(deployment=deployment)


@pytest.mark.parametrize("text", ["model: llama-3.1-8b\nlayout: {tp: 2}\n", "model: llama-3.1-8b\ntp: 2\n"])
def test_a_deployment_file_without_hardware_takes_the_gpu_given(tmp_path, text):
    # the README: the deployment from --deployment FILE, the GPU from --gpu; a file naming no hardware
    # had been refused ("give the hardware") although --gpu gave it
    path = tmp_path / "d.yaml"
    path.write_text(text)
    given = given_deployment(deployment=str(path), gpu="h100-sxm")
    assert given.hardware == "h100-sxm" and given.layout["tp"] == 2 and given.model == "llama-3.1-8b"
