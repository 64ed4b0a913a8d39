"""TensorRT-LLM prefills prompts whole unless told otherwise, and refuses one longer than its
token budget.

Sources: the LLM API's ``enable_chunked_prefill`` is false unless set (TensorRT-LLM's
long-sequence docs: "To enable chunked context, please set the enable_chunked_prefill in LLM API
to True"); ``LLM._check_arguments`` answers a prompt longer than ``max_num_tokens`` without it
with "The sum of prompt length (...), query length (0) should not exceed max_num_tokens (...)";
``trtllm-bench throughput`` never refuses a prompt for its budget: by release it chunks
(``--enable_chunked_context``, on by default in some releases) or raises ``max_num_tokens`` to the
longest prompt, and its reports record neither, so they are read as chunked.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

import inferlab
from inferlab.engines.scheduler import default_scheduler, prompt_cap
from inferlab.errors import SpecError
from inferlab.inputs.lengths import Lengths
from inferlab.techniques.disaggregation import Disaggregation, Pool

TOO_LONG = r"prompts of up to 16,000 tokens are longer than the token budget \(max_num_batched_tokens=8,192"


@pytest.mark.parametrize("engine", ["trtllm", "trtllm-pytorch"])
def test_tensorrt_llm_defaults_to_whole_prompts_within_its_8192_token_budget(engine):
    sched = default_scheduler(engine)
    assert sched.chunked_prefill is False and sched.max_num_batched_tokens == 8192
    assert prompt_cap(sched) == 8192
    # a replica's limits over four attention-DP ranks hold 4 x 8,192 tokens: one rank's is the cap
    assert prompt_cap(replace(sched, max_num_batched_tokens=4 * 8192), ranks=4) == 8192
    # the engines that chunk by default take any prompt (a long one in chunks)
    for other in ("vllm", "sglang", "lmdeploy", "generic"):
        assert default_scheduler(other).chunked_prefill is True and prompt_cap(default_scheduler(other)) is None


def test_a_prompt_longer_than_the_budget_is_refused_unless_chunked_or_the_budget_holds_it():
    kw = dict(engine="trtllm-pytorch", rate=1.0, num_requests=6, isl=16000, osl=8)
    with pytest.raises(SpecError, match=TOO_LONG + r".*chunked_prefill=True.*at least 16,000"):
        inferlab.serve("llama-3.1-8b", "h100-sxm", **kw)
    assert len(inferlab.serve("llama-3.1-8b", "h100-sxm", chunked_prefill=True, **kw).ttft_s) == 6
    assert len(inferlab.serve("llama-3.1-8b", "h100-sxm", max_num_batched_tokens=16384, **kw).ttft_s) == 6


def test_a_length_distributions_tail_past_the_budget_is_refused_request_by_request():
    # lognormal(mean 4,000, sigma 0.8): P(prompt > 8,192) = P(z > (ln 8192 - ln 4000 + 0.32) / 0.8)
    # = P(z > 1.30) ~ 10%: about 20 of 200 requests answered with an error, the rest served
    run = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", rate=1.0, num_requests=200,
                         isl=Lengths("lognormal", mean=4000, sigma=0.8), osl=16)
    assert 8 <= run.refused <= 35 and run.refused + len(run.trace.isl) == 200
    assert max(run.trace.isl) <= 8192 and "a prompt beyond an unchunked budget" in str(run)


def test_under_attention_dp_the_cap_is_one_ranks_budget():
    # each of the four ranks has its own 8,192-token max_num_tokens (the replica holds 32,768):
    # a 10,000-token prompt runs on one rank, so it is refused; 8,000 tokens are not
    kw = dict(tp=4, ep=4, attention_dp=True, engine="trtllm-pytorch", rate=1.0, num_requests=8, osl=8)
    with pytest.raises(SpecError, match="prompts of up to 10,000 tokens"):
        inferlab.serve("qwen3-30b-a3b", "h100-sxm", isl=10000, **kw)
    assert len(inferlab.serve("qwen3-30b-a3b", "h100-sxm", isl=8000, **kw).ttft_s) == 8


def test_only_the_pool_that_prefills_refuses_a_long_prompt():
    kw = dict(rate=1.0, num_requests=6, isl=10000, osl=8)
    vllm_prefills = Disaggregation(prefill=Pool("h100-sxm", 1, engine="vllm"),
                                   decode=Pool("h100-sxm", 1, engine="trtllm-pytorch"))
    assert len(inferlab.serve("llama-3.1-8b", disaggregation=vllm_prefills, engine="vllm", **kw).ttft_s) == 6
    trtllm_prefills = Disaggregation(prefill=Pool("h100-sxm", 1, engine="trtllm-pytorch"),
                                     decode=Pool("h100-sxm", 1, engine="vllm"))
    with pytest.raises(SpecError, match="prompts of up to 10,000 tokens"):
        inferlab.serve("llama-3.1-8b", disaggregation=trtllm_prefills, engine="vllm", **kw)


def test_a_second_whole_prompt_waits_for_the_next_iteration():
    """Two 5,000-token prompts queued together on one H100 with an 8,192-token budget. Whole:
    the first fills an iteration alone (3,192 tokens are left, fewer than the second needs), the
    second prefills in the next one, so its TTFT is the first's plus one more 5,000-token
    prefill (one decode beside it). Chunked: the second's first 3,192 tokens join the first
    iteration, which makes the first prompt's TTFT longer."""
    kw = dict(engine="trtllm-pytorch", offline=True, num_requests=2, isl=5000, osl=2)
    whole = np.sort(np.asarray(inferlab.serve("llama-3.1-8b", "h100-sxm", **kw).ttft_s))
    chunked = np.sort(np.asarray(inferlab.serve("llama-3.1-8b", "h100-sxm", chunked_prefill=True, **kw).ttft_s))
    prefill_s = inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", isl=5000, osl=2).ttft_s
    assert whole[1] - whole[0] == pytest.approx(prefill_s, rel=0.03)
    assert chunked[0] > whole[0] + 0.3 * prefill_s


def test_a_plan_turns_chunked_prefill_on_where_the_traffic_outgrows_the_budget():
    from inferlab.planning.candidate import Candidate
    from inferlab.planning.launch import winner_commands
    from inferlab.planning.search import chunked_prefill

    def scenario(isl, prefix=None):
        return SimpleNamespace(engine="trtllm-pytorch", search=SimpleNamespace(max_num_seqs=None),
                               traffic=SimpleNamespace(prefix=prefix, prefix_hit=0.0, isl=Lengths.of(isl),
                                                       osl=Lengths.of(256)))

    assert chunked_prefill(scenario(32000)) is True and chunked_prefill(scenario(1000)) is None
    # conversations: the sixth turn's prompt holds five earlier turns and answers, 6 x 2,048 + 5 x 256 = 13,568
    assert chunked_prefill(scenario(2048, "sessions:turns=6,think=5")) is True
    assert chunked_prefill(scenario(1000, "sessions:turns=3,think=5")) is None  # 3 x 1,000 + 2 x 256
    # a distribution whose 99.99th percentile passes 8,192 tokens (mean 2,000, sigma 0.6: ~ 2,000 x e^(3.72 x 0.6 - 0.18) ~ 15,500)
    assert chunked_prefill(scenario("lognormal:mean=2000,sigma=0.6")) is True
    assert chunked_prefill(SimpleNamespace(engine="vllm", traffic=None)) is None  # chunks anyway
    best = Candidate(model="llama-3.1-8b", hardware="h100-sxm", precision="bf16", tp=1, ep=1, speculative=None,
                     feasible=True, replicas=1)
    long = winner_commands(SimpleNamespace(best=best, scenario=scenario(32000)), "trtllm-pytorch")[0].script
    short = winner_commands(SimpleNamespace(best=best, scenario=scenario(1000)), "trtllm-pytorch")[0].script
    assert "enable_chunked_prefill: true" in long and "enable_chunked_prefill" not in short
    # the short plan's command for vLLM chunks as vLLM does (unchunked it needs a budget of its whole context)
    as_vllm = winner_commands(SimpleNamespace(best=best, scenario=scenario(1000)), "vllm")[0].script
    assert "no-enable-chunked-prefill" not in as_vllm


def test_the_cli_reads_both_forms_and_refuses_in_one_line(capsys):
    from inferlab.cli.main import main

    base = ["serve", "llama-3.1-8b", "h100-sxm", "--engine", "trtllm-pytorch", "--isl", "16000", "--osl", "8",
            "--rate", "1", "--num-requests", "4"]
    code = main(base)
    err = capsys.readouterr().err
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "longer than the token budget" in err and "Traceback" not in err
    assert main(base + ["--chunked-prefill"]) == 0
    assert main(base + ["--no-chunked-prefill"]) != 0


def test_validation_reads_each_source_familys_chunking():
    from inferlab.validation.case_setup import case_limits
    from inferlab.validation.cases import Case

    def case(source, regime, load):
        return Case(id="x", regime=regime, model="llama-3.1-8b", hardware="h100-sxm", num_gpus=1,
                    parallelism={"tp": 1}, precision={"weights": "fp8"}, engine="trtllm", isl=1024, osl=128,
                    load=load, metric="output_tokens_per_s", measured=1.0, unit="tokens/s", source=source)

    # the performance overview's offline pages ran trtllm-bench, which chunks by default
    assert case_limits(case("trtllm-perf-overview-v1.0-offline", "offline", {"offline": True}))["chunked_prefill"]
    # aiconfigurator's servers ran its templates, enable_chunked_prefill false
    silicon = case_limits(case("aiconfigurator-silicon-sample", "closed_loop", {"concurrency": 8}))
    assert silicon["chunked_prefill"] is False
    # the online pages name no tool setting: the engine's own default
    assert "chunked_prefill" not in case_limits(case("trtllm-perf-overview-v0.14-online-serving", "online",
                                                     {"request_rate": 1.0, "num_requests": 10}))


def test_a_command_converted_between_engines_keeps_its_chunking():
    from inferlab.engines import parse_engine_args
    from inferlab.engines.render import launch_command

    vllm = parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 32768")
    as_trtllm = launch_command(vllm, "trtllm-pytorch").script
    assert "enable_chunked_prefill: true" in as_trtllm and "vllm's default" in as_trtllm
    trtllm = parse_engine_args("trtllm-serve meta-llama/Llama-3.1-8B-Instruct --backend pytorch")
    assert trtllm.chunked_prefill is None  # unset: the engine's default, whole prompts
    # vLLM unchunked would need a budget of its whole context (it refuses to start below it): it chunks
    as_vllm = launch_command(trtllm, "vllm").script
    assert "no-enable-chunked-prefill" not in as_vllm and "vllm chunks them" in as_vllm
    back = parse_engine_args(as_vllm)  # and the command starts: read back, it serves
    served = inferlab.serve(hardware="h100-sxm", rate=1.0, num_requests=4, isl=1000, osl=8, **back.to_kwargs("serve"))
    assert back.chunked_prefill is None and len(served.ttft_s) == 4
    # nor when the TensorRT-LLM file says it (aiconfigurator's templates write enable_chunked_prefill: false)
    assert "no-enable-chunked-prefill" not in launch_command(replace(trtllm, chunked_prefill=False), "vllm").script
    # between TensorRT-LLM's runtimes nothing is said
    assert "chunked" not in launch_command(trtllm, "trtllm").script


def test_a_disaggregated_runs_tail_past_the_prefill_pools_budget_is_refused_request_by_request():
    # as test_a_length_distributions_tail_past_the_budget_is_refused_request_by_request, over two pools
    tail = Lengths("lognormal", mean=4000, sigma=0.8)
    for load in ({"rate": 1.0}, {"concurrency": 8}):
        run = inferlab.serve("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1",
                             engine="trtllm-pytorch", num_requests=200, isl=tail, osl=16, **load)
        assert 8 <= run.refused <= 35 and run.refused + len(run.trace.isl) == 200
        assert max(run.trace.isl) <= 8192


def test_a_fleet_answers_a_too_long_prompt_alone_and_routes_it_where_an_engine_takes_it():
    # lognormal(mean 4,000, sigma 0.8): ~10% of prompts pass 8,192 tokens (see the tail test above)
    traffic = {"rate": 1.0, "isl": {"kind": "lognormal", "mean": 4000, "sigma": 0.8}, "osl": 64}
    run = inferlab.fleet("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", replicas=2, horizon_s=600,
                         traffic=traffic)
    counts, isl, status = run.counts(), np.asarray(run.isl), np.asarray(run.status)
    assert 0.05 * len(isl) <= counts["too long"] <= 0.16 * len(isl) and counts["ok"] > 0.8 * len(isl)
    assert counts["no replica"] == 0 and isl[status == 0].max() <= 8192 and isl[status == 7].min() > 8192
    assert "request(s) too long for every pool serving their model" in run.explain()
    assert "with a prompt past an engine's token budget" in run.explain() and "max_model_len" not in run.explain()
    chunked = inferlab.fleet("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", replicas=2, horizon_s=600,
                             traffic=traffic, chunked_prefill=True)
    assert chunked.counts()["too long"] == 0
    with pytest.raises(SpecError, match="prompts of up to 16,000 tokens"):  # every prompt too long: said at once
        inferlab.fleet("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", replicas=1, horizon_s=60,
                       traffic={"rate": 1.0, "isl": 16000, "osl": 8})
    # beside a vLLM pool of the same model, the long prompts go there, through the router's queue too,
    # even when every prompt is too long for the TensorRT-LLM pool
    from inferlab.fleet.api import fleet_of

    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "trtllm-pytorch", "replicas": 1},
             {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", "replicas": 1}]
    for admission, load in ((None, traffic), ({"at": "router", "max_outstanding": 4}, traffic),
                            (None, {"rate": 0.2, "isl": 16000, "osl": 8})):
        both = fleet_of(pools, traffic=[load], horizon_s=600, admission=admission)
        served = np.asarray(both.status) == 0
        assert both.counts()["too long"] == 0 and both.counts()["no replica"] == 0
        long = served & (np.asarray(both.isl) > 8192)
        pool_of = np.asarray(both.replica_pool)[np.asarray(both.replica)[long]]
        assert long.any() and set(pool_of.tolist()) == {1}


def test_the_static_estimate_says_where_it_chunks_a_prompt_the_engine_would_refuse():
    # the static batch prices a prompt in chunks of the budget; TensorRT-LLM's own default would refuse it
    said = "whole prompts: trtllm-pytorch prefills each prompt whole"
    long = inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", isl=16000, osl=8)
    assert said in long.explain() and "max_num_tokens (8,192)" in long.explain()
    for quiet in (inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", isl=8000, osl=8),
                  inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", isl=16000, osl=8,
                                    max_num_tokens=16384),
                  inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="vllm", isl=16000, osl=8)):
        assert "whole prompts" not in quiet.explain() and not quiet.notes and not quiet.to_dict()["notes"]
    # the table says it too, naming the grid's longer prompts only (it had been said in --explain alone)
    grid = inferlab.estimate("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", isl=[8000, 16000, 20000], osl=8)
    assert "prefills the 16,000, 20,000-token prompts in chunks" in str(grid)
    assert grid.to_dict()["notes"] == grid.notes and "whole prompts" not in grid.explain(0)


def test_a_request_whose_own_pool_is_down_has_no_replica_not_too_long():
    # the 70B pool starts cold (its first replica still loading over these 300 s): its 12,000-token
    # requests find no replica; the 8B TensorRT-LLM pool, which would refuse them, is not theirs
    from inferlab.fleet.api import fleet_of

    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "trtllm-pytorch", "replicas": 1},
             {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "engine": "vllm", "replicas": 0,
              "autoscaler": {"min_replicas": 1, "max_replicas": 1}}]
    traffic = [{"rate": 0.5, "isl": 1000, "osl": 16, "model": "llama-3.1-8b"},
               {"rate": 0.5, "isl": 12000, "osl": 16, "model": "llama-3.1-70b"}]
    run = fleet_of(pools, traffic=traffic, horizon_s=300)
    counts = run.counts()
    assert counts["too long"] == 0 and counts["no replica"] > 0 and "too long" not in run.explain()
    assert set(np.asarray(run.isl)[np.asarray(run.status) == 4].tolist()) == {12000.0}


def test_a_planning_scenarios_fleet_runs_long_prompts_as_the_plan_would(tmp_path, capsys):
    from inferlab.cli.main import main

    scenario = tmp_path / "long.yaml"
    scenario.write_text("name: long prompts\nmodels: [llama-3.1-8b]\nhardware: [h100-sxm]\nengine: trtllm-pytorch\n"
                        "traffic: {rate: 0.5, isl: 16000, osl: 64}\nslo: {ttft_ms: 8000, tpot_ms: 60}\n"
                        "search: {precisions: [fp8], tp: [1]}\n"
                        "fleet: {model: llama-3.1-8b, hardware: h100-sxm, tp: 1, precision: fp8, replicas: 1, "
                        "hours: 0.05}\n")
    assert main(["fleet", str(scenario)]) == 0  # chunked, as the plan turns it on: every request served
    import re

    sent, served = re.search(r"(\d+) requests over [\d.]+ (?:s|min|h), (\d+) served", capsys.readouterr().out).groups()
    assert int(sent) > 0 and sent == served


def test_a_prefix_plans_too_long_requests_are_refused_alone_and_end_their_conversations():
    from inferlab.inputs.prefixes import PrefixPlan

    # two conversations of three turns (0-1-2, 3-4-5): dropping turn 1 ends the first after turn 0
    nxt = np.array([1, 2, -1, 4, 5, -1])
    ones = np.ones(6)
    plan = PrefixPlan(np.array([0.0, np.nan, np.nan, 1.0, np.nan, np.nan]), np.arange(6.0) + 100, ones, ones, ones,
                      ones, nxt, ones, True)
    kept = plan.without(np.array([False, True, False, False, False, False]))
    assert kept.isl.tolist() == [100.0, 103.0, 104.0, 105.0] and kept.next_turn.tolist() == [-1, 2, 3, -1]
    # shared prefixes: a lognormal tail past 8,192 tokens refused request by request, as without a prefix
    tail = Lengths("lognormal", mean=4000, sigma=0.8)
    run = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", rate=1.0, num_requests=200, isl=tail,
                         osl=16, prefix="shared:tokens=200")
    assert 8 <= run.refused <= 35 and run.refused + len(run.trace.isl) == 200 and max(run.trace.isl) <= 8192


def test_a_closed_loop_with_a_prefix_keeps_its_clients_when_an_early_request_is_refused():
    # lognormal(mean 6,000, sigma 0.8): about 30% of prompts pass 8,192 tokens, some among the first
    # four; the four clients still start together and keep four requests in flight
    tail = Lengths("lognormal", mean=6000, sigma=0.8)
    for seed in (1, 2):
        run = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="trtllm-pytorch", concurrency=4, num_requests=40,
                             isl=tail, osl=16, prefix="shared:tokens=200", seed=seed)
        first = np.asarray(run.trace.arrival)[:4]
        assert run.refused > 0 and np.all(first == 0.0)


def test_too_long_is_judged_by_the_pools_serving_the_model_not_by_whats_up():
    from inferlab.fleet.api import fleet_of

    # a vLLM pool of the same model still loading: the long prompts wait for it ('no replica'), not 'too long'
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "trtllm-pytorch", "replicas": 1},
             {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", "replicas": 0,
              "autoscaler": {"min_replicas": 1, "max_replicas": 1}}]
    run = fleet_of(pools, traffic=[{"rate": 0.2, "isl": 16000, "osl": 8}], horizon_s=300)
    assert run.counts()["too long"] == 0 and run.counts()["no replica"] > 0
    # a fleet none of whose requests any pool of their model takes is refused, whatever the pools' order
    for order in (1, -1):
        pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "trtllm-pytorch", "replicas": 1,
                  "limits": {"max_num_batched_tokens": 16384}},
                 {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "engine": "trtllm-pytorch",
                  "replicas": 1}][::order]
        with pytest.raises(SpecError, match="prompts of up to 12,000 tokens"):
            fleet_of(pools, traffic=[{"rate": 0.5, "isl": 12000, "osl": 16, "model": "llama-3.1-70b"}],
                     horizon_s=120)
