"""Case files: a bad case is reported with its reason and the others are still predicted;
a file that is not a case file, or an unknown profile, is one line and exit 2 (issue 16)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from inferlab.cli.main import main
from inferlab.errors import SpecError
from inferlab.validation.cases import Case, InvalidCase, load_case_entries, load_cases
from inferlab.validation.predict import predict_cases

SAMPLE = yaml.safe_load((Path(__file__).parent / "data" / "cases-sample.yaml").read_text(encoding="utf-8"))
GOOD = SAMPLE["cases"][0]  # GPT-J 6B fp8 on one H100, batch 1024, 128/128 tokens


def _file(tmp_path, cases, schema="inferlab-cases/1"):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"schema": schema, "cases": cases}), encoding="utf-8")
    return path


def _variant(case_id, **changes):
    case = copy.deepcopy(GOOD)
    case["id"] = case_id
    for key, value in changes.items():
        if value is None:
            case.pop(key)
        else:
            case[key] = value
    return case


def test_one_bad_case_does_not_stop_the_others(tmp_path):
    bad_ep = _variant("bad-ep", parallelism={"tp": 1, "ep": 0})
    unknown = _variant("bad-model", model="llama-9")
    missing = _variant("bad-missing", measured=None)
    entries = load_case_entries(_file(tmp_path, [GOOD, bad_ep, unknown, missing, "junk"]))
    kinds = [type(e).__name__ for e in entries]
    assert kinds == ["Case", "InvalidCase", "Case", "InvalidCase", "InvalidCase"]
    preds = predict_cases(entries)
    assert preds[0][0] is not None and preds[0][0] > 0 and preds[0][1] is None
    assert preds[1] == (None, "invalid case: case file " + str(tmp_path / "cases.yaml") + ", case 2 (bad-ep): "
                              "parallelism.ep: Input should be greater than or equal to 1")
    assert preds[2][0] is None and preds[2][1].startswith("unknown model 'llama-9'")
    assert preds[3][1].endswith("case 4 (bad-missing): measured: required field is missing")
    assert preds[4][1].endswith("case 5: expected a mapping of fields, got str")


@pytest.mark.parametrize("changes, message", [
    ({"load": {"batch_size": 2.5}}, "load: batch_size must be an integer from 1 to 1,000,000, got 2.5"),
    ({"load": {"batch_size": "8"}}, "load: batch_size must be an integer from 1 to 1,000,000, got '8'"),
    ({"load": {"request_rate": float("nan"), "num_requests": 5}}, "load: request_rate must be a number in (0, 1e+09]"),
    ({"load": {"concurrency": 0}}, "load: concurrency must be an integer from 1 to 1,000,000, got 0"),
    ({"isl": 10**12}, "isl: Input should be less than or equal to 100000000"),
    ({"measured": float("inf")}, "measured: Input should be a finite number"),
    ({"speculative": {"method": "eagle", "draft_tokens": "four"}}, "draft_tokens must be an integer from 0 to 64"),
    # a misspelt key had been kept as an extra and the real one read as not given (bf16 weights, tp 1)
    ({"precision": {"weight": "fp8", "activations": "fp8"}}, "unknown key precision.weight; did you mean precision.weights?"),
    ({"parallelism": {"tpp": 2}}, "unknown key parallelism.tpp; did you mean parallelism.tp?"),
    ({"enigne": "trtllm"}, "unknown key enigne; did you mean engine?"),
])
def test_case_fields_are_typed_and_bounded(tmp_path, changes, message):
    (entry,) = load_case_entries(_file(tmp_path, [_variant("c", **changes)]))
    assert isinstance(entry, InvalidCase) and message in entry.reason


def test_a_repeated_id_is_an_invalid_case_and_the_first_is_kept(tmp_path):
    entries = load_case_entries(_file(tmp_path, [GOOD, GOOD]))
    assert type(entries[0]).__name__ == "Case" and isinstance(entries[1], InvalidCase)
    assert "duplicate case id" in entries[1].reason


def test_load_cases_stays_strict_for_calibration(tmp_path):
    with pytest.raises(SpecError, match=r"case 2 \(bad-ep\): parallelism.ep"):
        load_cases(_file(tmp_path, [GOOD, _variant("bad-ep", parallelism={"ep": 0})]))


def test_validate_cli_reports_the_bad_case_and_exits_0(tmp_path, capsys):
    path = _file(tmp_path, [GOOD, _variant("bad-ep", parallelism={"ep": 0})])
    assert main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    good_row = next(line for line in out.splitlines() if line.startswith(GOOD["id"]))
    bad_row = next(line for line in out.splitlines() if line.startswith("bad-ep"))
    assert "invalid case" not in good_row and good_row.split()[2] == "2.586e+04"
    assert "parallelism.ep: Input should be greater than or equal to 1" in bad_row


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfeschema: x", "not UTF-8 text (byte 0)"),
    (b"schema: [unclosed", "not valid YAML"),
    (b"schema: inferlab-cases/0\ncases: []\n", "expected 'schema: inferlab-cases/1' at the top, found 'inferlab-cases/0'"),
    (b"just text", "expected 'schema: inferlab-cases/1' at the top, found 'str'"),
    (b"schema: inferlab-cases/1\ncases: {a: 1}\n", "'cases' must be a list of cases, got dict"),
    # these had said "found 'NoneType'", "found 'list'" and "'cases' must be a list"
    (b"", "the file is empty; a case file is a mapping: 'schema: inferlab-cases/1', then the cases in a list"),
    (b"- {id: a}\n", "a list at the top; a case file is a mapping"),
    (b"schema: inferlab-cases/1\ncase: []\n", "no 'cases' key (did you mean 'cases'?)"),
])
def test_files_that_are_not_case_files_exit_2_in_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "f.yaml"
    path.write_bytes(content)
    assert main(["validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err


def test_an_unknown_profile_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["validate", str(_file(tmp_path, [GOOD])), "--profile", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "inferlab: error: unknown profile 'nope'. Allowed: <path>.yaml, default, roofline.\n"


def test_a_file_of_invalid_cases_is_bad_input_not_success(tmp_path, capsys):
    path = _file(tmp_path, [_variant("bad-ep", parallelism={"ep": 0}), _variant("bad-tp", parallelism={"tp": 0})])
    assert main(["validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "none of the 2 cases in" in captured.err and "follows the schema; the first: " in captured.err


def test_a_file_without_cases_is_bad_input(tmp_path, capsys):
    path = tmp_path / "empty.yaml"
    path.write_text("schema: inferlab-cases/1\ncases: []\n")
    assert main(["validate", str(path)]) == 2
    assert f"validate: no cases in {path}" in capsys.readouterr().err


@pytest.mark.parametrize("metric, unit, measured, expected", [
    ("ttft_ms", "s", 0.05, 50.0),  # 0.05 s is 50 ms (it had been compared as 0.05 ms)
    ("ttft_ms", "ms", 42.0, 42.0),
    ("output_tokens_per_s", "tokens/ms", 1.2, 1200.0),
    ("output_tokens_per_s_per_gpu", "tokens/s/gpu", 25860.0, 25860.0),
    ("output_tokens_per_s_per_gpu", "tok/min/GPU", 60.0, 1.0),
    ("tpot_ms", "ms/token", 7.4, 7.4),  # a time per output token may say so (it had been refused)
    ("itl_ms", "s/tok", 0.0074, 7.4),
])
def test_a_case_is_compared_in_its_metrics_unit(tmp_path, metric, unit, measured, expected):
    (entry,) = load_case_entries(_file(tmp_path, [_variant("u", metric=metric, unit=unit, measured=measured)]))
    assert isinstance(entry, Case) and entry.measured == pytest.approx(expected)


@pytest.mark.parametrize("metric, unit, message", [
    ("ttft_ms", "furlongs", "unknown unit"),
    ("ttft_ms", "tokens/s", "the dimensions differ"),
    ("output_tokens_per_s", "tokens/s/gpu", "per GPU, but output_tokens_per_s is of the whole system"),
    ("ttft_ms", "ms/token", "the dimensions differ"),  # the first token's time is no time per token
])
def test_a_unit_of_another_kind_is_the_cases_reason(tmp_path, metric, unit, message):
    entries = load_case_entries(_file(tmp_path, [GOOD, _variant("u", metric=metric, unit=unit)]))
    assert isinstance(entries[0], Case) and isinstance(entries[1], InvalidCase) and message in entries[1].reason


def test_an_unknown_engine_is_the_cases_reason_and_the_others_are_predicted(tmp_path, capsys):
    # "vlm" had been predicted silently as the generic engine
    path = _file(tmp_path, [_variant("typo", engine="vlm"), GOOD, _variant("mlc-run", engine="mlc")])
    entries = load_case_entries(path)
    assert [type(e).__name__ for e in entries] == ["InvalidCase", "Case", "Case"]
    preds = predict_cases(entries)
    assert preds[0] == (None, f"invalid case: case file {path}, case 1 (typo): engine: unknown engine 'vlm'; "
                              "did you mean 'vllm'? Allowed: generic, gpt-fast, lmdeploy, mlc, other, sglang, "
                              "trtllm, trtllm-cpp, trtllm-pytorch, vllm.")
    assert preds[1][0] is not None and preds[1][1] is None  # the schema's engines without a profile still run
    assert preds[2][0] is not None and preds[2][1] is None
    assert main(["validate", str(path)]) == 0
    typo_row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("typo"))
    assert "unknown engine 'vlm'; did you mean 'vllm'?" in typo_row


def test_a_key_close_to_no_known_one_is_kept_as_a_later_schemas(tmp_path):
    """Only a near miss of a known key is refused: a field another harness adds is read past."""
    (entry,) = load_case_entries(_file(tmp_path, [_variant("c", harness="aiperf 0.3",
                                                           precision={**GOOD["precision"], "lm_head": "bf16"})]))
    assert isinstance(entry, Case)


def test_a_speculative_case_without_its_draft_length_says_so():
    # it had said "draft length k must be an integer >= 1, got 0" where nothing was given
    from inferlab.validation.cases import speculative_from

    with pytest.raises(SpecError, match=r"speculative: draft_tokens \(the draft length k, from 1\) is missing"):
        speculative_from({"method": "eagle", "acceptance": 0.7})
    assert speculative_from({"method": "eagle", "draft_tokens": 3, "acceptance": 0.7}).k == 3



@pytest.mark.parametrize("field, value", [("isl", True), ("isl", "1024"), ("num_gpus", "1"), ("measured", "1500")])
def test_a_boolean_or_quoted_number_is_the_cases_reason(tmp_path, field, value):
    # `isl: true` had been predicted as a 1-token prompt, a quoted measurement taken as a number
    entries = load_case_entries(_file(tmp_path, [GOOD, _variant("t", **{field: value})]))
    assert isinstance(entries[1], InvalidCase) and f"{field}: expected a number, got" in entries[1].reason
    (whole,) = load_case_entries(_file(tmp_path, [_variant("w", isl=128.0)]))  # a whole float stays a count
    assert isinstance(whole, Case) and whole.isl == 128
