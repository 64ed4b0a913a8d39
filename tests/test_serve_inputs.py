"""``inferlab.serve`` refuses what it cannot simulate, in one SpecError, before any simulation.

Each case is one example of issue 16 (a TypeError, a NaN arrival or a TPOT of 0 before);
the expected text is the message a user reads, written out here.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import inferlab
from inferlab.errors import SpecError
from inferlab.engines.scheduler import SchedulerConfig
from inferlab.inputs.workload import Lengths, Workload

SMALL = {"num_requests": 8}


@pytest.mark.parametrize("kwargs, message", [
    ({"rate": "5"}, "workload: rate must be a number [request/s], got '5'"),
    ({"rate": 1 + 2j}, "workload: rate must be a number [request/s], got (1+2j)"),
    ({"rate": float("nan")}, "workload: rate must be a finite number in (0, 1e+09] [request/s], got nan"),
    ({"rate": 1e300}, "workload: rate must be a finite number in (0, 1e+09] [request/s], got 1e+300"),
    # 8 requests at 1e-300/s would span 8e300 s, where a 10 ms step is below one float64 ulp
    ({"rate": 1e-300}, "8 requests at 1e-300 requests/s arrive over about 8e+300 s; at most 1e+06 s"),
    ({"rate": 2, "num_requests": 10.5}, "workload: num_requests must be an integer (it counts requests), got 10.5"),
    ({"rate": 2, "num_requests": 10.5}, "workload: num_requests must be an integer (it counts requests), got 10.5"),
    ({"rate": 2, "num_requests": 0}, "workload: num_requests must be between 1 and 10,000,000, got 0"),
    ({"rate": 2, "seed": 1.5}, "workload: seed must be an integer, got 1.5"),
    ({"rate": 2, "seed": "x"}, "workload: seed must be an integer, got 'x'"),
    ({"rate": 2, "seed": -1}, "workload: seed must be between 0 and"),
    ({"trace": [[0, 1], [2, 3]]}, "workload: trace must hold numbers only"),
    ({"trace": 5}, "workload: trace must be a flat list of numbers, got 5"),
    ({"trace": "0,1"}, "workload: trace must be a flat list of numbers, got '0,1'"),
    ({"trace": [0.0, float("nan")]}, "workload: trace must hold finite numbers in [0, 1e+06] [s], got nan"),
    ({"trace": [-1.0, 1.0]}, "workload: trace must hold finite numbers in [0, 1e+06] [s], got -1.0"),
    ({"trace": []}, "workload: trace must hold finite numbers in [0, 1e+06] [s], got no values"),
    ({"concurrency": 0}, "workload: concurrency must be between 1 and 10,000,000, got 0"),
    ({"concurrency": 2.5}, "workload: concurrency must be an integer (it counts clients), got 2.5"),
    ({"offline": 1}, "workload: offline must be true or false, got 1"),
    ({"offline": True, "isl": 10.5}, "workload: isl: lengths must be a token count"),
    ({"offline": True, "osl": [1, 2.5]}, "workload: osl: lengths: values must be an integer (it counts tokens), got 2.5"),
    ({"offline": True, "isl": 10**9}, "workload: isl: lengths: value must be between 1 and 100,000,000, got 1000000000"),
    ({"offline": True, "max_num_seqs": 0}, "scheduler: max_num_seqs must be between 1 and 1,000,000, got 0"),
    ({"offline": True, "kv_block_size": 0}, "scheduler: kv_block_size must be between 1 and"),
    ({"offline": True, "gpu_memory_utilization": 2.0}, "scheduler: gpu_memory_utilization must be a finite number "
                                                       "in (0, 1], got 2.0"),
    ({"offline": True, "max_num_batched_tokens": "8192"}, "scheduler: max_num_batched_tokens must be an integer"),
    ({"offline": True, "scheduler": {"max_num_seqs": 4}}, "serve: scheduler must be a SchedulerConfig"),
    ({"rate": 2, "concurrency": 4}, "give exactly one of rate"),
])
def test_serve_refuses_bad_workloads_in_one_line(kwargs, message):
    with pytest.raises(SpecError) as info:
        inferlab.serve("llama-3.1-8b", "h100-sxm", **{**SMALL, **kwargs})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_workload_is_checked_before_the_deployment_is_built():
    # an unknown model would be an UnknownNameError: the workload's error comes first
    with pytest.raises(SpecError, match="num_requests must be an integer"):
        inferlab.serve("no-such-model", "h100-sxm", rate=2, num_requests=3.5)


def test_the_slowest_allowed_rate_still_has_nonzero_step_times():
    # 8 requests at 8e-6 req/s span ~1e6 s: float64 resolves 1.2e-10 s there, far below a decode step
    result = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=8e-6, num_requests=8, isl=128, osl=16)
    assert result.summary()["tpot"]["p50"] > 1e-4


def test_integer_like_numpy_values_are_accepted():
    import numpy as np

    w = Workload(isl=np.int64(128), osl=[np.int32(4), 8], rate=np.float64(2.0), num_requests=np.int64(5),
                 seed=np.uint8(3))
    assert (w.num_requests, w.isl.value, w.osl.values, w.seed) == (5, 128, (4, 8), 3)


@pytest.mark.parametrize("kwargs, message", [
    ({"kind": "fixed", "value": 0}, "lengths: value must be between 1 and 100,000,000, got 0"),
    ({"kind": "uniform", "low": 9, "high": 3}, "lengths: uniform low 9 is above high 3"),
    ({"kind": "uniform", "low": 5}, "lengths: uniform lengths need low and high (token counts >= 1); high missing"),
    ({"kind": "lognormal", "mean": 1000.0, "sigma": 10.0}, "lengths: sigma must be a finite number in [0, 3], got 10.0"),
    ({"kind": "lognormal", "mean": float("inf")}, "lengths: mean must be a finite number"),
    ({"kind": "zipf"}, "lengths: unknown kind 'zipf'; allowed: fixed, uniform, lognormal, empirical"),
    ({"kind": "fixed", "value": "32"}, "lengths: value must be an integer (it counts tokens), got '32'"),
])
def test_lengths_refuse_what_they_cannot_draw(kwargs, message):
    with pytest.raises(SpecError) as info:
        Lengths(**kwargs)
    assert message in str(info.value)


def test_a_request_count_beside_a_trace_of_another_length_is_refused():
    # serve(trace=[0, 1, 2], num_requests=10) had served 3 requests without a word
    import inferlab

    with pytest.raises(SpecError, match="num_requests=10 beside a trace of 3 arrival times"):
        inferlab.serve("llama-3.1-8b", "h100-sxm", trace=[0.0, 1.0, 2.0], num_requests=10)
    assert Workload(trace=(0.0, 1.0, 2.0), num_requests=3).num_requests == 3
    assert Workload(trace=(0.0, 1.0, 2.0)).num_requests == 3
    # two data-parallel replicas share a trace of six arrivals, three each (with a cap too)
    trace = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert len(inferlab.serve("llama-3.1-8b", "h100-sxm", trace=trace, osl=16, dp=2).ttft_s) == 3
    assert len(inferlab.serve("llama-3.1-8b", "h100-sxm", trace=trace, osl=16, dp=2, max_concurrency=2).ttft_s) == 3


@pytest.mark.parametrize("text", ["128,,512", "128,", ",128"])
def test_a_list_of_lengths_with_an_empty_item_is_refused_as_estimate_refuses_it(text):
    # '128,,512' had been read as 128,512 while estimate's --batch 1,,2 is refused
    from inferlab.cli.main import main

    with pytest.raises(SpecError, match="an empty item between commas"):
        Lengths.parse(text)
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--isl", text, "--rate", "1", "--num-requests", "4"]) == 2
    assert Lengths.parse("128, 512").values == (128, 512)


@pytest.mark.parametrize("given, message", [
    # the last of two had won (a mean of 2 tokens), and a lognormal without its spread had drawn
    # every length at the mean
    ("lognormal:mean=1024,sigma=0.5,mean=2", "mean= is given twice; give it once"),
    ("lognormal:mean=1024", "sigma= is missing (the spread of log lengths"),
    ({"kind": "lognormal", "mean": 1024}, "a lognormal's sigma is missing"),
])
def test_a_lognormal_names_each_field_once_and_its_spread(given, message):
    with pytest.raises(SpecError) as info:
        Lengths.of(given)
    assert message in str(info.value)
    assert Lengths.parse("lognormal:mean=1024,sigma=0").sigma == 0.0  # a fixed length, said


def test_an_empty_prefix_is_refused_not_read_as_none(capsys):
    from inferlab.cli.main import main

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "1", "--num-requests", "4", "--prefix", ""]) == 2
    assert "prefix '': start with shared: or sessions:" in capsys.readouterr().err


def test_a_prefix_field_given_twice_is_refused():
    from inferlab.inputs.prefixes import Prefixes

    with pytest.raises(SpecError, match="tokens= is given twice"):
        Prefixes.parse("shared:tokens=500,groups=4,tokens=900")
    with pytest.raises(SpecError, match="think= is given twice"):
        Prefixes.parse("sessions:turns=4,think=5,think=9")


@pytest.mark.parametrize("argv, flag", [
    (["estimate", "llama-3.1-8b", "h100-sxm", "--batch", "1,8,1"], "--batch: 1 is given twice in '1,8,1'"),
    (["serve", "llama-3.1-8b", "h100-sxm", "--rates", "1,2,1.0"], "--rates: 1 is given twice in '1,2,1.0'"),
])
def test_a_sweep_listing_a_value_twice_is_refused(argv, flag, capsys):
    """A sweep's points are a grid: a repeated one is a typo or a wasted run (a serve prompt mix
    such as ``--isl 128,128,512`` is a distribution, where repeats weigh, and stays allowed)."""
    from inferlab.cli.main import main

    assert main(argv) == 2
    assert flag in capsys.readouterr().err
    assert Lengths.parse("128,128,512").values == (128, 128, 512)


def test_scheduler_refuses_wrong_types():
    with pytest.raises(SpecError, match="scheduler: chunked_prefill must be true or false, got 'no'"):
        SchedulerConfig(chunked_prefill="no")


@settings(max_examples=60, deadline=None)
@given(rate=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12)),
       n=st.integers(-5, 10**8))
def test_a_workload_either_builds_with_arrivals_in_range_or_refuses(rate, n):
    try:
        w = Workload(rate=rate, num_requests=n)
    except SpecError:
        return
    assert 0 < w.rate <= 1e9 and 1 <= w.num_requests <= 10**7 and w.num_requests / w.rate <= 1e6


@pytest.mark.parametrize("clients", ["nan", "inf", "2,nan", "2.5"])
def test_cli_concurrency_that_is_not_whole_clients_is_one_line(capsys, clients):
    from inferlab.cli.main import main

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", clients, "--num-requests", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--concurrency takes whole clients" in err


def test_json_of_one_token_outputs_is_strict_json_with_null_tpot(capsys):
    from inferlab.cli.main import main
    import json

    def refuse(name):
        raise AssertionError(f"{name} in JSON output")

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "2", "--osl", "1", "--num-requests", "20",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert data["latency_s"]["tpot"]["p50"] is None  # one token: no time per output token after the first
    assert data["latency_s"]["ttft"]["p50"] > 0


def test_a_load_sweep_of_one_token_outputs_has_no_tpot_and_no_warning(capsys):
    import json
    import warnings

    from inferlab.cli.main import main

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["serve", "llama-3.1-8b", "h100-sxm", "--num-requests", "40", "--concurrency", "2,8",
                     "--osl", "1"]) == 0
        table = capsys.readouterr().out.splitlines()
        assert main(["serve", "llama-3.1-8b", "h100-sxm", "--num-requests", "40", "--concurrency", "2,8",
                     "--osl", "1", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
    row = next(line.split() for line in table if line.split()[:1] == ["2"])
    assert row[4] == "-" and row[7] == "-" and row[8] == "-"  # tok/s/user, TPOT P50 and P99: no second token
    assert "nan" not in " ".join(table)
    assert data is not None


@pytest.mark.parametrize("argv", [["--rates", "2,4"], ["--rate", "2"]])
@pytest.mark.parametrize("percentile", ["675741526", "0", "nan"])
def test_a_percentile_outside_0_100_is_one_line_with_or_without_slos(capsys, argv, percentile):
    from inferlab.cli.main import main

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--num-requests", "8", *argv, "--percentile", percentile]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--percentile must be a finite number in (0, 100]" in err


def test_load_sweep_refuses_a_percentile_that_is_not_a_number():
    from inferlab.serving.curve import load_sweep

    with pytest.raises(SpecError, match="percentile must be a number, got 'p99'"):
        load_sweep("llama-3.1-8b", "h100-sxm", rates=[1, 2], percentile="p99", num_requests=8)


def test_a_length_distributions_tail_past_the_models_positions_is_refused_request_by_request():
    # a lognormal of mean 60,000 tokens and sigma 1.5 draws prompts past Llama-3.1-8B's 131,072
    # positions in 50 requests (its 99th percentile is e^(ln 60000 - 1.125 + 2.33 x 1.5) ~ 640,000):
    # the engine answers those with an error and serves the others; they had been simulated
    tail = Lengths("lognormal", mean=60000, sigma=1.5)
    run = inferlab.serve("llama-3.1-8b", "b200", tp=8, rate=1.0, num_requests=50, isl=tail, osl=64)
    assert run.refused > 0 and run.refused + len(run.trace.isl) == 50
    assert max(run.trace.isl + run.trace.osl) <= 131072
    assert run.to_dict()["refused"] == run.refused and "refused with an error" in str(run)
    # over three replicas each stream draws ceil(50 / 3) = 17: served and refused still sum to the 50 asked
    three = inferlab.serve("llama-3.1-8b", "b200", tp=2, dp=3, rate=1.0, num_requests=50, isl=tail, osl=64)
    counts = three.to_dict()
    assert three.refused > 0 and counts["num_requests"] + counts["refused"] == 50
    ran = inferlab.serve("llama-3.1-8b", "b200", tp=8, rate=1.0, num_requests=50, isl=tail, osl=64,
                         allow_long_context=True)
    assert ran.refused == 0 and max(ran.trace.isl) > 131072
    with pytest.raises(SpecError, match="exceeds the 131,072 positions llama-3.1-8b was trained for"):
        inferlab.serve("llama-3.1-8b", "b200", tp=8, rate=1.0, num_requests=50, isl=200000, osl=64)


def test_vllm_without_chunked_prefill_sizes_its_budget_to_the_context_and_refuses_a_smaller_one():
    # vLLM's SchedulerConfig: without chunked prefill the budget defaults to max(max_model_len, 2048) and
    # one below max_model_len is refused at start-up; a 10,000-token prompt had waited for an idle engine
    # (8,192 tokens an iteration): mean TTFT 16 s at 2 requests/s on one H100
    run = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="vllm", chunked_prefill=False, rate=2.0, num_requests=40,
                         isl=10000, osl=128)
    assert float(np.mean(run.ttft_s)) < 1.0
    with pytest.raises(SpecError, match=r"max_num_batched_tokens \(512\) is smaller than max_model_len \(131,072\)"):
        inferlab.serve("llama-3.1-8b", "h100-sxm", engine="vllm", chunked_prefill=False, max_num_batched_tokens=512,
                       rate=2.0, num_requests=10, isl=1000, osl=10)
    fits = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="vllm", chunked_prefill=False, max_model_len=4096,
                          max_num_batched_tokens=4096, rate=2.0, num_requests=10, isl=1000, osl=10)
    assert len(fits.ttft_s) == 10


def test_no_memory_for_a_kv_cache_says_where_the_memory_went_and_what_to_change():
    from inferlab.errors import InfeasibleError

    # the weights alone do not fit the engine's share: said as estimate says it (the bytes, what would fit)
    with pytest.raises(InfeasibleError, match=r"needs 1\d\.\d GB per GPU \(weights 16\.1 GB.* but 12\.8 GB is usable "
                                              r".*raise gpu_memory_utilization \(the engine's share is 12\.8 GB\)"):
        inferlab.serve("llama-3.1-8b", "h100-sxm", gpu_memory_utilization=0.15, rate=1.0, num_requests=5)
    # a 70B model on an L4: more GPUs, not a larger share (it had said 'raise it' of a flag never given)
    with pytest.raises(InfeasibleError, match=r"llama-3\.1-70b does not fit on l4 as tp1: .*; tp=8 would fit$"):
        inferlab.serve("llama-3.1-70b", "l4", rate=1.0, num_requests=5)


@pytest.mark.parametrize("percentile", ["0.99", "0.5", "1"])
def test_a_percentile_written_as_a_fraction_is_refused_naming_what_it_would_check(capsys, percentile):
    """--percentile 0.99 meant P99 but checks the 0.99th percentile, near the fastest request:
    it had printed 'P0.99 TTFT 25.8 ms ... meets the SLO'."""
    from inferlab.cli.main import main
    from inferlab.planning.scenario import load_scenario

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--num-requests", "8", "--rate", "2", "--ttft-slo", "100",
                 "--percentile", percentile]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is the {float(percentile):g}th percentile; a percentile is out of 100" in err
    with pytest.raises(SpecError, match="out of 100"):
        load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": {"rate": 2},
                       "slo": {"ttft_ms": 500, "percentile": float(percentile)}})


def test_a_closed_loop_with_fewer_requests_than_clients_says_so():
    from inferlab import serve

    r = serve("llama-3.1-8b", "h100-sxm", concurrency=500, num_requests=20, isl=128, osl=8)
    assert "500 clients (only 20 send a request: fewer requests than clients)" in str(r)
    assert "only" not in str(serve("llama-3.1-8b", "h100-sxm", concurrency=4, num_requests=20, isl=128, osl=8))


def test_whole_numbers_written_as_floats_are_counts_and_booleans_are_not():
    """isl=[512.0, 1024.0], num_requests=50.0 and concurrency=4.0 are whole counts, as tp=2.0 was
    already (a JSON or YAML number, or numpy arithmetic); a numpy boolean is no batch size (it had
    run as batch 1)."""
    import numpy as np

    from inferlab import estimate, serve

    assert len(serve("llama-3.1-8b", "h100-sxm", isl=[512.0, 1024.0], osl=32.0, rate=2, num_requests=50.0)
               .trace.osl) == 50
    assert serve("llama-3.1-8b", "h100-sxm", isl=512, osl=32, concurrency=4.0, num_requests=20).workload.concurrency == 4
    for flag in (np.bool_(True), [True, False]):
        with pytest.raises(SpecError, match="batch_size must be a number or an array of numbers"):
            estimate("llama-3.1-8b", "h100-sxm", batch_size=flag)


def test_the_context_check_adds_each_requests_own_prompt_and_output():
    """Qwen3-30B-A3B has 40,960 positions. Two requests of 40,000 + 10 and 10 + 40,000 tokens both
    fit; the check had added the longest prompt to the longest output (80,000) and refused them,
    which made plans with lognormal lengths fail at random on long tails."""
    import numpy as np

    from inferlab.checks import context_within_model
    from inferlab.specs.catalog import load_model

    model = load_model("qwen3-30b-a3b")
    assert context_within_model(model, np.array([40_000, 10]), np.array([10, 40_000])) is False
    with pytest.raises(SpecError, match="40,961 tokens exceeds the 40,960 positions"):
        context_within_model(model, np.array([40_000, 10]), np.array([961, 10]))


def test_a_quantity_is_read_in_the_unit_its_number_is_read_in():
    """Quantities are the edge: a rate of 60 requests a minute is 1 request/s and a fleet's
    horizon of 2 minutes 120 s, where a quantity of the right dimension had been refused as
    'not a number' (serve's rate, fleet's horizon and SLOs, every time and rate read by
    ``checks.real``); another dimension is a UnitError naming the one it needs."""
    from inferlab import Q, UnitError
    from inferlab.checks import real
    from inferlab.fleet import Failures

    assert Workload(rate=Q(60, "request/minute"), num_requests=5).rate == 1.0
    with pytest.raises(UnitError, match=r"workload: rate must be in \[request\] / \[time\] .*got 5 GB"):
        Workload(rate=Q(5, "GB"), num_requests=5)
    assert real("fleet: horizon_s", Q(2, "minute"), minimum=0.0, unit="s") == 120.0
    assert Failures(replica_mtbf_h=Q(2, "day")).replica_mtbf_h == 48.0
    assert real("a share", Q(50, "%"), minimum=0.0, maximum=1.0) == 0.5
    with pytest.raises(UnitError, match="a share must be in"):
        real("a share", Q(1, "s"), minimum=0.0, maximum=1.0)
    with pytest.raises(SpecError, match=r"must be a finite number in \[0, 10\] \[s\], got 20.0"):
        real("a wait", Q(20_000, "ms"), minimum=0.0, maximum=10.0, unit="s")


@pytest.mark.parametrize("flag, value, message", [
    ("--detokenize-us", "1e9", "--detokenize-us must be at most 10,000 us (10 ms a token would hold every stream "
                               "under 100 tokens/s on its own), got 1e+09"),
    ("--tokenize-us", "1001", "--tokenize-us must be at most 1,000 us (1 ms a token would take a second to tokenize "
                              "a 1,000-token prompt), got 1001"),
    ("--network-rtt", "10001", "--network-rtt must be at most 10,000 ms (10 s is past any network's round trip), "
                               "got 10001"),
    ("--client-overhead", "inf", "--client-overhead must be at most 600,000 ms (a client waiting past 600 s has "
                                 "timed out), got inf"),
])
def test_time_outside_the_gpu_beyond_anything_physical_is_refused_naming_the_flag(capsys, flag, value, message):
    from inferlab.cli.main import main

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "1", "--num-requests", "4", flag, value]) == 2
    assert capsys.readouterr().err == f"inferlab: error: {message}\n"


def test_the_largest_times_outside_the_gpu_are_accepted(capsys):
    from inferlab.cli.main import main

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "1", "--num-requests", "4", "--network-rtt", "10000",
                 "--client-overhead", "600000", "--tokenize-us", "1000", "--detokenize-us", "10000"]) == 0
    assert "ttft" in capsys.readouterr().out


def test_cli_lockstep_keeps_closed_loop_clients_in_step(capsys):
    # eight clients whose eight 1,024-token prompts fill one prefill iteration: in lockstep every
    # round arrives together as the first did, so every request waits out that whole iteration
    # (one TTFT for all, P50 = P99); out of step (the default), a client's prompt arrives alone
    # and runs in an iteration of its own, several times sooner
    from inferlab.cli.main import main
    import json

    base = ["serve", "llama-3.1-8b", "h100-sxm", "--concurrency", "8", "--isl", "1024", "--osl", "64",
            "--num-requests", "80", "--json"]
    ttft = {}
    for flag in ((), ("--lockstep",)):
        assert main([*base, *flag]) == 0
        data = json.loads(capsys.readouterr().out)
        ttft[flag] = data["latency_s"]["ttft"]
        assert data["workload"]["stagger"] is not bool(flag)
    locked, apart = ttft[("--lockstep",)], ttft[()]
    assert locked["p50"] == pytest.approx(locked["p99"], rel=1e-9)
    assert locked["p50"] > 3 * apart["p50"]
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "2", "--lockstep"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--lockstep" in err and "--concurrency" in err
