"""Whole serving runs published outside the validation set: out-of-sample checks of the
serving simulation on a harness and an engine release none of its terms were fitted on (the
fit half does hold other runs of the same model, GPU and engine: the SGLang DeepSeek-R1 H200
1,024/1,024 rows of aiconfigurator's sample, on which SGLang's serving terms were fitted).

SemiAnalysisAI/InferenceX issue #870 (2026-03-05): DeepSeek-R1-0528 FP8 (the catalog's
``deepseek-v3``, its architecture) on eight H200s, SGLang v0.5.7, TP8 without expert
parallelism, 1,024 prompt and 1,024 output tokens, a closed loop of 8-64 clients. Measured mean
TPOT 12.8 / 17.2 / 25.6 / 34.6 ms and output throughput 74.6 / 111.9 / 151.1 / 223.6 tok/s per
GPU. inferlab gives 14.0 / 18.8 / 25.7 / 34.3 ms and 71 / 106 / 155 / 232 tok/s per GPU (+9% to
-1%, -5% to +4%).

Its mean TTFT is not checked: 331-427 ms measured against 150-250 ms predicted, with a P99 of
1,975-2,741 ms, six times the mean at 8 clients where the TPOT's P99 is 12% over its mean: a
few first-round requests some 2 s late (kernels compiled or tuned on their first shapes, which a
benchmark without warm-up pays) carry much of the mean, which a steady-state model does not
have.
"""

from __future__ import annotations

import numpy as np
import pytest

import inferlab

#: clients -> (mean TPOT [ms], output tokens/s per GPU), InferenceX #870.
INFERENCEX_870 = {8: (12.8, 74.6), 16: (17.2, 111.9), 32: (25.6, 151.1), 64: (34.6, 223.6)}


@pytest.mark.parametrize("clients", sorted(INFERENCEX_870))
def test_sglang_deepseek_r1_on_eight_h200s_matches_an_independent_harness(clients):
    tpot_ms, per_gpu = INFERENCEX_870[clients]
    r = inferlab.serve(model="deepseek-v3", hardware="h200-sxm", tp=8, precision="fp8", engine="sglang",
                       isl=1024, osl=1024, concurrency=clients, num_requests=10 * clients)
    assert float(np.mean(r.tpot_s)) * 1e3 == pytest.approx(tpot_ms, rel=0.15)
    assert r.output_tokens_per_s_per_gpu == pytest.approx(per_gpu, rel=0.15)


#: clients -> decode rate one user sees [token/s] (1 / TPOT), InferenceX PR #1092.
INFERENCEX_1092 = {1: 249.0, 4: 234.0}


@pytest.mark.parametrize("clients", sorted(INFERENCEX_1092))
def test_vllm_gpt_oss_on_eight_mi300x_a_gpu_with_no_calibration_data(clients):
    """SemiAnalysisAI/InferenceX PR #1092 (2026-04-19): gpt-oss-120b (MXFP4 experts) on eight
    MI300X, vLLM v0.17.0 (ROCm), TP8, 1,024/1,024 tokens (random lengths 80-100% of that),
    1 and 4 clients: about 249 and 234 tok/s per user. The MI300X has no op-level data, so its
    kernels run the profile's generic fits on its datasheet peaks: inferlab gives 306 and
    286 (23% fast: 3.27 ms a token where 4.0 ms was measured; AMD's smallest kernels and its
    all-reduce are the likely share). It gave 290 and 272 (16%) before the all-reduce's hop
    latency: refitted on the faster NVIDIA all-reduces, vLLM's fitted per-iteration host time
    fell from 1.36 to 1.11 ms, which this GPU takes as it is. Held to 25%."""
    r = inferlab.serve(model="gpt-oss-120b", hardware="mi300x", tp=8, engine="vllm", isl=1024, osl=1024,
                       concurrency=clients, num_requests=16 * clients)
    assert 1.0 / float(np.mean(r.tpot_s)) == pytest.approx(INFERENCEX_1092[clients], rel=0.25)


#: (model, ISL, OSL, prompts) -> output tokens/s of eight MI300X, AMD's ROCm performance page.
AMD_ROCM_VLLM_083 = {("llama-3.1-70b", 128, 2048, 3200): 16364.9, ("llama-3.1-70b", 128, 4096, 1500): 12171.0,
                     ("llama-3.1-70b", 500, 2000, 2000): 13290.4, ("llama-3.1-70b", 2048, 2048, 1500): 8216.5,
                     ("llama-3.1-405b", 128, 2048, 1500): 4331.6, ("llama-3.1-405b", 128, 4096, 1500): 3409.9,
                     ("llama-3.1-405b", 500, 2000, 2000): 3184.0, ("llama-3.1-405b", 2048, 2048, 500): 2154.3}


def test_offline_throughput_on_eight_mi300x_is_within_the_amd_target():
    """AMD's ROCm performance results page ("AI Inference: Throughput Measurements", container
    rocm/vllm:rocm6.3.1_instinct_vllm0.8.3_20250410, April 2025): Llama 3.1 70B and 405B with FP8
    weights and KV cache (amd/...-FP8-KV), TP8 on eight MI300X (192 GB, 750 W), every prompt
    queued at once with as many sequences allowed. Its "Throughput (tokens/s)" is output
    tokens: read as prompt and output tokens, the 2,048/2,048 run would emit 4,108 tokens/s, a
    third of the 128/4,096 run's rate with shorter contexts and a prefill that takes a tenth of
    its time. The MI300X has no op-level data (datasheet peaks, the generic fits). Issue 10's
    target for AMD offline throughput is a median |error| of 15%; reached 10.5% (70B -10, +6,
    +2, +7%; 405B +11, +37, +41, +21%: the 405B runs hold about a thousand sequences, where likely the MI300X's
    large FP8 GEMMs and attention reach less of its peak than the generic fits assume)."""
    errors = []
    for (model, isl, osl, prompts), measured in AMD_ROCM_VLLM_083.items():
        r = inferlab.serve(model=model, hardware="mi300x", tp=8, engine="vllm", isl=isl, osl=osl, offline=True,
                           num_requests=prompts,
                           precision={"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"})
        errors.append(r.output_tokens_per_s / measured - 1.0)
    assert float(np.median(np.abs(errors))) <= 0.15
    assert max(abs(e) for e in errors[:4]) <= 0.15  # the 70B runs each
    assert max(abs(e) for e in errors) <= 0.45  # the 405B runs at the level reached


#: clients -> (mean TPOT [ms], input + output tokens/s per GPU), InferenceX issue #828.
INFERENCEX_828 = {4: (3.72, 260.5), 8: (4.05, 475.0), 16: (4.83, 814.8), 32: (5.82, 1326.3), 64: (7.36, 2106.9)}


@pytest.mark.parametrize("clients", sorted(INFERENCEX_828))
def test_vllm_gpt_oss_on_eight_h100s_matches_an_independent_harness(clients):
    """SemiAnalysisAI/InferenceX issue #828 (2026-03-01): gpt-oss-120b (MXFP4 experts, which the
    H100 runs as 16-bit GEMMs over 4-bit weights) on eight H100s under vLLM, TP8, 1,024/1,024
    tokens, 4-64 clients: mean TPOT 3.72-7.36 ms and 260-2,107 tokens/s per GPU in and out.
    inferlab gives TPOT +2..+6% and throughput -3..+1%; the public validation set holds no
    gpt-oss run. Held to 15%."""
    tpot_ms, per_gpu = INFERENCEX_828[clients]
    r = inferlab.serve(model="gpt-oss-120b", hardware="h100-sxm", tp=8, engine="vllm", isl=1024, osl=1024,
                       concurrency=clients, num_requests=10 * clients)
    assert float(np.mean(r.tpot_s)) * 1e3 == pytest.approx(tpot_ms, rel=0.15)
    assert 2.0 * r.output_tokens_per_s_per_gpu == pytest.approx(per_gpu, rel=0.15)  # as many in as out


@pytest.mark.xfail(strict=True, reason="MI300X runs gpt-oss's MXFP4 experts at large batches about half as "
                                       "fast as its bandwidth allows; no AMD op-level data to fit it on")
def test_vllm_gpt_oss_on_one_mi300x_at_large_batches():
    """SemiAnalysisAI/InferenceX PR #1061 (2026-04-17): gpt-oss-120b on one MI300X, vLLM v0.17.0,
    1,024/1,024 tokens: 2,008 / 2,561 / 2,990 / 4,271 output tokens/s at 64 / 96 / 128 / 256
    clients (median TPOT 31.4 / 36.6 / 41.3 / 58.3 ms). inferlab gives 3,708 / 4,929 / 6,122 /
    10,178 (1.8-2.4x): at 64 clients 111 of 128 experts a layer are read each step, 53 GB of
    MXFP4 weights, 10 ms at the MI300X's 5.3 TB/s, where the measured step is 31 ms. The same
    model on eight MI300X at 1-4 clients is 22-23% fast and on eight H100s within 6%, so most likely
    it is the MI300X's MoE kernels for a 4-bit format it has no tensor cores for (CDNA3 has FP8,
    not FP4), at large batches."""
    measured = {64: 2008.0, 96: 2561.0, 128: 2990.0, 256: 4271.0}
    for clients, out in measured.items():
        r = inferlab.serve(model="gpt-oss-120b", hardware="mi300x", tp=1, engine="vllm", isl=1024, osl=1024,
                           concurrency=clients, num_requests=5 * clients)
        assert r.output_tokens_per_s == pytest.approx(out, rel=0.25)


#: clients -> output tokens/s per GPU, InferenceX issue #870 (the B200 sweep).
INFERENCEX_870_B200 = {4: 59.7, 8: 104.8, 16: 169.3, 32: 282.4}


@pytest.mark.parametrize("clients", sorted(INFERENCEX_870_B200))
def test_sglang_deepseek_r1_fp4_on_eight_b200s_matches_an_independent_harness(clients):
    """SemiAnalysisAI/InferenceX issue #870 (2026-03-06): DeepSeek-R1-0528 NVFP4 on eight B200s,
    SGLang v0.5.6, TP8 with EP8, 1,024/1,024 tokens: 59.7 / 104.8 / 169.3 / 282.4 output tokens/s
    per GPU at 4 / 8 / 16 / 32 clients; inferlab gives 58.2 / 100.7 / 162.3 / 251.1 (-3..-11%; -3..-8% before
    Blackwell's MLA decode ran at its kernels' measured rate).
    Mean TTFT 197-394 ms against inferlab's 124-159 (P99 341-942 ms: no long outliers here, so
    this is the short-prompt floor left open in issue 10). Held to 15%."""
    r = inferlab.serve(model="deepseek-v3", hardware="b200", tp=8, ep=8, precision="nvfp4", engine="sglang",
                       isl=1024, osl=1024, concurrency=clients, num_requests=10 * clients)
    assert r.output_tokens_per_s_per_gpu == pytest.approx(INFERENCEX_870_B200[clients], rel=0.15)
