"""A static batch on an engine that admits on the prompt (vLLM, SGLang, LMDeploy) vs one that
reserves the whole output (TensorRT-LLM's guaranteed-no-evict policy)."""

from __future__ import annotations

import numpy as np
import pytest

import inferlab


def _pair(engine: str, osl: int):
    # Llama-3.1-8B in BF16 on one H100 (80 GB, 16 GB of weights): 128 kB of KV per token
    # (32 layers x 2 x 8 KV heads x 128 x 2 B), so 64 prompts of 2048 tokens need 17 GB while
    # 64 x (2048 + 8192) tokens need 86 GB, more than the ~50 GB pool.
    return inferlab.estimate("llama-3.1-8b", "h100-sxm", precision="bf16", isl=2048, osl=osl, batch_size=64,
                             engine=engine, waves=True)


@pytest.mark.parametrize("engine", ["vllm", "lmdeploy", "sglang"])
def test_prompt_admission_prefills_the_whole_batch_at_once(engine):
    """64 prompts of 2048 tokens (17 GB of KV) fit; with their 8192-token outputs (86 GB) they do not.
    An engine that admits on the prompt prefills all 32 in the first iterations, so each
    request's TTFT is the same as when the outputs are short enough for one wave."""
    long, short = _pair(engine, 8192), _pair(engine, 16)
    assert float(np.ravel(long.waves)[0]) > 1 and float(np.ravel(short.waves)[0]) == 1
    assert float(np.ravel(long.ttft_s)[0]) == pytest.approx(float(np.ravel(short.ttft_s)[0]), rel=1e-9)


def test_output_reservation_makes_later_waves_wait():
    """TensorRT-LLM reserves KV for the whole output on admission: the requests of later
    waves wait for the first wave's outputs, so the mean TTFT grows by half a wave per extra
    wave, far past the one-wave TTFT."""
    long, short = _pair("trtllm", 8192), _pair("trtllm", 16)
    n = float(np.ravel(long.waves)[0])
    assert n > 1
    wave_s = float(np.ravel(long.total_s)[0]) / n
    ttft = float(np.ravel(long.ttft_s)[0])
    assert ttft > (n - 1) / 2 * wave_s and ttft > 5 * float(np.ravel(short.ttft_s)[0])
