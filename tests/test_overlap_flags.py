"""The engines' overlap-scheduling switches read into ``EngineLaunch.overlap_host`` and written back:
SGLang's ``--disable-overlap-schedule`` (server arguments: "Disable the overlap scheduler, which
overlaps the CPU scheduler with GPU model worker"), TensorRT-LLM's ``disable_overlap_scheduler``
(an LLM-API field of the PyTorch runtime, set in the extra-options YAML; trtllm-serve has no flag
for it), vLLM's ``--async-scheduling`` / ``--no-async-scheduling`` (vllm PR #19970: the scheduler
runs one step ahead of the GPU)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from inferlab import serve
from inferlab.cli.main import main
from inferlab.engines import launch_command, launch_from_deployment, parse_engine_args
from inferlab.engines.scheduler import SchedulerConfig, default_scheduler
from inferlab.engines.speculation_limits import for_speculation
from inferlab.errors import SpecError
from inferlab.inputs.resolve import deployment

SGLANG = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct"
VLLM = "vllm serve meta-llama/Llama-3.1-8B-Instruct"


def _trtllm(options: str, backend: str = "pytorch") -> str:
    return (f"cat > o.yml <<'EOF'\n{options}\nEOF\n"
            f"trtllm-serve meta-llama/Llama-3.1-8B-Instruct --backend {backend} --extra_llm_api_options o.yml")


@pytest.mark.parametrize("command, overlap, flag", [
    (f"{VLLM} --async-scheduling", True, "--async-scheduling"),
    (f"{VLLM} --async_scheduling", True, "--async-scheduling"),  # vLLM takes underscores for dashes
    (f"{VLLM} --no-async-scheduling", False, "--no-async-scheduling"),
    (f"{SGLANG} --disable-overlap-schedule", False, "--disable-overlap-schedule"),
    (f"{SGLANG} --disable-overlap", False, "--disable-overlap-schedule"),  # argparse's unique prefix
    (_trtllm("disable_overlap_scheduler: true"), False, "--extra_llm_api_options: disable_overlap_scheduler"),
    (_trtllm("disable_overlap_scheduler: false"), True, "--extra_llm_api_options: disable_overlap_scheduler"),
])
def test_each_switch_is_read_with_the_flag_behind_it(command, overlap, flag):
    launch = parse_engine_args(command)
    assert launch.overlap_host is overlap and launch.unknown == ()
    assert launch.flag_of("overlap_host") == flag
    assert f"overlap scheduling {'on' if overlap else 'off'}" in launch.read_lines()[0]
    assert launch.to_kwargs("serve")["overlap_host"] is overlap
    assert "overlap_host" not in launch.to_kwargs("estimate")  # a static batch has no next iteration to plan
    assert any(flag in line and "limit serving" in line for line in launch.report("estimate"))


def test_without_a_switch_the_engine_default_holds():
    for command in (VLLM, SGLANG, "trtllm-serve meta-llama/Llama-3.1-8B-Instruct"):
        launch = parse_engine_args(command)
        assert launch.overlap_host is None and "overlap_host" not in launch.to_kwargs("serve")


def test_the_gpt_oss_recipes_config_file_turns_vllms_on():
    """vLLM's gpt-oss recipe YAML (``async-scheduling: true``) had left the flag unknown."""
    launch = parse_engine_args("cat > c.yaml <<'EOF'\nasync-scheduling: true\nEOF\n"
                               f"{VLLM} --config c.yaml")
    assert launch.overlap_host is True and launch.unknown == ()


def test_trtllm_refuses_a_non_boolean_and_keeps_the_pytorch_option_off_the_tensorrt_backend():
    with pytest.raises(SpecError, match="disable_overlap_scheduler 'yes' is not true or false"):
        parse_engine_args(_trtllm("disable_overlap_scheduler: 'yes'"))
    legacy = parse_engine_args(_trtllm("disable_overlap_scheduler: true", backend="tensorrt"))
    assert legacy.engine == "trtllm" and legacy.overlap_host is None
    assert legacy.unknown == ("disable_overlap_scheduler (the pytorch backend's): True",)


def test_vllm_before_0_14_refuses_it_beside_pipeline_stages_or_a_drafter_which_is_said():
    """vLLM 0.10-0.11's engine args raise for async scheduling with pipeline-parallel-size > 1 or a
    speculative config; later releases run both, so the command is read (and written) as theirs."""
    launch = parse_engine_args(f"{VLLM} --async-scheduling -pp 2")
    assert launch.overlap_host is True
    assert any("vLLM 0.10-0.11 refuses to start" in n for n in launch.notes)
    assert not any("refuses" in n for n in parse_engine_args(f"{VLLM} --async-scheduling").notes)


def test_the_flag_changes_the_simulated_engine_as_the_setting_does():
    """One client: a decode step of Llama-3.1-8B on an H100 (about 5 ms of weight reads) outlasts
    the host's step work, so without overlap every step, and the mean TPOT, is longer by exactly
    step_overhead_s (StepModel._with_host: gpu + host against max(gpu, host))."""
    host = deployment("llama-3.1-8b", "h100-sxm", engine="sglang").profile.step_overhead_s
    load = dict(concurrency=1, isl=512, osl=64, num_requests=20)
    results = {}
    for extra in ("", " --disable-overlap-schedule"):
        kw = parse_engine_args(SGLANG + extra).to_kwargs("serve")
        results[extra] = serve(kw.pop("model"), "h100-sxm", **kw, **load)
    slower = results[" --disable-overlap-schedule"].tpot_s.mean() - results[""].tpot_s.mean()
    assert slower == pytest.approx(host, rel=1e-6) and host > 0
    # vLLM's switch (on by default from 0.14): off, each step pays the host's part
    kw = parse_engine_args(f"{VLLM} --no-async-scheduling").to_kwargs("serve")
    off = serve(kw.pop("model"), "h100-sxm", **kw, **load)
    on = serve("llama-3.1-8b", "h100-sxm", engine="vllm", **load)
    assert off.tpot_s.mean() - on.tpot_s.mean() == pytest.approx(host, rel=1e-6)


def test_a_drafter_still_turns_sglangs_overlap_off():
    """SGLang's server args turn the overlap scheduler off with an EAGLE, NEXTN or STANDALONE
    drafter, whatever the flags; vLLM keeps async scheduling beside EAGLE and MTP drafters (0.14 on)
    and runs without it beside the others (its release notes: "excludes ... non-MTP/Eagle spec
    decoding")."""
    assert for_speculation("sglang", default_scheduler("sglang"), "eagle").overlap_host is False
    assert for_speculation("vllm", replace(default_scheduler("vllm"), overlap_host=True), "eagle").overlap_host
    assert for_speculation("vllm", default_scheduler("vllm"), "mtp").overlap_host
    for method in ("draft", "ngram", "medusa"):
        assert for_speculation("vllm", default_scheduler("vllm"), method).overlap_host is False


def test_tensorrt_llms_pytorch_runtime_turns_its_overlap_off_beside_an_ngram_drafter():
    """TensorRT-LLM's executor creator disables the overlap scheduler for a speculation mode that
    does not support it; NGram is one in every release from 1.0 on. MTP and one-model EAGLE-3
    keep it, and so do the two-model drafters from 1.1 on (draft model, two-model EAGLE-3)."""
    pytorch = default_scheduler("trtllm-pytorch")
    assert pytorch.overlap_host is True
    assert for_speculation("trtllm-pytorch", pytorch, "ngram").overlap_host is False
    for method in ("mtp", "eagle", "draft"):
        assert for_speculation("trtllm-pytorch", pytorch, method).overlap_host is True
    # a serve() beside the drafter pays the host's step work on every step, as one without overlap does
    load = dict(concurrency=1, isl=512, osl=64, num_requests=20, speculative="ngram:k=3,accept=0.5")
    ngram = serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", **load)
    off = serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", overlap_host=False, **load)
    assert ngram.tpot_s.mean() == off.tpot_s.mean()


@pytest.mark.parametrize("engine, written", [
    ("vllm", "--no-async-scheduling"), ("sglang", "--disable-overlap-schedule"),
    ("trtllm-pytorch", "disable_overlap_scheduler: true"),
])
def test_each_engine_writes_what_differs_from_its_default_and_reads_it_back(engine, written):
    default = default_scheduler(engine).overlap_host
    for overlap in (True, False):
        launch = launch_from_deployment("llama-3.1-8b", engine=engine, overlap_host=overlap)
        script = launch_command(launch, engine).script
        assert (written in script) == (overlap != default)
        back = parse_engine_args(script).overlap_host
        assert back == (None if overlap == default else overlap)  # the default: said by saying nothing
    # between engines: SGLang's switch off is vLLM's too (both overlap by default)
    off = parse_engine_args(f"{SGLANG} --disable-overlap-schedule")
    assert "--no-async-scheduling" in launch_command(off, "vllm").script
    assert "disable_overlap_scheduler: true" in launch_command(off, "trtllm-pytorch").script


def test_what_an_engine_cannot_run_is_said():
    eagle = launch_from_deployment("llama-3.1-8b", engine="sglang", overlap_host=True,
                                   speculative="eagle3-llama-3.1-8b")
    assert "overlap_host" in dict(launch_command(eagle, "sglang").unexpressed)
    assert "overlap_host" not in dict(launch_command(eagle, "vllm").unexpressed)
    legacy = launch_from_deployment("llama-3.1-8b", overlap_host=True)
    assert "overlap_host" in dict(launch_command(legacy, "trtllm").unexpressed)
    assert "overlap_host" not in dict(launch_command(legacy, "trtllm-pytorch").unexpressed)
    # TensorRT-LLM's PyTorch runtime turns its overlap scheduler off beside an NGram drafter
    ngram = launch_from_deployment("llama-3.1-8b", overlap_host=True, speculative="ngram:k=3,accept=0.5")
    assert "overlap_host" in dict(launch_command(ngram, "trtllm-pytorch").unexpressed)
    assert "overlap_host" not in dict(launch_command(eagle, "trtllm-pytorch").unexpressed)
    # and vLLM runs n-gram (draft-model, Medusa) drafting without async scheduling
    assert "overlap_host" in dict(launch_command(ngram, "vllm").unexpressed)


def test_the_cli_reads_it_as_the_explicit_option_and_explains_where_from(capsys):
    load = ("h100-sxm", "--concurrency", "1", "--num-requests", "20", "--isl", "512", "--osl", "64")
    assert main(["serve", "--engine-args", f"{SGLANG} --disable-overlap-schedule", *load, "--explain"]) == 0
    pasted = capsys.readouterr().out
    assert "overlap scheduling off (--disable-overlap-schedule)" in pasted
    assert main(["serve", "llama-3.1-8b", *load, "--engine", "sglang", "--no-overlap-host", "--explain"]) == 0
    explicit = capsys.readouterr().out
    assert pasted.split("\n\n")[0] == explicit.split("\n\n")[0]
    assert main(["serve", "--engine-args", f"{SGLANG} --disable-overlap-schedule", *load, "--overlap-host"]) == 2
    assert "--overlap-host True contradicts the engine args (--disable-overlap-schedule gives False)" in \
        capsys.readouterr().err


def test_a_scheduler_built_from_the_launch_gets_it():
    kw = parse_engine_args(f"{SGLANG} --disable-overlap-schedule").to_kwargs("serve")
    from inferlab.serving.replica import engine_scheduler

    sched = engine_scheduler("sglang", None, overlap_host=kw["overlap_host"])
    assert isinstance(sched, SchedulerConfig) and sched.overlap_host is False


def test_sglang_bench_server_info_records_the_switch(tmp_path):
    """bench_serving's server_info dumps SGLang's server arguments, ``disable_overlap_schedule``
    among them: a case measured without the overlap scheduler is simulated without it."""
    import json

    from conftest import DATA
    from inferlab.validation.bench import read_bench

    lines = [json.loads(line) for line in (DATA / "bench" / "sglang-bench-serving.jsonl").read_text().splitlines()]
    lines[0]["server_info"] = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 1,
                               "disable_overlap_schedule": True}
    lines[1]["server_info"] = {"model_path": "meta-llama/Llama-3.1-8B-Instruct", "tp_size": 1,
                               "disable_overlap_schedule": False}
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines))
    first, second = read_bench(path)[:2]
    assert dict(first.scheduler) == {"overlap_host": False} and dict(second.scheduler) == {}


def _planned(engine: str, speculative: str | None) -> dict[str, str]:
    """The launch scripts of a plan whose winner is one Llama-3.1-8B replica on an H100."""
    from types import SimpleNamespace

    from inferlab.planning.candidate import Candidate
    from inferlab.planning.launch import winner_commands

    best = Candidate(model="llama-3.1-8b", hardware="h100-sxm", precision="bf16", tp=1, ep=1,
                     speculative=speculative, feasible=True, replicas=1)
    from inferlab.inputs.lengths import Lengths

    traffic = SimpleNamespace(prefix=None, prefix_hit=0.0, isl=Lengths.of(1024), osl=Lengths.of(128))
    scenario = SimpleNamespace(engine=engine, traffic=traffic,
                               search=SimpleNamespace(max_num_seqs=None))
    planned = SimpleNamespace(best=best, scenario=scenario)
    return {e: winner_commands(planned, e)[0].script for e in ("vllm", "sglang", "trtllm-pytorch", "trtllm")}


OFF_WORDS = {"vllm": "--no-async-scheduling", "sglang": "--disable-overlap-schedule",
             "trtllm-pytorch": "disable_overlap_scheduler: true"}


@pytest.mark.parametrize("engine, speculative", [
    ("vllm", "ngram:k=3,accept=0.5"),  # vLLM runs n-gram drafting without async scheduling
    ("sglang", "eagle3-llama-3.1-8b"),  # SGLang turns its overlap scheduler off for EAGLE
    ("trtllm-pytorch", "ngram:k=3,accept=0.5"),  # and TensorRT-LLM's PyTorch runtime for NGram
])
def test_a_plans_launch_says_its_winner_runs_without_overlap(engine, speculative):
    """The plan simulated the winner without overlap scheduling: each engine's command says so in
    its own words (the TensorRT engine runtime has no overlap scheduler to turn off)."""
    scripts = _planned(engine, speculative)
    for name, words in OFF_WORDS.items():
        assert words in scripts[name], name
        assert parse_engine_args(scripts[name]).overlap_host is False
    assert "overlap" not in scripts["trtllm"]


@pytest.mark.parametrize("engine, speculative", [
    ("vllm", None), ("vllm", "eagle3-llama-3.1-8b"), ("sglang", None), ("trtllm-pytorch", "mtp:k=1,accept=0.5"),
])
def test_a_plans_launch_at_the_engines_overlap_default_writes_nothing_for_it(engine, speculative):
    scripts = _planned(engine, speculative)
    for name, words in OFF_WORDS.items():
        assert words not in scripts[name], name
        assert parse_engine_args(scripts[name]).overlap_host is None


def test_the_planners_curve_runs_without_overlap_beside_a_drafter_the_engine_turns_it_off_for():
    # vLLM overlaps by default (async scheduling) but not beside an n-gram drafter: the planner's
    # fluid curve follows the simulation there, so its decode step carries the host's step work
    # (step_overhead_s) on top of the GPU's where the overlapped curve hides it, and its prompt
    # pays that work on each of its iterations (a 1,024-token prompt: one iteration)
    from inferlab.planning.curve import _curve, engine_budget, prompt_prefill_s

    args = ("llama-3.1-8b", "h100-sxm", 1, 1, 1, "bf16")
    tail = ("vllm", "default", 0.0, 1024, 256)
    on = _curve(*args, "eagle:k=3,accept=0.6", *tail)  # EAGLE keeps async scheduling
    off = _curve(*args, "ngram:k=3,accept=0.6", *tail)
    assert on.overlap is True and off.overlap is False
    step = off.deployment.profile.step_overhead_s
    assert step > 0
    hidden, shown = (prompt_prefill_s(off.deployment, "vllm", 0.0, np.asarray(1024.0), overlap)
                     for overlap in (True, False))
    assert float(hidden[1]) == float(shown[1]) == 1.0  # one iteration
    assert float(shown[0]) - float(hidden[0]) == pytest.approx(step, rel=1e-9)
    plain = _curve(*args, None, *tail)  # built before and after the drafter's: a shared cache must not mix them
    assert off.prefill_1_s - plain.prefill_1_s == pytest.approx(step, rel=1e-6)
    # each prompt length pays the step work once per iteration of the token budget, and a prompt's
    # share of a budget-filling batch (k prompts in one iteration) the step's share, step / k
    lengths = (512.0, 4096.0, 20000.0)
    with_lengths = (*tail[:-1], tail[-1], None, lengths)
    off, plain = (_curve(*args, spec, *with_lengths) for spec in ("ngram:k=3,accept=0.6", None))
    chunks = np.ceil(np.asarray(lengths) / engine_budget("vllm", off.deployment.hardware))
    assert np.allclose(off.prompt_times_s - plain.prompt_times_s, chunks * step, rtol=1e-6)
    k = max(engine_budget("vllm", off.deployment.hardware) // 1024, 1)
    assert off.batched_prefill_s - plain.batched_prefill_s == pytest.approx(step / k, rel=1e-6)
    assert plain.overlap is True and _curve(*args, None, *with_lengths).overlap is True
