"""Number formats: bytes per element with block scales, from the format definitions."""

from __future__ import annotations

import pytest

from inferlab import UnknownNameError, number_format
from inferlab.errors import SpecError
from inferlab.specs.catalog import load_hardware, load_model
from inferlab.techniques.deployed_precision import resolve_precision


@pytest.mark.parametrize(
    "name, bits",
    [
        ("bf16", 16), ("fp16", 16), ("fp8", 8), ("int8", 8),
        ("nvfp4", 4 + 8 / 16),   # 16-element blocks, one FP8 E4M3 scale each
        ("mxfp4", 4 + 8 / 32),   # OCP MX: 32-element blocks, one E8M0 scale each
        ("mxfp6", 6 + 8 / 32),
        ("mxfp8", 8 + 8 / 32),
        ("int4", 4 + 16 / 128),  # weight-only, groups of 128 with a 16-bit scale
    ],
)
def test_bits_per_element(name, bits):
    assert number_format(name).bits_per_element == pytest.approx(bits)


def test_compute_precision_of_weight_only_int4_is_16_bit():
    assert number_format("int4").compute == "bf16"
    assert number_format("nvfp4").compute == "fp4"


def test_unknown_format_suggests():
    with pytest.raises(UnknownNameError, match="nvfp4"):
        number_format("nvfp3")


def test_case_insensitive():
    assert number_format("BF16").name == "bf16"


def test_a_kind_given_twice_in_a_precision_text_is_refused_and_a_kind_flag_replaces_it():
    from inferlab.cli.precision_flags import precision_value

    with pytest.raises(SpecError, match=r"kv is given twice \(kv_cache:fp8 and kv_cache:bf16\)"):
        resolve_precision("kv:fp8 kv:bf16", load_model("llama-3.1-8b"), load_hardware("h100-sxm"))
    text = precision_value("w:fp8 kv:fp8", {"weights": "bf16"})
    assert text == "kv:fp8 weights:bf16"
    cfg = resolve_precision(text, load_model("llama-3.1-8b"), load_hardware("h100-sxm")).config
    assert (cfg.weights, cfg.kv_cache) == ("bf16", "fp8")


def test_int4_in_groups_of_32_stores_half_a_bit_of_scale_a_weight():
    """Kimi-K2.5's INT4 experts: 4 bits and one BF16 scale per 32 weights, 4.5 bits (0.5625 B)
    a weight, against 4 + 16/128 = 4.125 bits in groups of 128; one weight-only kernel family."""
    from inferlab.core.quantization import gemm_kernel

    assert number_format("int4_g32").bytes_per_element == 4.5 / 8
    assert number_format("int4").bytes_per_element == 4.125 / 8
    assert gemm_kernel("int4_g32", "bf16") == gemm_kernel("int4", "bf16") == "int4_wo"
