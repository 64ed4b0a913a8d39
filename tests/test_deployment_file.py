"""Deployment files and the estimate command's technique flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferlab import SpecError
from inferlab.cli.main import main
from inferlab.inputs.files import load_deployment_file
from inferlab.techniques.speculative import SpeculativeConfig

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples" / "deployments").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_deployments_run(path, capsys):
    assert main(["estimate", "--file", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ttft_s"] and data["tpot_s"]


def test_mapping_forms_become_techniques(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\n"
                    "speculative: {method: eagle, k: 4, acceptance: 0.7}\nprefix_cache: {hit_rate: 0.3}\n")
    kw = load_deployment_file(path)
    assert isinstance(kw["speculative"], SpeculativeConfig) and kw["speculative"].k == 4
    assert kw["prefix_cache"].hit_rate == 0.3


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("model: llama-3.1-8b\nhardware: h100-sxm\ntensor_parallel: 2\n", "unknown key(s) tensor_parallel"),
        ("hardware: h100-sxm\n", "required key 'model'"),
        ("model: llama-3.1-8b\nhardware: h100-sxm\nspeculative: [1, 2]\n", "speculative: expected text or a mapping"),
        ("model: llama-3.1-8b\nhardware: h100-sxm\nspeculative: {method: eagle, k: 4}\n", "speculative"),
        ("- just\n- a list\n", "expected a mapping"),
        ("model: [unclosed\n", "not valid YAML"),
        ("model: llama-3.1-8b\nhardwar: h100-sxm\n", "unknown key(s) hardwar (did you mean 'hardware'"),
        ("model: llama-3.1-8b\nhardware: h100-sxm\nbatch_size: [1, 2.5]\n", "whole numbers, got list holding 2.5"),
        ("model: llama-3.1-8b\nhardware: h100-sxm\nprecision: .nan\n", "d.yaml: precision must be a format name"),
        ("model: llama-3.1-8b\nhardware: h100-sxm\nprecision: fp9\n", "d.yaml: unknown precision 'fp9'"),
    ],
)
def test_bad_files_say_what_is_wrong(tmp_path, text, fragment):
    path = tmp_path / "d.yaml"
    path.write_text(text)
    with pytest.raises(SpecError, match=fragment.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load_deployment_file(path)


def test_flags_override_the_file(capsys):
    path = EXAMPLES[0]
    assert main(["estimate", "--file", str(path), "--batch", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["batch_size"] in (2, [2], [[[2.0]]]) or 2 in json.dumps(data["batch_size"])


def test_technique_flags(capsys):
    code = main(["estimate", "llama-3.1-8b", "h100-sxm", "--spec", "eagle:k=3,accept=0.6", "--prefix-cache", "0.5",
                 "--ops", "decode", "--explain"])
    out = capsys.readouterr().out
    assert code == 0 and "draft_pass_1/" in out and "verify/" in out and "prefix cache" in out
    code = main(["estimate", "llama-3.1-70b", "h200-sxm", "--precision", "fp8", "--isl", "8192", "--osl", "512",
                 "--batch", "32", "--disagg", "prefill=h200x4,decode=h200x8"])
    out = capsys.readouterr().out
    assert code == 0 and "disaggregated" in out and "P:D" in out
    code = main(["estimate", "llama-3.1-8b", "h100-sxm", "--spec", "eagle:k=3"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("inferlab: error:") and err.count("\n") == 1


@pytest.mark.parametrize("argv", [
    ["estimate", "llama-3.1-8b", "h100-sxm", "--file", "a\x00b.yaml"],
    ["validate", "a\x00b.yaml"],
    ["validate", "--ops", "a\x00b.csv"],
    ["estimate", "llama-3.1-8b", "h100-sxm", "--profile", "a\x00b.yaml"],
])
def test_a_file_name_with_a_nul_byte_is_one_line_exit_2(capsys, argv):
    from inferlab.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a NUL byte" in err


def test_the_json_of_one_estimate_is_a_deployment_file_for_the_next(tmp_path, capsys):
    """``inferlab estimate --json`` writes the Deployment and the Workload; a file holding them
    (the Deployment's own form, ``layout:`` and ``engine:`` mappings, plus ``workload:``) gives
    the same estimate with ``--file`` (issue 18: one form, written and read back)."""
    import yaml

    flags = ["llama-3.1-70b", "h100-sxm", "--tp", "4", "--precision", "fp8", "--batch", "1,8", "--isl", "2048",
             "--osl", "256", "--engine", "trtllm", "--json"]
    assert main(["estimate", *flags]) == 0
    first = json.loads(capsys.readouterr().out)
    path = tmp_path / "again.yaml"
    path.write_text(yaml.safe_dump({**first["deployment"], "workload": first["workload"]}))
    assert main(["estimate", "--file", str(path), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["ttft_s"] == first["ttft_s"] and again["tpot_s"] == first["tpot_s"]
    assert again["deployment"] == first["deployment"] and first["deployment"]["layout"] == {"tp": 4}
    path.write_text(yaml.safe_dump({**first["deployment"], "layout": {"tp": 4, "pq": 2}}))
    assert main(["estimate", "--file", str(path)]) == 2
    assert "pq" in capsys.readouterr().err


def test_serving_limits_of_a_deployment_are_named_where_a_static_batch_leaves_them(tmp_path, capsys):
    # a typed file's max_prefill_tokens limits serving: estimate says so on stderr (as --engine-args
    # does) and gives the same numbers as without it; its max_num_seqs (64, above the batch) is used
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\n"
                    "engine: {name: sglang, max_num_seqs: 64, max_prefill_tokens: 4096}\n")
    assert main(["estimate", "--file", str(path), "--batch", "8", "--json"]) == 0
    out = capsys.readouterr()
    assert "max_prefill_tokens=4096 limit serving (inferlab serve), not a static batch" in out.err
    assert "max_num_seqs" not in out.err
    plain = tmp_path / "p.yaml"
    plain.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nengine: {name: sglang}\n")
    assert main(["estimate", "--file", str(plain), "--batch", "8", "--json"]) == 0
    bare = capsys.readouterr()
    assert bare.err == "" and json.loads(bare.out)["ttft_s"] == json.loads(out.out)["ttft_s"]
    # the Python call: explain() names them
    from inferlab import Deployment, Workload, estimate

    dep = Deployment.from_dict({"model": "llama-3.1-8b", "hardware": "h100-sxm",
                                "engine": {"name": "sglang", "chunked_prefill": False, "max_num_seqs": 4}})
    est = estimate(dep, Workload(batch_size=8, isl=512, osl=64))
    text = est.explain()
    assert "engine limits of the deployment: chunked_prefill=False limit serving" in text
    limits = next(line for line in text.splitlines() if "engine limits of the deployment" in line)
    assert "max_num_seqs" not in limits and float(est.waves) == 2  # 8 sequences, 4 at a time
    assert "engine limits" not in estimate("llama-3.1-8b", "h100-sxm", engine="sglang").explain()


def test_a_disaggregated_deployments_sequence_limit_is_named_not_dropped(tmp_path, capsys):
    # the pools of a disaggregated estimate run the batches given: a Deployment's max_num_seqs
    # (a serving limit there) is named on the result, in its dict and by the CLI, and the numbers
    # are those of the same deployment without it
    from inferlab import Deployment, Workload, estimate

    pools = {"prefill": {"hardware": "h200-sxm", "num_gpus": 2}, "decode": {"hardware": "h200-sxm", "num_gpus": 4}}
    limited = Deployment.from_dict({"model": "llama-3.1-8b", "disaggregation": pools,
                                    "engine": {"name": "sglang", "max_num_seqs": 16}})
    plain = Deployment.from_dict({"model": "llama-3.1-8b", "disaggregation": pools, "engine": {"name": "sglang"}})
    work = Workload(batch_size=64, isl=1024, osl=128)
    est, bare = estimate(limited, work), estimate(plain, work)
    assert est.notes == ["engine limits of the deployment: max_num_seqs=16 limit serving (inferlab serve), not a "
                         "static batch: not used here"]
    assert est.notes[0] in str(est) and est.to_dict()["notes"] == est.notes
    assert bare.notes == [] and float(bare.tpot_s) == float(est.tpot_s)
    path = tmp_path / "d.yaml"
    path.write_text(json.dumps(limited.to_dict()))
    assert main(["estimate", "--file", str(path), "--batch", "64", "--json"]) == 0
    out = capsys.readouterr()
    assert "max_num_seqs=16 limit serving" in out.err and json.loads(out.out)["notes"] == est.notes


def test_numbers_with_an_exponent_are_numbers(tmp_path):
    """YAML 1.2 and JSON read 1e2 as a number; PyYAML (YAML 1.1) as the text '1e2', which a
    batch size or a scenario's rate then refused as 'not a number'."""
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nbatch_size: [1, 1e2]\nisl: 2.048e3\n")
    kw = load_deployment_file(path)
    assert [int(b) for b in kw["batch_size"]] == [1, 100] and int(kw["isl"]) == 2048


def test_a_files_lists_are_gridded_as_the_flags_are(tmp_path, capsys):
    """batch_size [1, 8] and isl [128, 512] in a file are four points, as --batch 1,8 --isl 128,512
    (they had been paired into two: the file's keys always hold a 'disaggregation', None without
    pools, which the CLI had read as a disaggregated estimate's); a repeated value is refused."""
    import json

    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nbatch_size: [1, 8]\nisl: [128, 512]\n")
    assert main(["estimate", "--file", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)  # the grid's axes: batch x isl x osl
    assert data["batch_size"] == [[[1.0], [1.0]], [[8.0], [8.0]]] and data["isl"] == [[[128.0], [512.0]]] * 2
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nbatch_size: [1, 1]\n")
    assert main(["estimate", "--file", str(path)]) == 2
    assert "batch_size lists 1 twice; each value once" in capsys.readouterr().err
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nworkload: {batch_size: [1, 1]}\n")
    assert main(["estimate", "--file", str(path)]) == 2
    assert "workload: batch_size lists a value twice" in capsys.readouterr().err


def test_a_files_keys_a_disaggregation_ignores_name_the_file_once(tmp_path, capsys):
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\ndisaggregation: prefill=h200x4,decode=h200x8\ntp: 2\npp: 2\n")
    assert main(["estimate", "--file", str(path)]) == 2
    assert f"and {path}: tp, pp would be ignored" in capsys.readouterr().err


def test_what_json_writes_is_a_deployment_file(capsys, tmp_path):
    """README: the deployment and workload --json writes are a file too. The whole output read
    back gives the same grid and numbers (it had been refused: unknown keys); a nested
    deployment with a stray key beside it is refused, naming what is allowed."""
    flags = ["llama-3.1-70b", "h100-sxm", "--tp", "4", "--precision", "fp8", "--batch", "1,8", "--isl", "2048",
             "--osl", "256", "--engine", "vllm", "--spec", "eagle:k=3,accept=0.6"]
    assert main(["estimate", *flags, "--json"]) == 0
    first = capsys.readouterr().out
    path = tmp_path / "run.json"
    path.write_text(first)
    assert main(["estimate", "--file", str(path), "--json"]) == 0
    again, before = json.loads(capsys.readouterr().out), json.loads(first)
    for key in ("batch_size", "isl", "osl", "ttft_s", "tpot_s", "output_tokens_per_s"):
        assert again[key] == before[key]
    stray = tmp_path / "stray.yaml"
    stray.write_text("deployment: {model: llama-3.1-8b, hardware: h100-sxm}\nbatch: 4\n")
    with pytest.raises(SpecError, match="key\\(s\\) batch beside deployment; allowed: deployment, workload"):
        load_deployment_file(stray)


def test_what_serve_json_writes_is_named_as_such_by_estimate(capsys, tmp_path):
    # its result keys had been listed as unknown keys beside the deployment
    assert main(["serve", "llama-3.1-8b", "h100-sxm", "--rate", "1", "--num-requests", "10", "--json"]) == 0
    path = tmp_path / "served.json"
    path.write_text(capsys.readouterr().out)
    with pytest.raises(SpecError, match="is what serve --json writes; estimate reads a static batch"):
        load_deployment_file(path)
