"""The modality commands run in-process; bad input is one line and a non-zero exit."""

from __future__ import annotations

import json

import pytest

from inferlab.cli.main import main
from inferlab.errors import SpecError


@pytest.mark.parametrize("argv, expect", [
    (["embed", "bge-large-en-v1.5", "h100-sxm", "--batch", "1,64"], "seqs/s"),
    (["diffuse", "sdxl", "a100-sxm-80gb", "--steps", "30", "--cfg-off", "0.2"], "24 with CFG + 6 without"),
    (["diffuse", "wan2.1-t2v-14b", "h100-sxm", "--height", "720", "--width", "1280", "--frames", "81", "--cp", "8"],
     "75,600 tokens"),
    (["transcribe", "whisper-small", "h100-sxm:3g.40gb", "--audio", "600"], "RTF"),
    (["transcribe", "whisper-small", "h100-sxm", "--batch", "1", "--previous-text"], "224-token prompt"),
    # an hour is 120 windows of 30 s: 1,000 GPUs leave 880 without one
    (["transcribe", "whisper-small", "h100-sxm", "--gpus", "1000"], "120 windows over 1,000 GPUs leave 880 without one"),
    (["on-device", "llama-3.1-8b", "m4-max", "--precision", "q4_k_m,q8_0"], "decode tok/s"),
    (["modalities", "list"], "whisper-large-v3-turbo"),
    (["diffuse", "wan2.1-t2v-1.3b", "h100-sxm", "--frames", "33", "--height", "480", "--width", "832", "--execution",
      "eager"], "eager: this video DiT's unfused kernels are not modelled yet; it is priced as compiled"),
    (["speak", "orpheus-3b", "h100-sxm", "--llm", "llama-3.1-8b"], "first audio ms"),
    (["vlm", "qwen2.5-vl-7b", "h100-sxm", "--images", "4"], "5476"),
    (["vlm", "qwen2.5-vl-7b", "h100-sxm", "--images", "4", "--rate", "1", "--num-requests", "30"], "ttft (user)"),
    (["vlm", "paligemma-3b-224", "h100-sxm", "--height", "224", "--width", "224", "--text-tokens", "0",
      "--execution", "graph"], "encoder ms"),
    (["modalities", "validate"], "median |error|"),
])
def test_commands_print_their_tables(capsys, argv, expect):
    assert main(argv) == 0
    assert expect in capsys.readouterr().out


def test_json_output(capsys):
    assert main(["embed", "bge-base-en-v1.5", "l4", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["bound"] == "compute" and row["tokens_per_s"] > 0


def test_on_device_json_has_no_speed_for_a_format_that_does_not_fit(capsys):
    """Llama-3.1-70B in BF16 is 141 GB; an M3 Max with 128 GB lets its GPU use 96 GB: the table
    prints '-', and the JSON null (it had carried a made-up 2.0 tok/s), with the prompt speed and
    the memory the GPU may use as the table shows them."""
    assert main(["on-device", "llama-3.1-70b", "m3-max", "--precision", "q4_k_m,bf16", "--json"]) == 0
    q4, bf16 = json.loads(capsys.readouterr().out)
    assert q4["fits"] and q4["decode_tokens_per_s"] > 0 and q4["prefill_tokens_per_s"] > 0
    assert not bf16["fits"] and bf16["decode_tokens_per_s"] is None and bf16["prefill_tokens_per_s"] is None
    assert bf16["weight_bytes"] > bf16["usable_bytes"] == q4["usable_bytes"]


def test_on_device_table_shows_the_memory_the_gpu_may_use_as_its_reason_does(capsys):
    """An RTX 2080 Ti's GPU may use 11.6 GB; the table had rounded it to 12 beside a line saying
    16.1 GB > 11.6 GB: both say 11.6 now."""
    assert main(["on-device", "llama-3.1-8b", "rtx-2080-ti", "--precision", "q4_k_m,bf16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith("> 11.6 GB the GPU may use")
    q4, bf16 = (line.split() for line in out[3:5])
    assert q4[3] == bf16[3] == "11.6" and q4[4] == "yes" and bf16[4] == "NO"


@pytest.mark.parametrize("argv, message", [
    (["embed", "bge-large", "h100-sxm"], "did you mean 'bge-large-en-v1.5'"),
    (["diffuse", "flux.1-dev", "h100-sxm:3g.4gb"], "did you mean '3g.40gb'"),
    (["on-device", "llama-2-7b", "m2-ultra", "--precision", "q4km"], "unknown precision 'q4km'"),
    (["transcribe", "whisper-small", "h100-sxm", "--gpus", "0"], "gpus must be a whole number"),
    (["transcribe", "whisper-small", "h100-sxm", "--previous-text", "--batch", "8"], "windows run one at a time"),
])
def test_bad_input_is_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_vlm_names_its_own_long_context_flag_and_takes_it(capsys):
    assert main(["vlm", "qwen2.5-vl-7b", "h100-sxm", "--images", "200"]) != 0
    assert "pass --allow-long-context if" in capsys.readouterr().err
    assert main(["vlm", "qwen2.5-vl-7b", "h100-sxm", "--images", "200", "--allow-long-context"]) == 0


def test_vlm_without_images_shows_no_image_size(capsys):
    # a text-only prompt: no image size or tokens per image to show (it had shown 1024x1024, 1369)
    assert main(["vlm", "qwen2.5-vl-7b", "h100-sxm", "--images", "0"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1].split()
    assert row[:4] == ["0", "-", "-", "0"] and row[4:6] == ["0.0", "0.0"]


@pytest.mark.parametrize("argv, keys", [
    (["diffuse", "sdxl", "a100-sxm-80gb", "--steps", "30", "--cfg-off", "0.2"],
     {"guided_steps": 24, "plain_steps": 6, "gpus": 1}),
    (["transcribe", "whisper-small", "h100-sxm", "--audio", "600", "--batch", "8"], {"audio_s": 600.0, "batch": 8}),
    (["speak", "orpheus-3b", "h100-sxm", "--llm", "llama-3.1-8b"], {"first_chunk_tokens": 28}),
])
def test_json_carries_what_the_table_shows(capsys, argv, keys):
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {k: data[k] for k in keys} == keys
    more = {"diffuse": ("vae_decode_s", "weight_bytes_per_gpu", "comm_s"), "transcribe": ("rounds", "gpus"),
            "speak": ("request_overhead_s", "tts_prefill_s", "tts_tpot_s", "codec_s")}[argv[0]]
    assert all(data[k] is not None for k in more)


def test_speak_says_what_it_streams_and_what_would_fit(capsys):
    # a clause as long as the reply is the whole reply: the header says so
    assert main(["speak", "orpheus-3b", "h100-sxm", "--llm", "llama-3.1-8b", "--clause-tokens", "500",
                 "--reply-tokens", "150"]) == 0
    assert "after the whole reply" in capsys.readouterr().out
    # an LLM too large for one GPU: speak has no layout flags, so the advice is another LLM or GPU
    assert main(["speak", "orpheus-3b", "h100-sxm", "--llm", "deepseek-v3"]) != 0
    err = capsys.readouterr().err
    assert "speak runs the LLM on one h100-sxm" in err and "pp=" not in err


@pytest.mark.parametrize("argv, message", [
    (["vlm", "qwen2.5-vl-7b", "h100-sxm", "--osl", "10"], "--osl: a single request's TTFT has no output"),
    (["vlm", "qwen2.5-vl-7b", "h100-sxm", "--text-tokens", "-5"], "--text-tokens must be a whole number"),
    # the flags as typed, not the Python keywords behind them
    (["diffuse", "sdxl", "h100-sxm", "--cfg-off", "1.1"], "--cfg-off must be a finite number in [0, 1], got 1.1"),
    (["diffuse", "sdxl", "h100-sxm", "--cp", "2"], "use --cp 1"),
    (["transcribe", "whisper-large-v3", "h100-sxm", "--audio", "0"], "--audio must be a finite number in [0.01,"),
    (["transcribe", "whisper-large-v3", "h100-sxm", "--stride", "16"], "--stride must be an overlap in seconds"),
    (["embed", "bge-base-en-v1.5", "h100-sxm", "--seq-len", "0"], "--seq-len must be a whole number from 1 to 512"),
    (["on-device", "llama-3.1-8b", "m2-ultra", "--context", "-1"], "--context must be a whole number of tokens"),
    (["vlm", "paligemma-3b-224", "h100-sxm", "--crops", "2"], "--crops (pan and scan) apply to a processor that crops"),
    (["transcribe", "whisper-large-v3", "epyc-9554", "--features", "gpu"],
     "epyc-9554 is a cpu, not a GPU: --features gpu means nothing there"),
    (["transcribe", "whisper-large-v3", "snapdragon-8-gen-3", "--gpus", "4"], "--gpus 4 means nothing there"),
    (["vlm", "gemma-3-27b", "h100-sxm", "--crops", "-1"], "crops must be a whole number"),
    (["transcribe", "whisper-large-v3", "h100-sxm", "--previous-text", "--stride", "5"],
     "without the chunked pipeline's overlapping stride"),
    (["transcribe", "whisper-large-v3", "h100-sxm", "--previous-text", "--gpus", "4"], "batch 1 on 1 GPU, got 4 GPUs"),
    (["transcribe", "whisper-large-v3", "h100-sxm", "--beams", "100000", "--batch", "1", "--audio", "30"],
     "use fewer beams"),
    (["models", "show", "whisper-large-v3"], "`inferlab transcribe` runs it"),
    # a model of the other catalog was 'unknown', with a list of the wrong catalog's names
    (["estimate", "sdxl", "h100-sxm"], "sdxl is not a language model of the LLM catalog but an image or video "
                                       "diffusion model of the modalities catalog"),
    (["serve", "whisper-small", "h100-sxm", "--rate", "1"], "`inferlab transcribe` runs it"),
    (["slices", "h100-sxm", "bge-base-en-v1.5"], "`inferlab embed` runs it"),
    (["speak", "orpheus-3b", "h100-sxm", "--llm", "whisper-small"], "`inferlab transcribe` runs it"),
    (["embed", "llama-3.1-8b-instruct", "h100-sxm"], "llama-3.1-8b-instruct is a language model of the LLM catalog "
                                                     "(inferlab estimate, serve, on-device), not an embedding one"),
    (["vlm", "llama-3.1-8b", "h100-sxm"], "not a vision-language one; vision models: gemma-3-27b"),
    (["vlm", "qwen2.5-vl-7b", "h100-sxm", "--height", "1"], "a 1024x1 image: qwen2.5-vl-7b's processor refuses"),
    # no prompt at all: the message had named the language model's isl, which vlm has no flag for
    (["vlm", "qwen2.5-vl-7b", "h100-sxm", "--images", "0", "--text-tokens", "0"],
     "a request of no images and no text has no prompt to prefill: give --images >= 1 or --text-tokens >= 1"),
    (["embed", "orpheus-3b", "h100-sxm"], "orpheus-3b is a text-to-speech model (inferlab speak)"),
    (["on-device", "llama-3.1-8b", "m2-ultra", "--precision", "nvfp4"], "on-device runtimes store weights as"),
])
def test_meaningless_modality_input_is_one_line_in_the_commands_terms(capsys, argv, message):
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert "None" not in err and "waves=True" not in err


def test_the_modality_functions_refuse_wrong_types_in_one_line():
    """A value of the wrong type had raised a TypeError or AttributeError, or read as another value
    (``cfg_off_fraction=True`` as 1.0; ``step_overhead_s=-1`` making a transcription faster)."""
    from inferlab.modalities.diffusion import diffuse
    from inferlab.modalities.on_device import on_device
    from inferlab.modalities.tts import speak
    from inferlab.modalities.whisper import transcribe

    for call, message in (
            (lambda: diffuse("sdxl", "h100-sxm", cfg_off_fraction=None), "cfg_off_fraction must be a number"),
            (lambda: diffuse("sdxl", "h100-sxm", cfg_off_fraction=True), "cfg_off_fraction must be a number"),
            (lambda: on_device("llama-3.1-8b", "m2-ultra", engine=None), "engine must be a LlamaCpp"),
            (lambda: transcribe("whisper-large-v3", "h100-sxm", step_overhead_s=-1.0), "step_overhead_s must be"),
            (lambda: transcribe("whisper-large-v3", "h100-sxm", step_overhead_s=float("nan")),
             "step_overhead_s must be"),
            (lambda: transcribe("whisper-large-v3", "h100-sxm", diarize="yes"), "diarize must be true or false"),
            (lambda: speak("orpheus-3b", "h100-sxm", stream="no"), "stream must be true or false"),
            (lambda: speak("orpheus-3b", "h100-sxm", prompt_tokens=5000), "no llm writes the reply"),
            # below one 10 ms mel frame a real-time factor is no rate (5e-324 s had printed inf)
            (lambda: transcribe("whisper-large-v3", "h100-sxm", audio_s=5e-324), "audio_s must be a finite number")):
        with pytest.raises(SpecError, match=message):
            call()


def test_an_embedding_grid_keeps_the_points_that_run(capsys):
    """README's partial grids: batch 65,536 x 512 tokens needs 412 GB of activations on one H100;
    batch 1 runs. The grid had stopped at the first point that did not fit."""
    import json

    assert main(["embed", "bge-base-en-v1.5", "h100-sxm", "--batch", "1,65536", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["batch"] for r in rows] == [1, 65536]
    assert rows[0]["latency_s"] > 0 and rows[1]["latency_s"] is None and "does not fit" in rows[1]["reason"]
    assert main(["embed", "bge-base-en-v1.5", "h100-sxm", "--batch", "65536,131072"]) == 1
    assert "no point of the grid runs" in capsys.readouterr().err
