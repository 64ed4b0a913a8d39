"""Each engine's memory share, read the way the engine reads it (inferlab.engines.memory_share)."""

import pytest

import inferlab
from inferlab.engines import parse_engine_args
from inferlab.engines.memory_share import sglang_static_share
from inferlab.errors import InfeasibleError
from inferlab.serving.replica import engine_scheduler, kv_capacity_tokens

H100_MIB, B200_MIB, L40S_MIB = 81559, 183359, 46068  # nvidia-smi totals, the catalog's visible memory
MIB = 2**20


@pytest.mark.parametrize("mib, chunk, graphs, tp, adp, drafter, share", [
    # 512 + 8,192 x 1.5 + 256 x 2 + 1 x 128 = 13,440 MiB reserved: (81,559 - 13,440) / 81,559 = 0.835
    (H100_MIB, 8192, 256, 1, 1, "", 0.835),
    # 512 + 16,384 x 1.5 + 512 x 2 + 8 x 128 = 27,136: (183,359 - 27,136) / 183,359 = 0.852
    (B200_MIB, 16384, 512, 8, 1, "", 0.852),
    # a 45 GiB card keeps its sum, 512 + 6,144 + 64 + 128 = 6,848: (46,068 - 6,848) / 46,068 = 0.851
    (L40S_MIB, 4096, 32, 1, 1, "", 0.851),
    # 3,728 MiB is raised to 10 GiB on a GPU above 60 GiB: (81,559 - 10,240) / 81,559 = 0.874
    (H100_MIB, 2048, 8, 1, 1, "", 0.874),
    # an EAGLE drafter reserves 2 GiB more: 15,488 -> 0.810
    (H100_MIB, 8192, 256, 1, 1, "eagle", 0.810),
    # attention DP over 8 ranks: 27,136 + 512 x 8 x 3 + 512 x 8 x 1.5 (graphs above 300) = 45,568 -> 0.751
    (B200_MIB, 16384, 512, 8, 8, "", 0.751),
])
def test_sglang_sizes_its_share_from_the_gpu_and_the_launch(mib, chunk, graphs, tp, adp, drafter, share):
    assert sglang_static_share(mib * MIB, chunk, graphs, tp, 1, adp, drafter) == share


def test_sglang_holds_weights_and_kv_in_its_share_and_reserves_the_rest():
    # Qwen3-32B BF16 on one H100: 0.835 x 85.52 GB = 71.41 GB holds 65.52 GB of weights and a 5.89 GB
    # KV pool; vLLM's 0.92 of all memory, less weights, workspace and reserve, leaves more
    sglang = inferlab.estimate("qwen3-32b", "h100-sxm", engine="sglang", isl=1024, osl=1024, batch_size=8).memory
    assert float(sglang.kv_budget) == pytest.approx(0.835 * 85.5208e9 - 65.5242e9, rel=1e-3)
    assert sglang.reserve == pytest.approx(0.165 * sglang.capacity, rel=1e-9)
    vllm = inferlab.estimate("qwen3-32b", "h100-sxm", engine="vllm", isl=1024, osl=1024, batch_size=8).memory
    assert float(vllm.kv_budget) > float(sglang.kv_budget)
    # the simulation holds the pool the estimate plans
    dep = inferlab.estimate("qwen3-32b", "h100-sxm", engine="sglang", batch_size=1).deployment
    pool = kv_capacity_tokens(dep, engine_scheduler("sglang")) * sglang.kv_per_token
    assert pool == pytest.approx(float(sglang.kv_budget), rel=1e-9)


def test_a_share_given_to_sglang_is_read_as_its_mem_fraction_static():
    launch = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-32B --mem-fraction-static 0.9")
    est = inferlab.estimate(hardware="h100-sxm", **launch.to_kwargs())
    assert float(est.memory.kv_budget) == pytest.approx(0.9 * est.memory.capacity - est.memory.weights, rel=1e-9)


def test_lmdeploy_takes_four_fifths_of_what_the_weights_leave():
    m = inferlab.estimate("qwen3-32b", "h100-sxm", engine="lmdeploy", isl=1024, osl=1024, batch_size=8).memory
    assert float(m.kv_budget) == pytest.approx(0.8 * (m.capacity - m.weights - float(m.workspace) - m.reserve), rel=1e-9)


def test_weights_beyond_sglangs_own_share_are_refused_with_what_fits():
    # DeepSeek-R1 FP8 over four B200s: 168.2 GB of weights per GPU against 0.855 x 192.27 GB = 164.4 GB
    # (SGLang reserves 512 + 24,576 + 1,024 + 512 MiB for a 16,384-token chunk, 512-request graphs, tp 4)
    with pytest.raises(InfeasibleError, match=r"0\.855 of 192\.3 GB.*tp=8 would fit"):
        inferlab.estimate("deepseek-v3", "b200", tp=4, precision="fp8", engine="sglang", isl=1024, osl=128)
    # with --mem-fraction-static 0.95 it loads
    est = inferlab.estimate("deepseek-v3", "b200", tp=4, precision="fp8", engine="sglang", isl=1024, osl=128,
                            gpu_memory_utilization=0.95)
    assert float(est.memory.kv_budget) == pytest.approx(0.95 * est.memory.capacity - est.memory.weights, rel=1e-9)


def test_what_does_not_fit_names_the_setting_that_made_it_so():
    # a 1,000,000-token budget's workspace (118.8 GB: more than the H100's 85.5 GB) and a share of
    # 0.0001 of the GPU: no layout fits either, and the advice had been a narrower format or a
    # larger GPU; Llama-3.1-8B BF16 needs 18.3 GB, inside 90% of 85.5 GB
    import inferlab
    from inferlab.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match="workspace of one iteration's token budget alone takes 118.8 GB: lower "
                                              "max_num_tokens$"):  # as the keyword given is named
        inferlab.estimate("llama-3.1-8b", "h100-sxm", max_num_tokens=1_000_000)
    for engine in ("vllm", "sglang", "trtllm"):  # a share of the free memory, SGLang's static one, TensorRT-LLM's KV one
        with pytest.raises(InfeasibleError, match="weights, workspace and one sequence fit in 80% of the GPU's 85.5 GB: "
                                                  "raise gpu_memory_utilization \\(the engine's share is"):
            inferlab.estimate("llama-3.1-8b", "h100-sxm", engine=engine, gpu_memory_utilization=0.0001)
    with pytest.raises(InfeasibleError, match="tp=8 with pp=2 pipeline stages"):  # weights: a layout still says it
        inferlab.estimate("llama-3.1-405b", "h100-sxm")
