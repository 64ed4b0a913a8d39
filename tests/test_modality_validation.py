"""The modality models against published measurements: median |error| per kind, datasheet-only."""

from __future__ import annotations

import pytest

from inferlab.validation.modalities import load_cases, median_abs_error_pct, score

#: The target of issue 17: median |error| per kind at most this [%].
TARGET_PCT = 25.0


def test_every_case_has_a_source_url_and_a_quote():
    cases = load_cases()
    assert len(cases) >= 10
    assert all(c["quote"].strip() and c["unit"] for c in cases)
    import yaml
    from importlib import resources

    data = yaml.safe_load((resources.files("inferlab.validation") / "data" / "modalities.yaml").read_text())
    assert all(data["sources"][c["source"]]["url"].startswith("https://") for c in cases)
    assert {c["kind"] for c in cases} >= {"embedding", "diffusion", "on_device", "speech", "vision", "tts"}


#: Speech reached 24% (eight cases, target met): batched transformers runs +4% (large-v3-turbo, 120 s on an H100)
#: and +8% (large-v3 on an A100, batch 24, FA2, chunked pipeline's 5 s overlap, NumPy features), the same run with
#: BetterTransformer -65% (the two attention kernels are not told apart); the five faster-whisper runs (sequential
#: long form with transcribe's defaults: each window prompted with the last 223 tokens before it) +17% (RTX 5090
#: medium), -21% (RTX 5090 large-v3), -28% and -46% (RTX 2080 Ti large-v3 and turbo, French speech), -56% (A100
#: large-v2, greedy): a host cost per kernel above the 5 us floor, or more steps a window than English's 100
#: (French, timestamp tokens, temperature fallback), none with a published figure (issue 17).


#: Vision reached 21% with six cases, each encoder run in eager PyTorch, its host issuing every PyTorch call at
#: 3.6 us (Horace He's measured dispatch, read as on CPU tensors: inferred, the source names no device) plus 5 us of
#: CUDA launch API for each kernel of the graph (the mean in an Nsight Systems trace of an eager PyTorch forward,
#: vllm-omni PR #6516; published figures span 3-8 us), and, under SGLang, the three q/k/v copies to contiguous
#: tensors of its VisionAttention in every layer (vLLM's Qwen2.5-VL attention makes none since vLLM PR #27106;
#: nothing fitted): SGLang's Pi0.5 SigLIP tower at 224 x 224 on an H100, one image -11% and three -4% (host-bound:
#: 709 calls and 353 launches); the vLLM TTFT of Qwen2.5-VL-7B on an H100 -11%; the transformers Qwen2.5-VL encoder
#: on an A100 -30% (the Conv3d patch embedding and window gather are not in the graph); SGLang's SigLIP tower of
#: Gemma 3 on an H100 -38% (its SDPA kernel is not stated and runs at the datasheet share; FlashAttention-2's share
#: would give about -13%); a transformers forward pass of Qwen2.5-VL-7B over 8 H100s -47% (its eager language model
#: and host set-up are not in the graph). Still not counted: the module calls, the layers' Python around the
#: PyTorch calls and the launches of kernels the graph does not hold (issue 17).


@pytest.mark.parametrize("kind", ["embedding", "diffusion", "on_device", "speech", "vision", "tts"])
def test_median_error_within_target(kind):
    assert median_abs_error_pct(kind) <= TARGET_PCT


#: Levels reached [%] where the target is met narrowly (speech: 24.5%) or was met last (vision: 20.6%): the median
#: may not get worse.
LEVEL_REACHED_PCT = {"speech": 24.5, "vision": 20.7}


@pytest.mark.parametrize("kind", sorted(LEVEL_REACHED_PCT))
def test_median_error_does_not_regress_past_the_level_reached(kind):
    assert median_abs_error_pct(kind) <= LEVEL_REACHED_PCT[kind]


def test_every_prediction_is_positive_and_finite():
    for r in score().records:
        assert 0 < r["predicted"] < float("inf"), r["id"]


@pytest.mark.parametrize("hardware_kind", ["cpu", "phone-soc"])
def test_cpu_and_phone_decode_within_target(hardware_kind):
    # The on-device cases split by what decodes: a CPU socket (llama.cpp on an EPYC 9554) and a
    # phone SoC (ExecuTorch on a Snapdragon 8 Gen 3), each its own kind of device with its own
    # bandwidth share (STREAM's of peak x llama.cpp's of STREAM), at least two cases each.
    import numpy as np

    from inferlab.specs.catalog import load_hardware

    by_id = {c["id"]: c for c in load_cases()}
    errors = [abs(r["error_pct"]) for r in score().records
              if r["kind"] == "on_device" and load_hardware(by_id[r["id"]]["hardware"]).kind == hardware_kind]
    assert len(errors) >= 2
    assert float(np.median(errors)) <= TARGET_PCT
