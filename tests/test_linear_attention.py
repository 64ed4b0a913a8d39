"""Hybrid models with linear attention (Gated DeltaNet: Qwen3-Next, Qwen3.5): a recurrent state per
sequence in place of a KV cache in three of four layers. Expected values are derived by hand from
the configs (``model_specs/qwen3.5-397b-a17b.yaml``, ``qwen3-next-80b-a3b.yaml``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab import SpecError, load_model
from inferlab.core.graph import Step
from inferlab.core.memory import plan_memory, recurrent_state_per_gpu
from inferlab.core.parallelism import Parallelism, tp_split_reason
from inferlab.engines.scheduler import ENGINE_SCHEDULERS, SchedulerConfig
from inferlab.inputs.resolve import deployment
from inferlab.serving.replica import kv_capacity_tokens, scheduler_for, state_slots, state_tokens
from inferlab.serving.simulator import simulate
from inferlab.serving.stepmodel import StepModel
from inferlab.specs.model import ModelSpec
from inferlab.techniques.step import run_step

QWEN35 = "qwen3.5-397b-a17b"
FP8_BF16_KV = {"weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}


def test_qwen3_5_parameters_by_hand():
    # embedding and the untied LM head: 248,320 x 4,096 each
    embed = 248_320 * 4_096
    # a full-attention layer: q with its output gate 4,096 x (32 x 256 x 2), k and v 2 x 4,096 x (2 x 256),
    # o 8,192 x 4,096, q/k norms 2 x 256
    full = 4_096 * 16_384 + 2 * 4_096 * 512 + 8_192 * 4_096 + 2 * 256
    # a Gated DeltaNet layer: in_proj 4,096 x (2 x 2,048 q,k + 2 x 8,192 v,z + 2 x 64 a,b), out_proj
    # 8,192 x 4,096, conv 12,288 channels x 4 taps, A_log and dt_bias 64 each, gated norm 128
    linear = 4_096 * (2 * 2_048 + 2 * 8_192 + 128) + 8_192 * 4_096 + 12_288 * 4 + 2 * 64 + 128
    expert = 3 * 4_096 * 1_024
    per_layer_moe = 512 * expert + expert + 4_096 * 512  # routed, one shared, router
    norms = 60 * 2 * 4_096 + 4_096
    total = 2 * embed + 15 * full + 45 * linear + 60 * per_layer_moe + norms
    m = load_model(QWEN35)
    assert m.param_counts.attention == 15 * full + 45 * linear == 6_883_511_040
    assert m.total_params == total
    assert m.active_params == total - 60 * 502 * expert  # 10 of 512 routed experts a token
    assert m.layer_kinds == {"linear": 45, "full": 15}
    assert [i for i, layer in enumerate(m.layers) if layer.attention == "full"] == list(range(3, 60, 4))


def test_qwen3_5_cache_a_token_and_state_a_sequence_by_hand():
    m = load_model(QWEN35)
    # only the 15 full layers cache a token: 2 (K, V) x 2 KV heads x 256 x 2 B
    assert m.kv_cache_bytes_per_token("bf16") == {"full": 15 * 2 * 2 * 256 * 2} == {"full": 30_720}
    assert float(m.kv_cache_bytes(8_192, "bf16")) == 30_720 * 8_192
    # 45 layers x (64 value heads x 128 x 128 at float32 + (2 x 2,048 + 8,192) channels x 3 taps x 2 B)
    assert m.recurrent_state_bytes() == 45 * (64 * 128 * 128 * 4 + 12_288 * 3 * 2) == 192_061_440
    assert load_model("llama-3.1-8b").recurrent_state_bytes() == 0.0


def test_a_sequence_on_one_of_four_gpus_holds_half_its_kv_and_a_quarter_of_its_state():
    m, hw = load_model(QWEN35), inferlab.load_hardware("b200")
    from inferlab.core.quantization import PrecisionConfig

    prec = PrecisionConfig(weights="fp8", activations="fp8", kv_cache="bf16")
    plan = plan_memory(m, hw, prec, parallel=Parallelism(tp=4), batch=np.array(1.0), context=np.array(1_024.0),
                       step_tokens=np.array(0.0))
    # two KV heads over four GPUs: each holds one (half a token's KV); the 16 key / 64 value heads split 4 ways
    assert plan.kv_per_token == pytest.approx(30_720 / 2)
    assert recurrent_state_per_gpu(m, Parallelism(tp=4)) == pytest.approx(192_061_440 / 4)
    assert float(plan.kv_per_sequence) == pytest.approx(1_024 * 15_360 + 48_015_360)


def test_decode_moves_each_state_once_each_way_whatever_the_context():
    dep = deployment(QWEN35, "b200", tp=4, precision="fp8")
    for context in (100.0, 50_000.0):
        ops = {t.op.name: t.op for t in run_step(dep, Step.decode(np.array(8.0), np.array(context))).times}
        delta = ops["delta_rule"].byte_parts()
        # 8 sequences x one layer's state on one of 4 GPUs (4,268,032 B / 4), read and written back
        assert float(delta["kv_read"]) == pytest.approx(8 * 4_268_032 / 4)
        assert float(delta["kv_write"]) == pytest.approx(8 * 4_268_032 / 4)
        assert ops["delta_rule"].count == 45 and ops["attention"].count == 15
    # a prompt runs in chunks: 7 q v FLOPs a decode token and head; 4 k v + 2 x 64 x (2 k + v) in chunks
    pre = {t.op.name: t.op for t in run_step(dep, Step.prefill(np.array(1.0), np.array(1_024.0))).times}
    assert float(pre["delta_rule"].flops) == pytest.approx(1_024 * 16 * (4 * 128 * 128 + 2 * 64 * 384))
    dec = {t.op.name: t.op for t in run_step(dep, Step.decode(np.array(1.0), np.array(10.0))).times}
    assert float(dec["delta_rule"].flops) == pytest.approx(16 * 7 * 128 * 128)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(batch=st.integers(1, 256), context=st.integers(1, 200_000))
def test_a_narrower_state_is_never_slower_and_the_state_costs_the_same_at_any_length(batch, context):
    wide = deployment(QWEN35, "h200-sxm", tp=8, precision="fp8")
    lin = wide.model.linear_attention
    narrow_model = wide.model.model_copy(update={"linear_attention": lin.model_copy(update={"state_format": "bf16"})})
    narrow = replace(wide, model=narrow_model)
    step = Step.decode(np.array(float(batch)), np.array(float(context)))
    assert float(run_step(narrow, step).time_s) <= float(run_step(wide, step).time_s)
    short = {t.op.name: t for t in run_step(wide, Step.decode(np.array(float(batch)), np.array(1.0))).times}
    long = {t.op.name: t for t in run_step(wide, step).times}
    assert float(long["delta_rule"].total_s) == pytest.approx(float(short["delta_rule"].total_s))


def test_sglang_splits_what_the_weights_leave_between_state_and_kv_pools():
    dep = deployment(QWEN35, "b300", tp=4, precision=FP8_BF16_KV, engine="sglang")
    sglang = ENGINE_SCHEDULERS["sglang"]
    one_pool = replace(sglang, state_pool_ratio=None)
    # state pool : KV pool = 0.9 (SGLang's --mamba-full-memory-ratio): the KV pool is 1/1.9 of the rest
    assert kv_capacity_tokens(dep, sglang) == pytest.approx(kv_capacity_tokens(dep, one_pool) / 1.9)
    slots = state_slots(dep, sglang)
    kv_bytes = kv_capacity_tokens(dep, sglang) * 30_720 / 2  # one of two KV heads a GPU
    # slots of a quarter of a state each, three a running request (the radix cache's locked and donated slots)
    assert slots == int(0.9 * kv_bytes // (192_061_440 / 4)) // 3
    assert state_slots(dep, one_pool) is None and state_tokens(dep, sglang) == 0.0
    # the state pool caps the running requests; SGLang's no_buffer strategy turns its overlap scheduler off
    capped = scheduler_for(dep, replace(sglang, max_num_seqs=10**5))
    assert capped.max_num_seqs == slots and capped.overlap_host is False
    llama = deployment("llama-3.1-70b", "b300", tp=4, precision="fp8", engine="sglang")
    assert scheduler_for(llama, sglang).overlap_host is True and state_slots(llama, sglang) is None


def test_one_pool_gives_each_running_request_pages_for_its_state():
    dep = deployment(QWEN35, "b200", tp=4, precision=FP8_BF16_KV, engine="vllm")
    vllm = ENGINE_SCHEDULERS["vllm"]
    # vLLM's pages hold one layer's state on one of four GPUs, 4,268,032 / 4 = 1,067,008 B, in tokens of one
    # layer's KV there (one of two KV heads: 2 x 256 x 2 = 1,024 B): 16 x ceil(1,067,008 / 16,384) = 1,056
    assert scheduler_for(dep, vllm).kv_block_size == 1_056
    # a page for each of the 45 linear layers, in tokens of the 15 full layers: 3 x 1,056
    assert state_tokens(dep, vllm) == 3 * 1_056
    # without page alignment: a quarter of 192,061,440 B over half of 30,720 B a token
    assert state_tokens(dep, replace(vllm, state_pages=False)) == pytest.approx(48_015_360 / 15_360)
    # an engine of 625 pages of 16 tokens: prompts of 1,000 tokens take 63 pages, 9 at once; with a
    # state of 1,600 tokens (100 pages) each takes 163, 3 at once
    model = StepModel(dep, 16_384)
    sched = SchedulerConfig(max_num_seqs=64, max_num_batched_tokens=16_384)  # whole prompts: no partial pages
    isl, osl = np.full(12, 1_000.0), np.full(12, 4.0)
    for state, most in ((0.0, 9), (1_600.0, 3)):
        t = simulate(model, sched, np.zeros(12), isl, osl, kv_capacity_tokens=10_000, state_tokens=state)
        running = max(int(np.sum((t.first_scheduled <= s) & (t.finish > s))) for s in t.first_scheduled)
        assert running == most and t.preemptions == 0
    with pytest.raises(inferlab.InfeasibleError, match="state's 1600 tokens"):
        simulate(model, sched, np.zeros(1), np.array([9_000.0]), np.array([4.0]), kv_capacity_tokens=10_000,
                 state_tokens=1_600.0)


def test_configs_read_and_refused():
    m = load_model("qwen3-next-80b-a3b")
    assert m.layer_kinds == {"linear": 36, "full": 12} and m.attention_output_gate
    assert m.linear_attention.state_elements == 32 * 128 * 128
    # its config names no state format: SGLang keeps FP32, vLLM the model's BF16; the convolution's
    # 3 taps of (2 x 2,048 + 4,096) channels in BF16 either way
    conv = (2 * 2_048 + 4_096) * 3 * 2
    for engine, width in (("sglang", 4), ("vllm", 2)):
        dep = deployment("qwen3-next-80b-a3b", "h200-sxm", tp=4, precision="fp8", engine=engine)
        assert dep.model.recurrent_state_bytes() == 36 * (32 * 128 * 128 * width + conv)
    assert deployment(QWEN35, "b200", tp=4, precision="fp8", engine="vllm").model.linear_attention.state_format == "fp32"
    assert tp_split_reason(load_model(QWEN35), 32) == "tp=32 does not divide the 16 key heads of the linear-attention layers"
    base = {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 4096,
            "intermediate_size": 512, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
            "linear_key_head_dim": 32, "linear_value_head_dim": 32}
    dense = ModelSpec.from_hf_config(base)
    assert dense.layer_kinds == {"linear": 3, "full": 1} and dense.moe is None
    with pytest.raises(SpecError, match="linear_num_value_heads"):
        ModelSpec.from_hf_config({k: v for k, v in base.items() if k != "linear_num_value_heads"})
    with pytest.raises(SpecError, match="mamba_ssm_dtype"):
        ModelSpec.from_hf_config({**base, "mamba_ssm_dtype": "int8"})
    with pytest.raises(SpecError, match="'layer_types' holds 'linear_attention'"):
        ModelSpec.from_hf_config({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
                                  "num_attention_heads": 4, "vocab_size": 10, "max_position_embeddings": 64,
                                  "intermediate_size": 512, "layer_types": ["linear_attention", "full_attention"]})
    with pytest.raises(SpecError, match="'layer_types' holds 'sliding_attention'; allowed for model_type 'qwen3_next'"):
        ModelSpec.from_hf_config({**base, "layer_types": ["linear_attention"] * 3 + ["sliding_attention"]})
    with pytest.raises(SpecError, match="hybrid model keeps some attention layers"):
        ModelSpec.from_hf_config({**base, "layer_types": ["linear_attention"] * 4})


def test_a_hybrid_model_estimates_and_serves():
    est = inferlab.estimate(QWEN35, "b200", tp=4, precision=FP8_BF16_KV, isl=8_192, osl=256, batch_size=32)
    text = est.explain()
    # one of four GPUs: 192,061,440 B / 4 = 48.0 MB of state a sequence beside 15.4 kB a token of KV
    assert "15.4 kB/token and a 48.0 MB linear-attention state a sequence" in text
    r = inferlab.serve(QWEN35, "b200", tp=4, precision="fp8", engine="sglang", isl=1_024, osl=64, concurrency=8,
                       num_requests=16)
    assert np.all(np.isfinite(r.ttft_s)) and r.tpot_s.mean() > 0


def test_each_prompt_of_a_grid_runs_its_own_form_and_a_verify_pass_keeps_each_drafts_state():
    # a one-token prompt beside an 8,192-token one does not turn the long one's chunks into steps
    alone = inferlab.estimate(QWEN35, "b200", tp=4, precision=FP8_BF16_KV, isl=8_192, osl=16, batch_size=1)
    grid = inferlab.estimate(QWEN35, "b200", tp=4, precision=FP8_BF16_KV, isl=[1, 8_192], osl=16, batch_size=1)
    assert float(np.ravel(grid.ttft_s)[-1]) == pytest.approx(float(np.ravel(alone.ttft_s)[0]), rel=1e-9)
    # a verify pass of 4 tokens a sequence reads each state once and keeps 4 of them (rollback)
    dep = deployment(QWEN35, "b200", tp=4, precision=FP8_BF16_KV)
    verify = Step("decode", np.array(8.0), np.array(4.0), np.array(1_000.0))
    op = next(t.op for t in run_step(dep, verify).times if t.op.name == "delta_rule")
    assert float(op.byte_parts()["kv_read"]) == pytest.approx(8 * 4_268_032 / 4)
    assert float(op.byte_parts()["kv_write"]) == pytest.approx(4 * 8 * 4_268_032 / 4)
    assert float(op.flops) == pytest.approx(8 * 4 * 16 * 7 * 128 * 128)  # token by token: 7 k v a head


def test_drafters_of_a_hybrid_model_attend_fully():
    # an EAGLE head is built from the first layer (linear in these models) and runs as full attention
    for model, spec in (("qwen3-next-80b-a3b", "eagle:k=3,accept=0.7"), (QWEN35, "mtp:k=2,accept=0.8")):
        est, plain = (inferlab.estimate(model, "b200", tp=4, precision="fp8", isl=1_024, osl=256, batch_size=8,
                                        speculative=s) for s in (spec, None))
        assert 0 < float(est.tpot_s) < float(plain.tpot_s)


def test_a_decode_pool_receives_its_heads_share_of_kv_and_state():
    from inferlab.techniques.disaggregation import Disaggregation, Pool
    from inferlab.techniques.kv_transfer import kv_transfer

    pre = deployment(QWEN35, "b200", tp=4, precision=FP8_BF16_KV)
    dec = deployment(QWEN35, "b200", tp=8, precision=FP8_BF16_KV)
    d = Disaggregation(Pool("b200", num_gpus=4, tp=4), Pool("b200", num_gpus=8, tp=8))
    move = kv_transfer(d, pre, dec, 1.0, 1_000.0, 0.1)
    # each of 8 decode GPUs receives half the KV (one of two KV heads) and an eighth of the state
    per_gpu = 1_000 * 30_720 / 2 + 192_061_440 / 8
    assert float(move.bytes) == pytest.approx(8 * per_gpu)


def test_sglang_state_flags_read_written_and_served():
    from inferlab.engines import launch_command, parse_engine_args

    cmd = ("python -m sglang.launch_server --model-path Qwen/Qwen3.5-397B-A17B-FP8 --tp 4 "
           "--mamba-full-memory-ratio 0.5 --mamba-scheduler-strategy extra_buffer")
    launch = parse_engine_args(cmd)
    # extra_buffer: three slots a request plus two ping-pong states with the overlap scheduler, which stays on
    assert (launch.state_pool_ratio, launch.state_slots, launch.hybrid_overlap) == (0.5, 5, True)
    assert "state_slots 5 (--mamba-scheduler-strategy)" in launch.read_lines()[0]
    written = launch_command(launch).script
    assert "--mamba-full-memory-ratio 0.5" in written and "--mamba-scheduler-strategy extra_buffer" in written
    assert "not written: vllm keeps the states in its KV pool" in launch_command(launch, "vllm").script
    no_overlap = parse_engine_args(cmd + " --disable-overlap-schedule")
    assert no_overlap.state_slots == 4  # one ping-pong state without overlap
    for bad, says in (("--mamba-scheduler-strategy fast", "allowed: auto, no_buffer, extra_buffer"),
                      ("--mamba-full-memory-ratio 0", "is not a number above 0")):
        with pytest.raises(SpecError, match=says):
            parse_engine_args("python -m sglang.launch_server --model-path Qwen/Qwen3.5-397B-A17B --tp 4 " + bad)
    dep = deployment(QWEN35, "b300", tp=4, precision=FP8_BF16_KV, engine="sglang")
    sglang = ENGINE_SCHEDULERS["sglang"]
    # the KV pool is 1 / (1 + r) of what the weights leave: 1 / 1.5 at r 0.5, 1 / 1.9 at 0.9
    assert kv_capacity_tokens(dep, replace(sglang, state_pool_ratio=0.5)) == \
        pytest.approx(kv_capacity_tokens(dep, sglang) * 1.9 / 1.5)
    limits = scheduler_for(dep, replace(sglang, state_slots=5, hybrid_overlap=True, max_num_seqs=10**5))
    assert limits.overlap_host is True and limits.max_num_seqs == state_slots(dep, replace(sglang, state_slots=5))
    r = inferlab.serve(QWEN35, "b300", tp=4, precision=FP8_BF16_KV, engine="sglang", isl=512, osl=32, concurrency=4,
                       num_requests=8, state_pool_ratio=0.5, state_slots=5, hybrid_overlap=True)
    assert np.all(np.isfinite(r.e2e_s))


def test_fixes_from_a_hunt_of_the_hybrid_paths():
    # a config whose every layer is full attention has no linear attention (it crashed serving)
    base = {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "max_position_embeddings": 4096,
            "intermediate_size": 512, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
            "linear_key_head_dim": 32, "linear_value_head_dim": 32, "full_attention_interval": 1}
    plain = ModelSpec.from_hf_config(base)
    assert plain.linear_attention is None and plain.layer_kinds == {"full": 4}
    r = inferlab.serve(plain, "h100-sxm", engine="vllm", isl=128, osl=16, concurrency=2, num_requests=4)
    assert np.all(np.isfinite(r.e2e_s))
    # SGLang's own state pool options are refused for an engine that keeps states in its KV pool
    with pytest.raises(SpecError, match="state pool of its own is SGLang's; vllm keeps the states in its KV pool"):
        inferlab.serve(QWEN35, "b200", tp=4, precision="fp8", engine="vllm", isl=128, osl=16, concurrency=2,
                       num_requests=4, state_pool_ratio=0.5)
    # SGLang's static batch runs in waves of what its state pool holds, as its serving does
    est = inferlab.estimate("qwen3-next-80b-a3b", "h200-sxm", precision="fp8", engine="sglang", batch_size=500,
                            isl=128, osl=128)
    dep = deployment("qwen3-next-80b-a3b", "h200-sxm", precision="fp8", engine="sglang")
    held = state_slots(dep, ENGINE_SCHEDULERS["sglang"])
    assert float(est.wave_batch) == held and float(est.waves) == np.ceil(500 / held)
    assert "pool of linear-attention states runs the batch" in est.explain()
    # and the memory line says what the pools hold, not only what the memory would (it had said
    # "up to N sequences fit" with N above the waves' size)
    assert f"in the engine's pools (its linear-attention states hold {held:.0f}" in est.explain()
    # pipeline stages: the stage with the most linear layers holds their states (Qwen3.5: 12 of 45 at pp 4)
    assert recurrent_state_per_gpu(load_model(QWEN35), Parallelism(pp=4)) == pytest.approx(192_061_440 * 12 / 45)
    # Qwen3-Next drafts with its MTP layer
    mtp = inferlab.estimate("qwen3-next-80b-a3b", "h200-sxm", tp=2, precision="fp8", speculative="mtp:k=2,accept=0.8",
                            isl=1_024, osl=256)
    assert float(mtp.tpot_s) < float(inferlab.estimate("qwen3-next-80b-a3b", "h200-sxm", tp=2, precision="fp8",
                                                       isl=1_024, osl=256).tpot_s)


def test_sglangs_two_pools_in_a_static_batch_say_which_binds_and_when_none_holds_a_sequence():
    # 30,000-token prompts on two L40S: the KV pool beside the states' holds 2, the state pool far more
    est = inferlab.estimate("qwen3-next-80b-a3b", "l40s", tp=2, precision="fp8", engine="sglang", batch_size=50,
                            isl=30_000, osl=128)
    assert float(est.wave_batch) == 2 and "KV pool, beside its pool of states, runs the batch" in est.explain()
    # 121,000 tokens: one sequence does not fit the KV pool's 1 / 1.9 share, though the whole rest would hold it
    with pytest.raises(inferlab.InfeasibleError, match="does not fit the engine's KV pool beside its pool of"):
        inferlab.estimate("qwen3-next-80b-a3b", "l40s", tp=2, precision="fp8", engine="sglang", batch_size=4,
                          isl=120_000, osl=1_000, allow_long_context=True)
    # the state options are SGLang's: refused with separate pools too; overlap kept on means extra_buffer's 5 slots
    with pytest.raises(SpecError, match="a state pool of its own and a prompt.s encoder work are not simulated over separate pools"):
        inferlab.serve(QWEN35, isl=128, osl=16, rate=1.0, num_requests=4, engine="sglang", state_slots=5,
                       disaggregation="prefill=b200x4:tp4,decode=b200x4:tp4")
    from inferlab.serving.replica import engine_scheduler

    assert engine_scheduler("sglang", hybrid_overlap=True).state_slots == 5
    assert engine_scheduler("sglang", hybrid_overlap=True, overlap_host=False).state_slots == 4
    assert engine_scheduler("sglang", hybrid_overlap=False).state_slots == 3


def test_serving_says_when_sglangs_state_pool_caps_the_running_requests():
    r = inferlab.serve("qwen3-next-80b-a3b", "h200-sxm", precision="fp8", engine="sglang", concurrency=400,
                       num_requests=400, isl=128, osl=16)
    dep = deployment("qwen3-next-80b-a3b", "h200-sxm", precision="fp8", engine="sglang")
    held = state_slots(dep, ENGINE_SCHEDULERS["sglang"])
    assert r.limits.max_num_seqs == held < 400
    assert f"at most {held:,} requests run at once: the engine's pool of linear-attention states" in r.explain()
    plain = inferlab.serve("llama-3.1-8b", "h100-sxm", engine="sglang", concurrency=4, num_requests=4, isl=128, osl=16)
    assert "linear-attention" not in plain.explain()


def test_vllms_static_batch_takes_its_state_sized_pages():
    est = inferlab.estimate(QWEN35, "b200", tp=4, precision=FP8_BF16_KV, engine="vllm", isl=1_000, osl=100,
                            batch_size=64)
    # 1,100 tokens in pages of 1,056 take two, at 15,360 B a token on one of four GPUs, beside the state's 48,015,360 B
    assert float(est.memory.kv_per_sequence) == pytest.approx(2 * 1_056 * 15_360 + 48_015_360)
    sglang = inferlab.estimate(QWEN35, "b200", tp=4, precision=FP8_BF16_KV, engine="sglang", isl=1_000, osl=100,
                               batch_size=64)
    assert float(sglang.memory.kv_per_sequence) < float(est.memory.kv_per_sequence)  # SGLang's own pages
