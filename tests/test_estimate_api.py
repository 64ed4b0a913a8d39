"""The public estimate/sweep API and the estimate CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inferlab import SpecError, UnknownNameError
from inferlab.cli.main import main
from inferlab.phases.estimate import estimate
from inferlab.phases.sweep import sweep
from inferlab.results.render import whole


def test_estimate_result_surface():
    est = estimate("llama-3.1-70b", "h100-sxm", tp=4, precision="fp8", isl=2048, osl=256, batch_size=8)
    assert est.ttft.units == est.tpot.units
    assert est.ttft.to("ms").magnitude > 0 and est.tpot.to("ms").magnitude > 0
    tp = est.throughput
    assert tp["system"].magnitude == pytest.approx(4 * tp["per_gpu"].magnitude)
    assert tp["per_user"].magnitude == pytest.approx(1 / est.tpot.to("s").magnitude)
    d = est.to_dict()
    json.dumps(d)
    assert d["tp"] == 4 and d["precision"] == "fp8" and d["memory"]["weights_bytes"] > 0
    rows = est.op_table("decode")
    assert {r["op"] for r in rows} >= {"qkv_proj", "attention", "mlp_up", "all_reduce_attention", "lm_head"}
    assert sum(r["share"] for r in rows) <= 1.0 + 1e-9
    html = est._repr_html_()
    assert "<table" in html and "TTFT ms" in html
    text = est.explain()
    for fragment in ("prefill:", "decode:", "ridge point", "costliest ops", "memory per GPU", "what would move"):
        assert fragment in text


def test_to_frame():
    pytest.importorskip("pandas")
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=np.array([1, 8]), isl=512, osl=64)
    frame = est.to_frame()
    assert list(frame["batch_size"]) == [1, 8]
    ops = est.to_frame("prefill")
    assert "bound" in ops.columns and len(ops) > 10


def test_grid_inputs_broadcast():
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=np.array([1, 4, 16])[:, None], isl=np.array([128, 2048]),
                   osl=64)
    assert est.ttft_s.shape == (3, 2)
    # a larger batch never has a shorter TTFT; a longer prompt neither
    assert np.all(np.diff(est.ttft_s, axis=0) >= 0) and np.all(np.diff(est.ttft_s, axis=1) >= 0)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"batch_size": 0}, SpecError),
        ({"isl": "long"}, SpecError),
        ({"engine": "tensorrt"}, UnknownNameError),
        ({"precision": "fp7"}, UnknownNameError),
        ({"tp": 2, "num_gpus": 4}, SpecError),
        ({"attention": "paged"}, SpecError),
    ],
)
def test_bad_input_is_a_clear_error(kwargs, error):
    with pytest.raises(error):
        estimate("llama-3.1-8b", "h100-sxm", **kwargs)


def test_sweep_table_and_infeasible_points():
    res = sweep(["llama-3.1-8b", "llama-3.1-70b"], "h100-sxm", tp=[1, 2], precision=["bf16", "fp8"],
                batch_size=[1, 64], isl=[1024, 8192], osl=[256])
    assert len(res) == 2 * 2 * 2 * 2 * 2
    # llama-3.1-70b at BF16 and tp=1 cannot hold its weights on one H100
    bad = (res["model"] == "llama-3.1-70b") & (res["tp"] == 1) & (res["precision"] == "bf16")
    assert not np.any(res["feasible"][bad]) and "does not fit" in res["reason"][bad][0]
    ok = res["feasible"]
    assert np.all(np.isfinite(res["tpot_s"][ok])) and np.all(res["tpot_s"][ok] > 0)
    best = res.best("output_tokens_per_s_per_gpu")
    assert best["feasible"] and best["model"] == "llama-3.1-8b"
    assert "llama-3.1-8b" in str(res)


def test_sweep_matches_estimate_pointwise():
    res = sweep("qwen3-8b", "h200-sxm", batch_size=[2, 32], isl=[700], osl=[300], chunk_size=1)
    for j, b in enumerate((2, 32)):
        est = estimate("qwen3-8b", "h200-sxm", batch_size=b, isl=700, osl=300)
        assert res["tpot_s"][j] == pytest.approx(float(est.tpot_s))
        assert res["ttft_s"][j] == pytest.approx(float(est.ttft_s))


def test_estimate_cli_table_json_and_errors(capsys):
    code = main(["estimate", "llama-3.1-70b", "h100-sxm", "--tp", "4", "--precision", "fp8", "--isl", "2048",
                 "--osl", "256", "--batch", "1,8,64"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("2048") >= 3 and "TPOT ms" in out
    code = main(["estimate", "llama-3.1-8b", "h100-sxm", "--json", "--ops", "decode", "--explain"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["ops"][0]["op"] == "embedding" and "decode:" in data["explain"]
    code = main(["estimate", "llama-3.1-70b", "h100-sxm", "--tp", "3"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "does not divide" in err  # a layout the model cannot take: bad input
    code = main(["estimate", "llama-3.1-405b", "h100-sxm", "--tp", "8"])
    err = capsys.readouterr().err
    assert code == 1 and "does not fit" in err and "GB" in err


def test_tpot_at_a_context_brackets_the_mean():
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=16, isl=1024, osl=1024)
    start, end = est.tpot_at(1024), est.tpot_at(2047)
    assert start <= est.tpot <= end
    assert est.tpot_at([1024, 2047]).shape == (2,)


def test_tpot_at_over_a_batch_grid_broadcasts_or_says_why():
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=np.array([1, 8]), isl=1024, osl=64)
    grid = est.tpot_at([[1024], [4096]]).to("ms").magnitude
    assert grid.shape == (2, 2)
    assert grid[1, 1] > grid[0, 1]  # more context, more KV read at batch 8
    with pytest.raises(SpecError, match=r"shape \(3,\).*2 batch sizes"):
        est.tpot_at([1024, 2048, 4096])


def test_quantities_of_a_grid_are_arrays():
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=np.array([1, 8]), isl=256, osl=32)
    assert est.ttft.to("ms").magnitude.shape == (2,)
    assert est.throughput["per_gpu"].magnitude.shape == (2,)


def test_estimate_without_hardware_or_workload_is_one_line():
    import inferlab

    with pytest.raises(inferlab.SpecError, match="give the Workload as the second argument"):
        inferlab.estimate(inferlab.Deployment(model="llama-3.1-8b", hardware="h100-sxm"))
    with pytest.raises(inferlab.SpecError, match="estimate: give the hardware"):
        inferlab.estimate("llama-3.1-8b")


def test_a_grid_keeps_its_points_within_the_trained_length():
    """estimate(isl=[1024, 200000]) keeps the 1,024-token point and marks the other (past
    Llama-3.1-8B's 131,072 positions), as sweep() does; it had refused the whole grid. A grid
    whose every point is beyond it is still one line."""
    import inferlab

    e = inferlab.estimate("llama-3.1-8b", "h100-sxm", isl=[1024, 200000])
    assert list(np.ravel(e.feasible)) == [True, False]
    assert "exceeds the 131,072 positions" in str(np.ravel(e.reason)[1])
    assert np.isfinite(np.ravel(e.ttft_s)[0]) and np.isnan(np.ravel(e.ttft_s)[1])
    with pytest.raises(inferlab.SpecError, match="exceeds the 131,072 positions"):
        inferlab.estimate("llama-3.1-8b", "h100-sxm", isl=200000)


def test_a_sweep_iterates_its_columns_as_a_table_does():
    """list(t) and 'ttft_s' in t had raised 'unknown sweep column 0' (no iteration protocol):
    a sweep iterates its column names, as a DataFrame does, and len() counts its rows."""
    import inferlab

    t = inferlab.sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 2, 4])
    assert list(t)[:3] == ["batch_size", "isl", "osl"] and "ttft_s" in t and "nope" not in t and len(t) == 3
    assert {name: len(t[name]) for name in t} == dict.fromkeys(t, 3)


def test_a_price_may_be_a_quantity_of_money_per_time():
    from inferlab import Deployment, Q
    from inferlab.errors import UnitError
    from inferlab.fleet.pricing import Pricing

    # 0.05 USD a minute is 3 USD an hour: the cost is that of the plain number 3
    per_minute = estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=Q(0.05, "USD/minute"))
    assert per_minute.cost.usd_per_gpu_hour == pytest.approx(3.0)
    assert float(per_minute.cost.usd_per_request) == pytest.approx(
        float(estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=3.0).cost.usd_per_request))
    assert Deployment(model="llama-3.1-8b", hardware="h100-sxm", price_per_gpu_hour=Q(2, "USD/hour")) \
        .price_per_gpu_hour == 2.0
    assert Pricing(on_demand_usd_per_hour=Q(240, "USD/day")).on_demand_usd_per_hour == pytest.approx(10.0)
    with pytest.raises(UnitError, match="USD/hour"):
        estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=Q(3, "USD"))  # a price per what?
    with pytest.raises(SpecError, match="one price"):
        estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=Q(np.array([1.0, 2.0]), "USD/hour"))


def test_a_price_may_be_written_with_its_unit():
    assert estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour="$2.50/h").cost.usd_per_gpu_hour == 2.5
    with pytest.raises(SpecError, match="must be a number"):
        estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour="2.5")  # a bare number as text is a typo


def test_a_sweep_shows_no_tpot_where_one_output_token_leaves_no_decode_step():
    # estimate says "-" (NaN) for osl 1; the sweep had said 0.0 s, and best("tpot_s") picked that row
    table = sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 8], isl=[512], osl=[1, 64])
    one = np.asarray(table["osl"]) == 1
    assert np.all(np.isnan(np.asarray(table["tpot_s"])[one])) and np.all(np.asarray(table["tpot_s"])[~one] > 0)
    assert table.best("tpot_s")["osl"] == 64


def test_a_large_grid_shows_its_first_rows_and_says_how_many_more():
    """A 100,000-point grid had printed 100,003 lines and 15 MB of HTML (a notebook hangs): the
    table shows SHOWN_ROWS (200) points and counts the rest; the frame keeps them all. Points that do
    not run give their reason in the notebook too, as in the text."""
    import html.parser

    from inferlab.phases.table_notes import SHOWN_ROWS

    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=np.arange(1, 501)[:, None],
                   isl=np.arange(128, 25_601, 128)[None, :], osl=128, waves=True)
    text, page = str(est), est._repr_html_()
    assert SHOWN_ROWS == 200 and len(text.splitlines()) < 260 and len(page) < 200_000
    assert "... 99,800 more points (to_frame() and to_dict() hold them all)" in text and "99,800 more points" in page
    html.parser.HTMLParser().feed(page)
    small = estimate("llama-3.1-70b", "h100-sxm", tp=2, batch_size=[1, 512], isl=8192, osl=256)
    assert "does not run" in small._repr_html_() and "does not run" in str(small)


def test_counts_are_json_integers_and_fractions_stay_floats():
    # a script reading --json gets "batch_size": 8, not 8.0; a time stays a float
    est = estimate("llama-3.1-8b", "h100-sxm", batch_size=[1, 8], isl=1024, osl=128)
    d = json.loads(json.dumps(est.to_dict()))
    assert d["batch_size"] == [1, 8] and [type(b) for b in d["batch_size"]] == [int, int]
    for key in ("isl", "osl", "waves"):  # broadcast over the batch axis
        assert [type(v) for v in d[key]] == [int, int], key
    assert d["isl"] == [1024, 1024] and [type(v) for v in d["memory"]["max_sequences"]] == [int, int]
    assert [type(t) for t in d["ttft_s"]] == [float, float]
    table = sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 64], isl=[1024], osl=[256])
    assert table.best("usd_per_million_output")["batch_size"] == 64
    assert type(table.best("usd_per_million_output")["batch_size"]) is int
    assert [type(v) for v in table.to_dict()["isl"]] == [int, int]
    # a fraction is not a count made whole, a missing number stays null
    assert whole([1.5, None, 2.0]) == [1.5, None, 2] and type(whole(2.0)) is int


def test_a_load_curves_clients_are_json_integers_and_its_rates_floats():
    from inferlab.serving.curve import load_sweep

    clients = json.loads(json.dumps(load_sweep("llama-3.1-8b", "h100-sxm", concurrencies=[2, 4], num_requests=8).to_dict()))
    assert [p["concurrency"] for p in clients["points"]] == [2, 4]
    assert all(type(p["concurrency"]) is int for p in clients["points"])
    rates = load_sweep("llama-3.1-8b", "h100-sxm", rates=[1, 2], num_requests=8).to_dict()
    assert [type(p["rate"]) for p in rates["points"]] == [float, float]
