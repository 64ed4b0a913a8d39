"""Dask: sweeps, plans and validation on a LocalCluster of 2 worker processes give exactly
the results of the serial run (one cluster for the module, started once)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import inferlab
from inferlab.cli.main import main
from inferlab.cluster import dask_client, map_units
from inferlab.errors import InferlabError, SpecError
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.validation.cases import load_case_entries
from inferlab.validation.predict import predict_cases
from inferlab.validation.units import case_units, predict_cases_on

pytest.importorskip("distributed")

CASE_FILES = ["tests/data/cases-sample.yaml", "tests/data/cases-serving-sample.yaml"]


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as c:
        yield c


def _same_table(a, b) -> None:
    assert list(a.columns) == list(b.columns)
    for name in a.columns:
        x, y = a[name], b[name]
        assert x.dtype == y.dtype, name
        if x.dtype.kind == "f":
            assert np.array_equal(x, y, equal_nan=True), name
        else:
            assert list(x) == list(y), name


def test_units_come_back_in_order(client):
    assert map_units(math.factorial, [5, 0, 3], client) == [120, 1, 6]


def test_a_sweep_on_the_cluster_equals_the_serial_sweep(client):
    # 2 models x 2 GPUs x 2 precisions x tp 1 and 3 (3 does not divide the heads: rows with a
    # reason) over 6 x 3 x 2 = 36 rows in chunks of 5: units of whole chunks, joined in order.
    kw = dict(tp=[1, 3], precision=["bf16", "fp8"], batch_size=[1, 2, 8, 64, 256, 1024], isl=[128, 2048, 8192],
              osl=[16, 512], engine="vllm", chunk_size=5)
    serial = inferlab.sweep(["llama-3.1-8b", "qwen3-30b-a3b"], ["h100-sxm", "l40s"], **kw)
    spread = inferlab.sweep(["llama-3.1-8b", "qwen3-30b-a3b"], ["h100-sxm", "l40s"], client=client, **kw)
    assert len(serial) == 2 * 2 * 2 * 2 * 36
    assert not serial["feasible"].all() and serial["feasible"].any()
    _same_table(serial, spread)


def test_a_plan_on_the_cluster_equals_the_serial_plan(client):
    scenario = load_scenario("examples/scenarios/chat.yaml").model_copy(update={"verify": 1})
    serial, spread = plan(scenario), plan(scenario, client)
    assert str(serial) == str(spread)
    assert json.dumps(serial.to_dict(), default=str) == json.dumps(spread.to_dict(), default=str)


def test_validation_on_the_cluster_equals_the_serial_validation(client):
    cases = load_case_entries(CASE_FILES)
    serial = predict_cases(cases)
    assert sum(p is not None for p, _ in serial) >= 15
    assert predict_cases_on(cases, client=client) == serial


def test_an_infinite_rate_row_is_predicted_on_the_cluster_as_here(client):
    # the infinite-rate TTFT row takes its sweep's count only where the whole set states one: a
    # finite-rate row of 1,000 requests beside the 500 leaves it unpredicted, also when that row
    # is itself unpredicted (its unit apart, with the 500 alone); an invalid online row keeps its reason
    from inferlab.validation.cases import InvalidCase

    cases = [c for c in load_case_entries(CASE_FILES[1:]) if getattr(c, "regime", "") == "online"]
    inf = next(c for c in cases if c.load.get("offline") and c.metric == "ttft_ms")
    rate = next(c for c in cases if "request_rate" in c.load)
    other = rate.model_copy(update={"load": {"request_rate": 8.0, "num_requests": 1000}, "id": "qps8",
                                    "prefix_cache": {"hit_rate": 2.0}})
    bad = InvalidCase(id="bad", reason="no model", regime="online")
    mixed = [inf, rate, other, bad]
    serial = predict_cases(mixed)
    assert serial[0][0] is None and serial[3] == (None, "invalid case: no model")
    assert predict_cases_on(mixed, client=client) == serial
    assert predict_cases_on([inf, rate], client=client) == predict_cases([inf, rate])


def test_case_units_keep_each_grid_and_simulation_whole():
    cases = load_case_entries(CASE_FILES)
    units = case_units(cases)
    assert sorted(i for unit in units for i in unit) == list(range(len(cases)))
    assert 1 < len(units) < len(cases)  # some cases share a grid or a simulation


def test_cli_validate_with_workers_prints_what_the_serial_run_prints(capsys):
    assert main(["validate", *CASE_FILES, "--json"]) == 0
    serial = capsys.readouterr().out
    assert main(["validate", *CASE_FILES, "--json", "--workers", "2"]) == 0
    assert capsys.readouterr().out == serial


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0"], "--workers must be a whole number of processes, at least 1, got 0"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "give --workers (a local cluster) or --scheduler"),
    # a thousand local processes had hung the machine and leaked semaphores
    (["--workers", "100000"], "--workers 100000 is more processes than this machine runs usefully"),
])
def test_cli_cluster_flags_refuse_bad_input(capsys, argv, message):
    assert main(["validate", CASE_FILES[0], *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_client_that_is_not_one_is_refused():
    with pytest.raises(SpecError, match="client must be a dask.distributed.Client"):
        inferlab.sweep("llama-3.1-8b", "h100-sxm", client="tcp://127.0.0.1:8786")


def test_an_unreachable_scheduler_is_one_clear_error(monkeypatch):
    monkeypatch.setattr("inferlab.cluster.CONNECT_TIMEOUT", "1s")
    with pytest.raises(InferlabError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        with dask_client(scheduler="tcp://127.0.0.1:1"):
            pass


@pytest.mark.parametrize("address", ["localhost", ""])
def test_an_address_without_a_port_is_one_clear_error(capsys, address):
    pytest.importorskip("dask.distributed")
    with pytest.raises(SpecError, match=f"--scheduler '{address}' is not a scheduler address .*give host:port"):
        with dask_client(scheduler=address):
            pass
    assert main(["validate", "--scheduler", address]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give host:port" in err
