"""The CLI, run in-process: every command, --json, and one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest

from inferlab.cli.main import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_hardware_list_and_json(capsys):
    code, out, _ = run(capsys, "hardware", "list")
    assert code == 0 and "h100-sxm" in out and "mi300x" in out and "dense" in out
    code, out, _ = run(capsys, "hardware", "list", "--json")
    rows = json.loads(out)
    h100 = next(r for r in rows if r["id"] == "h100-sxm")
    assert h100["figures"]["memory_bandwidth"]["value"] == 3.35e12
    assert h100["figures"]["memory_bandwidth"]["source_title"].startswith("NVIDIA H100")


def test_hardware_show(capsys):
    code, out, _ = run(capsys, "hardware", "show", "h100-sxm")
    assert code == 0
    assert "flops.bf16" in out and "989 TFLOPS" in out and "ridge point" in out and "295.2 FLOP/B" in out
    assert "1g.10gb x7" in out
    code, out, _ = run(capsys, "hardware", "show", "b200", "--json")
    data = json.loads(out)
    assert data["figures"]["flops.fp4"]["value"] == pytest.approx(9e15)


def test_models_list_and_show(capsys):
    code, out, _ = run(capsys, "models", "list")
    assert code == 0 and "deepseek-v3" in out and "MLA" in out
    code, out, _ = run(capsys, "models", "show", "deepseek-r1")
    assert code == 0 and "70,272 B" in out and "256 routed experts" in out
    code, out, _ = run(capsys, "models", "show", "llama-3.1-70b", "--json")
    data = json.loads(out)
    assert data["kv_cache_bytes_per_token_bf16"] == {"full": 327680.0}
    assert data["card"]["total_params"]["stated"] == "70.6B"


def test_models_show_config_path(capsys, data_dir):
    path = data_dir / "hf-configs" / "openai--gpt-oss-20b.json"
    code, out, _ = run(capsys, "models", "show", str(path))
    assert code == 0 and "sliding(128)" in out and "mxfp4" in out


@pytest.mark.parametrize(
    "expr, to, value, unit",
    [
        ("140 GB / (3.35 TB/s)", "ms", 41.791, "ms"),
        ("400 Gb/s", "GB/s", 50.0, "GB/s"),
        ("h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth", None, 295.224, "FLOP/B"),
        ("h100-sxm.ridge_point.fp8", None, 590.746, "FLOP/B"),
        # 2 bytes x 70,553,706,496 params / 3.35e12 B/s = 42.12 ms: the decode-step floor
        ("llama-3.1-70b.weight_bytes.bf16 / h100-sxm.memory_bandwidth", "ms", 42.122, "ms"),
        ("llama-3.1-70b.kv_bytes_per_token * 8192 tok", "GiB", 2.5, "GiB"),
        ("mi300x.memory_capacity", "GB", 206.158, "GB"),  # 192 GiB = 192 * 2**30 B
        ("2 $/h", None, 2.0, "USD/h"),
        ("$2.95/hour * h100-sxm.tdp / h100-sxm.tdp", None, 2.95, "USD/h"),
        ("H100-SXM.flops.bf16", "TFLOPS", 989.0, "TFLOPS"),
        ("h100-sxm.tdp-h100-sxm.tdp", "W", 0.0, "W"),
        ("3 hours", None, 3.0, "h"),
        ("h100-sxm.price / (2500 tok/s)", None, 0.327778, "USD/Mtok"),  # 2.95 $/h / 3600 / 2500 * 1e6
        ("128 ktok", "tok", 128_000, "tok"),
    ],
)
def test_calc(capsys, expr, to, value, unit):
    args = ["calc", expr, "--json"] + (["--to", to] if to else [])
    code, out, err = run(capsys, *args)
    assert code == 0, err
    data = json.loads(out)
    assert data["value"] == pytest.approx(value, abs=1e-3)  # hand values: 989/3.35, 1979/3.35, ...
    assert data["unit"] == unit


def test_calc_text_lists_sources(capsys):
    code, out, _ = run(capsys, "calc", "h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth")
    assert out.startswith("295.224 FLOP/B")
    assert "NVIDIA H100 Tensor Core GPU product page" in out


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["hardware", "show", "h100-sx"], "did you mean 'h100-sxm'"),
        (["models", "show", "lama-3.1-70b"], "did you mean 'llama-3.1-70b'"),
        (["calc", "3 GB + 2 s"], "[information]"),
        (["calc", "h10-sxm.flops.bf16"], "did you mean 'h100-sxm'"),
        (["calc", "h100-sxm.flop.bf16"], "did you mean 'flops'"),
        (["calc", "h100-sxm.flops.fp4"], "unknown key"),
        (["calc", "140 GB / (3.35 TB/s)", "--to", "GB"], "cannot be expressed in GB"),
        (["calc", "1 gilbert"], "unknown unit"),
        (["models", "show", "/nonexistent/config.json"], "no such file"),
        (["models", "show", "./nonexist"], "no such file"),
        (["calc", "10**400 B"], "larger than 64"),
        (["calc", "9**9**9"], "chained powers"),
        (["calc", "8K tokens"], "unknown unit 'K'"),
        (["calc", "h100-sxm * 2"], "names a catalog entry"),
        (["calc", "1e308 * 10 * h100-sxm.tdp"], "not a finite number"),
    ],
)
def test_errors_are_one_line_exit_2(capsys, args, fragment):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("inferlab: error: ")
    assert fragment in err
    assert "Traceback" not in err


def test_a_plot_file_without_an_image_suffix_is_one_line(capsys):
    from inferlab.cli.main import main

    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "1", "--num-requests", "5", "--plot",
                 "figure.txt"]) == 2
    err = capsys.readouterr().err
    assert "cannot write a figure to figure.txt: its suffix names no image format" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, hint", [
    (["estimate", "llama-3.1-8b", "h100-sxm", "--prefix-cache", "0.5,replicas=4,routing=randm"], "'random'"),
    (["estimate", "llama-3.1-8b", "h100-sxm", "--prefix-cache", "0.5,replica=4"], "'replicas'"),
    (["estimate", "llama-3.1-8b", "--disagg", "prefill=h100-sxmx2,decod=h100-sxmx2"], "'decode'"),
    (["estimate", "llama-3.1-8b", "--disagg", "prefill=h100-sxmx2,decode=h100-sxmx2,link=nvlnk"], "'nvlink'"),
    (["serve", "llama-3.1-8b", "h100-sxm", "--isl", "lognorml:mean=100", "--rate", "1"], "'lognormal'"),
    (["serve", "llama-3.1-8b", "h100-sxm", "--prefix", "shard:tokens=100", "--rate", "1"], "'shared'"),
    (["serve", "llama-3.1-8b", "h100-sxm", "--prefix", "shared:tokns=100", "--rate", "1"], "'tokens'"),
])
def test_a_misspelt_option_value_gets_a_did_you_mean(capsys, argv, hint):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"(did you mean {hint}?)" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, expect", [
    (["estimate", "llama-3.1-8b", "--tp", "2", "h100-sxm", "--json"], '"tp": 2'),
    (["serve", "llama-3.1-8b", "--rate", "2", "h100-sxm", "--num-requests", "5", "--json"], '"num_requests": 5'),
    (["explore", "llama-3.1-8b", "--port", "99999", "h100-sxm"], "--port must be in [0, 65535]"),
])
def test_options_may_come_between_the_positionals(capsys, argv, expect):
    """MODEL and HARDWARE are optional (--file, --engine-args and --disagg give them), so an
    option after MODEL had ended the positionals: 'unrecognized arguments: h100-sxm'."""
    code, out, err = run(capsys, *argv)
    assert expect in out + err and "unrecognized" not in err
    code, out, err = run(capsys, "estimate", "llama-3.1-8b", "h100-sxm", "--tp", "2", "extra")
    assert code == 2 and "unrecognized arguments: extra" in err
