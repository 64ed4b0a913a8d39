"""Scenario files and ``inferlab plan`` refuse what they cannot answer (issue 16).

Expected messages and numbers are written out here by hand; none is recomputed by the
code under test.
"""

from __future__ import annotations

import re
import types

import numpy as np
import pytest

from inferlab.cli.main import build_parser, main
from inferlab.errors import InfeasibleError, InferlabError, SpecError
from inferlab.planning.planner import plan
from inferlab.planning.probes import probe_requests, slo_probe
from inferlab.planning.scenario import load_scenario
from inferlab.inputs.workload import Lengths


def _scenario(**overrides):
    base = {"name": "t", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"],
            "traffic": {"rate": 2, "isl": 256, "osl": 32}, "slo": {"ttft_ms": 2000, "tpot_ms": 100},
            "search": {"precisions": ["bf16"], "tp": [1]}, "verify": 0}
    base.update(overrides)
    return base


def test_traffic_without_lengths_takes_the_documented_defaults():
    sc = load_scenario(_scenario(traffic={"rate": 2}))
    assert sc.traffic.isl == Lengths("fixed", value=1024) and sc.traffic.osl == Lengths("fixed", value=256)
    assert str(plan(sc)).startswith("plan 't': 2 req/s, ISL ~1024, OSL ~256")


@pytest.mark.parametrize("prices, message", [
    ({"h100-sxm": -24}, "prices: h100-sxm at -24 USD/h; a price is >= 0"),
    ({"h100-sxm": float("inf")}, "prices.h100-sxm: Input should be a finite number"),
    ({"h100-sxm": float("nan")}, "prices.h100-sxm: Input should be a finite number"),
    ({"h100-sxm": "2.5"}, "prices.h100-sxm: expected a number, got '2.5'"),
    # a price under a name the search never uses would leave the catalog's price in force
    ({"h100": 2.5}, "prices: 'h100' is not one of the scenario's hardware (did you mean 'h100-sxm'?)"),
])
def test_prices_are_finite_non_negative_and_name_a_searched_gpu(prices, message):
    with pytest.raises(SpecError) as info:
        load_scenario(_scenario(prices=prices))
    assert message in str(info.value)


@pytest.mark.parametrize("overrides, message", [
    ({"budget_usd_per_hour": float("inf")}, "budget_usd_per_hour: Input should be a finite number"),
    ({"traffic": {"rate": "2"}}, "traffic.rate: expected a number, got '2'"),
    ({"traffic": {"rate": 2, "isl": {"kind": "fixed", "valu": 3}}}, "unknown key 'valu' (did you mean 'value'?) in a distribution"),
    ({"traffic": {"rate": 2, "isl": 1.5}}, "traffic.isl: lengths must be a token count"),
    ({"traffic": {"rate": 2e12}}, "2e+12 requests/s is more than 1e+09"),
    ({"verify": True}, "verify: Input should be a valid integer"),
    ({"search": {"tp": [1.0]}}, "search.tp.0: Input should be a valid integer"),
    ({"search": {"precisions": ["fp9"]}}, "search.precisions: unknown"),
    ({"engine": "vlm"}, "engine: unknown engine 'vlm' (did you mean 'vllm'?)"),
    ({"slo": {"ttft_ms": 100, "percentile": 99.99}}, "slo.percentile: Input should be less than or equal to 99.9"),
])
def test_scenario_fields_refused_with_their_place(overrides, message):
    with pytest.raises(SpecError) as info:
        load_scenario(_scenario(**overrides))
    assert message in str(info.value)


def test_verification_simulates_enough_requests_for_the_percentile():
    # 20 requests beyond the percentile, between 1,000 and 20,000: P99 -> 20 / 0.01 = 2,000;
    # P99.5 -> 4,000; P99.9 -> 20,000; P50 -> 40, raised to 1,000
    assert probe_requests(99.0) == 2000
    assert probe_requests(99.5) == 4000
    assert probe_requests(99.9) == 20_000
    assert probe_requests(50.0) == 1000


def test_verification_checks_the_slo_at_its_own_percentile():
    # TTFTs of 1..1000 ms: linear-interpolated P99 = 1 + 0.99 x 999 = 990.01 ms and
    # P99.9 = 1 + 0.999 x 999 = 999.001 ms; a 995 ms SLO holds at P99 and fails at P99.9
    result = types.SimpleNamespace(ttft_s=np.arange(1.0, 1001.0) / 1e3, tpot_s=np.full(1000, 0.01))
    for percentile, ttft_ms, ok in ((99.0, 990.01, True), (99.9, 999.001, False)):
        sc = load_scenario(_scenario(slo={"ttft_ms": 995, "tpot_ms": 100, "percentile": percentile}))
        probe = slo_probe(sc, result, 1, 0.0)
        assert probe.ttft_s == pytest.approx(ttft_ms / 1e3, rel=1e-12) and probe.tpot_s == pytest.approx(0.01)
        assert probe.meets is ok


def test_a_tp_the_heads_cannot_split_is_ruled_out_with_its_reason():
    # Llama-3.1-8B has 32 attention heads (3 does not divide them); an H100 SXM node has 8 GPUs
    with pytest.raises(InfeasibleError) as info:
        plan(load_scenario(_scenario(search={"precisions": ["bf16"], "tp": [3, 16]})))
    reasons = [c.reason for c in info.value.plan.candidates]
    assert reasons == ["tp=3 does not divide the 32 attention heads",
                       "tp=16 spans more than the 8 GPUs of one h100-sxm node (tensor parallelism stays in a node)"]
    # each ruled-out configuration with its reason, in the table a CLI user reads
    assert str(info.value.plan).endswith(
        "0 feasible, 2 ruled out:\n  llama-3.1-8b h100-sxm bf16 tp3: tp=3 does not divide the 32 attention heads\n"
        "  llama-3.1-8b h100-sxm bf16 tp16: tp=16 spans more than the 8 GPUs of one h100-sxm node (tensor "
        "parallelism stays in a node)")


def _write(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def _infeasible_plan(tmp_path, models: str, search: str) -> str:
    """The error of ``inferlab plan`` on a scenario of ``models`` at 2 req/s on H100s with ``search``."""
    path = _write(tmp_path, f"models: [{models}]\nhardware: [h100-sxm]\ntraffic: {{rate: 2}}\n"
                            f"search: {{{search}}}\nverify: 0\n")
    args = build_parser().parse_args(["plan", path])
    with pytest.raises(InfeasibleError) as info:
        args.func(args)
    return str(info.value)


def test_plan_with_nothing_feasible_is_an_infeasible_error_with_the_reasons(tmp_path):
    # only the scenario's own values rule every configuration out: the fix is those values, not the SLOs
    assert _infeasible_plan(tmp_path, "llama-3.1-8b", "tp: [3], precisions: [bf16, fp8]") == (
        "no configuration of scenario 'scenario' can be weighed (2 ruled out by its own values): tp=3 does not "
        "divide the 32 attention heads (2x); give search.tp, search.pp and search.precisions values the model takes")
    # beside one the physics rules out (too big for one H100), the general advice stays
    mixed = _infeasible_plan(tmp_path, "llama-3.1-70b", "tp: [1, 3], precisions: [bf16]")
    assert mixed.startswith("no configuration of scenario 'scenario' meets it (2 ruled out): ") and "does not fit" in mixed
    assert "tp=3 does not divide the 64 attention heads" in mixed and "add hardware" in mixed


def test_plan_json_with_nothing_feasible_still_gives_each_reason_on_stdout(tmp_path, capsys):
    # it had printed nothing on stdout: a script could not read the per-configuration reasons
    import json

    path = _write(tmp_path, "models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 2}\n"
                            "search: {tp: [3], precisions: [bf16, fp8]}\nverify: 0\n")
    from inferlab.cli.main import main

    assert main(["plan", path, "--json"]) == 2  # (a layout the model cannot take: bad input, as in estimate)
    out = capsys.readouterr()
    data = json.loads(out.out)
    assert [c["reason"] for c in data["candidates"]] == ["tp=3 does not divide the 32 attention heads"] * 2
    assert "no configuration of scenario" in out.err


@pytest.mark.parametrize("text, message", [
    (b"models: [llama-3.1-8b]\nname: \xff\xfe\n", "not UTF-8"),
    ("models: [", "not valid YAML"),
    ("- a\n- b\n", "expected a mapping of fields, got list"),
    ("", "the file is empty; expected a mapping of fields"),
    ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 2}\nprices: {h100-sxm: -24}\n",
     "a price is >= 0"),
])
def test_plan_bad_files_are_one_line_and_exit_2(tmp_path, capsys, text, message):
    code = main(["plan", _write(tmp_path, text)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_plan_refuses_a_negative_verify_count(tmp_path, capsys):
    path = _write(tmp_path, "models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 2}\n")
    assert main(["plan", path, "--verify", "-1"]) == 2
    assert "--verify must be between 0 and 100, got -1" in capsys.readouterr().err


@pytest.mark.parametrize("changes, message", [
    ({"prices": {"h100-sxm": 5e-324}}, "prices.h100-sxm: a price must be 0 (free) or at least 1e-09 USD, got 5e-324"),
    ({"api_price": {"input_per_million": 0.5, "output_per_million": 1e-12}},
     "api_price.output_per_million: a price must be 0 (free) or at least 1e-09 USD"),
])
def test_a_price_below_a_nano_dollar_is_refused(changes, message):
    # tokens per dollar at 5e-324 USD/h overflow float64: the price means nothing anyway
    with pytest.raises(SpecError, match=re.escape(message)):
        load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": {"rate": 2}, **changes})


def test_a_price_of_zero_is_free_and_accepted():
    sc = load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": {"rate": 2},
                        "prices": {"h100-sxm": 0.0}})
    assert sc.prices == {"h100-sxm": 0.0}


def test_prefix_structure_and_hit_rate_together_are_refused():
    with pytest.raises(SpecError) as info:
        load_scenario(_scenario(traffic={"rate": 2, "prefix_hit": 0.3, "prefix": "shared:tokens=500,groups=4"}))
    assert "give 'prefix'" in str(info.value) and "not both" in str(info.value)


def test_a_misspelt_key_gets_the_closest_one_at_its_place():
    from inferlab.planning.scenario import load_scenario

    data = {"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "trafic": {"rate": 5},
            "slo": {"ttf_ms": 500}, "search": {"precision": ["fp8"]}}
    with pytest.raises(SpecError) as err:
        load_scenario(data)
    text = str(err.value)
    for message in ("trafic: unknown key; did you mean 'traffic'?", "slo.ttf_ms: unknown key; did you mean 'ttft_ms'? "
                    "allowed: ttft_ms, tpot_ms, percentile", "search.precision: unknown key; did you mean 'precisions'?"):
        assert message in text


def test_a_name_yaml_read_as_a_boolean_says_to_quote_it(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: off\nmodels: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 1}\n")
    with pytest.raises(SpecError, match=r"name: read as the boolean False .*quote the name"):
        load_scenario(str(path))


@pytest.mark.parametrize("traffic, message", [
    ({"offline": True, "requests": 1000, "deadline_h": 1, "rate": 5}, "an offline job's rate is its requests over"),
    ({"rate": 5, "requests": 100}, "'requests' and 'deadline_h' describe an offline job"),
])
def test_traffic_fields_of_the_other_mode_are_refused(traffic, message):
    with pytest.raises(SpecError, match=message):
        load_scenario({"models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "traffic": traffic})


def test_lengths_take_the_same_forms_everywhere():
    # the command line's text, a file's mapping, a count, a list: one parser (Lengths.of) for the
    # Python API, scenario and workload files and fleet traffic
    from inferlab.inputs.workload import Lengths, Workload

    text = Lengths.of("lognormal:mean=1500,sigma=0.6")
    assert text == Lengths.of({"kind": "lognormal", "mean": 1500, "sigma": 0.6}) == Lengths("lognormal", mean=1500, sigma=0.6)
    assert Lengths.of("128,512") == Lengths("empirical", values=(128, 512)) and Lengths.of("2048") == Lengths.of(2048)
    assert Workload(isl="uniform:128-256", osl=64, rate=1.0).isl == Lengths("uniform", low=128, high=256)
    assert Workload.from_dict({"isl": "lognormal:mean=900,sigma=0.4", "osl": 64, "rate": 1.0}).isl.mean == 900
    with pytest.raises(SpecError, match="did you mean 'lognormal'"):
        Lengths.of("lognorm:mean=100")
    with pytest.raises(SpecError, match="a text like"):
        Lengths.of(1.5)


def test_a_drafter_may_be_named_by_its_hugging_face_repository():
    # the draft model of a speculative configuration resolves as the target does: a repository a
    # catalog card names (a fine-tune suffix dropped) is that catalog model
    import inferlab
    from inferlab.specs.catalog import load_model

    assert load_model("meta-llama/Llama-3.1-8B-Instruct").id == "llama-3.1-8b"
    by_repo = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, engine="vllm",
                                speculative="draft:model=meta-llama/Llama-3.1-8B-Instruct,k=4,accept=0.7")
    by_id = inferlab.estimate("llama-3.1-70b", "h100-sxm", tp=4, engine="vllm",
                              speculative="draft:model=llama-3.1-8b,k=4,accept=0.7")
    assert float(by_repo.tpot_s) == float(by_id.tpot_s)
    with pytest.raises(SpecError, match="not a catalog model; did you mean"):
        load_model("meta-llama/Llama-9B")


def test_a_scenario_reads_numbers_with_an_exponent(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 2e1, isl: 1.5e3, osl: 3e2}\n"
                    "slo: {ttft_ms: 1.5e3, tpot_ms: 5e1}\n")
    sc = load_scenario(path)
    assert (sc.traffic.request_rate, sc.traffic.isl.expected, sc.traffic.osl.expected) == (20.0, 1500.0, 300.0)
    assert (sc.slo.ttft_ms, sc.slo.tpot_ms) == (1500.0, 50.0)


@pytest.mark.parametrize("argv, text, where", [
    (["plan"], "models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 5, isl: 512, osl: 64}\n"
               "slo: {ttft_ms: 1000, tpot_ms: 50}\nverify: 0\ntraffic: {rate: 6}\n",
     "line 6: key 'traffic' is given twice (first at line 3)"),
    (["estimate", "--file"], "model: llama-3.1-8b\nhardware: h100-sxm\nlayout: {tp: 1, tp: 8}\n",
     "line 3: key 'tp' is given twice (first at line 3)"),
])
def test_a_key_given_twice_in_a_file_is_refused(tmp_path, capsys, argv, text, where):
    """PyYAML keeps the last of two equal keys and drops the first without a word: the plan
    of a scenario whose second 'traffic' lost the lengths ran at the default lengths, and
    the deployment above ran on 8 GPUs. YAML says a mapping's keys are unique: one line."""
    path = tmp_path / "file.yaml"
    path.write_text(text)
    assert main([*argv, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and where in err and "keep one" in err


def test_a_merge_key_may_still_be_overridden():
    """``<<: *base`` then a key of base is YAML's override, not a key given twice."""
    import yaml

    from inferlab.specs.validation import SAFE_LOADER

    text = "base: &b {isl: 512, osl: 64}\ntraffic:\n  <<: *b\n  osl: 128\n"
    assert yaml.load(text, Loader=SAFE_LOADER)["traffic"] == {"isl": 512, "osl": 128}


def test_a_fleet_scenario_given_to_plan_says_which_command_runs_it(capsys):
    """It had been four schema errors (models missing, hardware not a list, traffic missing,
    model unknown); `inferlab fleet` says the converse of a planning scenario already."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "fleet-day.yaml"
    assert main(["plan", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is a fleet scenario (one deployment and a fleet: section): `inferlab fleet {path}` " \
                                   "runs it" in err


def test_one_value_where_a_list_goes_says_so_in_plain_words():
    """pydantic's 'Input should be a valid tuple' told a user nothing of what to write."""
    with pytest.raises(SpecError) as info:
        load_scenario(_scenario(hardware="h100-sxm", search={"precisions": ["bf16"], "tp": 4}))
    assert str(info.value) == ("scenario: hardware: expected a list, e.g. [h100-sxm], got str 'h100-sxm'; "
                               "search.tp: expected a list, e.g. [4], got int 4")


def test_a_list_where_one_value_goes_and_an_empty_list_say_so_in_plain_words():
    """pydantic's 'Input should be a valid string' and 'Tuple should have at least 1 item' had
    named neither what to write nor the engines allowed."""
    with pytest.raises(SpecError) as info:
        load_scenario(_scenario(engine=["vllm", "sglang"], hardware=[]))
    assert str(info.value) == ("scenario: hardware: expected at least one item, got none; engine: expected one "
                               "engine (a plan is for one; plan several apart), got ['vllm', 'sglang']; allowed: "
                               "generic, trtllm, trtllm-pytorch, vllm, sglang, lmdeploy")
    with pytest.raises(SpecError, match=r"^scenario: name: expected one name or text, got a list \['a', 'b'\]$"):
        load_scenario(_scenario(name=["a", "b"]))


def test_an_unknown_profile_is_bad_input_once():
    """It had ruled out every configuration, each with the same reason (exit 1, as infeasible)."""
    with pytest.raises(InferlabError, match="unknown profile 'nope'"):
        load_scenario(_scenario(profile="nope"))


@pytest.mark.parametrize("changes, message", [
    ({"models": ["llama-3.1-8b", "llama-3.1-8b"]}, "models: 'llama-3.1-8b' is listed twice; each choice once"),
    ({"hardware": ["h100-sxm", "h100-sxm"]}, "hardware: 'h100-sxm' is listed twice"),
    ({"search": {"precisions": ["bf16"], "tp": [4, 4]}}, "search.tp: 4 is listed twice"),
    ({"operations": {"daily_profile": [0, 0]}}, "at least one above 0 (all 0: no traffic to plan)"),
    ({"operations": {"ramp_rps_per_min": 1e9}}, "operations.ramp_rps_per_min: Input should be less than or equal to"),
])
def test_repeated_choices_and_unbounded_operations_are_refused(changes, message):
    """A repeat had doubled the plan's rows (and a repeated GPU made its price's error name it twice);
    a day of zero traffic had planned 0-0 replicas at $0; a ramp of 1e9 requests/s a minute had
    asked for 1.7 billion warm replicas."""
    with pytest.raises(SpecError, match=re.escape(message)):
        load_scenario(_scenario(**changes))


def test_plan_whose_layouts_all_lack_memory_names_the_layouts_that_would_hold_the_weights(tmp_path):
    # Llama-3.1-405B in BF16 is 811.7 GB of weights; an H100 leaves 77.0 GB usable, so TP 8 alone
    # holds 101 GB a GPU (too much) and TP 8 with 2 pipeline stages 50.7 GB: 16 GPUs, past max_gpus 8
    said = _infeasible_plan(tmp_path, "llama-3.1-405b", "tp: [1, 2], pp: [1], precisions: [bf16], max_gpus: 8")
    assert said.endswith("the weights fit none of the layouts searched; add search.tp [8] and search.pp "
                                    "[2] with search.max_gpus >= 16 (the smallest layouts that hold them), a "
                                    "precision with fewer bytes, or hardware with more memory")
    # a reason other than memory (TP 3 does not divide the heads) beside one keeps the general advice,
    # pipeline stages named
    assert _infeasible_plan(tmp_path, "llama-3.1-405b", "tp: [3, 8], pp: [1], precisions: [bf16], "
                                                        "max_gpus: 8").endswith("or pipeline stages (search.pp)")
