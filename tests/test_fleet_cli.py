"""``inferlab fleet``: the example day runs (shortened), bad files are one line, traces load,
and the reading of a run names what lost prefix hits and what dominates a cold start."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import inferlab
from inferlab.cli.main import main
from inferlab.errors import SpecError
from inferlab.fleet import fleet_of
from inferlab.fleet.traffic import read_trace

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "fleet-day.yaml"


def _refused_in_one_line(tmp_path, capsys, fleet: str, message: str) -> None:
    """A one-replica scenario with the ``fleet:`` section given: exit 2, ``message`` on stderr."""
    path = tmp_path / "f.yaml"
    path.write_text(f"model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {fleet}\n")
    assert main(["fleet", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_example_day_runs_shortened(capsys):
    assert main(["fleet", str(EXAMPLE), "--hours", "0.5", "--rate-scale", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "[small model]" in out and "escalated requests" in out and "cold start" in out


def test_example_day_json(capsys):
    assert main(["fleet", str(EXAMPLE), "--hours", "0.25", "--rate-scale", "0.05", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["small"]["requests"]["ok"] > 0 and data["share"] == 0.15
    # what the table says, JSON says too: the replica range, utilization, SLOs, the cold start note
    small = data["small"]
    assert 1 <= small["replicas_min"] <= small["replicas_max"] and 0 <= small["mean_utilization"] <= 1
    assert small["ttft_slo_s"] == 1.0 and small["need"] >= 1 and small["reachable_hit_rate"] >= small["hit_rate"]
    assert any(n.startswith("cold start") for n in small["notes"]) and data["escalated_p99_ttft_s"] > 0


def test_bad_scenario_is_one_line_with_a_suggestion(tmp_path, capsys):
    bad = tmp_path / "f.yaml"
    bad.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {replicas: 2, routr: random}\n")
    assert main(["fleet", str(bad)]) != 0
    err = capsys.readouterr().err.strip()
    assert "did you mean 'router'" in err and "\n" not in err
    assert main(["fleet", str(EXAMPLE), "--hours", "-1"]) != 0
    assert "--hours" in capsys.readouterr().err
    # the same year as the file's fleet.hours: 366 days (a leap year) of 24 h
    assert main(["fleet", str(EXAMPLE), "--hours", "9000"]) != 0
    assert "--hours must be in (0, 8784], got 9000.0" in capsys.readouterr().err


def test_trace_file_with_sessions(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,isl,osl,session\n0.0,100,20,a\n1.0,50,10,b\n5.0,300,20,a\n")
    req = read_trace(path)
    # the second turn of session a starts with the first turn's prompt and answer: 100 + 20
    assert req.prefix.tolist() == [0.0, 0.0, 120.0]
    assert req.stream[0] == req.stream[2] != req.stream[1]
    with pytest.raises(SpecError, match="arrival_s, isl, osl"):
        bad = tmp_path / "b.csv"
        bad.write_text("time,isl\n0,1\n")
        read_trace(bad)


@pytest.mark.parametrize("text, message", [
    ("arrival_s,isl,osl\n0,nan,10\n", "line 2, column isl: 'nan' is not a finite number"),
    ("arrival_s,isl,osl\n0,100,10\n1,100\n", "line 3, column osl: missing (a short row)"),
    ("arrival_s,isl,osl,prefix_id,prefix_tokens\n5,100,10,a,50\n0,100,10,a,abc\n",
     "line 3, column prefix_tokens: 'abc'"),
    # a count of tokens that is no count: a fraction of a token, and a negative shared prefix (whose
    # reachable hit rate had come out -1.0); the line is the file's, before the rows are sorted
    ("arrival_s,isl,osl\n0,100,10\n1,100.5,10\n", "line 3, column isl: a token count is a whole number >= 1, got 100.5"),
    ("arrival_s,isl,osl\n0,100,0\n", "line 2, column osl: a token count is a whole number >= 1, got 0"),
    ("arrival_s,isl,osl,prefix_id,prefix_tokens\n5,100,10,a,50\n0,100,10,a,-100\n",
     "line 3, column prefix_tokens: a token count is a whole number >= 0, got -100"),
    ("arrival_s,isl,osl\n0,100,10\n-1,100,10\n", "line 3, column arrival_s: a time >= 0 [s], got -1"),
    (b"arrival_s,isl,osl\n0,100,10\n\xff,1,1\n", "not UTF-8 text (byte 27)"),
])
def test_a_bad_trace_cell_is_one_line_naming_its_line_and_column(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    with pytest.raises(SpecError) as err:
        read_trace(path)
    assert message in str(err.value)


def test_fleet_hours_and_slos_that_are_not_numbers_are_one_line(tmp_path, capsys):
    for field, value, message in (("hours", "abc", "fleet.hours must be a number [h], got 'abc'"),
                                  ("slo", "{ttft_ms: soon}", "fleet.slo.ttft_ms must be a number [ms]")):
        path = tmp_path / "f.yaml"
        path.write_text(f"model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {{replicas: 1, {field}: {value}}}\n")
        assert main(["fleet", str(path)]) != 0
        assert message in capsys.readouterr().err


def test_explain_names_the_lost_prefix_hits_and_the_cold_start():
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=8, router="random", horizon_s=600.0,
                       traffic={"rate": 2.0, "isl": 400, "osl": 60, "prefix": "sessions:turns=2,think=1"})
    text = r.explain()
    # half the prompt tokens are reusable (turn two's history); random routing over 8 keeps ~1/8
    assert "lose 8" in text or "lose 9" in text
    assert "scale-up" not in text  # no autoscaler and no failures: no replica is ever started, no cold start to read
    assert np.isfinite(r.usd) and r.usd > 0
    scaled = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=1, horizon_s=600.0, traffic={"rate": 2.0, "isl": 400,
                            "osl": 60}, autoscaler={"signal": "queue", "min_replicas": 2, "max_replicas": 4})
    assert "image pull dominates scale-up" in scaled.explain()
    assert "fleet starts 1 replica, below the autoscaler's min_replicas 2" in scaled.explain()
    above = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=5, horizon_s=60.0, traffic={"rate": 2.0, "isl": 400,
                           "osl": 60}, autoscaler={"signal": "queue", "min_replicas": 2, "max_replicas": 4})
    assert "fleet starts 5 replicas, above the autoscaler's max_replicas 4: it scales down to 4" in above.explain()


def test_plot_has_four_panels(tmp_path):
    pytest.importorskip("matplotlib")
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=2, horizon_s=300.0,
                       traffic={"shape": "burst", "rate": 2.0, "peak_rate": 20.0, "start_s": 100.0, "end_s": 200.0,
                                "isl": 500, "osl": 100},
                       autoscaler={"signal": "queue", "target": 2.0, "max_replicas": 4})
    fig = r.plot(str(tmp_path / "f.png"))
    assert len(fig.axes) == 5  # four panels and the arrival-rate axis over the first
    assert (tmp_path / "f.png").stat().st_size > 1000
    ticks = fig.axes[0].get_yticks()
    assert len(ticks) >= 2 and all(t == round(t) for t in ticks)  # whole replicas (2 to 4: no 2.5 tick)


def test_regions_example_runs_shortened(capsys):
    path = EXAMPLE.parent / "fleet-regions.yaml"
    assert main(["fleet", str(path), "--hours", "0.2", "--rate-scale", "0.2"]) == 0
    assert "fleet two regions" in capsys.readouterr().out


def test_pools_and_a_top_level_model_are_refused(tmp_path, capsys):
    bad = tmp_path / "p.yaml"
    bad.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {pools: [{model: llama-3.1-8b, "
                   "hardware: h100-sxm}], traffic: {rate: 1}}\n")
    assert main(["fleet", str(bad)]) != 0
    assert "in each pool" in capsys.readouterr().err


PLAN_WITH_FLEET = """name: chat assistant
models: [llama-3.1-8b]
hardware: [h100-sxm, h200-sxm]
engine: vllm
traffic: {rate: 4, isl: {kind: lognormal, mean: 1500, sigma: 0.6}, osl: 300}
slo: {ttft_ms: 1500, tpot_ms: 50}
prices: {h100-sxm: 2.95}
fleet: {replicas: 2, router: least_kv, hours: 0.05}
"""


def test_a_planning_scenario_with_a_fleet_section_runs_both_ways(tmp_path, capsys):
    from inferlab.planning.scenario import load_scenario

    path = tmp_path / "chat.yaml"
    path.write_text(PLAN_WITH_FLEET)
    assert load_scenario(path).fleet["replicas"] == 2  # the planner accepts and ignores it
    assert main(["fleet", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # two replicas at the scenario's price for the 0.05 h and the seconds its last requests take to end
    assert 2 * 2.95 * 0.05 <= data["usd"] <= 2 * 2.95 * (0.05 + 10 / 3600)
    path.write_text(PLAN_WITH_FLEET.replace("fleet: {replicas: 2, router: least_kv, hours: 0.05}\n", ""))
    assert main(["fleet", str(path)]) != 0
    assert "without a fleet: section" in capsys.readouterr().err


def test_a_cascade_plots_both_fleets(tmp_path):
    """The cascade's plot has a line per fleet in every panel and their spend added up."""
    pytest.importorskip("matplotlib")
    from inferlab.fleet.cascade import run_scenario

    r = run_scenario({"model": "llama-3.1-8b", "hardware": "h100-sxm", "replicas": 1, "horizon_s": 300.0,
                      "traffic": {"rate": 2.0, "isl": 500, "osl": 100},
                      "cascade": {"model": "qwen3-8b", "share": 0.3, "replicas": 1}})
    fig = r.plot(str(tmp_path / "c.png"))
    replicas, queue, p99, spend = fig.axes[:4]
    labels = [line.get_label() for line in replicas.get_lines()]
    assert "small model: serving" in labels and "large model: serving" in labels
    assert {"small model", "large model"} <= {line.get_label() for line in queue.get_lines()}
    page = r._repr_html_()  # in a notebook: both fleets' headlines and the reading (it had been the dataclass repr)
    assert page.startswith("<pre><b>fleet ") and page.count("fleet ") >= 2 and "escalat" in page
    total = next(line for line in spend.get_lines() if line.get_label() == "total")
    parts = [line for line in spend.get_lines() if line.get_label() in ("small model", "large model")]
    # one on-demand H100 each all along: the total is the two fleets' spend together
    assert total.get_ydata()[-1] == pytest.approx(sum(p.get_ydata()[-1] for p in parts))
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_a_planning_scenario_runs_the_plans_choice_where_its_fleet_section_leaves_one(tmp_path):
    """The fleet runs what `inferlab plan` picks (it had run the search's first TP size and format,
    whatever the plan chose): the cheapest configuration and, unless named, its replica count."""
    from inferlab import plan
    from inferlab.fleet.scenario import load_fleet_scenario

    path = tmp_path / "plan.yaml"
    head = ("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 5, isl: 1024, osl: 128}\n"
            "slo: {ttft_ms: 2000, tpot_ms: 60}\nsearch: {precisions: [bf16, fp8], tp: [4, 1], max_num_seqs: 4}\n")
    path.write_text(head + "fleet: {hours: 0.1}\n")
    kwargs = load_fleet_scenario(path)
    best = plan(path).best
    dep = kwargs["model"]
    assert (dep.layout.tp, dep.precision.weights, kwargs["replicas"]) == (best.tp, best.precision, best.replicas)
    assert best.tp == 1  # one GPU per replica is the cheap way to serve 5 req/s of an 8B model, not tp4 first
    assert dep.engine.limits()["max_num_seqs"] == 4 and "from the plan's cheapest" in kwargs["notes"][0]
    path.write_text(head + "fleet: {replicas: 3, hours: 0.1, tp: 4}\n")
    kwargs = load_fleet_scenario(path)  # named: the plan chooses within them
    assert (kwargs["model"].layout.tp, kwargs["replicas"]) == (4, 3)
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 5, isl: 1024, osl: 128}\n"
                    "fleet: {replicas: 2, hours: 0.1, tp: 8, precision: bf16}\n")
    kwargs = load_fleet_scenario(path)  # all named: run as written, no search
    assert (kwargs["tp"], kwargs["precision"]) == (8, "bf16") and "max_num_seqs" not in kwargs and "notes" not in kwargs


def test_a_scenario_commands_long_context_message_names_the_scenario_key(tmp_path, capsys):
    path = tmp_path / "f.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {replicas: 1, hours: 0.01, "
                    "traffic: {rate: 1, isl: 200000, osl: 10}}\n")
    assert main(["fleet", str(path)]) != 0
    assert "pass allow_long_context: true (a key of the scenario file)" in capsys.readouterr().err


def test_a_planned_fleet_runs_what_a_fleet_replica_can_and_keeps_long_context(tmp_path):
    """The search's pipeline stages and drafters are left out of a fleet's plan (fleet() runs one
    tensor-parallel group, and had refused a plan it was never told to run), and the section's
    allow_long_context reaches the plan."""
    from inferlab.fleet.scenario import load_fleet_scenario

    path = tmp_path / "pp.yaml"
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nengine: vllm\ntraffic: {rate: 4, isl: 1000, "
                    "osl: 200}\nslo: {ttft_ms: 2000, tpot_ms: 50, percentile: 90}\nsearch: {precisions: [fp8], tp: [1], "
                    "pp: [2], speculative: [null, eagle3-llama-3.1-8b]}\nverify: 1\nfleet: {hours: 0.05}\n")
    dep = load_fleet_scenario(path)["model"]
    assert dep.layout.pp == 1 and dep.speculative is None
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\nengine: vllm\ntraffic: {rate: 0.1, isl: 130000, "
                    "osl: 2000}\nsearch: {precisions: [fp8], tp: [1, 2]}\nverify: 1\n"
                    "fleet: {hours: 0.05, allow_long_context: true}\n")
    assert load_fleet_scenario(path)["model"].allow_long_context is True


@pytest.mark.parametrize("fleet, message", [
    ("{trace: null}", "fleet.trace: a CSV file's path (arrival_s,isl,osl), got None"),
    ("{trace: [a.csv]}", "fleet.trace: a CSV file's path"),
    ("{trace: a.csv, traffic: {rate: 1}}", "fleet.trace and fleet.traffic both give the requests; keep one"),
])
def test_a_fleet_trace_that_is_not_one_path_is_one_line(tmp_path, capsys, fleet, message):
    """A trace of null or a list had been a TypeError traceback; beside traffic it had been ignored."""
    _refused_in_one_line(tmp_path, capsys, fleet, message)


@pytest.mark.parametrize("extra, message", [
    ("tp: 1.5", "f.yaml, fleet: tp must be an integer"), ("precision: fp7", "unknown precision 'fp7'"),
    ("precision: 8", "f.yaml, fleet: precision: one format, got 8"),
    ("hardware: [h100-sxm]", "f.yaml, fleet: hardware: one catalog id, got ['h100-sxm']"),
])
def test_a_planning_fleet_sections_bad_choice_is_one_line(tmp_path, capsys, extra, message):
    """These had been a pydantic ValidationError traceback (tp, precision) or named keys the user
    never wrote ('models.0')."""
    path = tmp_path / "f.yaml"
    path.write_text(PLAN_WITH_FLEET.replace("hours: 0.05}", f"hours: 0.05, {extra}}}"))
    assert main(["fleet", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_pools_of_two_models_need_each_class_to_name_its_model():
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm"}, {"model": "llama-3.1-8b", "hardware": "h100-sxm"}]
    # two pools of one model: a class asking for another is still refused (the check had been skipped)
    with pytest.raises(SpecError, match="asks for model 'llama-3.1-70b', which no pool serves"):
        fleet_of(pools, traffic=[{"rate": 1, "model": "llama-3.1-8b"}, {"rate": 1, "model": "llama-3.1-70b"}],
                          horizon_s=60)
    two = [pools[0], {"model": "qwen3-32b", "hardware": "h100-sxm"}]
    with pytest.raises(SpecError, match="a class names no model, and the pools serve llama-3.1-8b, qwen3-32b"):
        fleet_of(two, traffic={"rate": 1}, horizon_s=60)
    r = fleet_of(two, traffic={"rate": 1, "model": "llama-3.1-8b", "isl": 200, "osl": 20}, horizon_s=60)
    assert any("no traffic class names qwen3-32b" in n for n in r.notes)
    # a pool whose layout does not fit says which pool it is (still infeasible: exit 1 from the CLI)
    from inferlab.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match=r"^pool 1: llama-3.1-70b does not fit on l4 as tp1"):
        fleet_of([pools[0], {"model": "llama-3.1-70b", "hardware": "l4"}], traffic={"rate": 1, "model": "llama-3.1-8b"},
                 horizon_s=60)


def test_a_quota_of_a_region_no_pool_is_in_is_refused():
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": "us-east-1"}]
    with pytest.raises(SpecError, match=r"regions.quota_gpus: no pool is in region 'us-east1' \(did you mean 'us-east-1'\?\)"):
        fleet_of(pools, traffic={"rate": 1}, horizon_s=60, regions={"quota_gpus": {"us-east1": 2}})


def test_a_shared_prefix_longer_than_every_prompt_is_refused_as_serve_refuses_it():
    with pytest.raises(SpecError, match="the shared prefix of 1,000 tokens is longer than every prompt"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=60,
                       traffic={"rate": 2, "isl": 500, "osl": 100, "prefix": "shared:tokens=1000"})


def test_a_trace_longer_than_the_horizon_says_what_it_left_out(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,isl,osl\n" + "".join(f"{t},500,50\n" for t in range(0, 7200, 72)))  # 100 over 2 h
    r = inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=3600, trace=path)
    assert r.counts()["ok"] == 50
    assert any(n.startswith("50 of the trace's requests arrive after the 1 h horizon") for n in r.notes)


def test_a_run_of_too_many_control_ticks_is_refused_up_front():
    """A year at a 1 s autoscaler period (with a sample each second too) is 2 x 31,536,000 ticks:
    minutes of loop whatever the traffic; refused before it starts, saying why."""
    with pytest.raises(SpecError, match=r"8,760 h with autoscaler period_s 1 s is 63,072,000 control ticks"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=8760 * 3600, autoscaler={"period_s": 1, "max_replicas": 2},
                       traffic={"rate": 0.01, "isl": 500, "osl": 100})


@pytest.mark.parametrize("fleet, message", [
    ("{hours: 1e6, traffic: {rate: 1}}", "fleet.hours must be a finite number in (0, 8784] [h]"),
    ("{slo: x, traffic: {rate: 1}}", "fleet.slo must be a mapping of ttft_ms and tpot_ms, got 'x'"),
    ("{admission: {queue_limit: 0}, traffic: {rate: 1}}", "admission.queue_limit must be between 1 and"),
])
def test_fleet_values_that_meant_nothing_are_one_line(tmp_path, capsys, fleet, message):
    """hours had been named horizon_s in seconds; a string slo's characters read as its keys; a
    queue limit of 0 rejected every request of an idle fleet."""
    _refused_in_one_line(tmp_path, capsys, fleet, message)


@pytest.mark.parametrize("fleet, message", [
    ("{replicas: 1.5, traffic: {rate: 1}}", "inferlab: error: f.yaml: fleet: replicas must be an integer, got 1.5"),
    ("{traffic: [{rate: 1}, {rate: 1, osl: 0}]}", "f.yaml: traffic class 1: osl: value must be between 1 and"),
])
def test_a_fleet_files_errors_name_the_file_and_the_class(tmp_path, capsys, fleet, message):
    _refused_in_one_line(tmp_path, capsys, fleet, message)


def test_a_trace_from_a_spreadsheet_reads_and_a_folder_says_so(tmp_path):
    """A byte-order mark and spaces after the commas had refused the header ('\\ufeffarrival_s')."""
    path = tmp_path / "t.csv"
    path.write_bytes(b"\xef\xbb\xbfarrival_s, isl, osl\n0, 100, 10\n1.5, 200, 20\n")
    r = read_trace(path)
    assert r.arrival.tolist() == [0.0, 1.5] and r.isl.tolist() == [100.0, 200.0] and r.osl.tolist() == [10.0, 20.0]
    with pytest.raises(SpecError, match="is a folder"):
        read_trace(tmp_path)
    with pytest.raises(SpecError, match=r"pool 0: unknown key 'modle' \(did you mean 'model'\?\)"):
        fleet_of([{"model": "llama-3.1-8b", "hardware": "h100-sxm", "modle": 1}], traffic={"rate": 1}, horizon_s=60)


def test_rate_scale_takes_a_class_of_rate_0_as_the_file_does(tmp_path, capsys):
    """0 req/s x 2 is 0; --rate-scale had refused the class the file itself accepts."""
    path = tmp_path / "f.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {hours: 0.01, traffic: [{rate: 0, isl: 100, "
                    "osl: 10}, {rate: 1, isl: 100, osl: 10}]}\n")
    assert main(["fleet", str(path), "--rate-scale", "2"]) == 0
    assert "served" in capsys.readouterr().out
    # a file with neither traffic nor a trace: the flag is not the reason, the missing traffic is
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nfleet: {hours: 0.01}\n")
    assert main(["fleet", str(path), "--rate-scale", "2"]) == 2
    assert "give traffic" in capsys.readouterr().err


def test_a_planning_scenarios_prefix_hit_rate_reaches_its_fleet(tmp_path):
    """A planning scenario states its prefix reuse as a hit rate (traffic.prefix_hit); the plan runs it
    as one prefix of hit x ISL tokens every prompt shares, and its fleet must run the same traffic
    (it had dropped it: no prefix hits, every prompt prefilled whole)."""
    from inferlab.fleet.scenario import load_fleet_scenario

    path = tmp_path / "plan.yaml"
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\n"
                    "traffic: {rate: 2, isl: 4000, osl: 100, prefix_hit: 0.25}\n"
                    "fleet: {replicas: 1, hours: 0.05, tp: 1, precision: bf16}\n")
    prefix = load_fleet_scenario(path)["traffic"]["prefix"]
    assert (prefix.kind, prefix.tokens, prefix.groups) == ("shared", 1000, 1)  # 0.25 x 4,000 tokens


def test_notes_a_fleet_keeps_and_the_kind_of_error_a_planned_one_raises(tmp_path, capsys):
    # spot reclaims start replicas without an autoscaler: the cold start is theirs to read
    spot = inferlab.fleet("llama-3.1-8b", "h100-sxm", replicas=2, horizon_s=7200.0, traffic={"rate": 1.0, "isl": 200,
                          "osl": 20}, pricing={"spot_share": 1.0, "spot_reclaims_per_h": 2.0, "spot_usd_per_hour": 1.2})
    assert any(n.startswith("cold start") for n in spot.notes)
    # a start count above max beside requests crossing regions: both notes (the second had replaced the first)
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": "us-east-1", "replicas": 3,
              "autoscaler": {"signal": "queue", "min_replicas": 1, "max_replicas": 2}},
             {"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": "eu-west-1", "replicas": 1}]
    both = fleet_of(pools, traffic={"rate": 2.0, "isl": 200, "osl": 20, "region": "ap-southeast-2"},
                    horizon_s=120.0, router="least_outstanding")
    assert any("pool 0 starts 3 replicas" in n for n in both.notes) and any("crossed regions" in n for n in both.notes)
    # a planning scenario whose own values rule every configuration out: exit 2 from fleet as from plan
    path = tmp_path / "plan.yaml"
    path.write_text("models: [llama-3.1-8b]\nhardware: [h100-sxm]\ntraffic: {rate: 2, isl: 512, osl: 64}\n"
                    "search: {tp: [3]}\nfleet: {hours: 0.01}\n")
    assert main(["fleet", str(path)]) == 2 and "can be weighed" in capsys.readouterr().err
