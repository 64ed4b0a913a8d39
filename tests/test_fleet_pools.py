"""Pools across regions and models: the round trip lands in TTFT, busy regions spill, a
request only reaches its model's replicas, and a region's GPU quota caps the autoscaler."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.errors import SpecError
from inferlab.fleet import fleet_of
from inferlab.fleet.pools import Regions

SYD, USE = "ap-southeast-2", "us-east-1"
QUIET = {"rate": 1.0, "isl": 500, "osl": 50, "region": SYD}


def test_remote_region_adds_the_round_trip_to_ttft():
    """Sydney users served in us-east-1 wait the 200 ms round trip (CloudPing median) on top
    of the same replica's TTFT: arrivals shift by the one-way time, so the engine's timeline
    shifts with them."""
    local = fleet_of([{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": SYD}], traffic=QUIET,
                     horizon_s=300.0)
    remote = fleet_of([{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": USE}], traffic=QUIET,
                      horizon_s=300.0)
    assert np.median(remote.ttft) - np.median(local.ttft) == pytest.approx(0.200, abs=1e-3)


def test_requests_stay_near_until_the_region_is_busy():
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": SYD, "replicas": 1},
             {"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": USE, "replicas": 4}]
    quiet = fleet_of(pools, traffic=QUIET, horizon_s=200.0)
    assert quiet.counts()["ok"] > 100 and np.all(quiet.replica[quiet.status == 0] == 0)  # the Sydney replica is the first
    busy = fleet_of(pools, traffic={**QUIET, "rate": 60.0, "isl": 2000, "osl": 300}, horizon_s=120.0)
    spilled = np.mean(busy.replica[busy.status == 0] > 0)
    assert 0.2 < spilled < 1.0


def test_models_sharing_a_region_reach_only_their_own_replicas_within_the_gpu_quota():
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "replicas": 1, "region": USE,
              "autoscaler": {"signal": "concurrency", "target": 4, "max_replicas": 10}},
             {"model": "qwen3-8b", "hardware": "h100-sxm", "replicas": 1, "region": USE,
              "autoscaler": {"signal": "concurrency", "target": 4, "max_replicas": 10}}]
    traffic = [{"rate": 30.0, "isl": 1000, "osl": 200, "region": USE, "model": "llama-3.1-8b"},
               {"rate": 5.0, "isl": 1000, "osl": 200, "region": USE, "model": "qwen3-8b"}]
    r = fleet_of(pools, traffic=traffic, horizon_s=600.0, regions={"quota_gpus": {USE: 4}})
    served = r.status == 0
    llama = (np.arange(len(r.status)) < _first_class_size(r))[served]  # the first class's requests come first
    pool = r.replica_pool[r.replica[served]]
    assert np.all(pool[llama] == 0) and np.all(pool[~llama] == 1) and llama.any() and (~llama).any()
    assert r.samples["running"].max() <= 4  # one GPU each, four in the region
    assert any(e[1] == "quota" for e in r.events)
    assert any("replica order(s) refused by a GPU quota" in n for n in r.notes)
    assert r.counts()["ok"] > 1000


def test_a_providers_quota_caps_its_pools_across_regions():
    """Two pools of one provider in two regions, each region's quota generous, the provider's
    3 GPUs: the autoscaler's orders past 3 replicas in total (one GPU each) are refused; a
    pool of another provider beside them is not held by that quota."""
    scaler = {"signal": "concurrency", "target": 2, "max_replicas": 10}
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": USE, "provider": "cloud-a",
              "autoscaler": scaler},
             {"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": SYD, "provider": "cloud-a",
              "autoscaler": scaler}]
    traffic = [{"rate": 20.0, "isl": 1000, "osl": 200, "region": USE},
               {"rate": 20.0, "isl": 1000, "osl": 200, "region": SYD}]
    capped = fleet_of(pools, traffic=traffic, horizon_s=300.0, seed=1,
                      regions={"quota_gpus": {USE: 8, SYD: 8}, "provider_quota_gpus": {"cloud-a": 3}})
    assert capped.samples["running"].max() <= 3 and any(e[1] == "quota" for e in capped.events)
    other = [pools[0], {**pools[1], "provider": "cloud-b"}]
    free = fleet_of(other, traffic=traffic, horizon_s=300.0, seed=1,
                    regions={"quota_gpus": {USE: 8, SYD: 8}, "provider_quota_gpus": {"cloud-a": 3}})
    assert free.samples["running"].max() > 3


def test_unknown_regions_key_is_one_line():
    with pytest.raises(SpecError, match="unknown key 'quota'.*provider_quota_gpus"):
        fleet_of([{"model": "llama-3.1-8b", "hardware": "h100-sxm"}], traffic=QUIET, horizon_s=10.0,
                 regions={"quota": {USE: 1}})


def test_unknown_round_trip_is_one_line():
    with pytest.raises(SpecError, match="no round-trip time between regions 'mars' and 'us-east-1'"):
        Regions().rtt("mars", USE)


def _first_class_size(r) -> int:
    """Requests of the first traffic class: they come first, until arrivals restart at 0."""
    return int(np.flatnonzero(np.diff(np.nan_to_num(r.arrival, nan=np.inf)) < -1.0)[0] + 1)


def test_traffic_for_a_model_no_pool_serves_is_refused_with_the_served_ones():
    """A typo in a traffic class's model would lose every one of its requests ('no replica'):
    it is one line naming the model, the closest served one and the pools' models."""
    pools = [{"model": "llama-3.1-8b", "hardware": "h100-sxm", "replicas": 1},
             {"model": "qwen3-8b", "hardware": "h100-sxm", "replicas": 1}]
    traffic = [{"rate": 2.0, "isl": 500, "osl": 50, "model": "llama-3.1-8"}]
    with pytest.raises(SpecError, match=r"'llama-3.1-8', which no pool serves \(did you mean 'llama-3.1-8b'\?\); "
                                        r"pools serve: llama-3.1-8b, qwen3-8b"):
        fleet_of(pools, traffic=traffic, horizon_s=10.0)


def test_replicas_a_quota_refuses_are_said():
    """A pool of one replica in a region whose GPU quota is 0 could never start it: refused up
    front (it ran none, every request lost, with a note); the orders an autoscaler makes beyond
    the quota in the run are counted in a note (above)."""
    with pytest.raises(SpecError, match="start 1 GPUs, over its quota of 0"):
        fleet_of([{"model": "llama-3.1-8b", "hardware": "h100-sxm", "region": USE, "replicas": 1}],
                 traffic=QUIET, horizon_s=30.0, regions={"quota_gpus": {USE: 0}})


def test_an_unknown_scheduler_limit_is_named_with_the_ones_there_are(tmp_path, capsys):
    """A pool's ``limits`` and fleet()'s keyword limits went to the scheduler dataclass as they
    were: a misspelt one was a TypeError, from the CLI a traceback."""
    import inferlab
    from inferlab.cli.main import main

    with pytest.raises(SpecError, match=r"unknown argument 'max_num_seq' \(did you mean 'max_num_seqs'\?\); .* "
                                        "and the engine limits max_num_seqs, max_num_batched_tokens"):
        inferlab.fleet("llama-3.1-8b", "h100-sxm", horizon_s=60.0, traffic=QUIET, max_num_seq=4)
    path = tmp_path / "fleet.yaml"
    path.write_text("name: x\nfleet:\n  hours: 0.01\n  pools: [{model: llama-3.1-8b, hardware: h100-sxm, "
                    "limits: {bogus: 1}}]\n  traffic: [{rate: 1, isl: 100, osl: 10}]\n")
    assert main(["fleet", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown limit 'bogus'" in err


def test_a_pool_sizes_what_a_request_holds_from_the_requests_it_takes():
    """Gemma 3's sliding layers hold min(1,024, context) tokens of a request: a 100,000-token
    request past a 4,096-token max_model_len is refused and holds nothing, so it must not lift the
    mean context (400 tokens) that sizes them; taken (a longer max_model_len), it does."""
    from inferlab.fleet.replicas import replica_kind
    from inferlab.fleet.startup import Startup

    short = (np.array([300.0, 300.0, 300.0]), np.array([100.0, 100.0, 100.0]))
    mixed = (np.array([300.0, 300.0, 300.0, 100_000.0]), np.array([100.0, 100.0, 100.0, 100.0]))

    def held(lengths, max_model_len):
        kind, _ = replica_kind("", "gemma-3-27b", "h100-sxm", startup=Startup(), lengths=lengths,
                               limits={"max_model_len": max_model_len})
        return kind.state_tokens

    assert held(mixed, 4096) == held(short, 4096)
    assert held(mixed, 131_072) > 2 * held(short, 4096)
