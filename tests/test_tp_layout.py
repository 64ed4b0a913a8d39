"""Which tensor-parallel sizes split a model's attention, and the layouts a memory error
suggests: only ones the model can be laid out on."""

from __future__ import annotations

import pytest

from inferlab import InfeasibleError, estimate, load_model
from inferlab.cli.main import main
from inferlab.core.parallelism import tp_split_reason


@pytest.mark.parametrize("model_id, tp, reason", [
    # GLM-4.5-Air: 96 attention heads, 8 KV heads
    ("glm-4.5-air", 3, "tp=3 does not split the 8 KV heads"),    # 96 / 3 = 32 heads, 8 / 3 KV heads
    ("glm-4.5-air", 6, "tp=6 does not split the 8 KV heads"),
    ("glm-4.5-air", 12, "tp=12 does not split the 8 KV heads"),  # 12 is no multiple of 8
    ("glm-4.5-air", 4, ""),                                      # 2 KV heads a GPU
    ("glm-4.5-air", 24, ""),                                     # each KV head on 3 GPUs
    ("glm-4.5-air", 5, "tp=5 does not divide the 96 attention heads"),
    ("llama-3.1-70b", 16, ""),                                   # 64 heads, 8 KV heads on 2 GPUs each
    ("deepseek-v3", 32, ""),                                     # MLA: one latent KV, whole on every GPU
])
def test_a_tp_splits_the_attention_heads_and_the_kv_heads(model_id, tp, reason):
    why = tp_split_reason(load_model(model_id), tp)
    assert why.startswith(reason) if reason else why == ""


def test_too_small_a_tp_suggests_one_the_kv_heads_split_over():
    # GLM-4.5-Air's bf16 weights are 213.7 GB: a third (71.2 GB) would fit in the 77.0 GB usable
    # of an H100, but 3 GPUs cannot split its 8 KV heads; the next layout that fits is tp=4. On the
    # two GPUs given, fp8 weights (106.9 GB, 53.4 GB a GPU) leave room for a sequence in 77.0 GB
    with pytest.raises(InfeasibleError) as info:
        estimate("glm-4.5-air", "h100-sxm", tp=2)
    assert info.value.suggestion == {"tp": 4}
    assert str(info.value).endswith("; tp=4 would fit, or fp8 weights on these 2 GPUs (precision={'weights': 'fp8'})")
    assert "tp=3" not in str(info.value)


def test_the_cli_suggests_the_same_and_refuses_tp_3(capsys):
    assert main(["estimate", "glm-4.5-air", "h100-sxm", "--tp", "2"]) == 1
    assert capsys.readouterr().err.strip().endswith("; tp=4 would fit, or fp8 weights on these 2 GPUs (--weights fp8)")
    # a layout the model's heads cannot take is a meaningless combination: bad input, exit 2
    assert main(["estimate", "glm-4.5-air", "h100-sxm", "--tp", "3"]) == 2
    err = capsys.readouterr().err.strip()
    # divisors of 96 up to 64 that divide 8 or are multiples of it (3, 6 and 12 are neither)
    assert err == ("inferlab: error: glm-4.5-air: tp=3 does not split the 8 KV heads (it neither divides them nor "
                   "is a multiple of them); tensor-parallel sizes that split its heads: 1, 2, 4, 8, 16, 24, 32, 48")


def test_an_expert_parallel_size_that_cannot_split_the_experts_is_bad_input(capsys):
    # Qwen3-30B-A3B has 128 routed experts: three ranks of vLLM's -dp 3 --enable-expert-parallel
    # cannot hold a third each; bad input (exit 2) as a tp that cannot split the heads (it had
    # been exit 1), listing the sizes that can: the divisors of 128 up to 64
    assert main(["estimate", "--engine-args", "vllm serve Qwen/Qwen3-30B-A3B --data-parallel-size 3 "
                 "--enable-expert-parallel", "h100-sxm"]) == 2
    assert capsys.readouterr().err.strip() == (
        "inferlab: error: ep=3 does not divide the 128 routed experts of qwen3-30b-a3b; expert-parallel sizes "
        "that split them: 1, 2, 4, 8, 16, 32, 64")


def test_a_refusal_names_a_narrower_format_only_where_it_fits_the_gpus_given():
    # Gemma-3-27B: 54.0 GB of bf16 weights against 23.2 GB usable on an RTX 4090; fp8 (27.0 GB)
    # does not fit either, int4 (13.5 GB and its scales) does
    with pytest.raises(InfeasibleError) as info:
        estimate("gemma-3-27b", "rtx-4090")
    assert str(info.value).endswith("; tp=4 would fit, or int4 weights on this GPU (precision={'weights': 'int4'})")
    assert info.value.suggestion == {"tp": 4}
    # Llama-3.1-70B in fp8 on one H100: 70.6 GB of weights fit in 77.0 GB usable
    with pytest.raises(InfeasibleError, match=r"tp=2 would fit, or fp8 weights on this GPU \(precision=\{'weights': 'fp8'\}\)$"):
        estimate("llama-3.1-70b", "h100-sxm")
    # on an L4 (24 GB) not even int4 (about 35 GB) holds it: only the layout is named
    with pytest.raises(InfeasibleError, match=r"tp=8 would fit$"):
        estimate("llama-3.1-70b", "l4")


def test_the_format_hint_keeps_the_other_kinds_counts_a_drafter_and_names_the_weights_flag(capsys):
    # Llama-3.1-70B with an EAGLE head on one H100: fp8 weights (70.6 GB) plus the head's do not fit
    # in 77.0 GB, so the hint names int4, not fp8 (it had named fp8, which then refused again)
    with pytest.raises(InfeasibleError, match=r"or int4 weights on this GPU"):
        estimate("llama-3.1-70b", "h100-sxm", speculative="eagle:k=4,accept=0.7", precision="fp8")
    # a partial precision keeps its KV format: 120k + 8k tokens of FP8 KV (20.97 GB) beside int4
    # weights (about 35 GB) fit, and the run the hint names does
    with pytest.raises(InfeasibleError, match=r"or int4 weights on this GPU") as info:
        estimate("llama-3.1-70b", "h100-sxm", precision={"kv_cache": "fp8"}, isl=120000, osl=8000)
    assert "precision={'weights': 'int4'}" in str(info.value)
    assert estimate("llama-3.1-70b", "h100-sxm", precision={"weights": "int4", "kv_cache": "fp8"}, isl=120000,
                    osl=8000).feasible
    # the CLI names the per-kind flag, whichever other kind was given
    assert main(["estimate", "gemma-3-27b", "rtx-4090", "--kv-cache-dtype", "fp8"]) == 1
    assert capsys.readouterr().err.strip().endswith("or int4 weights on this GPU (--weights int4)")
    # a MIG slice too: Llama-3.1-8B's 16.1 GB of BF16 weights do not fit a 1g.10gb slice, int4 does
    with pytest.raises(InfeasibleError, match=r"int4 weights fit this one \(precision=\{'weights': 'int4'\}\)$"):
        estimate("llama-3.1-8b", "h100-sxm:1g.10gb")


def test_a_scenario_command_names_its_own_key_for_the_format():
    # plan and fleet read precisions from the scenario file, not from a flag
    from inferlab.errors import cli_spelling

    with cli_spelling({"precision_weights": "the scenario file's search: precisions"}):
        with pytest.raises(InfeasibleError, match=r"or fp8 weights on this GPU \(fp8 in the scenario file's search: "
                                                  r"precisions\)$"):
            estimate("llama-3.1-70b", "h100-sxm")
