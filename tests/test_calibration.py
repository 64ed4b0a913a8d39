"""Calibration: the fits recover known parameters, are reproducible, and regenerate the shipped profile."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import yaml

from inferlab import estimate
from inferlab.fitting.fit import calibrate, round_tree, source_for
from inferlab.fitting.ops import assemble_profile, fit_engine_gpu, fit_ops, median_fragment
from inferlab.calibration.profile import Profile, profile_file
from inferlab.cli.validate import add_parsers
from inferlab.validation.cases import load_cases
from inferlab.validation.predict import predict_cases
from inferlab.validation.ops import OpTable, predict_ops, read_ops

SHARED = Path(__file__).resolve().parents[2] / "shared" / "validation"
OPS_PUBLIC = SHARED / "ops" / "ops-public.csv"


def synthetic_gemms(tmp_path: Path, profile: Profile) -> OpTable:
    """GEMM rows on an H100 whose 'measured' latency is the model's under ``profile``."""
    rng = np.random.default_rng(0)
    lines = ["op,hardware,engine,dtype,m,n,k,kv_dtype,batch,seq_len,kv_len,num_heads,num_kv_heads,head_dim,window,"
             "num_gpus,message_bytes,measured_ms"]
    for _ in range(300):
        m, n, k = (int(2 ** rng.uniform(0, 14)) for _ in range(3))
        lines.append(f"gemm,h100-sxm,trtllm,bf16,{m},{max(n, 16)},{max(k, 16)},,,,,,,,,,,1.0")
    path = tmp_path / "synthetic.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = read_ops(path)
    return OpTable(table.text, {**table.numbers, "measured_ms": predict_ops(table, profile) * 1e3})


def test_fit_recovers_known_gemm_parameters(tmp_path):
    truth = {"peak_fraction": 0.72, "m_half": 40.0, "n_half": 300.0, "bandwidth_fraction": 0.8}
    profile = Profile(gemm={"kernels": {"bf16": truth}}, kernel_floor_s=4e-6)
    fitted = fit_engine_gpu(synthetic_gemms(tmp_path, profile), "trtllm", "h100-sxm")
    assert fitted["kernel_floor_s"] == pytest.approx(4e-6, rel=0.01)
    for name, value in truth.items():
        assert fitted["gemm"]["kernels"]["bf16"][name] == pytest.approx(value, rel=0.02), name


def test_median_fragment_and_rounding():
    frags = [{"a": 1.0, "b": {"c": 10.0}}, {"a": 3.0, "b": {"c": 20.0, "d": 5.0}}, {"a": 2.0}]
    # a: median(1, 3, 2) = 2; c: median(10, 20) = 15; d: only one value.
    assert median_fragment(frags) == {"a": 2.0, "b": {"c": 15.0, "d": 5.0}}
    assert round_tree({"z": 0.123456789, "a": {"y": 12345.678}}) == {"a": {"y": 12350.0}, "z": 0.1235}
    assert list(round_tree({"z": 1.0, "a": 2.0})) == ["a", "z"]


def run_calibrate(capsys, *argv: str) -> str:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true")
    parser = argparse.ArgumentParser(prog="inferlab")
    add_parsers(parser.add_subparsers(dest="command", required=True), common)
    args = parser.parse_args(["calibrate", *argv])
    args.func(args)
    return capsys.readouterr().out


def test_calibrate_on_a_sample_is_reproducible(capsys, data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = tmp_path / "profile.yaml"
    argv = ("--ops", str(data_dir / "ops-sample.csv"), "--cases", str(data_dir / "cases-sample.yaml"), "--out", str(out))
    text = run_calibrate(capsys, *argv)
    assert f"wrote {out}" in text and "each GPU left out of the fit" in text and "held-out half" in text
    first = out.read_text(encoding="utf-8")
    run_calibrate(capsys, *argv)
    assert out.read_text(encoding="utf-8") == first
    data = yaml.safe_load(first)
    assert "2023-11-14" in data["source"] and "ops-sample.csv" in data["source"]
    assert "inferlab calibrate --ops" in data["source"] and "cases-sample.yaml" in data["source"]
    assert set(data) == {"source", "generic", "hardware", "overrides"}
    # per measured GPU, and per architecture family for the GPUs known only from datasheets
    assert set(data["hardware"]) == {"a100-sxm-80gb", "h100-sxm", "ampere", "hopper"}
    # The written profile is usable as it stands.
    est = estimate("llama-3.1-8b", "h200-sxm", precision="fp8", engine="trtllm", profile=str(out))
    assert float(est.tpot_s) > 0
    assert est.deployment.profile.source == data["source"]


def test_leaving_a_gpu_out_removes_it_everywhere(data_dir):
    fits = fit_ops(read_ops(data_dir / "ops-sample.csv"))
    profile = assemble_profile(fits, exclude="h100-sxm")
    assert "h100-sxm" not in str(profile)
    assert set(profile["hardware"]) == {"a100-sxm-80gb", "ampere"}
    # the datasheet-only fallback takes the one GPU left's collectives as fitted without a hop latency
    assert profile["generic"]["collective"] == {**fits.flat_collectives["a100-sxm-80gb"]["collective"],
                                                "hop_latency_s": 0.0}
    assert profile["hardware"]["a100-sxm-80gb"]["collective"] == fits.collectives["a100-sxm-80gb"]["collective"]


def _close(a, b, path=""):
    if isinstance(a, dict):
        assert set(a) == set(b), path
        for key in a:
            _close(a[key], b[key], f"{path}.{key}")
    else:
        assert a == pytest.approx(b, rel=2e-3, abs=1e-12), path


@pytest.mark.skipif(not OPS_PUBLIC.is_file(), reason="the shared op-level file is not checked out")
def test_shipped_default_profile_is_what_calibrate_writes():
    """The shipped profile is regenerated by
    ``inferlab calibrate --ops ../shared/validation/ops/ops-public.csv --out src/inferlab/calibration/profiles/default.yaml``
    (the public cases shipped in the package are the default case files).

    What is compared is what the two profiles *predict*, not the fitted digits: the same
    physics fitted by another scipy/numpy build stops the least-squares iterations at a
    slightly different point (parameters move in the 3rd-4th digit where the loss is flat,
    e.g. a fixed cost traded against a bandwidth share), which moves predictions by far less
    than the ~5% engine-version noise of the measurements. Tolerance: every static-batch case
    and a sample of op rows within 2%, their median within 0.5%.
    """
    table = read_ops(OPS_PUBLIC)
    report = calibrate(table, load_cases(), source=source_for(OPS_PUBLIC, None, len(table), "test"), score=False)
    shipped = yaml.safe_load(profile_file("default").read_text(encoding="utf-8"))
    assert "ops-public.csv" in shipped["source"] and "inferlab calibrate --ops" in shipped["source"]
    assert set(report.profile) == set(shipped)
    cases = [c for c in load_cases() if c.regime == "static_batch"]
    fresh = np.array([p for p, _ in predict_cases(cases, report.profile)], float)
    ours = np.array([p for p, _ in predict_cases(cases, shipped)], float)
    rows = table.take(np.arange(0, len(table), 97))  # every 97th row: all op kinds, GPUs and engines
    fresh = np.r_[fresh, predict_ops(rows, report.profile)]
    ours = np.r_[ours, predict_ops(rows, shipped)]
    ratio = fresh / ours
    assert np.all(np.isfinite(ratio))
    assert np.max(np.abs(ratio - 1)) < 0.02
    assert abs(np.median(ratio) - 1) < 0.005


def test_shipped_host_terms_hold_to_their_published_measurements():
    """Each engine's fitted host terms stay within what was measured of them: the exposed work
    of an in-flight-batching iteration, SGLang's scheduler 0.31 ms beside a mock forward for one
    user (tenstorrent/tt-inference-server issue #3560) and TensorRT-LLM's PyTorch executor 0.58 ms
    of idle GPU a decode iteration at 64 clients (NVIDIA/TensorRT-LLM issue #13957); an extra
    kernel at most 4 us (about 1.5 kernel floors: sglang issue #1264's eager DeepSeek-V2 decode);
    a request's server work under 30 ms (Llama-3.1-8B answers ShareGPT prompts in 30-43 ms TTFT
    on one RTX 4090 under vLLM and SGLang, prefill included). TensorRT-LLM's had been fitted at
    1.30 ms for every model."""
    shipped = yaml.safe_load(profile_file("default").read_text(encoding="utf-8"))
    measured = {"sglang": 0.31e-3, "trtllm-pytorch": 0.58e-3}
    for engine, sections in shipped["overrides"].items():
        terms = sections.get("all", {})
        assert terms.get("serving_step_overhead_s", 0.0) <= measured.get(engine, 0.01) * (1 + 1e-9), engine
        assert terms.get("serving_kernel_overhead_s", 0.0) <= 4e-6, engine
        assert terms.get("request_overhead_s", 0.0) <= 0.03 * (1 + 1e-9), engine
    assert set(measured) <= set(shipped["overrides"])


def test_sm120_blackwell_runs_ada_kernels_not_the_b200s():
    """GeForce / RTX PRO Blackwell (GB202, sm_120) has warp-level MMA like Ada, without the
    B200's tcgen05 path: its GEMM fits are Ada's. Llama-3.1-8B BF16 at batch 1 on an RTX 5090
    (1.79 TB/s, datasheet) reads 16.1 GB of weights per token: at least 9.0 ms; borrowing the
    B200's 265-row tiles at a tenth of its peak made it 26 ms, three times that."""
    from inferlab.calibration.profile import hardware_family
    from inferlab.phases.estimate import estimate
    from inferlab.specs.catalog import load_hardware

    assert hardware_family(load_hardware("rtx-5090").architecture) == "ada"
    assert hardware_family(load_hardware("rtx-pro-6000").architecture) == "ada"
    assert hardware_family(load_hardware("b200").architecture) == "blackwell"
    tpot = float(estimate("llama-3.1-8b", "rtx-5090", batch_size=1, isl=512, osl=128, engine="vllm").tpot_s)
    assert 9.0e-3 < tpot < 1.5 * 9.0e-3
