"""Issue 16 for estimate, sweep and the estimate CLI: bad input refused in one line, grids
that keep their feasible points, ``best()`` by direction, exit codes of every command."""

from __future__ import annotations

import json
import time
import warnings

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab import InfeasibleError, SpecError, UnknownNameError, estimate, serve, sweep
from inferlab.cli.main import main

pd = pytest.importorskip("pandas")

# llama-3.1-70b, bf16, tp=4 on h100-sxm: KV per token is 2 (K, V) x 80 layers x 8 KV heads x
# 128 x 2 B = 327,680 B; each of the 4 GPUs holds 2 of the 8 KV heads: 81,920 B per token.
# 2000 sequences of 1024 + 128 = 1152 tokens (72 pages of 16) need 2000 x 1152 x 81,920 B
# = 188.74 GB per GPU, far past the ~40 GB the weights leave of 0.9 x 85.5 GB.
KV_2000_BYTES = 2000 * 1152 * 81_920


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --- deliverable 1: types, ranges and combinations ---------------------------------------
@pytest.mark.parametrize("kwargs, fragment", [
    ({"model": 3}, "model must be a catalog id"),
    ({"hardware": 8.0}, "hardware must be a catalog id"),
    ({"tp": 1.5}, "tp must be an integer (it counts GPUs), got 1.5"),
    ({"tp": True}, "tp must be an integer (it counts GPUs), got True"),
    ({"tp": float("nan")}, "tp must be an integer (it counts GPUs), got nan"),
    ({"tp": 2**21}, "tp must be between 1 and 1,048,576"),
    ({"isl": 2**40}, "isl must hold whole numbers between 1 and 2,147,483,647"),
    ({"batch_size": [1, 2.5]}, "batch_size must hold whole numbers"),
    ({"batch_size": 0.0}, "batch_size must hold whole numbers between 1 and 1,000,000,000, got 0$"),
    ({"batch_size": [1, 2, 3], "isl": [128, 256]}, "batch_size (3,), isl (2,), osl ()"),
    ({"gpu_memory_utilization": 2.0}, "gpu_memory_utilization must be a finite number in (0, 1]"),
    ({"utilization": 0.0}, "utilization must be a finite number in (0, 1]"),
    ({"kv_block_size": 0}, "kv_block_size must be between 1 and"),
    ({"max_num_tokens": 0}, "max_num_tokens must be between 1 and"),
    ({"max_num_tokens": -8}, "max_num_tokens must be between 1 and"),
    ({"price_per_gpu_hour": -2.0}, "price_per_gpu_hour must be a finite number in [0, 1e+09]"),
    ({"price_per_gpu_hour": float("inf")}, "price_per_gpu_hour must be a finite number"),
    ({"expert_imbalance": 1.5}, "llama-3.1-8b is dense (no experts to route to)"),
    ({"micro_batches": 4}, "micro_batches=4 splits a batch over pipeline stages, but there is one stage"),
    ({"micro_batches": 8, "pp": 2, "batch_size": [2, 4]},
     "micro_batches 8: above the largest batch (4); each micro-batch holds at least one sequence"),
    ({"prefill_batch": 4}, "applies only to a disaggregated deployment"),
    ({"waves": "yes"}, "waves must be true or false"),
    ({"speculative": "eagle:k=100000,accept=0.5"}, "use k in 1..16"),
    ({"disaggregation": "prefill=h200x4,decode=h200x8", "speculative": "eagle:k=4,accept=0.7"},
     "speculative would be ignored"),
    ({"disaggregation": "prefill=h200x4,decode=h200x8", "tp": 4}, "tp would be ignored"),
    ({"disaggregation": "prefill=h200x4,decode=h200x8", "pp": 2}, "pp would be ignored"),
    ({"disaggregation": "prefill=h200x4,decode=h200x8"}, "hardware 'h100-sxm' disagrees with the pools"),
])
def test_bad_input_is_refused_before_the_physics(kwargs, fragment):
    model, hardware = kwargs.pop("model", "llama-3.1-8b"), kwargs.pop("hardware", "h100-sxm")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way to the error
        with pytest.raises(SpecError) as info:
            estimate(model, hardware, **kwargs)
    text = str(info.value)  # (a fragment ending in $ ends the message: "got 0", not "got 0.0")
    assert text.endswith(fragment[:-1]) if fragment.endswith("$") else fragment in text


def test_unbounded_draft_length_is_refused_at_once():
    start = time.perf_counter()
    with pytest.raises(SpecError, match="published drafters"):
        estimate("llama-3.1-8b", "h100-sxm", speculative="eagle:k=100000,accept=0.5")
    assert time.perf_counter() - start < 1.0


def test_disaggregation_with_hardware_that_agrees_runs():
    est = estimate("llama-3.1-70b", "h200", precision="fp8", disaggregation="prefill=h200x4,decode=h200x8",
                   prefill_batch=2, batch_size=16)
    assert est.num_gpus == 12 and float(est.tpot_s) > 0
    none = estimate("llama-3.1-70b", None, precision="fp8", disaggregation="prefill=h200x4,decode=h200x8")
    assert float(none.ttft_s) > 0


def test_sweep_refuses_a_memory_share_above_one():
    # before: 143 GB per GPU "feasible" on an 85.5 GB H100 at gpu_memory_utilization=2.0
    with pytest.raises(SpecError, match=r"gpu_memory_utilization must be a finite number in \(0, 1\]"):
        sweep("llama-3.1-8b", "h100-sxm", gpu_memory_utilization=2.0, batch_size=[1, 64])


# --- deliverable 2: context beyond the model ---------------------------------------------
@pytest.mark.parametrize("model, isl, osl, limit", [("llama-3.1-8b", 200_000, 128, "131,072"),
                                                    ("llama-2-7b", 8000, 192, "4,096")])
def test_context_beyond_the_model_is_refused(model, isl, osl, limit):
    with pytest.raises(SpecError) as info:
        estimate(model, "h100-sxm", isl=isl, osl=osl)
    assert f"isl + osl = {isl + osl:,} tokens exceeds the {limit} positions" in str(info.value)
    assert "allow_long_context=True" in str(info.value)


def test_long_context_allowed_is_said_in_explain():
    est = estimate("llama-2-7b", "h100-sxm", isl=8000, osl=192, allow_long_context=True)
    assert est.long_context and est.to_dict()["long_context"] is True
    assert "8,192 tokens is beyond the 4,096 positions" in est.explain()
    inside = estimate("llama-2-7b", "h100-sxm", isl=2000, osl=192)
    assert not inside.long_context and "long context" not in inside.explain()


def test_serve_refuses_context_beyond_the_model():
    with pytest.raises(SpecError, match="exceeds the 4,096 positions llama-2-7b"):
        serve("llama-2-7b", "h100-sxm", isl=8000, osl=192, rate=1.0, num_requests=4)


def test_sweep_marks_rows_beyond_a_model_context():
    res = sweep(["llama-2-7b", "llama-3.1-8b"], "h100-sxm", isl=[1000, 8000], osl=[100])
    beyond = (res["model"] == "llama-2-7b") & (res["isl"] == 8000)
    assert list(res["feasible"]) == list(~beyond)
    assert "4,096 positions llama-2-7b" in res["reason"][beyond][0] and np.isnan(res["ttft_s"][beyond][0])


# --- deliverables 3-4: partial grids ------------------------------------------------------
def test_grid_keeps_feasible_points_and_marks_the_others():
    est = estimate("llama-3.1-70b", "h100-sxm", tp=4, batch_size=[1, 2000])
    assert est.feasible.tolist() == [True, False]
    assert "the KV cache of 2000 sequences of 1,152 tokens needs 188.7 GB per GPU" in est.reason[1]
    assert "waves=True" in est.reason[1]
    d = est.to_dict()
    assert d["feasible"] == [True, False] and d["ttft_s"][1] is None and d["cost"]["usd_per_request"][1] is None
    json.dumps(d, allow_nan=False)  # no NaN reaches JSON
    frame = est.to_frame()
    assert frame["ttft_s"].isna().tolist() == [False, True] and frame["reason"][1] == est.reason[1]
    text = str(est).splitlines()
    assert text[-2].split()[:4] == ["2000", "1024", "128", "-"]
    assert text[-1].startswith("batch 2000, isl 1024, osl 128 does not run: the KV cache")


def test_a_single_point_that_does_not_fit_still_raises_with_bytes():
    with pytest.raises(InfeasibleError) as info:
        estimate("llama-3.1-70b", "h100-sxm", tp=4, batch_size=2000)
    assert info.value.needed_bytes == pytest.approx(KV_2000_BYTES, rel=1e-9)
    assert info.value.suggestion["batch_size"] < 2000
    assert "the largest batch that fits is" in str(info.value)


def test_a_grid_with_nothing_feasible_raises():
    with pytest.raises(InfeasibleError, match="none of the 2 grid points runs"):
        estimate("llama-3.1-70b", "h100-sxm", tp=4, batch_size=[2000, 3000])


def test_explain_and_ops_default_to_the_first_point_that_runs():
    est = estimate("llama-3.1-70b", "h100-sxm", tp=4, batch_size=[2000, 1])
    assert "batch 1," in est.explain()
    with pytest.raises(InfeasibleError, match="grid point 0 does not run"):
        est.op_table("decode", 0)


def test_sweep_infeasible_rows_hold_no_wave_numbers():
    res = sweep("llama-3.1-70b", "h100-sxm", tp=4, batch_size=[1, 2000])
    assert res["feasible"].tolist() == [True, False]
    assert np.isnan(res["ttft_s"][1]) and np.isnan(res["memory_per_gpu_bytes"][1])
    assert res.to_dict()["ttft_s"][1] is None and res.to_frame()["ttft_s"].isna().tolist() == [False, True]


_SMALL = st.tuples(st.lists(st.sampled_from([1, 8, 64, 512, 2000]), min_size=1, max_size=3, unique=True),
                   st.lists(st.sampled_from([128, 2048, 16384]), min_size=1, max_size=2, unique=True),
                   st.sampled_from([1, 64, 1024]))


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(_SMALL)
def test_grid_rows_equal_the_points_estimated_alone(axes):
    batches, isls, osl = axes
    kw = {"tp": 4, "precision": "fp8", "osl": osl}
    b, i = np.meshgrid(batches, isls, indexing="ij")
    try:
        grid = estimate("llama-3.1-70b", "h100-sxm", batch_size=b, isl=i, **kw)
    except InfeasibleError:
        grid = None
    for j, (bj, ij) in enumerate(zip(b.ravel(), i.ravel())):
        if grid is None or not grid.feasible.ravel()[j]:
            with pytest.raises(InfeasibleError):
                estimate("llama-3.1-70b", "h100-sxm", batch_size=int(bj), isl=int(ij), **kw)
            continue
        alone = estimate("llama-3.1-70b", "h100-sxm", batch_size=int(bj), isl=int(ij), **kw)
        assert grid.ttft_s.ravel()[j] == pytest.approx(float(alone.ttft_s), rel=1e-12)
        assert grid.tpot_s.ravel()[j] == pytest.approx(float(alone.tpot_s), rel=1e-12)


# --- deliverable 4: best() -----------------------------------------------------------------
def test_best_minimizes_cost_and_maximizes_throughput():
    res = sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 8, 64], isl=[1024], osl=[256])
    # a larger batch spreads each weight read over more tokens: the cheapest is batch 64, the
    # fastest per user is batch 1 (before, best("usd_per_million_output") returned batch 1)
    assert res.best("usd_per_million_output")["batch_size"] == 64
    assert res.best("output_tokens_per_s_per_user")["batch_size"] == 1
    assert res.best("tpot_s")["batch_size"] == 1
    assert res.best("usd_per_million_output", direction="max")["batch_size"] == 1
    with pytest.raises(UnknownNameError, match="did you mean 'usd_per_million_output'"):
        res.best("usd_per_million_outptu")
    with pytest.raises(SpecError, match="direction must be 'min' or 'max'"):
        res.best("tpot_s", direction="down")


def test_best_never_returns_an_infeasible_row():
    res = sweep("llama-3.1-70b", "h100-sxm", tp=1, batch_size=[1, 8])  # bf16 weights do not fit one H100
    assert not res["feasible"].any()
    with pytest.raises(InfeasibleError, match="no feasible row"):
        res.best()


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from([1, 4, 16, 128, 1024, 4096]), min_size=1, max_size=4, unique=True),
       st.sampled_from(["ttft_s", "tpot_s", "usd_per_million_output", "output_tokens_per_s_per_gpu",
                        "output_tokens_per_s_per_user", "memory_per_gpu_bytes"]))
def test_best_is_the_extreme_of_the_feasible_rows(batches, metric):
    res = sweep("llama-3.1-8b", "l40s", batch_size=batches, isl=[2048], osl=[128])
    ok = res["feasible"]
    if not ok.any():
        return
    values = res[metric][ok]
    higher_is_better = metric.startswith("output")  # throughputs up, latencies, memory and costs down
    best = res.best(metric)
    assert best["feasible"] and best[metric] == (values.max() if higher_is_better else values.min())
    flipped = res.best(metric, direction="min" if higher_is_better else "max")
    assert flipped[metric] == (values.min() if higher_is_better else values.max())


# --- deliverable 5: exit codes and one line ----------------------------------------------
@pytest.mark.parametrize("argv, code, fragment", [
    (["estimate", "llama-3.1-70b", "h100-sxm", "--tp", "4", "--batch", "2000"], 1, "(or pass --waves)"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--isl", "200000"], 2, "pass --allow-long-context"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--micro-batches", "2"], 2, "--micro-batches 2 splits"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--kv-block-size", "0"], 2, "--kv-block-size must be between 1"),
    (["estimate", "llama-3.1-70b", "h100-sxm", "--disagg", "prefill=h200x4,decode=h200x8", "--tp", "4"], 2,
     "--tp would be ignored"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--tp", "x"], 2, "argument --tp: invalid int value"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--plot", "/nonexistent-folder/x.png"], 2,
     "the folder /nonexistent-folder does not exist"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--plot", ""], 2, "no file named (an empty path)"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--plot", f"{__file__}/x.png"], 2, "test_estimate_bounds.py is a file, not a folder"),
    (["validate", "--profile", "nope"], 2, "unknown profile 'nope'"),
    (["serve", "llama-2-7b", "h100-sxm", "--rate", "1", "--isl", "8000", "--num-requests", "4"], 2,
     "4,096 positions"),
    (["hardware", "show", "h100-sx"], 2, "did you mean 'h100-sxm'"),
    (["models", "show", "lama-3.1-70b"], 2, "did you mean"),
    (["calc", "3 GB + 2 s"], 2, "cannot combine"),
    (["frobnicate"], 2, "invalid choice"),
    ([], 2, "the following arguments are required"),
])
def test_exit_codes_and_one_line(capsys, argv, code, fragment):
    got, out, err = _cli(capsys, *argv)
    assert got == code and out == ""
    assert err.count("\n") == 1 and err.startswith("inferlab: error: ") and fragment in err


def test_cli_prints_the_rows_that_fit_and_exits_0(capsys):
    code, out, err = _cli(capsys, "estimate", "llama-3.1-70b", "h100-sxm", "--tp", "4", "--batch", "1,2000")
    assert code == 0 and err == ""
    assert "batch 2000, isl 1024, osl 128 does not run" in out and "(or pass --waves)" in out
    code, out, _ = _cli(capsys, "estimate", "llama-3.1-70b", "h100-sxm", "--tp", "4", "--batch", "1,2000", "--json")
    data = json.loads(out)
    # the CLI's grid is batch x isl x osl
    assert code == 0 and data["feasible"] == [[[True]], [[False]]] and data["tpot_s"][1] == [[None]]


def test_non_utf8_files_are_one_line(capsys, tmp_path):
    bad = tmp_path / "d.yaml"
    bad.write_bytes(b"model: llama-3.1-8b\nhardware: h100-sxm\nisl: \xff\xfe\n")
    for argv in (["estimate", "--file", str(bad)], ["models", "show", str(bad)], ["validate", str(bad)]):
        code, _, err = _cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and "UTF-8" in err


def test_plan_with_nothing_feasible_exits_1(capsys, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "models": ["llama-3.1-8b"], "hardware": ["h100-sxm"],
                                    "engine": "vllm", "traffic": {"rate": 5, "isl": 1000, "osl": 200},
                                    "slo": {"ttft_ms": 1, "tpot_ms": 60},
                                    "search": {"precisions": ["fp8"], "tp": [1]}, "verify": 0}))
    code, out, err = _cli(capsys, "plan", str(path))
    assert code == 1 and "TTFT" in err and len(err.strip().splitlines()) == 1
    assert err.count("\n") == 1 and "no configuration of scenario" in err


# --- deployment files ------------------------------------------------------------------------
def test_yaml_alias_bomb_is_refused_quickly(capsys, tmp_path):
    lines = ["model: llama-3.1-8b", "hardware: h100-sxm", "batch_size:", "  - &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"  - &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]  # 9**9 values
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size < 600
    start = time.perf_counter()
    code, _, err = _cli(capsys, "estimate", "--file", str(path))
    assert code == 2 and "expands to more than 10,000 values" in err
    assert time.perf_counter() - start < 1.0


def test_deployment_file_grid_axes_must_be_flat_whole_numbers(capsys, tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nbatch_size: [[1, 2], [3]]\n")
    code, _, err = _cli(capsys, "estimate", "--file", str(path))
    assert code == 2 and "batch_size must be a whole number or a flat list" in err


def test_a_whole_float_count_is_accepted_where_files_may_write_one():
    # JSON and YAML write 2.0 for 2: a layout count equal to an integer is that integer
    assert estimate("llama-3.1-8b", "h100-sxm", tp=2.0).deployment.parallel.tp == 2


def test_a_price_below_a_nano_dollar_is_refused_and_zero_is_free():
    with pytest.raises(SpecError, match="price_per_gpu_hour must be 0 [(]free[)] or at least 1e-09 USD, got 1e-300"):
        estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=1e-300)
    assert estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=0.0).to_dict()["cost"]["usd_per_million_output"] == 0.0


def test_a_price_above_a_billion_dollars_is_refused_everywhere():
    # 1e308 USD/hour overflowed the cost into a silent '-' (and a numpy warning); 1e300 printed 300 digits
    from inferlab.cli.main import main
    from inferlab.fleet.pricing import Pricing

    for price in (1e300, 1e308):
        with pytest.raises(SpecError, match=r"must be a finite number in \[0, 1e\+09\]"):
            estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=price)
        with pytest.raises(SpecError, match="must be 0 \\(free\\) or from 1e-09 to 1e\\+12 USD/hour a replica"):
            Pricing(on_demand_usd_per_hour=price / 1e3)
    # a replica of four GPUs at 5e8 USD/hour each (a price estimate takes) is a 2e9 replica a fleet takes
    assert Pricing(on_demand_usd_per_hour=2e9).on_demand_usd_per_hour == 2e9
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--price", "1e300"]) == 2
    assert estimate("llama-3.1-8b", "h100-sxm", price_per_gpu_hour=1e9).to_dict()["cost"]["usd_per_million_output"] > 0


def test_a_refused_layout_is_labelled_with_the_formats_it_would_have_run():
    # tp=3 does not divide Llama-3.1-8B's 32 heads: its rows keep the reason and the precision
    # label the rows that run print ('bf16' from the BF16 checkpoint on an H100), not 'checkpoint'
    df = sweep(["llama-3.1-8b"], ["h100-sxm"], tp=[1, 3], batch_size=[1], isl=[512], osl=[64]).to_frame()
    assert list(df["precision"]) == ["bf16", "bf16"] and "does not divide" in df["reason"].iloc[1]


def test_a_tpu_has_no_cuda_graph_limit():
    """XLA compiles every step on a TPU: no CUDA graph to fall out of, so no batch runs eagerly
    and throughput keeps rising with the batch (SGLang's graph cap had cut it by up to 19% past 8)."""
    from inferlab import estimate

    est = estimate("llama-3.1-8b", "tpu-v5e", tp=4, engine="sglang", batch_size=[8, 16, 32])
    assert est.output_tokens_per_s[0] < est.output_tokens_per_s[1] < est.output_tokens_per_s[2]
    # memory-bound decode: 16 sequences read the same weights as 8 and a little more KV cache
    assert est.tpot_s[1] < 1.1 * est.tpot_s[0] and "CUDA graph" not in est.explain(point=1)


def test_gguf_weights_run_only_on_engines_that_load_gguf():
    """vLLM and SGLang load a .gguf checkpoint; TensorRT-LLM and LMDeploy do not (they had
    been estimated with llama.cpp's Q4_K_M as if they ran it); a sweep keeps its other points."""
    import inferlab
    from inferlab.errors import InfeasibleError

    for engine in ("trtllm", "trtllm-pytorch", "lmdeploy"):
        with pytest.raises(InfeasibleError, match=f"engine {engine} does not load GGUF files \\(q4_k_m"):
            inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="q4_k_m", engine=engine)
    for engine in ("generic", "vllm", "sglang"):
        assert inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="q4_k_m", engine=engine).tpot.magnitude > 0
    s = inferlab.sweep("llama-3.1-8b", "h100-sxm", precision=["bf16", "q4_k_m"], engine="trtllm", batch_size=[1])
    assert list(s["feasible"]) == [True, False]
