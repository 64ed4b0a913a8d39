"""Precision per tensor kind: routed-expert weights apart, the shipped checkpoint's formats as the
default, FP4 weight-only on GPUs without FP4 tensor cores, and the CLI flags of each kind."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from inferlab import InfeasibleError, estimate
from inferlab.cli.main import main
from inferlab.errors import SpecError, UnknownNameError
from inferlab.inputs.resolve import deployment
from inferlab.precision import FORMATS, number_format
from inferlab.core.quantization import PrecisionConfig

GB = 1e9
#: MXFP4: 4-bit elements plus one 8-bit E8M0 scale per 32 elements = 4.25 bits [OCP MX v1.0].
MXFP4_BYTES = (4 + 8 / 32) / 8


def _gpt_oss_expert_params(layers: int, experts: int) -> int:
    # config.json: hidden 2880, expert width 2880; gate_up 2880 x 5760 + bias 5760, down 2880 x 2880 + bias 2880
    per_expert = 2880 * 5760 + 5760 + 2880 * 2880 + 2880  # = 24,891,840
    return layers * experts * per_expert


# --- weight bytes by hand -----------------------------------------------------------------

def test_gpt_oss_120b_fits_one_h100_as_shipped():
    """Model card (arXiv 2508.10925, table 1): 116.83B parameters, 114.71B of them in the MLP.

    Experts: 36 layers x 128 x 24,891,840 = 114,701,598,720 params (the card's 114.71B, with
    the 13M-parameter router kept in BF16) at 4.25 bits = 60.94 GB; the other
    116.83B - 114.70B = 2.13B params (attention, router, embedding, LM head, norms) in BF16
    = 4.26 GB; 65.19 GB in all (the card's checkpoint: 60.8 GiB = 65.3 GB).
    One H100: 85.5 GB x 0.9 = 77.0 GB usable, so it fits with room for the KV cache.
    """
    experts = _gpt_oss_expert_params(36, 128)
    assert experts == 114_701_598_720
    expected = experts * MXFP4_BYTES + (116.83e9 - experts) * 2.0
    assert expected / GB == pytest.approx(65.19, abs=0.01)
    est = estimate("gpt-oss-120b", "h100-sxm")
    assert est.memory.weights == pytest.approx(expected, rel=2e-3)
    assert est.deployment.precision.to_dict() == {"weights": "bf16", "moe_weights": "mxfp4", "activations": "bf16",
                                                  "kv_cache": "bf16"}
    assert "shipped checkpoint's defaults" in est.explain() and "mxfp4" in est.explain()
    # the same model with BF16 experts (234 GB in all) needs four of them
    with pytest.raises(InfeasibleError, match="tp=4 would fit"):
        estimate("gpt-oss-120b", "h100-sxm", precision="bf16")


def test_gpt_oss_20b_weight_bytes_as_shipped():
    """24 layers x 32 experts x 24,891,840 = 19,116,933,120 params (card: MLP 19.12B) at 4.25 bits
    = 10.16 GB; 20.91B - 19.12B = 1.79B params in BF16 = 3.59 GB; 13.75 GB (card: 12.8 GiB = 13.7 GB)."""
    experts = _gpt_oss_expert_params(24, 32)
    expected = experts * MXFP4_BYTES + (20.91e9 - experts) * 2.0
    assert expected / GB == pytest.approx(13.75, abs=0.01)
    assert estimate("gpt-oss-20b", "l40s").memory.weights == pytest.approx(expected, rel=3e-3)


def test_deepseek_v3_weights_are_block_scaled_fp8_as_shipped():
    """671.0B parameters (DeepSeek-V3 report; MTP module apart). Embedding and LM head
    2 x 129,280 x 7,168 = 1,853,358,080 params stay BF16 = 3.71 GB; the other 669.17B are FP8
    with one FP32 scale per 128 x 128 block: 1 + 4 / 16384 B each = 669.33 GB; 673.04 GB in
    all, 84.13 GB on each of 8 GPUs."""
    embed = 2 * 129_280 * 7_168
    expected = (embed * 2.0 + (671.0e9 - embed) * (1 + 4 / 16384)) / 8
    assert expected / GB == pytest.approx(84.13, abs=0.01)
    est = estimate("deepseek-v3", "h200-sxm", tp=8)
    assert est.memory.weights == pytest.approx(expected, rel=2e-3)
    assert est.deployment.precision.weights == "fp8_block" and est.deployment.precision.activations == "fp8"
    assert est.deployment.step_precision.kernel == "fp8_block"


def test_expert_gemms_read_their_own_format():
    dep = deployment("gpt-oss-120b", "b200", profile="roofline")
    est = estimate(dep.model, dep.hardware, profile="roofline", osl=2)
    rows = {r["op"]: r for r in est.op_table("decode")}
    assert rows["experts_up"]["precision"] == "bf16" and rows["qkv_proj"]["precision"] == "bf16"
    assert dep.step_precision.expert_kernel == "mxfp4_wo" and dep.step_precision.kernel == "bf16"


# --- FP4 on GPUs without FP4 tensor cores -------------------------------------------------

def test_mxfp4_on_h100_is_weight_only_with_bf16_activations():
    dep = deployment("gpt-oss-120b", "h100-sxm", precision="mxfp4")
    assert dep.precision.to_dict() == {"weights": "mxfp4", "moe_weights": "mxfp4", "activations": "bf16",
                                       "kv_cache": "fp8"}
    assert (dep.step_precision.gemm, dep.step_precision.kernel) == ("bf16", "mxfp4_wo")
    assert any("no fp4 tensor rate" in note for note in dep.precision_notes)
    # an explicit request for FP4 activations gets the same mapping and the same note
    explicit = deployment("gpt-oss-120b", "h100-sxm", precision={"weights": "mxfp4", "activations": "mxfp4"})
    assert explicit.precision.activations == "bf16" and explicit.precision_notes[-1] == dep.precision_notes[-1]
    # Blackwell computes in FP4: the activations stay MXFP4
    blackwell = deployment("gpt-oss-120b", "b200", precision="mxfp4")
    assert (blackwell.precision.activations, blackwell.step_precision.gemm) == ("mxfp4", "fp4")
    assert blackwell.step_precision.kernel == "mxfp4"


def test_fp8_activations_on_an_a100_stay_bf16():
    dep = deployment("llama-3.1-8b", "a100-sxm-80gb", precision="fp8")
    assert (dep.precision.activations, dep.step_precision.kernel) == ("bf16", "fp8_wo")


def test_a_bf16_checkpoint_runs_fp16_on_a_gpu_without_bf16():
    # Turing (RTX 2080 Ti) computes FP16 and not BF16: engines load a BF16 checkpoint as FP16
    # there, so the checkpoint's kinds are labelled FP16 (the bytes are the same: 2 per weight)
    turing = deployment("llama-3.1-8b", "rtx-2080-ti", tp=2)
    assert (turing.precision.weights, turing.precision.activations, turing.precision.kv_cache) == ("fp16",) * 3
    assert any("computes FP16 and not BF16" in n for n in turing.precision_notes)
    assert deployment("llama-3.1-8b", "h100-sxm").precision.weights == "bf16"
    # a kind the user sets is theirs; only the checkpoint's BF16 kinds move
    mixed = deployment("llama-3.1-8b", "rtx-2080-ti", tp=2, precision="kv:int8")
    assert (mixed.precision.weights, mixed.precision.kv_cache) == ("fp16", "int8")
    same = [estimate("llama-3.1-8b", "rtx-2080-ti", tp=2, precision=p) for p in (None, "fp16")]
    assert float(same[0].tpot_s) == float(same[1].tpot_s)
    assert same[0].memory.weights == same[1].memory.weights
    # a bf16 the user gives runs as FP16 too, saying so (vLLM refuses bfloat16 there), and FP8 weights
    # without FP8 tensor cores dequantize to the 16-bit format the GPU has: FP16, not BF16
    given = deployment("llama-3.1-8b", "rtx-2080-ti", tp=2, precision="bf16")
    assert (given.precision.weights, given.precision.activations) == ("fp16", "fp16")
    assert any("not the bf16 given" in n for n in given.precision_notes)
    fp8 = deployment("llama-3.1-8b", "rtx-2080-ti", tp=2, precision="fp8")
    assert (fp8.precision.weights, fp8.precision.activations) == ("fp8", "fp16")
    assert any("dequantize the stored weights to FP16" in n for n in fp8.precision_notes)
    assert deployment("llama-3.1-8b", "a100-sxm-80gb", precision="fp8").precision.activations == "bf16"


# --- the text, mapping and dict forms -----------------------------------------------------

def test_precision_forms():
    assert PrecisionConfig.parse("fp8 kv:bf16") == PrecisionConfig("fp8", "fp8", "bf16")
    assert str(PrecisionConfig("bf16", "bf16", "bf16", moe_weights="mxfp4")) == "bf16 moe:mxfp4"
    assert str(PrecisionConfig.parse("int4")) == "int4"
    # kinds left out of a mapping are the checkpoint's (the base), each kind only its own
    shipped = PrecisionConfig("bf16", "bf16", "bf16", moe_weights="mxfp4")
    assert PrecisionConfig.parse({"kv_cache": "fp8"}, checkpoint=shipped).to_dict() == {
        "weights": "bf16", "moe_weights": "mxfp4", "activations": "bf16", "kv_cache": "fp8"}
    # expert weights that follow the weights keep following them
    assert PrecisionConfig.parse("fp8 w:bf16").experts == "bf16"
    with pytest.raises(SpecError, match="kind:format"):
        PrecisionConfig.parse("fp8 q:bf16")
    with pytest.raises(UnknownNameError, match="did you mean"):
        PrecisionConfig.parse("fp7")
    with pytest.raises(SpecError, match="precision '  ' is empty; give a format name"):
        PrecisionConfig.parse("  ")


def test_expert_formats_on_a_dense_model_are_refused():
    with pytest.raises(SpecError, match="moe_weights mxfp4 .* but llama-3.1-8b is dense: it has no experts"):
        estimate("llama-3.1-8b", "h100-sxm", precision={"moe_weights": "mxfp4"})
    with pytest.raises(SpecError, match="llama-3.1-8b is dense"):
        estimate("llama-3.1-8b", "h100-sxm", precision="fp8 moe:mxfp4")
    # stating the experts' format equal to the weights' says nothing new (validation cases do): accepted
    same = estimate("llama-3.1-8b", "h100-sxm", precision={"weights": "fp8", "moe_weights": "fp8"})
    assert same.deployment.precision.weights == "fp8"


def test_cli_moe_weights_on_a_dense_model_is_one_line(capsys):
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--moe-weights", "mxfp4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(--moe-weights, moe:mxfp4)" in err and "is dense" in err


_FMT = st.sampled_from(sorted(FORMATS))


def _runs_at(fmt: str) -> int:
    """Bits a GEMM or attention computes at with operands in ``fmt`` (weight-only: 16)."""
    return {"fp4": 4, "fp6": 6, "fp8": 8, "int8": 8}.get(number_format(fmt).compute, 16)  # 16- and 32-bit alike


def _meaningless(acts: str, *weights: str | None) -> bool:
    """Activations in a weight-only format, or narrower than every weight format other than FP8
    (attention's): nothing computes at their width."""
    return number_format(acts).weight_only or (
        _runs_at(acts) < min(_runs_at(w) for w in weights if w) and number_format(acts).compute != "fp8")


@given(_FMT, st.none() | _FMT, _FMT, _FMT)
def test_text_and_dict_forms_round_trip(weights, moe, acts, kv):
    assume(not _meaningless(acts, weights, moe))
    cfg = PrecisionConfig(weights, acts, kv, moe_weights=moe)
    assert PrecisionConfig.parse(str(cfg)) == cfg
    assert PrecisionConfig.parse(cfg.to_dict()) == cfg


# --- CLI flags: each overrides only its kind ----------------------------------------------

@pytest.mark.parametrize("args", [["llama-3.1-8b", "h100-sxm", "--activations", "fp8"],
                                  ["llama-3.1-8b", "h100-sxm", "--precision", "fp8", "--weights", "bf16"],
                                  ["qwen3-30b-a3b", "h100-sxm", "--precision", "bf16 a:fp8"]])
def test_activations_narrower_than_every_weight_format_are_refused(capsys, args):
    # no GEMM multiplies BF16 weights by FP8 activations: it had been priced at BF16 and labelled a:fp8
    assert main(["estimate", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "activations fp8 (--activations, a:fp8) are narrower than the weights (bf16)" in err
    # experts stored narrower than the activations (gpt-oss's MXFP4 beside FP8 activations: W4A8) run
    assert main(["estimate", "gpt-oss-120b", "h100-sxm", "--activations", "fp8"]) == 0
    capsys.readouterr()

def _formats(capsys, *args):
    code = main(["estimate", *args, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)["formats"]


@pytest.mark.parametrize("flags, expected", [
    ([], ("bf16", "bf16", "bf16")),
    (["--kv-cache-dtype", "fp8"], ("bf16", "bf16", "fp8")),
    (["--weights", "fp8"], ("fp8", "bf16", "bf16")),
    (["--weights", "int4", "--activations", "fp8"], ("int4", "fp8", "bf16")),  # W4A8
    (["--precision", "fp8"], ("fp8", "fp8", "fp8")),
    (["--precision", "fp8", "--kv-cache-dtype", "bf16"], ("fp8", "fp8", "bf16")),
    (["--precision", "fp8", "--weights", "int4"], ("int4", "fp8", "fp8")),
    (["--precision", "fp8", "--kv-cache-dtype", "auto"], ("fp8", "fp8", "fp8")),
])
def test_cli_kind_flags_override_only_their_kind(capsys, flags, expected):
    got = _formats(capsys, "llama-3.1-8b", "h100-sxm", *flags)
    assert (got["weights"], got["activations"], got["kv_cache"]) == expected


def test_cli_moe_flags_on_gpt_oss(capsys):
    # --weights leaves the checkpoint's MXFP4 experts alone; --moe-weights sets them
    assert _formats(capsys, "gpt-oss-120b", "b200", "--weights", "fp8")["moe_weights"] == "mxfp4"
    assert _formats(capsys, "gpt-oss-120b", "b200", "--moe-weights", "nvfp4")["weights"] == "bf16"
    assert _formats(capsys, "gpt-oss-120b", "b200", "--precision", "fp8")["moe_weights"] == "fp8"


def test_cli_serve_takes_the_kind_flags(capsys):
    code = main(["serve", "llama-3.1-8b", "h100-sxm", "--precision", "fp8", "--kv-cache-dtype", "bf16", "--rate", "1",
                 "--num-requests", "20", "--isl", "128", "--osl", "16", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["precision"] == "fp8 kv:bf16"


def test_cli_bad_kind_format_is_one_line(capsys):
    code = main(["estimate", "llama-3.1-8b", "h100-sxm", "--kv-cache-dtype", "fp9"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "did you mean" in err


@pytest.mark.parametrize("model, hardware, precision", [
    ("gpt-oss-20b", "a100-sxm-80gb", "fp8"), ("gpt-oss-120b", "h100-sxm", "nvfp4"), ("gpt-oss-20b", "h100-sxm", None),
    ("gpt-oss-20b", "h100-sxm", "w:int8 a:bf16 kv:bf16"), ("llama-3.1-8b", "a100-sxm-80gb", "fp8 kv:bf16"),
    ("deepseek-v3", "b200", None)])
def test_the_precision_label_runs_the_same_configuration(model, hardware, precision):
    # FP8 weights on an A100 (no FP8 activations) had read 'w:fp8 a:bf16 kv:fp8', which parses with the kinds it
    # leaves out from the checkpoint: gpt-oss's experts back at MXFP4 (13.1 GB of weights where the run had 22.1)
    from inferlab import estimate

    tp = 8 if model == "deepseek-v3" else 1
    first = estimate(model, hardware, tp=tp, precision=precision, isl=256, osl=16)
    again = estimate(model, hardware, tp=tp, precision=str(first.deployment.precision), isl=256, osl=16)
    assert again.deployment.precision == first.deployment.precision
    assert float(again.memory.weights) == float(first.memory.weights)


def test_precision_none_is_the_default_of_serve_and_sweep():
    from inferlab import sweep

    table = sweep(["gpt-oss-20b"], ["h100-sxm"], batch_size=[1], isl=[512], osl=[32])
    assert table.columns["precision"][0] == "bf16 moe:mxfp4"
    assert np.all(table.columns["feasible"])


# --- attention weights apart --------------------------------------------------------------

#: NVFP4: 4-bit elements plus one 8-bit E4M3 scale per 16 elements = 4.5 bits.
NVFP4_BYTES = (4 + 8 / 16) / 8


def test_attention_weights_apart_by_hand():
    """NVIDIA's NVFP4 DeepSeek-R1 recipe: attention projections in BF16, the MLPs in NVFP4.

    Only the attention parameters change format: over TP8 each GPU holds 1/8 of them, so it
    stores attention x (2 - 0.5625) / 8 bytes more than with everything in NVFP4; the graph's
    attention GEMMs read 2 bytes per weight and the experts 0.5625."""
    from inferlab import load_model
    from inferlab.core.parallelism import Parallelism, weights_per_gpu

    model = load_model("deepseek-v3")
    fp4 = PrecisionConfig.parse("nvfp4")
    mixed = PrecisionConfig.parse("nvfp4 attn:bf16")
    assert (mixed.weights, mixed.attention, mixed.experts, mixed.activations) == ("nvfp4", "bf16", "nvfp4", "nvfp4")
    par = Parallelism(tp=8, ep=8)
    extra = weights_per_gpu(model, mixed, par) - weights_per_gpu(model, fp4, par)
    assert extra == pytest.approx(model.param_counts.attention * (2.0 - NVFP4_BYTES) / 8)
    est = estimate("deepseek-v3", "b200", tp=8, ep=8, precision="nvfp4 attn:bf16", isl=1024, osl=2, batch_size=1)
    ops = {r["op"]: r for r in est.op_table("decode")}
    assert "q_a_proj" in ops and "experts_up" in ops
    base = estimate("deepseek-v3", "b200", tp=8, ep=8, precision="nvfp4", isl=1024, osl=2, batch_size=1)
    assert float(est.tpot_s) > float(base.tpot_s)  # more bytes in a memory-bound step


@given(_FMT, st.none() | _FMT, st.none() | _FMT, _FMT, _FMT)
def test_attention_kind_round_trips(weights, moe, attn, acts, kv):
    # activations in a weight-only format, or narrower than every weight format other than FP8
    # (attention's), have nothing to compute at their width: refused, naming why
    if _meaningless(acts, weights, moe, attn):
        with pytest.raises(SpecError, match=f"activations {number_format(acts).name}"):
            PrecisionConfig(weights, acts, kv, moe_weights=moe, attention_weights=attn)
        return
    cfg = PrecisionConfig(weights, acts, kv, moe_weights=moe, attention_weights=attn)
    assert PrecisionConfig.parse(str(cfg)) == cfg
    assert PrecisionConfig.parse(cfg.to_dict()) == cfg
    assert cfg.attention == (attn or weights)


def test_cli_attention_weights_flag(capsys):
    got = _formats(capsys, "deepseek-v3", "b200", "--tp", "8", "--precision", "nvfp4", "--attention-weights", "bf16")
    assert (got["weights"], got["attention_weights"], got["moe_weights"]) == ("nvfp4", "bf16", "nvfp4")
    assert "attention_weights" not in _formats(capsys, "llama-3.1-8b", "h100-sxm", "--precision", "fp8")
