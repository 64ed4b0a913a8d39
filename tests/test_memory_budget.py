"""SGLang sizes its prefill chunk from the GPU's memory (sgl-project/sglang, server_args.py,
``_handle_gpu_memory_settings``): 2,048 tokens under 35 GiB, 4,096 under 60 GiB, 8,192 under
160 GiB, 16,384 above. The GPUs' visible memory is their nvidia-smi total (reference NOTES,
trap 2): H100 SXM 81,559 MiB, H200 143,771 MiB, B200 183,359 MiB, L40S 46,068 MiB."""

from __future__ import annotations

import pytest

from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig, for_hardware, memory_budget
from inferlab.inputs.resolve import deployment
from inferlab.serving.replica import engine_scheduler, scheduler_for
from inferlab.specs.catalog import load_hardware

MIB = 2**20


@pytest.mark.parametrize("mib, tokens", [
    (24_564, 2048),    # RTX 4090: under 35 GiB (35,840 MiB)
    (46_068, 4096),    # L40S: under 60 GiB (61,440 MiB)
    (81_559, 8192),    # H100 SXM
    (143_771, 8192),   # H200: under 160 GiB (163,840 MiB)
    (183_359, 16384),  # B200
])
def test_sglang_chunk_follows_the_gpu_memory(mib, tokens):
    assert memory_budget(mib * MIB) == tokens


@pytest.mark.parametrize("gpu, tokens", [("h100-sxm", 8192), ("h200-sxm", 8192), ("b200", 16384), ("l40s", 4096)])
def test_an_sglang_deployment_gets_its_gpus_chunk(gpu, tokens):
    dep = deployment("llama-3.1-8b", gpu, engine="sglang")
    assert scheduler_for(dep, engine_scheduler("sglang")).max_num_batched_tokens == tokens
    assert load_hardware(gpu).usable_memory_capacity.si == pytest.approx(dep.hardware.usable_memory_capacity.si)


def test_a_budget_set_by_the_user_wins_and_other_engines_keep_theirs():
    dep = deployment("llama-3.1-8b", "b200", engine="sglang")
    assert scheduler_for(dep, engine_scheduler("sglang", max_num_batched_tokens=4096)).max_num_batched_tokens == 4096
    assert scheduler_for(dep, engine_scheduler("vllm")).max_num_batched_tokens == 8192
    # a scheduler given whole is taken as it is
    assert for_hardware(SchedulerConfig(max_num_batched_tokens=2048), dep.hardware).max_num_batched_tokens == 2048
    assert ENGINE_SCHEDULERS["sglang"].with_limits(max_num_seqs=8).budget_by_memory is True
    assert ENGINE_SCHEDULERS["sglang"].with_limits(max_num_batched_tokens=8192).budget_by_memory is False
