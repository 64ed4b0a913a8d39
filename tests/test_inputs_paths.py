"""Deployment and Workload through every entry point: the typed call gives the keyword call's numbers.

The grid is the golden grid of ``scripts/golden.py`` (the refactor check), each point
computed both ways and compared with ``==`` on every figure of ``to_dict()``.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab import Deployment, InferlabError, SpecError, Workload, estimate, serve
from inferlab.inputs.convert import from_kwargs
from inferlab.validation.case_inputs import case_deployment, case_workload
from inferlab.validation.cases import load_cases
from inferlab.validation.support import unsupported_reason
from inferlab.validation.predict import metric_value, predict_case


def _golden():
    path = Path(__file__).resolve().parents[1] / "scripts" / "golden.py"
    spec = importlib.util.spec_from_file_location("golden", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GOLDEN = _golden()


def _without_inputs(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("deployment", "workload")}


@pytest.mark.parametrize("model, hardware, kw", GOLDEN.ESTIMATES, ids=lambda x: str(x)[:30])
def test_golden_estimates_through_deployment(model, hardware, kw):
    args = dict(model=model, hardware=hardware, isl=[128, 2048, 8192], osl=[256], batch_size=[1, 8, 64], waves=True,
                **kw)
    d, w = from_kwargs(**args)
    assert w.waves and w.batch_size == (1, 8, 64)
    assert _without_inputs(estimate(d, w).to_dict()) == estimate(**args).to_dict()


@pytest.mark.parametrize("model, hardware, kw", GOLDEN.SERVES, ids=lambda x: str(x)[:30])
def test_golden_serves_through_deployment(model, hardware, kw):
    args = dict(model=model, hardware=hardware, isl=1024, osl=128, num_requests=60, seed=1, **kw)
    d, w = from_kwargs("serve", **args)
    assert w.num_requests == 60 and w.seed == 1
    assert _without_inputs(serve(d, w).to_dict()) == serve(**args).to_dict()


def test_disaggregated_serve_and_prefill_batch():
    d = Deployment(model="llama-3.1-8b", disaggregation="prefill=h200x2,decode=h200x2")
    plain = serve("llama-3.1-8b", None, disaggregation="prefill=h200x2,decode=h200x2", rate=5.0, num_requests=40)
    assert _without_inputs(serve(d, Workload(rate=5.0, num_requests=40)).to_dict()) == plain.to_dict()
    w = Workload(batch_size=16, prefill_batch=[1, 4], isl=1024, osl=128)
    typed = estimate(d, w).to_dict()
    assert typed["workload"] == {"batch_size": 16, "prefill_batch": [1, 4], "isl": 1024, "osl": 128}
    plain = estimate("llama-3.1-8b", None, disaggregation="prefill=h200x2,decode=h200x2", batch_size=16,
                     prefill_batch=[1, 4], isl=1024, osl=128)
    assert _without_inputs(typed) == plain.to_dict()


def test_economics_and_layout_options_pass_through():
    args = dict(model="mixtral-8x7b", hardware="h100-sxm", tp=2, pp=2, ep=2, micro_batches=4, expert_imbalance=1.2,
                price_per_gpu_hour=2.5, utilization=0.6, attention="naive", cuda_graphs=False, kv_block_size=32,
                batch_size=8)
    d, w = from_kwargs(**args)
    assert (d.num_gpus, d.layout.micro_batches, d.price_per_gpu_hour, d.engine.kv_block_size) == (4, 4, 2.5, 32)
    assert _without_inputs(estimate(d, w).to_dict()) == estimate(**args).to_dict()
    with pytest.raises(SpecError, match="serve does not take price_per_gpu_hour"):
        serve(d, Workload(rate=1.0, num_requests=10))


def _static_cases():
    return [c for c in load_cases(None) if c.regime == "static_batch" and unsupported_reason(c) is None
            and not c.scheduler]


@pytest.mark.parametrize("case", _static_cases()[:12], ids=lambda c: c.id)
def test_public_static_cases_predict_through_their_deployment(case):
    value, reason = predict_case(case)
    d, w = case_deployment(case), case_workload(case)
    assert d.num_gpus == case.num_gpus and w.batch_size == case.load["batch_size"]
    if value is None:
        pytest.skip(reason)
    est = estimate(d, w)
    mine = metric_value(case.metric, ttft_s=est.ttft_s, tpot_s=est.tpot_s, tpot_mid_s=est.decode_step.time_s,
                        output_tokens_per_s=est.output_tokens_per_s, num_gpus=case.num_gpus)
    assert math.isclose(float(np.ravel(mine)[0]), value, rel_tol=1e-12)


def test_case_workloads_by_regime():
    cases = {c.regime: c for c in load_cases(None)}
    assert case_workload(cases["static_batch"]).mode == "static_batch"
    closed = cases["closed_loop"]
    assert case_workload(closed).concurrency == closed.load["concurrency"]


def test_scenario_traffic_is_a_workload():
    from inferlab.planning.scenario import Traffic

    w = Traffic(rate=3, isl=2048, osl=256, prefix="shared:tokens=512,groups=4").workload(num_requests=100)
    assert (w.rate, w.num_requests, w.isl.value, w.osl.value, w.prefix.tokens) == (3.0, 100, 2048, 256, 512)
    job = Traffic(offline=True, requests=50, deadline_h=1.0).workload()
    assert job.offline and job.num_requests == 50  # fewer than the default 1000: the job's own count


_ARGS = st.fixed_dictionaries(
    {"model": st.sampled_from(["llama-3.1-8b", "qwen3-30b-a3b", "mixtral-8x7b"]),
     "hardware": st.sampled_from(["h100-sxm", "h200-sxm", "b200", "a100-sxm-80gb"])},
    optional={"tp": st.sampled_from([1, 2, 4, 8]), "ep": st.sampled_from([1, 2]), "dp": st.sampled_from([1, 2]),
              "pp": st.sampled_from([1, 2]), "attention_dp": st.booleans(),
              "precision": st.sampled_from(["fp8", "fp8 kv:bf16", "kv:fp8", "int4", "nvfp4", {"weights": "fp8"}]),
              "engine": st.sampled_from(["generic", "vllm", "trtllm", "sglang"]),
              "speculative": st.sampled_from(["eagle:k=3,accept=0.6", "ngram:k=4,accept=0.3"]),
              "prefix_cache": st.sampled_from([0.3, "tokens=200"]),
              "batch_size": st.sampled_from([1, [1, 16], [4, 64]]), "isl": st.sampled_from([128, [512, 2048]]),
              "osl": st.sampled_from([64, 256]), "gpu_memory_utilization": st.sampled_from([0.8, 0.95])})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=_ARGS)
def test_typed_estimate_equals_keywords_or_fails_alike(args):
    try:
        plain = estimate(**args).to_dict()
    except InferlabError as exc:
        with pytest.raises(type(exc)):
            estimate(*from_kwargs(**args))
        return
    assert _without_inputs(estimate(*from_kwargs(**args)).to_dict()) == plain
