"""Overlap scheduling as a setting a user and a launch command give: ``serve(overlap_host=...)``,
a deployment's engine, ``inferlab serve --overlap-host / --no-overlap-host``."""

from __future__ import annotations

import json

import pytest

from inferlab import serve
from inferlab.cli.main import main
from inferlab.engines.scheduler import default_scheduler, serving_only
from inferlab.errors import SpecError
from inferlab.inputs.parts import engine_of
from inferlab.inputs.resolve import deployment

ONE_CLIENT = dict(concurrency=1, isl=512, osl=64, num_requests=20)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_one_request_at_a_time_pays_the_host_step_once_per_token_without_overlap(engine):
    """One client: every decode step runs one sequence. Without overlap an iteration is
    gpu + step_overhead + serving_step_overhead; with it max(gpu, step_overhead) +
    serving_step_overhead (StepModel._with_host). A decode step of Llama-3.1-8B on an H100 reads
    its 16 GB of BF16 weights (about 5 ms at 3.35 TB/s), longer than the host's step work (checked
    below), so each decode step, and so the mean TPOT, is longer by exactly step_overhead_s."""
    host = deployment("llama-3.1-8b", "h100-sxm", engine=engine).profile.step_overhead_s
    assert 0.0 < host < 4e-3
    off = serve("llama-3.1-8b", "h100-sxm", engine=engine, overlap_host=False, **ONE_CLIENT)
    on = serve("llama-3.1-8b", "h100-sxm", engine=engine, overlap_host=True, **ONE_CLIENT)
    assert off.tpot_s.mean() - on.tpot_s.mean() == pytest.approx(host, rel=1e-6)
    # the engine's default is one of the two: vLLM's off, SGLang's on
    default = serve("llama-3.1-8b", "h100-sxm", engine=engine, **ONE_CLIENT)
    same = on if default_scheduler(engine).overlap_host else off
    assert default.tpot_s.tolist() == same.tpot_s.tolist()


def test_under_load_overlap_off_is_not_faster_per_token():
    """At the same Poisson load every iteration of a batch is longer by min(gpu, host) > 0 without
    overlap, and the longer iterations hold more requests at once: the mean TPOT cannot drop."""
    load = dict(rate=8, isl=512, osl=128, num_requests=300)
    off = serve("llama-3.1-8b", "h100-sxm", engine="sglang", overlap_host=False, **load)
    on = serve("llama-3.1-8b", "h100-sxm", engine="sglang", **load)
    assert off.tpot_s.mean() > on.tpot_s.mean()


def test_a_deployments_engine_takes_it_and_a_static_batch_leaves_it_to_serving():
    assert engine_of({"name": "sglang", "overlap_host": False}).limits() == {"overlap_host": False}
    with pytest.raises(SpecError, match="overlap_host must be true or false"):
        engine_of({"name": "sglang", "overlap_host": "false"})
    assert "overlap_host=False" in serving_only({"overlap_host": False})


def test_the_serve_cli_switches_it(capsys):
    load = ("llama-3.1-8b", "h100-sxm", "--engine", "sglang", "--concurrency", "1", "--num-requests", "20",
            "--isl", "512", "--osl", "64", "--json")
    runs = {}
    for flag in ("--overlap-host", "--no-overlap-host", None):
        assert main(["serve", *load, *([flag] if flag else [])]) == 0
        runs[flag] = json.loads(capsys.readouterr().out)
    assert runs[None]["latency_s"] == runs["--overlap-host"]["latency_s"] != runs["--no-overlap-host"]["latency_s"]
    # the deployment written in --json says what was set
    assert runs["--no-overlap-host"]["deployment"]["engine"] == {"name": "sglang", "overlap_host": False}
    assert "overlap_host" not in runs[None]["deployment"]["engine"]
