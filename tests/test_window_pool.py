"""A windowed-attention model's KV pool as each engine keeps it (``engines/window_pool.py``): the
serving simulation's pool agrees with the static estimate's, and a closed loop runs every
client whose sequences fit.

Hand figures (gpt-oss-120b, config.json): 36 layers alternating ``sliding_attention`` (window
128) and ``full_attention``, 8 KV heads of 64: 8 x 64 x 2 x 2 B = 2,048 B a token a layer in
BF16, 36,864 B a token over the 18 layers of each kind. A sequence of 9,216 tokens holds
18 x 2,048 x 9,216 + 18 x 2,048 x 128 = 344,457,216 B where one pool frees what leaves a window
(vLLM, TensorRT-LLM), and 9,216 x 36,864 x (1 + 0.8) = 611,529,523 B in SGLang's two pools at
``--swa-full-tokens-ratio`` 0.8 (the windowed layers' pool holding 0.8 of a token for each
token of the full layers' pool). Llama 4 Scout: 36 layers of ``chunked(8192)`` attention and 12
full ones.
"""

from __future__ import annotations

import numpy as np
import pytest

import inferlab
from inferlab import load_model
from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig
from inferlab.engines.window_pool import pool_token_share, window_tokens
from inferlab.errors import SpecError
from inferlab.inputs.resolve import deployment
from inferlab.serving.replica import kv_capacity_tokens, state_tokens


def test_shares_and_window_tokens_by_hand():
    oss, scout, llama = load_model("gpt-oss-120b"), load_model("llama-4-scout"), load_model("llama-3.1-8b")
    vllm, sglang = ENGINE_SCHEDULERS["vllm"], ENGINE_SCHEDULERS["sglang"]
    assert oss.full_attention_kv_share == 0.5 and scout.full_attention_kv_share == 0.25
    assert llama.full_attention_kv_share == 1.0
    assert oss.kv_cache_bytes(9216.0) == pytest.approx(344_457_216)
    # one pool: the windowed layers' tokens in tokens of the full layers (18 x 128 / 18; 36 x 8,192 / 12)
    assert window_tokens(oss, vllm) == pytest.approx(128.0)
    assert window_tokens(oss, vllm, context=100.0) == pytest.approx(100.0)
    assert window_tokens(scout, vllm) == pytest.approx(36 * 8192 / 12)
    assert window_tokens(scout, vllm, context=1000.0) == pytest.approx(3000.0)
    assert pool_token_share(oss, vllm) == 0.5
    # SGLang's pool of their own: 0.8 of a windowed token for each full one; nothing per sequence
    assert window_tokens(oss, sglang) == 0.0
    assert pool_token_share(oss, sglang) == pytest.approx(0.5 + 0.8 * 0.5)
    assert window_tokens(llama, vllm) == 0.0 and pool_token_share(llama, vllm) == 1.0


@pytest.mark.parametrize("engine", ["trtllm-pytorch", "vllm", "sglang"])
def test_the_simulations_pool_holds_what_the_estimate_says(engine):
    """Sequences of 9,216 tokens of gpt-oss-120b on one B200: the serving pool's tokens over a
    sequence's (its own and what its windowed layers hold beside them) is the static memory
    plan's count, to one sequence."""
    dep = deployment("gpt-oss-120b", "b200", engine=engine)
    sched = ENGINE_SCHEDULERS[engine]
    served = kv_capacity_tokens(dep, sched) / (9216 + state_tokens(dep, sched, context=9216.0))
    planned = float(inferlab.estimate("gpt-oss-120b", "b200", engine=engine, isl=1024, osl=8192, batch_size=1,
                                      ).memory.max_sequences)
    assert served == pytest.approx(planned, abs=1.0)


def test_sglangs_window_pool_holds_fewer_long_sequences_than_one_pool():
    """At 9,216 tokens a sequence takes 611.6 MB in SGLang's two pools against 344.5 MB in one
    (by hand above): 1.776x, so SGLang's pool holds 1 / 1.776 of vLLM's sequences for the same
    memory; the same B200 budget in both (the vLLM share set to SGLang's)."""
    sglang = deployment("gpt-oss-120b", "b200", engine="sglang")
    one = ENGINE_SCHEDULERS["sglang"].__class__(**{**ENGINE_SCHEDULERS["sglang"].__dict__, "window_pool_ratio": None})
    two_pools = kv_capacity_tokens(sglang, ENGINE_SCHEDULERS["sglang"]) / 9216
    one_pool = kv_capacity_tokens(sglang, one) / (9216 + state_tokens(sglang, one, context=9216.0))
    assert one_pool / two_pools == pytest.approx(611_529_523.2 / 344_457_216, rel=1e-6)


def test_a_closed_loop_runs_every_client_the_pool_holds():
    """256 clients of 1,024 + 8,192 tokens on one B200 under TensorRT-LLM: 327 such sequences fit
    (above), so every client runs from the first round, none waiting for a whole request to end
    (with every layer counted at every token only 166 fit, and the first round's last prompts
    waited about 150 s: a request's 8,192 tokens at some 18 ms each)."""
    r = inferlab.serve(model="gpt-oss-120b", hardware="b200", engine="trtllm-pytorch", isl=1024, osl=8192,
                       concurrency=256, num_requests=256)
    assert float(np.max(r.ttft_s)) < 10.0


def test_a_window_pool_ratio_is_checked():
    with pytest.raises(SpecError, match="swa-full-tokens-ratio"):
        SchedulerConfig(window_pool_ratio=1.5)
    with pytest.raises(SpecError, match="window_pool_ratio"):
        SchedulerConfig(window_pool_ratio=0)
