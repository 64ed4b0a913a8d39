"""Memos and blocking on the hot path change speed, never values."""

from __future__ import annotations

import json

import numpy as np

import inferlab
from inferlab.techniques import step as phases
from inferlab.phases.sweep import _blocks


def _dump(est) -> str:
    return json.dumps(est.to_dict(), sort_keys=True, default=str)


def test_sweep_blocks_cover_the_chunk_and_never_leave_one_row_alone():
    # 16384 rows per block: 32768 rows are two blocks; 16385 rows keep their last row in
    # the block before; 16386 rows end in a block of two.
    assert _blocks(0, 32768) == [slice(0, 16384), slice(16384, 32768)]
    assert _blocks(0, 16385) == [slice(0, 16385)]
    assert _blocks(0, 16386) == [slice(0, 16384), slice(16384, 16386)]
    assert _blocks(32768, 32769) == [slice(32768, 32769)]  # a chunk of one row stays one row


def test_a_repeated_estimate_equals_a_fresh_one():
    for model, hw, kw in (("llama-3.1-8b", "h100-sxm", {}), ("deepseek-v3", "b200", {"tp": 8, "batch_size": [1, 32]})):
        phases._TIMING_MEMO.clear()
        phases._GRAPH_MEMO.clear()
        phases._GRAPH_MEMO_KEYS.clear()
        first = _dump(inferlab.estimate(model, hw, **kw))
        assert len(phases._TIMING_MEMO) >= 2  # prefill and decode were memoized
        assert _dump(inferlab.estimate(model, hw, **kw)) == first  # from the memos


def test_a_one_combination_sweep_is_the_table_itself():
    table = inferlab.sweep("llama-3.1-8b", "h100-sxm", batch_size=[1, 8], isl=[512], osl=[64])
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm", batch_size=np.array([1, 8]), isl=512, osl=64)
    assert list(table["model"]) == ["llama-3.1-8b", "llama-3.1-8b"]
    assert np.array_equal(table["tpot_s"], est.tpot_s)


def test_a_grid_timed_on_its_distinct_rows_is_the_same_to_the_last_bit():
    from inferlab.core.graph import Step
    from inferlab.inputs.resolve import deployment

    b = np.repeat([1.0, 7.0, 64.0], 3000)  # runs of equal rows, as in a sweep's order
    i = np.tile(np.repeat(np.arange(100.0, 3100.0, 100.0), 10), 30)[: b.size]
    for model, hw, kw in (("llama-3.1-70b", "h100-sxm", {"tp": 4, "precision": "fp8"}),
                          ("deepseek-v3", "b200", {"tp": 8, "ep": 8, "attention_dp": True}),
                          ("llama-3.1-405b", "h100-sxm", {"tp": 8, "pp": 2, "precision": "fp8"})):
        dep = deployment(model, hw, **kw)
        step = Step.prefill(b, i)
        spread = phases.run_step(dep, step)
        whole = phases._run_step(dep, step)
        assert type(spread) is not type(whole)  # the distinct rows were timed
        assert np.array_equal(spread.time_s, whole.time_s)
        assert [t.op.name for t in spread.times] == [t.op.name for t in whole.times]
        assert spread.kernels == whole.kernels  # the host's eager issue time counts them
        contexts = i[:, None] + np.array([0.0, 5.0, 9.0, 30.0])
        assert np.array_equal(phases.decode_time_s(dep, b[:, None], contexts),
                              phases._run_step(dep, Step.decode(b[:, None], contexts)).time_s)


def test_a_large_sweep_equals_its_points_estimated_alone():
    # 40 x 40 x 8 = 12,800 points: the prefill rows repeat over the 8 output lengths, so the
    # steps are timed on their distinct rows (a grid of >= 4,096 rows in runs), and the prefill
    # is chunked by the token budget (a chunked prefill counts the step's kernels for the
    # host's issue time: an engine that runs prefill eagerly, SGLang, and one that does not)
    grid = {"batch_size": np.arange(1, 41), "isl": np.arange(1024, 5024, 100), "osl": np.arange(64, 576, 64)}
    for engine in ("sglang", "vllm"):
        table = inferlab.sweep("llama-3.1-8b", "h100-sxm", engine=engine, **grid)
        assert len(table["ttft_s"]) == 12800
        feasible = np.flatnonzero(np.isfinite(table["ttft_s"]))
        assert feasible.size > 6000  # the large batches of long prompts may not fit; the rest do
        for k in (feasible[0], feasible[feasible.size // 2], feasible[-1]):
            b, i, o = (int(table[c][k]) for c in ("batch_size", "isl", "osl"))
            alone = inferlab.estimate("llama-3.1-8b", "h100-sxm", engine=engine, batch_size=b, isl=i, osl=o)
            assert np.isclose(table["ttft_s"][k], float(alone.ttft_s), rtol=1e-12)
            assert np.isclose(table["tpot_s"][k], float(alone.tpot_s), rtol=1e-12)
