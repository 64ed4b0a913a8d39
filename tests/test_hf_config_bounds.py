"""``ModelSpec.from_hf_config`` refuses configs it cannot build faithfully (issue 16): counts
past any real model, wrong-typed values, files that are not UTF-8 JSON. One line each, at once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from inferlab.errors import SpecError
from inferlab.specs.hf_fields import COUNT_BOUNDS
from inferlab.specs.model import ModelSpec

CONFIGS = Path(__file__).parent / "data" / "hf-configs"
DEEPSEEK = json.loads((CONFIGS / "deepseek-ai--DeepSeek-V3.json").read_text())
MIXTRAL = json.loads((CONFIGS / "mistralai--Mixtral-8x7B-v0.1.json").read_text())
LLAMA = json.loads((CONFIGS / "meta-llama--Meta-Llama-3.1-8B.json").read_text())


@pytest.mark.parametrize("base, field, value, message", [
    (DEEPSEEK, "num_hidden_layers", 2**63, "field 'num_hidden_layers' must be between 1 and 4,096 (a bound far beyond "
                                           "any released model), got 9,223,372,036,854,775,808"),
    (DEEPSEEK, "n_routed_experts", 10**12, "field 'n_routed_experts' must be between 1 and 65,536"),
    (MIXTRAL, "num_local_experts", 2**40, "field 'num_local_experts' must be between 1 and 65,536"),
    (LLAMA, "hidden_size", 2**31, "field 'hidden_size' must be between 1 and 1,048,576"),
    (LLAMA, "vocab_size", -1, "field 'vocab_size' must be between 1 and 16,777,216"),
    (LLAMA, "max_position_embeddings", 10**20, "field 'max_position_embeddings' must be between 1 and 1,073,741,824"),
    (LLAMA, "num_attention_heads", 10**6, "field 'num_attention_heads' must be between 1 and 8,192"),
    (LLAMA, "num_hidden_layers", 32.0, "field 'num_hidden_layers' must be an integer, got 32.0 (float)"),
    (LLAMA, "num_hidden_layers", True, "field 'num_hidden_layers' must be an integer, got True (bool)"),
    (MIXTRAL, "sliding_window", "32", "field 'sliding_window' must be an integer, got '32' (str)"),
    (LLAMA, "tie_word_embeddings", "false", "field 'tie_word_embeddings' must be true or false, got 'false'"),
    (LLAMA, "num_key_value_heads", "8", "field 'num_key_value_heads' must be an integer, got '8' (str)"),
])
def test_count_and_type_errors_name_the_field(base, field, value, message):
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        ModelSpec.from_hf_config({**base, field: value})
    assert message in str(info.value) and "\n" not in str(info.value)
    assert time.perf_counter() - start < 1.0  # refused before 2^63 layers are built


def test_a_missing_count_is_named():
    config = {k: v for k, v in LLAMA.items() if k != "num_hidden_layers"}
    with pytest.raises(SpecError, match="model_type 'llama' needs field 'num_hidden_layers', which is missing"):
        ModelSpec.from_hf_config(config)


def test_a_sliding_window_given_as_an_integer_is_read():
    # Mixtral-8x7B's released config has sliding_window null (full attention in all 32 layers)
    assert ModelSpec.from_hf_config({**MIXTRAL, "sliding_window": 4096}).layer_kinds == {"sliding(4096)": 32}


def test_unknown_layer_types_are_refused():
    config = json.loads((CONFIGS / "openai--gpt-oss-20b.json").read_text())
    config["layer_types"] = ["sliding_attention", "global"] * 12
    with pytest.raises(SpecError, match="'layer_types' holds 'global'; allowed: sliding_attention, full_attention"):
        ModelSpec.from_hf_config(config)


def test_the_largest_allowed_counts_build_quickly():
    # every count at its bound: 4,096 layers of hidden 2^20 and 65,536 experts of width 2^20
    big = {**DEEPSEEK, "num_hidden_layers": 4096, "hidden_size": 2**20, "n_routed_experts": 65_536,
           "moe_intermediate_size": 2**20, "intermediate_size": 2**20, "vocab_size": 2**24}
    start = time.perf_counter()
    spec = ModelSpec.from_hf_config(big)
    assert spec.num_hidden_layers == 4096 and spec.total_params > 10**20
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
    (b"{\"model_type\": ", "not valid JSON"),
    (b"[1, 2]", "expected a JSON object, got list"),
    (b"[" * 100_000, "JSON nested too deeply to be a config"),
])
def test_files_that_are_not_configs_are_one_line(tmp_path, content, message):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(SpecError) as info:
        ModelSpec.from_hf_config(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_models_show_on_a_non_utf8_config_exits_2(tmp_path, capsys):
    from inferlab.cli.main import main

    path = tmp_path / "config.json"
    path.write_bytes(b"\x80abc")
    assert main(["models", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not UTF-8" in err


@settings(max_examples=80, deadline=None)
@given(field=st.sampled_from(sorted(COUNT_BOUNDS)), value=st.integers(-2**70, 2**70))
def test_any_count_either_builds_within_its_bound_or_is_refused_with_its_name(field, value):
    low, high = COUNT_BOUNDS[field]
    try:
        ModelSpec.from_hf_config({**LLAMA, field: value})
    except SpecError as exc:  # in bounds it may still be refused (heads not dividing hidden_size...)
        if not low <= value <= high:
            assert f"field '{field}' must be between {low:,} and {high:,}" in str(exc)
        return
    assert low <= value <= high


def test_a_number_past_pythons_digit_limit_is_one_line_in_json_and_yaml(tmp_path):
    """Python refuses to read an integer of more than 4,300 digits (a ValueError, which had
    escaped as a traceback from a config.json, a deployment file and a case file)."""
    from inferlab.inputs.deployment import Deployment
    from inferlab.validation.cases import load_cases

    huge = "9" * 5000
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": %s}' % huge, encoding="utf-8")
    with pytest.raises(SpecError, match="not a config: Exceeds the limit"):
        ModelSpec.from_hf_config(config)
    deployment = tmp_path / "deployment.yaml"
    deployment.write_text(f"model: llama-3.1-8b\nhardware: h100-sxm\nlayout: {{tp: {huge}}}\n", encoding="utf-8")
    with pytest.raises(SpecError, match="integer of 5,000 digits is too long to be a value"):
        Deployment.from_file(deployment)
    cases = tmp_path / "cases.yaml"
    cases.write_text(f"schema: 1\ncases:\n- id: a\n  measured: {huge}\n", encoding="utf-8")
    with pytest.raises(SpecError, match="integer of 5,000 digits"):
        load_cases(cases)
