"""The explorer without a browser: knobs, views, the JSON API, ``inferlab.explore()`` and the CLI."""

from __future__ import annotations

import json
from urllib.request import urlopen

import numpy as np
import pytest

import inferlab
from inferlab.cli.main import main
from inferlab.errors import SpecError, UnknownNameError
from inferlab.explore.config import Knobs
from inferlab.explore.server import start
from inferlab.explore.views import estimate_view


@pytest.fixture(scope="module")
def server():
    srv = start(0)
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(server, path: str):
    with urlopen(server.url + path, timeout=30) as response:
        return response.status, response.headers["Content-Type"], response.read()


def test_knobs_from_a_query_become_estimate_arguments():
    knobs = Knobs.from_query({"model": ["llama-3.1-70b"], "tp": ["4"], "kv": ["fp8"], "prefix_hit": ["0.5"],
                              "spec": ["eagle:k=4,accept=0.7"]})
    kw = knobs.estimate_kwargs()
    assert kw["precision"] == {"kv_cache": "fp8"} and kw["tp"] == 4 and kw["prefix_cache"] == 0.5
    assert kw["speculative"] == "eagle:k=4,accept=0.7" and kw["batch_size"] == 8
    assert knobs.query() == {"model": "llama-3.1-70b", "tp": "4", "kv": "fp8", "prefix_hit": "0.5",
                             "spec": "eagle:k=4,accept=0.7"}
    assert Knobs().precision is None


@pytest.mark.parametrize("query, fragment", [({"tp": "two"}, "tp must be a number"),
                                             ({"batch": "1.5"}, "batch must be a whole number"),
                                             ({"batch": "0"}, "batch must be at least 1"),
                                             ({"prefix_hit": "1"}, r"prefix hit rate must be in \[0, 1\)")])
def test_bad_knobs_say_which_and_why(query, fragment):
    with pytest.raises(SpecError, match=fragment):
        Knobs.from_query(query)


def test_the_estimate_view_is_the_library_s_estimate():
    view = estimate_view(Knobs(gpu="h200-sxm", batch=32, kv="fp8", tp=2))
    est = inferlab.estimate("llama-3.1-8b", "h200-sxm", tp=2, engine="vllm", batch_size=32, isl=1024, osl=256,
                            precision={"kv_cache": "fp8"})
    m = view["metrics"]
    assert m["ttft_s"] == float(est.ttft_s) and m["tpot_s"] == float(est.tpot_s)
    assert m["usd_per_million_output"] == float(est.cost.usd_per_million_output)
    assert view["memory"]["max_sequences"] == float(est.memory.max_sequences)
    assert view["explain"] == est.explain()
    curve = view["batch_curve"]
    j = curve["batch"].index(32.0)
    assert curve["tpot_s"][j] == pytest.approx(float(est.tpot_s), rel=1e-12)
    # a decode op's attained FLOP/s is its FLOPs over its time, below the roof
    decode = [op for op in view["roofline"]["ops"] if op["phase"] == "decode"]
    bw = view["roofline"]["memory_bandwidth"]
    assert decode and all(op["flops_per_s"] <= op["intensity"] * bw * (1 + 1e-9) for op in decode)


def test_the_disaggregated_view_has_no_roofline():
    view = estimate_view(Knobs(model="llama-3.1-70b", disagg="prefill=h200x4,decode=h200x8", batch=64))
    est = inferlab.estimate("llama-3.1-70b", None, engine="vllm", disaggregation="prefill=h200x4,decode=h200x8",
                            batch_size=64, isl=1024, osl=256)
    assert view["roofline"] is None and view["num_gpus"] == 12
    assert view["metrics"]["tpot_s"] == float(np.ravel(est.tpot_s)[0])


def test_the_api_serves_the_page_the_catalog_and_estimates(server):
    status, kind, body = _get(server, "")
    assert status == 200 and kind.startswith("text/html") and b"explorer.js" in body
    for name in ("explorer.js", "explorer.css"):
        assert _get(server, name)[0] == 200
    catalog = json.loads(_get(server, "api/catalog")[2])
    assert "llama-3.1-8b" in catalog["models"] and "h100-sxm" in catalog["gpus"]
    assert catalog["defaults"]["batch"] == Knobs().batch
    view = json.loads(_get(server, "api/estimate?model=qwen3-8b&batch=4")[2])
    est = inferlab.estimate("qwen3-8b", "h100-sxm", engine="vllm", batch_size=4, isl=1024, osl=256)
    assert view["metrics"]["ttft_s"] == float(est.ttft_s)


def test_the_api_answers_bad_input_with_one_line(server):
    error = json.loads(_get(server, "api/estimate?model=llama-9")[2])["error"]
    assert error.startswith("unknown model 'llama-9'") and "\n" not in error
    with pytest.raises(Exception, match="404"):
        _get(server, "nothing-here")


def test_a_serving_sweep_runs_in_the_background(server):
    import time

    job = json.loads(_get(server, "api/serve?loads=1,4&requests=30&ttft_slo_ms=1000&tpot_slo_ms=50")[2])["job"]
    for _ in range(600):
        status = json.loads(_get(server, f"api/job?id={job}")[2])
        if status["curve"] or status["error"]:
            break
        time.sleep(0.05)
    assert status["error"] is None and status["done"] == status["total"] == 2
    assert status["curve"]["loads"] == [1.0, 4.0] and len(status["curve"]["points"]) == 2
    for query in ("loads=0,4", "loads=inf", "loads=4,x", "loads=4&requests=inf", "loads=4&requests=2.5"):
        bad = json.loads(_get(server, f"api/serve?{query}")[2])
        assert bad["error"].startswith(("loads must be", "requests must be")) and "\n" not in bad["error"], query
    # an SLO that is not a positive number names its knob (it had said "could not convert string to float")
    for query, knob in (("ttft_slo_ms=abc&tpot_slo_ms=50", "ttft_slo_ms"), ("ttft_slo_ms=900&tpot_slo_ms=-5", "tpot_slo_ms")):
        bad = json.loads(_get(server, f"api/serve?loads=4&{query}")[2])
        assert bad["error"].startswith(f"{knob} must be a positive number of milliseconds"), query


def test_explore_in_a_notebook_returns_a_frame_on_a_local_server():
    frame = inferlab.explore(model="qwen3-8b", batch=16)
    src = getattr(frame, "src", frame)
    assert src.startswith("http://127.0.0.1:") and "model=qwen3-8b" in src and "batch=16" in src
    with pytest.raises(UnknownNameError, match="batchsize"):
        inferlab.explore(batchsize=16)


@pytest.mark.parametrize("argv, message", [(["nope", "h100-sxm"], "unknown model 'nope'"),
                                           (["llama-3.1-8b", "h100-sx"], "unknown hardware 'h100-sx'")])
def test_cli_refuses_an_unknown_model_or_gpu_before_serving(capsys, argv, message):
    assert main(["explore", *argv, "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"inferlab: error: {message}") and err.count("\n") == 1


def test_cli_refuses_a_bad_port_with_one_line(capsys):
    assert main(["explore", "--port", "70000", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("inferlab: error: --port must be in [0, 65535]") and err.count("\n") == 1


def test_the_serving_sweep_runs_the_prefix_hit_rate_as_a_shared_prefix():
    kw = Knobs(prefix_hit=0.5, isl=2048).serve_kwargs()
    assert kw["prefix"].tokens == 1024 and kw["isl"] == 2048 and "batch_size" not in kw
    assert "prefix" not in Knobs().serve_kwargs()


def test_a_one_token_output_has_no_tpot_in_the_explorer():
    # one output token leaves no decode step: the CLI prints '-' and Estimate.tpot is NaN; the
    # explorer had drawn 0 ms
    view = estimate_view(Knobs(osl=1))
    assert view["metrics"]["tpot_s"] is None and view["metrics"]["output_tokens_per_s_per_user"] is None
    assert set(view["batch_curve"]["tpot_s"]) == {None}
    assert view["metrics"]["ttft_s"] > 0
