"""HTML reprs, short reprs and pandas frames of the serving, curve, plan and sweep results."""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab.planning.planner import plan
from inferlab.planning.scenario import load_scenario
from inferlab.serving.curve import load_sweep

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def result():
    return inferlab.serve("llama-3.1-8b", "h100-sxm", rate=4, isl=512, osl=64, num_requests=40)


def test_serve_result_repr_is_one_short_line(result):
    text = repr(result)
    assert "\n" not in text and len(text) < 300
    assert text.startswith("<ServeResult llama-3.1-8b on 1x h100-sxm")
    assert f"{result.summary()['ttft']['mean'] * 1e3:.1f} ms" in text


def test_serve_result_html_holds_the_summary(result):
    page = result._repr_html_()
    s = result.summary()
    assert page.startswith("<div><table")
    for name in ("ttft", "tpot", "e2e"):
        assert f"<td style='text-align:right'>{s[name]['p99'] * 1e3:.1f}</td>" in page
    assert "throughput" in page


def test_serve_result_frame_has_one_row_per_request(result):
    frame = result.to_frame()
    assert len(frame) == 40
    np.testing.assert_array_equal(frame["ttft_s"].to_numpy(), result.ttft_s)
    np.testing.assert_array_equal(frame["e2e_s"].to_numpy(), result.e2e_s)


def test_load_curve_html_frame_and_repr():
    curve = load_sweep("llama-3.1-8b", "h100-sxm", concurrencies=[1, 8], isl=512, osl=64, num_requests=24,
                       ttft_slo_s=1.0, tpot_slo_s=0.05)
    frame = curve.to_frame()
    assert list(frame["concurrency"]) == [1.0, 8.0]
    np.testing.assert_allclose(frame["output_tokens_per_s"], curve.output_tokens_per_s)
    page = curve._repr_html_()
    assert page.count("<tr>") == 3 and "<th>goodput</th>" in page
    assert f"{curve.output_tokens_per_s[1]:,.0f}" in page
    assert repr(curve).startswith("<LoadCurve llama-3.1-8b") and "concurrency 1, 8" in repr(curve)


def test_sweep_html_marks_points_that_do_not_run():
    table = inferlab.sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 4096], isl=[1024], osl=[128])
    page = table._repr_html_()
    assert page.count("<tr>") == 3
    assert "at most" in page  # the reason of the point that does not fit
    one = inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=1, isl=1024, osl=128)
    assert f">{float(one.ttft_s) * 1e3:.1f}<" in page
    assert repr(table).startswith("<SweepResult 2 points, 1 feasible")


def test_plan_html_frame_and_repr():
    sc = load_scenario({"name": "t", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"], "engine": "vllm",
                        "traffic": {"rate": 5, "isl": 1000, "osl": 200}, "slo": {"ttft_ms": 2000, "tpot_ms": 60},
                        "search": {"precisions": ["fp8"], "tp": [1, 2]}, "verify": 0})
    result = plan(sc)
    frame = result.to_frame()
    assert len(frame) == len(result.candidates)
    assert frame["label"].iloc[0] == result.best.label
    page = result._repr_html_()
    assert result.best.label in page and page.count("<tr>") == len(result.feasible) + 1
    # the footer is the counts, not the last ruled-out configuration's reason the text lists
    ruled = load_scenario({**sc.model_dump(mode="json"), "search": {"precisions": ["fp8"], "tp": [1, 3]}})
    ruled_page = plan(ruled)._repr_html_()
    assert "1 feasible, 1 ruled out" in ruled_page and "does not divide" not in ruled_page
    assert repr(result) == (f"<Plan 't': {len(result.feasible)} of {len(result.candidates)} feasible; best "
                            f"{result.best.label}, {result.best.gpus} GPUs at ${result.best.usd_per_hour:,.2f}/h>")
