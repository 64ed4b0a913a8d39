"""``ModelSpec.from_hf_config``: the real configs of ``shared/reference/hf-configs`` (or the
copies in ``tests/data``) with fields set to huge, negative, wrong-typed or missing values."""

import json
from pathlib import Path

from hypothesis import strategies as st

from inferlab.specs.hf_fields import BOOL_FIELDS, COUNT_BOUNDS
from inferlab.specs.catalog import load_hardware
from inferlab.specs.model import ModelSpec
from inferlab.techniques.deployed_precision import resolve_precision

from . import Entry

_ROOT = Path(__file__).resolve().parents[2]
_FOLDERS = [_ROOT.parent / "shared" / "reference" / "hf-configs", _ROOT / "tests" / "data" / "hf-configs"]
_FOLDER = next((f for f in _FOLDERS if f.is_dir() and any(f.glob("*.json"))), _FOLDERS[-1])
CONFIGS = {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(_FOLDER.glob("*.json"))
           if "quant_config" not in p.name}
_FIELDS = sorted(set(COUNT_BOUNDS) | set(BOOL_FIELDS) | {"model_type", "layer_types", "moe_layers",
                                                         "no_rope_layers", "mlp_only_layers", "text_config",
                                                         "quantization_config", "hidden_act", "rope_scaling"})
_VALUES = st.one_of(
    st.integers(-10, 10), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 2**31, 2**63, 4096, 65_537, 2**20 + 1]),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), st.text(max_size=6),
    st.sampled_from(["32", "false", "llama", "qwen3_moe", "sliding_attention", "deepseek_v3"]),
    st.lists(st.one_of(st.integers(-2, 200), st.sampled_from(["sliding_attention", "full_attention", "x"])),
             max_size=8),
    st.dictionaries(st.sampled_from(["quant_method", "bits", "hidden_size"]), st.one_of(st.integers(), st.text(max_size=4)),
                    max_size=2),
    st.fixed_dictionaries({"quant_method": st.sampled_from(["fp8", "mxfp4", "awq", "gptq", "nvfp4", "bogus"])},
                          optional={"bits": st.sampled_from([4, 8, 3, True, "4"]),
                                    "weight_block_size": st.sampled_from([[128, 128], "x", None]),
                                    "modules_to_not_convert": st.sampled_from(
                                        [["model.layers.*.self_attn"], "self_attn", [1], []])}))
_H100 = load_hardware("h100-sxm")
_DELETE = object()
_CHANGE = st.tuples(st.one_of(st.sampled_from(_FIELDS), st.text(max_size=8)), st.one_of(_VALUES, st.just(_DELETE)))


def _mutated(name_changes):
    name, changes = name_changes
    config = dict(CONFIGS[name])
    for key, value in changes:
        if value is _DELETE:
            config.pop(key, None)
        else:
            config[key] = value
    return config


def _inputs():
    return st.tuples(st.sampled_from(sorted(CONFIGS)), st.lists(_CHANGE, min_size=0, max_size=3)).map(_mutated)


def _call(config):
    spec = ModelSpec.from_hf_config(config)
    kv = spec.kv_cache_bytes_per_token("bf16")
    shipped = resolve_precision(None, spec, _H100).config  # the checkpoint's formats: the default precision
    return {"total_params": spec.total_params, "active_params": spec.active_params, "kv_bytes_per_token": kv,
            "weight_bytes": spec.weight_bytes("bf16"), "kv_bytes_at_8k": float(spec.kv_cache_bytes(8192.0)),
            "checkpoint_weight_bytes": spec.weight_bytes(shipped.weights, expert_precision=shipped.moe_weights)}


ENTRY = Entry("from_hf_config", _inputs, _call)
