"""Attention data-parallel ranks of several GPUs (``attention_tp``): SGLang's ``--tp 8 --dp 4
--enable-dp-attention``, vLLM's ``-tp 2 -dp 4 --enable-expert-parallel``. Expected values are
derived by hand in each test."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import SpecError, estimate, load_hardware, load_model
from inferlab.cli.main import main
from inferlab.core.memory import plan_memory
from inferlab.core.parallelism import Parallelism, weights_per_gpu
from inferlab.core.quantization import PrecisionConfig
from inferlab.engines import launch_command, parse_engine_args
from inferlab.engines.scheduler import ENGINE_SCHEDULERS
from inferlab.inputs.resolve import deployment
from inferlab.serving.replica import scheduler_for
from inferlab.techniques.step import decode


def test_vllm_tp_inside_dp_ranks_is_one_stage_of_ranks_of_tp_gpus():
    vllm = deployment("deepseek-v3", "b200", tp=2, dp=4, ep=8, precision="fp8").parallel
    explicit = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, attention_tp=2, precision="fp8").parallel
    assert vllm == explicit == Parallelism(tp=8, ep=8, attention_dp=True, attention_tp=2)
    assert (vllm.attention_groups, vllm.head_split, vllm.num_gpus) == (4, 2, 8)
    assert str(vllm) == "tp8xep8 attention-dp (4 ranks of tp2)"


@pytest.mark.parametrize("kw, words", [
    (dict(tp=8, ep=8, attention_tp=2), "attention DP is off"),
    (dict(tp=8, ep=8, attention_dp=True, attention_tp=3), "must divide tp=8"),
    (dict(tp=8, ep=8, attention_dp=True, attention_tp=0), "attention_tp"),
])
def test_meaningless_attention_ranks_are_refused(kw, words):
    with pytest.raises(SpecError, match=words):
        deployment("deepseek-v3", "b200", precision="fp8", **kw)


def test_ranks_of_two_gpus_split_the_weights_outside_the_experts_in_two():
    model = load_model("deepseek-v3")
    fp8 = PrecisionConfig.parse("fp8")
    tp8 = weights_per_gpu(model, fp8, Parallelism(tp=8, ep=8))
    ranks2 = weights_per_gpu(model, fp8, Parallelism(tp=8, ep=8, attention_dp=True, attention_tp=2))
    counts = model.param_counts
    ends = counts.embedding + counts.lm_head  # 16-bit: 2 B each
    rest = counts.total - ends - counts.routed_experts  # 1 B each in FP8
    # TP8: 1/8 of all but the experts on each GPU; ranks of two: 1/2 of it; the experts alike
    assert ranks2 - tp8 == pytest.approx((rest + 2 * ends) * (1 / 2 - 1 / 8))


def test_kv_per_token_splits_over_a_ranks_gpus():
    # MiniMax-M2.5: 62 layers of 8 KV heads of 128, K and V, FP8 KV: 8 x 128 x 2 x 62 = 126,976 B a
    # token whole; a rank of a GPUs holds 1/a of the heads
    kw = dict(precision="fp8 kv:fp8", batch_size=8, isl=1024, osl=16)
    for a, expected in ((1, 126_976), (2, 63_488), (4, 31_744), (8, 15_872)):
        est = estimate("minimax-m2.5", "b200", tp=8, ep=8, attention_dp=True, attention_tp=a, **kw)
        assert est.memory.kv_per_token == pytest.approx(expected)
    # DeepSeek's MLA latent is one KV unit: every GPU of a rank holds it whole
    mla = [estimate("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, attention_tp=a, **kw).memory.kv_per_token
           for a in (1, 2)]
    assert mla[0] == pytest.approx(mla[1])


def test_a_decode_step_all_reduces_inside_the_rank_and_dispatches_its_share():
    dep = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=True, attention_tp=2, precision="fp8")
    ops = decode(dep, np.array(64.0), np.array(2048.0)).ops
    reduces = [op for op in ops if op.name.startswith("all_reduce")]
    assert reduces and all(op.group_size == 2 for op in reduces)  # the rank's two GPUs
    attention = next(op for op in ops if op.name == "attention")
    assert float(attention.heads) == pytest.approx(128 / 2)  # half of DeepSeek's 128 heads a GPU
    # 64 sequences over 4 ranks: 16 a rank, 8 token-expert copies of 7,168 x 2 B each, sent half
    # from each of the rank's two GPUs, to all 8 GPUs of the stage
    dispatch = next(op for op in ops if op.name == "moe_dispatch")
    assert float(dispatch.message_bytes) == pytest.approx(16 * 8 * 7168 * 2 / 2)
    assert dispatch.group_size == 8


def test_scheduler_limits_per_rank_count_the_ranks():
    sched = ENGINE_SCHEDULERS["trtllm"]
    dep = deployment("deepseek-v3", "b200", tp=8, ep=8, attention_dp=True, attention_tp=2, precision="nvfp4",
                     engine="trtllm")
    assert scheduler_for(dep, sched).max_num_seqs == 4 * sched.max_num_seqs


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), model=st.sampled_from(["deepseek-v3", "minimax-m2.5", "qwen3-235b-a22b"]))
def test_wider_ranks_never_hold_more_per_gpu(tp, model):
    """More GPUs a rank never more weight or KV bytes a GPU (the rank's GPUs share what it holds)."""
    spec, hw, fmt = load_model(model), load_hardware("b200"), PrecisionConfig.parse("fp8 kv:fp8")
    one = np.array(1.0)
    plans = [plan_memory(spec, hw, fmt, parallel=Parallelism(tp=tp, ep=tp, attention_dp=True, attention_tp=a),
                         batch=one, context=one * 512, step_tokens=one * 512)
             for a in (d for d in (1, 2, 4, 8) if tp % d == 0)]
    for wide, narrow in zip(plans[1:], plans):
        assert wide.weights <= narrow.weights * (1 + 1e-12)
        assert wide.kv_per_token <= narrow.kv_per_token * (1 + 1e-12)


def test_engine_flags_read_and_written_back():
    sglang = parse_engine_args("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --dp 4 "
                               "--enable-dp-attention --ep-size 8")
    assert (sglang.tp, sglang.ep, sglang.attention_dp, sglang.attention_tp) == (8, 8, True, 2)
    assert "--tp 8 --dp 4 --enable-dp-attention" in " ".join(launch_command(sglang).script.replace("\\", "").split())
    vllm = parse_engine_args("vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 4 --enable-expert-parallel")
    assert (vllm.tp, vllm.ep, vllm.dp, vllm.attention_dp, vllm.attention_tp) == (8, 8, 1, True, 2)
    written = " ".join(launch_command(vllm).script.replace("\\", "").split())
    assert "--tensor-parallel-size 2 --data-parallel-size 4 --enable-expert-parallel" in written
    trtllm = launch_command(vllm, "trtllm")  # TensorRT-LLM's attention DP is a GPU a rank
    assert [key for key, _ in trtllm.unexpressed] == ["attention_tp"]


def test_cli_takes_attention_tp_and_says_what_is_wrong(capsys):
    assert main(["estimate", "deepseek-v3", "b200", "--tp", "8", "--ep", "8", "--attention-dp", "--attention-tp", "2",
                 "--precision", "fp8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["attention_tp"], out["num_gpus"]) == (2, 8)
    assert main(["estimate", "deepseek-v3", "b200", "--tp", "8", "--ep", "8", "--attention-tp", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--attention-tp 2" in err[0] and "--attention-dp" in err[0]


def test_a_benchmark_file_run_with_attention_ranks_of_two_gpus_reads_as_such():
    from conftest import DATA
    from inferlab.validation.bench import bench_cases, given_deployment
    from inferlab.validation.cases import case_layout

    given = given_deployment(engine_args="vllm serve deepseek-ai/DeepSeek-V3 -tp 2 -dp 4 --enable-expert-parallel",
                             gpu="h200-sxm")
    cases, _ = bench_cases([DATA / "bench" / "sglang-bench-serving.jsonl"], given)
    case = cases[0]
    # the case schema's spelling: the GPUs of a rank as tp, the ranks apart; 8 GPUs in all
    assert (case.model, case.num_gpus, case.parallelism.tp, case.parallelism.attention_dp_size) == (
        "deepseek-v3", 8, 2, 4)
    assert case_layout(case) == {"tp": 8, "pp": 1, "ep": 8, "dp": 1, "attention_dp": True, "attention_tp": 2}


def test_the_combine_sums_the_routed_experts_without_an_all_reduce():
    """Under attention DP the combine brings each token's summed expert outputs back; only the
    rank's own tensor-parallel layers all-reduce: MiniMax (no shared experts) its attention and
    its QK-norm statistics; DeepSeek also its first dense layers' MLPs and its shared expert."""
    names = {}
    for model in ("minimax-m2.5", "deepseek-v3"):
        dep = deployment(model, "h200-sxm", tp=8, ep=8, attention_dp=True, attention_tp=2, precision="fp8")
        names[model] = {op.name for op in decode(dep, np.array(64.0), np.array(2048.0)).ops
                        if op.name.startswith("all_reduce")}
    assert names["minimax-m2.5"] == {"all_reduce_attention", "all_reduce_qk_norm"}
    assert names["deepseek-v3"] == {"all_reduce_attention", "all_reduce_mlp", "all_reduce_moe_combine"}


def test_sglang_dp_attention_with_one_rank_is_tensor_parallel_attention():
    launch = parse_engine_args("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
                               "--enable-dp-attention")
    assert (launch.tp, launch.attention_dp, launch.attention_tp) == (8, False, 1)
    assert any("--dp 1" in note for note in launch.notes)


def test_an_mtp_drafters_kv_splits_as_the_targets():
    """GLM-4.5's MTP layer keeps a layer of KV a token; under attention DP a rank's GPUs split it
    over its KV heads as the target's layers (whole on a rank of one GPU, half on two)."""
    from inferlab.techniques.speculative import SpeculativeConfig
    from inferlab.techniques.speculative_memory import drafter_memory

    spec = SpeculativeConfig(method="mtp", k=1, acceptance=0.7)
    kv = {a: drafter_memory(deployment("glm-4.5", "h200-sxm", tp=8, ep=8, attention_dp=True, attention_tp=a,
                                       precision="fp8 kv:fp8"), spec).kv_bytes_per_token for a in (1, 2)}
    model = load_model("glm-4.5")
    whole = model.kv_elements_per_token_per_layer() * 1.0  # FP8: 1 B an element
    assert (kv[1], kv[2]) == pytest.approx((whole, whole / 2))


def test_an_mtp_draft_pass_under_attention_dp_runs_the_busiest_ranks_sequences():
    """DeepSeek-V3's MTP module under attention DP over 8 GPUs at 256 sequences: each rank drafts
    for its 32 (all 128 heads a GPU, no all-reduce), its MoE layer over expert parallelism with a
    dispatch of 32 x 8 token-expert copies of 7,168 x 2 B; under TP8, all 256 over 16 heads a GPU."""
    from inferlab.techniques.speculative import SpeculativeConfig, _mtp

    spec = SpeculativeConfig(method="mtp", k=1, acceptance=0.7)
    for adp, heads, tokens in ((True, 128, 32), (False, 16, 256)):
        dep = deployment("deepseek-v3", "h200-sxm", tp=8, ep=8, attention_dp=adp, precision="fp8")
        (draft,), _ = _mtp(dep, spec, np.array(256.0), np.array(1024.0))
        ops = {op.name: op for op in draft.ops}
        assert float(ops["attention"].heads) == heads and float(ops["attention"].batch) == tokens
        assert any(name.startswith("all_reduce") for name in ops) is not adp
        if adp:
            assert float(ops["moe_dispatch"].message_bytes) == pytest.approx(32 * 8 * 7168 * 2)
