"""How a benchmark tool scheduled its requests, read as the case's regime and load.

The layouts are the tools' own, cited per test: AIPerf's ``input_config`` is its configuration
as it ran (``aiperf/common/config/loadgen_config.py`` and ``user_config.py`` for the flag-based
``loadgen`` section; ``aiperf/config/phases.py`` for the newer ``phases`` list, whose rate
phases hold ``rate``, not ``request_rate``), written with ``exclude_unset`` (a default the user
did not set is absent); GuideLLM's strategies are ``guidellm/scheduler/strategies.py``. Each
test rewrites one shipped fixture (tests/data/bench/) with that layout."""

from __future__ import annotations

import json

import pytest

from inferlab.errors import SpecError
from inferlab.validation.bench import read_bench

from conftest import DATA

BENCH = DATA / "bench"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _aiperf(tmp_path, config, name="aiperf.json"):
    """The AIPerf fixture (request_count 240 measured) with ``config`` as its input_config."""
    data = json.loads((BENCH / "aiperf-profile-export.json").read_text())
    data["input_config"] = config
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _phases(*phases):
    """AIPerf's newer configuration: a warm-up phase, then the measured ones."""
    warmup = {"name": "warmup", "kind": "warmup", "type": "concurrency", "concurrency": 2, "requests": 10,
              "exclude_from_results": True}
    return {"models": {"items": [{"name": MODEL}]}, "phases": [warmup, *phases]}


def test_aiperf_rate_phases_are_online_runs_capped_by_their_concurrency(tmp_path):
    """phases.py: a poisson/gamma/constant phase's rate is ``rate`` and its ``concurrency`` a cap.
    Read as ``request_rate`` the rate was lost: a capped run became a closed loop of 8 and an
    uncapped one was refused as recording no load."""
    capped = _phases({"name": "profiling", "type": "poisson", "rate": 3.0, "concurrency": 8, "requests": 240})
    (run,) = read_bench(_aiperf(tmp_path, capped))
    assert run.regime_and_load() == ("online", {"request_rate": 3.0, "num_requests": 240, "max_concurrency": 8})
    assert not run.notes  # Poisson arrivals are the simulation's own

    uncapped = _phases({"name": "profiling", "type": "poisson", "rate": 3.0, "requests": 240})
    (run,) = read_bench(_aiperf(tmp_path, uncapped, "uncapped.json"))
    assert run.regime_and_load() == ("online", {"request_rate": 3.0, "num_requests": 240})


def test_aiperf_concurrency_phase_without_its_default_is_one_client(tmp_path):
    """phases.py: ConcurrencyPhase.concurrency defaults to 1, so an export written with
    exclude_unset lacks it; it had been refused as recording no load."""
    (run,) = read_bench(_aiperf(tmp_path, _phases({"name": "profiling", "type": "concurrency", "requests": 240})))
    assert run.regime_and_load() == ("closed_loop", {"concurrency": 1, "num_requests": 240})


def test_aiperf_constant_and_gamma_arrivals_are_noted_as_simulated_poisson(tmp_path):
    """Constant arrivals are 1/rate apart, gamma's shape is --arrival-smoothness (1 is Poisson);
    the online simulation draws Poisson arrivals, so the run says so."""
    constant = _phases({"name": "profiling", "type": "constant", "rate": 3.0, "requests": 240})
    (run,) = read_bench(_aiperf(tmp_path, constant))
    assert run.request_rate == 3.0 and any("constant arrivals" in n and "Poisson" in n for n in run.notes)

    flagged = {"endpoint": {"model_names": [MODEL]},
               "loadgen": {"request_rate": 3.0, "arrival_pattern": "gamma", "arrival_smoothness": 4.0}}
    (run,) = read_bench(_aiperf(tmp_path, flagged, "gamma.json"))
    assert any("gamma (smoothness 4.0) arrivals" in n for n in run.notes)

    older = {"endpoint": {"model_names": [MODEL]}, "loadgen": {"request_rate": 3.0, "request_rate_mode": "constant"}}
    (run,) = read_bench(_aiperf(tmp_path, older, "older.json"))
    assert any("constant arrivals" in n for n in run.notes)
    assert not read_bench(BENCH / "aiperf-profile-export.json")[0].notes  # request_rate_mode poisson


@pytest.mark.parametrize("config, says", [
    # user_config.py: --fixed-schedule replays the trace's timestamps, --concurrency only caps it
    ({"input": {"fixed_schedule": True, "file": "trace.jsonl"}, "loadgen": {"concurrency": 8}},
     "trace's timestamps"),
    # --user-centric-rate spaces each of --num-users users' turns; --concurrency a cap
    ({"loadgen": {"user_centric_rate": 1.0, "num_users": 15, "concurrency": 16}}, "each user's turns"),
    # the same schedules as phases (phases.py: FixedSchedulePhase, UserCentricPhase)
    (_phases({"name": "profiling", "type": "fixed_schedule", "concurrency": 8}), "trace's timestamps"),
    (_phases({"name": "profiling", "type": "user_centric", "rate": 1.0, "users": 15, "concurrency": 16}),
     "each user's turns"),
])
def test_aiperf_trace_replay_and_user_centric_runs_are_refused(tmp_path, config, says):
    """They had been read as a closed loop of their concurrency cap."""
    with pytest.raises(SpecError, match=f"{says}.*not predicted"):
        read_bench(_aiperf(tmp_path, config))


def test_guidellm_constant_rate_is_noted_as_simulated_poisson():
    """strategies.py: AsyncConstantStrategy spaces requests 1/rate apart (the fixture's second
    benchmark, constant at 2/s); AsyncPoissonStrategy's are the simulation's own."""
    concurrent, constant = read_bench(BENCH / "guidellm-report.json")
    assert constant.request_rate == 2.0 and any("constant arrivals" in n and "Poisson" in n for n in constant.notes)
    assert not any("arrivals" in n for n in concurrent.notes)
