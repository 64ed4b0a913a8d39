"""A hybrid model's linear-attention state format as a precision kind (``state:``), as SGLang's
``--mamba-ssm-dtype`` and vLLM's ``--mamba-ssm-cache-dtype`` set it, and SGLang's state pool pinned
at a number of slots (``--max-mamba-cache-size``). Expected sizes are derived by hand from the
configs (``model_specs/qwen3.5-397b-a17b.yaml``, ``qwen3-next-80b-a3b.yaml``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab import SpecError
from inferlab.cli.main import main
from inferlab.core.quantization import PrecisionConfig
from inferlab.engines import launch_command, parse_engine_args
from inferlab.engines.render import launch_from_deployment
from inferlab.inputs.resolve import deployment

QWEN35 = "qwen3.5-397b-a17b"
NEXT = "qwen3-next-80b-a3b"


def test_the_state_kind_parses_prints_and_round_trips():
    cfg = PrecisionConfig.parse("fp8 state:bf16")
    assert (cfg.weights, cfg.kv_cache, cfg.state) == ("fp8", "fp8", "bf16")
    assert str(cfg) == "fp8 state:bf16" and PrecisionConfig.parse(str(cfg)) == cfg
    assert cfg.to_dict()["state"] == "bf16" and "state" not in PrecisionConfig.parse("fp8").to_dict()
    assert PrecisionConfig.parse({"state": "fp32"}).state == "fp32"
    with pytest.raises(SpecError, match="fp32, bf16, fp16"):
        PrecisionConfig.parse("fp8 state:fp8")


def test_qwen3_5_state_a_sequence_in_each_format_by_hand():
    """45 linear layers, each a 64 x 128 x 128 state plus a 12,288-channel conv window of 3 (BF16):
    FP32 45 x (4,194,304 + 73,728) = 192,061,440 B (the config's mamba_ssm_dtype); BF16
    45 x (2,097,152 + 73,728) = 97,689,600 B, whatever the engine's default."""
    for engine in ("sglang", "vllm"):
        assert deployment(QWEN35, "b200", tp=8, engine=engine).model.recurrent_state_bytes() == 192_061_440
        dep = deployment(QWEN35, "b200", tp=8, engine=engine, precision="state:bf16")
        assert dep.model.recurrent_state_bytes() == 97_689_600
        assert dep.precision.state == "bf16"


def test_a_model_without_a_state_refuses_one():
    with pytest.raises(SpecError, match="keeps none"):
        deployment("llama-3.1-8b", "h100-sxm", precision="fp8 state:bf16")
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--state-dtype", "bf16"]) == 2


@settings(max_examples=15, deadline=None, derandomize=True)
@given(batch=st.integers(1, 128), isl=st.integers(128, 32_768))
def test_a_narrower_state_never_decodes_slower_nor_fits_fewer_sequences(batch, isl):
    """Qwen3-Next under SGLang (FP32 states by default) with BF16 states: fewer bytes a step and
    a sequence, so never a slower decode step nor fewer sequences in memory."""
    kw = dict(tp=4, engine="sglang", batch_size=batch, isl=isl, osl=64)
    wide = inferlab.estimate(NEXT, "h100-sxm", **kw)
    narrow = inferlab.estimate(NEXT, "h100-sxm", precision="state:bf16", **kw)
    assert float(narrow.tpot_s) <= float(wide.tpot_s) * (1 + 1e-12)
    assert float(narrow.memory.max_sequences) >= float(wide.memory.max_sequences)


def test_engine_flags_read_and_written():
    sglang = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 "
                               "--mamba-ssm-dtype bfloat16")
    assert sglang.state == "bf16" and sglang.precision == "state:bf16" and not sglang.unknown
    assert "--mamba-ssm-dtype bfloat16" in launch_command(sglang).script
    vllm = parse_engine_args("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4 --kv-cache-dtype fp8 "
                             "--mamba-ssm-cache-dtype float32")
    assert vllm.precision == "kv:fp8 state:fp32"
    assert "--mamba-ssm-cache-dtype float32" in launch_command(vllm).script
    assert "--mamba-ssm-dtype float32" in launch_command(vllm, "sglang").script
    assert parse_engine_args("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct --mamba-ssm-cache-dtype auto").state is None
    trt = launch_command(launch_from_deployment(NEXT, engine="trtllm-pytorch", tp=4, precision="state:bf16"),
                         "trtllm-pytorch")
    assert "cannot express state" in trt.script
    with pytest.raises(SpecError, match="float32, bfloat16, float16"):
        parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct "
                          "--mamba-ssm-dtype fp8")
    served = inferlab.serve(hardware="h100-sxm", isl=512, osl=16, concurrency=2, num_requests=4,
                            **sglang.to_kwargs("serve"))
    assert served.deployment.model.linear_attention.state_format == "bf16"


def test_sglangs_state_pool_pinned_at_its_slots():
    """``--max-mamba-cache-size 300``: 300 states a replica (75 a rank over four attention-DP ranks),
    three slots a running request (the radix cache on): 100 running requests either way; the KV
    pool takes what the weights leave less 300 states a GPU, where the ratio's pool left it
    1 / 1.9 of it."""
    from dataclasses import replace

    from inferlab.core.memory import recurrent_state_per_gpu
    from inferlab.engines.scheduler import ENGINE_SCHEDULERS
    from inferlab.serving.kv_pool import _pools, kv_capacity_tokens, state_slots

    sglang = ENGINE_SCHEDULERS["sglang"]
    pinned = replace(sglang, state_pool_slots=300)
    tp4 = deployment(NEXT, "h100-sxm", tp=4, engine="sglang")
    adp = deployment(NEXT, "h100-sxm", tp=4, ep=4, attention_dp=True, engine="sglang")
    assert state_slots(tp4, pinned) == 100
    assert state_slots(adp, pinned) == 4 * (75 // 3)
    rest, state = _pools(tp4, sglang)[0], recurrent_state_per_gpu(tp4.model, tp4.parallel)
    assert kv_capacity_tokens(tp4, pinned) == pytest.approx(kv_capacity_tokens(tp4, sglang) * 1.9 * (rest - 300 * state)
                                                            / rest)
    launch = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 "
                               "--max-mamba-cache-size 300")
    assert launch.state_pool_slots == 300 and not launch.unknown
    assert "--max-mamba-cache-size 300" in launch_command(launch).script
    assert "not written: vllm keeps the states in its KV pool" in launch_command(launch, "vllm").script
    served = inferlab.serve(hardware="h100-sxm", isl=512, osl=16, concurrency=2, num_requests=4,
                            **launch.to_kwargs("serve"))
    assert served.limits.max_num_seqs == 100
    with pytest.raises(SpecError, match="keeps the states in its KV pool"):
        inferlab.serve(NEXT, "h100-sxm", tp=4, engine="vllm", concurrency=2, num_requests=4, state_pool_slots=300)
    with pytest.raises(inferlab.InfeasibleError, match="no KV pool is left"):
        inferlab.serve(NEXT, "h100-sxm", tp=4, engine="sglang", concurrency=2, num_requests=4, state_pool_slots=10**6)


def test_state_settings_travel_in_deployments_plans_and_commands():
    """From a review: a Deployment carries the state format and the pinned pool (a plan searching a
    state format writes its candidates as Deployments); a pool too small for one request is
    refused; SGLang's flag on a model without a state is a note, as SGLang ignores it; a command
    converted between engines keeps the states it ran (SGLang FP32 by default, vLLM BF16)."""
    from inferlab import Deployment, InfeasibleError, Workload
    from inferlab.planning.planner import plan
    from inferlab.planning.scenario import load_scenario

    dep = Deployment(model=NEXT, hardware="h100-sxm", layout={"tp": 4}, precision="fp8 state:bf16",
                     engine={"name": "sglang", "state_pool_slots": 300})
    assert Deployment.from_dict(dep.to_dict()) == dep
    served = inferlab.serve(dep, Workload(concurrency=2, num_requests=4, isl=512, osl=16))
    assert served.deployment.model.linear_attention.state_format == "bf16" and served.limits.max_num_seqs == 100
    sc = load_scenario({"name": "s", "models": [NEXT], "hardware": ["h100-sxm"], "engine": "sglang",
                        "traffic": {"rate": 2, "isl": 2000, "osl": 300}, "slo": {"ttft_ms": 3000, "tpot_ms": 60},
                        "search": {"precisions": ["fp8 state:bf16"], "tp": [4]}, "verify": 0})
    assert plan(sc).to_dict()["candidates"][0]["label"].startswith(f"{NEXT} h100-sxm fp8 state:bf16")
    with pytest.raises(InfeasibleError, match="fewer than the 3 one running request takes"):
        inferlab.serve(NEXT, "h100-sxm", tp=4, engine="sglang", concurrency=2, num_requests=4, state_pool_slots=2)
    llama = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
                              "--mamba-ssm-dtype bfloat16")
    assert llama.state is None and "keeps no linear-attention state" in " ".join(llama.notes)
    sglang = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4")
    assert "--mamba-ssm-cache-dtype float32" in launch_command(sglang, "vllm").script
    vllm = parse_engine_args("vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4")
    assert "--mamba-ssm-dtype bfloat16" in launch_command(vllm, "sglang").script
    with pytest.raises(SpecError, match="fp32, bf16, fp16"):
        launch_from_deployment(NEXT, engine="sglang", precision="state:fp8")


def test_an_agreeing_kind_flag_keeps_the_commands_other_kinds():
    """``--kv-cache-dtype fp8`` beside a command that sets the KV cache and the state keeps both
    (it replaced the command's precision text: the state was dropped, and ``--quantization fp8``
    read as BF16 weights)."""
    launch = parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3-Next-80B-A3B-Instruct --tp 4 "
                               "--kv-cache-dtype fp8_e4m3 --mamba-ssm-dtype bfloat16")
    kw = launch.merged({"precision": "kv_cache:fp8"})
    assert PrecisionConfig.parse(kw["precision"]).state == "bf16"
    fp8 = parse_engine_args("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --quantization fp8 "
                            "--kv-cache-dtype fp8").merged({"precision": "kv_cache:fp8"})
    assert PrecisionConfig.parse(fp8["precision"]) == PrecisionConfig.parse("fp8")


def test_explain_says_where_the_state_format_comes_from():
    def note(**kw):
        return next(n for n in deployment(**kw).precision_notes if n.startswith("linear-attention state"))

    assert note(model=NEXT, hardware="h100-sxm", tp=4, engine="sglang").startswith(
        "linear-attention state fp32: sglang's default")
    assert note(model=NEXT, hardware="h100-sxm", tp=4, engine="vllm").startswith(
        "linear-attention state bf16: the model's dtype")
    assert note(model=QWEN35, hardware="b200", tp=8, engine="vllm").startswith(
        "linear-attention state fp32: the config's mamba_ssm_dtype")
    assert note(model=NEXT, hardware="h100-sxm", tp=4, engine="sglang", precision="state:bf16") == \
        "linear-attention state bf16: as given (state:bf16)"
    assert not [n for n in deployment("llama-3.1-8b", "h100-sxm").precision_notes if "linear-attention" in n]
