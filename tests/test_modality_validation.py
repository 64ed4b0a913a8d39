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


#: Vision misses the target at 41% with six cases, each encoder run in eager PyTorch (its host issuing every
#: PyTorch call at 3.6 us, Horace He's measured rate; nothing fitted): the vLLM TTFT of Qwen2.5-VL-7B on an H100 at
#: -11%, the transformers Qwen2.5-VL encoder on an A100 at -30% (its float32 RMSNorm, unfused SiLU gate and float32
#: rotary copies, FlashAttention-2 with head dim 80 computed as 96, a host wait at each layer's .item(); the Conv3d
#: patch embedding and window gather are not in the graph), SGLang's SigLIP tower of Gemma 3 on an H100 at -43%:
#: its attention ran PyTorch's SDPA, whose kernel the source does not state (most likely cuDNN: -44%;
#: FlashAttention-2, a third of the H100's peak: -18%), so it runs at the datasheet share; a transformers forward
#: pass of Qwen2.5-VL-7B (one 1260 x 700 image, FA2, the model spread over 8 H100s) at -48% (its eager language
#: model and host set-up not in the graph); SGLang's Pi0.5 SigLIP tower at 224 x 224 on an H100, one image at -47%
#: (-61% as a CUDA graph: the host's 709 calls take 2.5 ms against the GPU's 1.9 ms, the measured 4.86 ms is 6.9 us
#: a call) and three at -40%: the module calls, the layers' Python and perhaps the launches above the measured
#: dispatch are not counted. The xfail is strict, so meeting the target fails it and the mark has to come off
#: (issue 17).
_VISION_MISSES = pytest.mark.xfail(
    strict=True, reason="vision median |error| 41% > 25% with six cases, encoders run eagerly (issue 17)")


@pytest.mark.parametrize("kind", ["embedding", "diffusion", "on_device", "speech",
                                  pytest.param("vision", marks=_VISION_MISSES), "tts"])
def test_median_error_within_target(kind):
    assert median_abs_error_pct(kind) <= TARGET_PCT


#: Levels reached [%] where the target is not met or met narrowly (speech: 24.5%): the median may not get worse.
LEVEL_REACHED_PCT = {"speech": 24.5, "vision": 41.6}


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
