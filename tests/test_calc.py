"""The calculator: precedence as engineers read it, percent, bounds, refusals (issue 16).

Expected values are worked out by hand in the comments; the CLI itself is tested in
``test_cli.py`` (formatting, sources, --json) and here for one-line exits on bad input.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.calc.evaluator import evaluate
from inferlab.calc.syntax import AmbiguousExpressionError
from inferlab.calc.tokens import tokenize
from inferlab.cli.main import main
from inferlab.errors import InferlabError, UnitError, UnknownNameError


@pytest.mark.parametrize(
    "expr, to, value, unit",
    [
        # 140e9 B / 3.35e12 B/s = 0.0417910 s: the divisor is the quantity 3.35 TB/s
        ("140 GB / 3.35 TB/s", "ms", 41.791, "ms"),
        # spaces do not split a unit: TB / s is still the unit of 3.35
        ("140 GB / 3.35 TB / s", "ms", 41.791, "ms"),
        ("140 GB / (3.35 TB/s)", "ms", 41.791, "ms"),
        # 1 h / 2 h = 3600 s / 7200 s = 0.5, a plain number (not 6,480,000 s^2)
        ("1 h / 2 h", None, 0.5, "dimensionless"),
        ("1 h / 30 min", None, 2.0, "dimensionless"),  # 3600 s / 1800 s
        # 7 TB / 0.10 = 70 TB
        ("7 TB / 10%", None, 70.0, "TB"),
        # 2 Hz / 0.07 = 28.571 Hz
        ("(2 Hz / 7%)", "Hz", 28.5714, "Hz"),
        ("50% * 80 GB", None, 40.0, "GB"),  # 0.5 * 80 GB
        ("25 % * 8 GB", None, 2.0, "GB"),  # 0.25 * 8 GB
        ("1 h / 2 h", "%", 50.0, "%"),
        ("400 Gb/s", "GB/s", 50.0, "GB/s"),  # 400e9 bit/s / 8 bit/B
        ("10**9 B", "GB", 1.0, "GB"),  # a power of a number, then its unit
        ("2**3 GB", None, 8.0, "GB"),
        ("2 GB**2", None, 2.0, "GB²"),  # the power belongs to the unit
        ("(2 GB)**2", None, 4.0, "GB²"),
        ("6 GB / 2 * 3", None, 9.0, "GB"),  # * and / left to right: (6 GB / 2) * 3
        ("2 * (3 + 4) GB", None, 14.0, "GB"),  # a parenthesis takes the unit after it
        ("-3 GB + 5 GB", None, 2.0, "GB"),
        ("1 GB/s * 2 s", None, 2.0, "GB"),
        ("1 kW*h / 1 W", "h", 1000.0, "h"),  # kW*h is one unit: 1000 W h / 1 W
        ("3600 / (2 s)", "1/s", 1800.0, "1/s"),
        ("(3600 / 2) s", "s", 1800.0, "s"),
        ("$2.95/hour * 2 h", None, 5.9, "USD"),
        ("2 $/h", None, 2.0, "USD/h"),
        ("128 ktok", "tok", 128_000.0, "tok"),
        ("5 ms", "ms", 5.0, "ms"),  # a milli-second is still one
        ("(4 GB**2) ** 0.5", "GB", 2.0, "GB"),
        # 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 B = 131,072 B a token, x 128,000 tokens
        ("llama-3.1-8b.kv_bytes_per_token.bf16 * 128 ktok", "GB", 16.777216, "GB"),
        # 989 TFLOP/s / 3.35 TB/s = 295.224 FLOP/B (H100 SXM datasheet)
        ("h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth", None, 295.224, "FLOP/B"),
        # 80 layers x 8 KV heads x 128 dims x 2 (K and V) x 1 B = 163,840 B
        ("llama-3.1-70b.kv_bytes_per_token.fp8", "B/tok", 163_840.0, "B/tok"),
        # 163,840 B x 32,768 tokens x 16 sequences = 85,899,345,920 B = 80 x 2**30 B
        ("llama-3.1-70b.kv_bytes_per_token.fp8 * 32768 tok * 16", "GiB", 80.0, "GiB"),
        ("h100-sxm.tdp-h100-sxm.tdp", "W", 0.0, "W"),
        # a catalog value is a named quantity: 70,553,706,496 params / (2 s) = 3.5277e10 /s
        ("llama-3.1-70b.total_params / 2 s", "1/s", 3.5276853248e10, "1/s"),
        # energy: 700 W x 24 h = 16,800 Wh = 16.8 kWh (shown so), and priced: 8 GPUs x 16.8 kWh x $0.12/kWh = $16.128
        ("700 W * 24 h", None, 16.8, "kWh"),
        ("700 W * 24 h", "kWh", 16.8, "kWh"),
        ("8 * 700 W * 24 h * 0.12 USD/kWh", None, 16.128, "USD"),
        ("3 J", None, 3.0, "J"),  # below a watt-hour, joules
        # a fraction of a byte stays in bytes: no millibytes, a prefix the calculator does not read back
        ("1 GB * 1e-12", None, 0.001, "B"),
    ],
)
def test_hand_values(expr, to, value, unit):
    result = evaluate(expr, to=to)
    assert result.value.magnitude == pytest.approx(value, rel=1e-5, abs=1e-9)
    assert result.to_dict()["unit"] == unit


def test_catalog_values_are_listed_with_sources():
    result = evaluate("h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth")
    assert [r.text for r in result.references] == ["h100-sxm.flops.bf16", "h100-sxm.memory_bandwidth"]
    assert all(r.source.startswith("NVIDIA H100") for r in result.references)


def test_narrow_weight_bytes_say_what_deploys():
    # Llama-3.1-8B: 8.03e9 weights; in FP8 every one is a byte (8.03 GB), but engines keep the
    # embedding and LM head (2 x 128,256 x 4,096 = 1.05e9 weights) 16-bit: 8.03 + 1.05 = 9.08 GB,
    # what estimate() holds
    ref = evaluate("llama-3.1-8b.weight_bytes.fp8").references[0]
    assert "9.08 GB as deployed" in ref.source
    assert "as deployed" not in evaluate("llama-3.1-8b.weight_bytes.bf16").references[0].source


@pytest.mark.parametrize(
    "expr, tight, loose",
    [
        ("1/2 h", "1 / (2 h)", "(1 / 2) h"),
        ("3600 / 2 s", "3600 / (2 s)", "(3600 / 2) s"),
        ("1 / -2 h", "1 / (-2 h)", "(1 / -2) h"),
        ("2 * 3 / 4 h", "2 * 3 / (4 h)", "(2 * 3 / 4) h"),
        ("50% / 2 h * 1 h", "50% / (2 h) * 1 h", "(50% / 2) h * 1 h"),
        ("1 / 10**9 B", "1 / (10**9 B)", "(1 / 10**9) B"),
    ],
)
def test_ambiguous_division_is_refused_with_both_readings(expr, tight, loose):
    with pytest.raises(AmbiguousExpressionError) as info:
        evaluate(expr)
    assert info.value.readings == (tight, loose)
    assert tight in str(info.value) and loose in str(info.value)
    evaluate(tight), evaluate(loose)  # each offered reading is itself accepted


def test_offered_readings_have_the_hand_values():
    # 1 / (2 h) = 1 / 7200 s = 1.3889e-4 Hz; (1 / 2) h = 1800 s
    assert evaluate("1 / (2 h)", to="Hz").value.magnitude == pytest.approx(1 / 7200)
    assert evaluate("(1 / 2) h", to="s").value.magnitude == pytest.approx(1800)


@pytest.mark.parametrize(
    "expr, fragment",
    [
        ("((9**63)**63)**63", "not a finite number"),  # 9**63 = 1.2e60; (1.2e60)**63 = 1e3787
        ("(2 GB)**64", "not a finite number"),  # 2**64 x (8e9 bit)**64 = 1.8e19 x 6.3e632
        ("1e308 * 10 * h100-sxm.tdp", "not a finite number"),
        ("1e309", "not a finite number"),
        ("1e-320 / 1e300", "underflows"),
        ("1e-999 GB", "below the float64 range"),
        ("10**65", "larger than 64"),
        ("2**(-65)", "larger than 64"),
        ("2**(10 * 7)", "larger than 64"),  # an evaluated exponent is bounded too
        ("2**(1 s)", "plain number"),
        ("9**9**9", "chained powers"),
        ("GB**2**2", "chained powers"),
        ("(-8)**(1/3)", "not a real number"),
        ("1 GB / 0 s", "division by zero"),
        ("0**-1", "division by zero"),
        ("(1 s)**64 * (1 s)**64", "exponents beyond 64"),
        ("9" * 41, "longer than 40 digits"),
        ("9" * 40_000, "characters long"),
        ("(" * 33 + "1" + ")" * 33, "nested deeper than 32"),
        ("ref0_", "unknown unit 'ref0_'"),
        ("h100-sxm.tdp + ref0_", "unknown unit 'ref0_'"),
        ("8K tokens", "unknown unit 'K'"),
        ("tokns", "did you mean 'tokens'"),
        ("2 3", "missing operator"),
        ("2 h100-sxm.tdp", "missing operator"),
        ("10%%", "'%' must follow a number"),
        ("5 % 3", "write * or / between them; % is percent (5% = 0.05), not a remainder"),
        ("(1", "never closed"),
        ("1)", "unmatched ')'"),
        ("2 +", "ends too early"),
        ("2 × 3", "unexpected character"),
        ("", "empty"),
        ("1 GB + 1 s", "cannot combine gigabyte ([information]) with second ([time])"),
        ("h100-sxm * 2", "names a catalog entry"),
        # a short GPU name is the entry it stands for, as in h200.memory_bandwidth (had read as a unit)
        ("h200", "'h200' names a catalog entry, not a number; name one of its values, e.g. h200-sxm.memory_bandwidth"),
        # a fraction of a bit or a token is a lower-case mega-, not a quantity
        ("100 mb", "reads as millibits, a fraction of a bit; did you mean 'Mb' or 'MB' (megabytes)?"),
        ("1 mtok", "did you mean 'Mtok'?"),
        ("2 uB", "microbytes"),
        # FLOPs is a count in one paper and a rate in the next
        ("989 TFLOPs / 3.35 TB/s", "ambiguous: write TFLOP for a count of operations or TFLOPS (TFLOP/s)"),
        ("400 Gb/s to GB/s", "give the target unit with --to (inferlab calc '400 Gb/s' --to GB/s)"),
        ("(1 GB) ** 0.5", "a fractional power must leave whole powers of each dimension"),
        # KV bytes are per token: a count of tokens makes bytes, a bare number does not
        ("llama-3.1-8b.kv_bytes_per_token.bf16 * 8192 + 1 GB", "cannot combine"),
    ],
)
def test_refusals_are_clear_and_immediate(expr, fragment):
    start = time.perf_counter()
    with pytest.raises(UnitError) as info:
        evaluate(expr)
    assert time.perf_counter() - start < 1.0  # bounds are checked before any long arithmetic
    assert fragment in str(info.value)


def test_unknown_catalog_names_get_did_you_mean():
    with pytest.raises(UnknownNameError, match="did you mean 'h100-sxm'"):
        evaluate("h10-sxm.tdp")


@pytest.mark.parametrize("to, fragment", [("9**9**9", "not a unit"), ("GB/", "not a unit"), ("kelvin", "unknown unit"),
                                          ("GB", "cannot be expressed in GB")])
def test_bad_target_units(to, fragment):
    with pytest.raises(UnitError, match=fragment):
        evaluate("140 GB / 3.35 TB/s", to=to)


@pytest.mark.parametrize("value", [None, 42, 4.2, b"1 GB", ["1 GB"]])
def test_non_text_is_refused(value):
    with pytest.raises(UnitError, match="must be text"):
        evaluate(value)


def test_a_40000_digit_number_is_refused_at_once():
    # the length bound comes before tokenizing; the digit bound alone is linear too
    start = time.perf_counter()
    with pytest.raises(UnitError, match="longer than 40 digits"):
        tokenize("9" * 990)
    with pytest.raises(UnitError):
        evaluate("9" * 40_000 + " GB")
    assert time.perf_counter() - start < 0.5


# -- properties --------------------------------------------------------------------------------

_POSITIVE = st.floats(1e-3, 1e6, allow_nan=False)
_UNIT_IN_SECONDS = {"s": 1.0, "ms": 1e-3, "min": 60.0, "h": 3600.0}


@given(_POSITIVE, _POSITIVE, st.sampled_from(["GB", "s", "TB/s", "tok", "USD/h", "W"]))
def test_same_unit_over_same_unit_is_the_plain_ratio(a, b, unit):
    result = evaluate(f"{a!r} {unit} / {b!r} {unit}")
    assert result.value.dimensionless
    assert result.value.magnitude == pytest.approx(a / b, rel=1e-9)


@given(_POSITIVE, _POSITIVE, st.sampled_from(sorted(_UNIT_IN_SECONDS)))
def test_divisor_with_unit_is_one_quantity(x, n, unit):
    # x GB / n unit = x * 1e9 B / (n * seconds-per-unit s)
    expected = x * 1e9 / (n * _UNIT_IN_SECONDS[unit])
    spellings = [f"{x!r} GB / {n!r} {unit}", f"{x!r} GB / ({n!r} {unit})", f"({x!r} GB) / ({n!r} {unit})"]
    for text in spellings:
        assert evaluate(text, to="B/s").value.magnitude == pytest.approx(expected, rel=1e-9)


@given(_POSITIVE, st.floats(0.5, 500, allow_nan=False))
def test_percent_is_a_hundredth(a, p):
    assert evaluate(f"{a!r} GB * {p!r}%", to="GB").value.magnitude == pytest.approx(a * p / 100, rel=1e-9)
    assert evaluate(f"{a!r} GB / {p!r}%", to="GB").value.magnitude == pytest.approx(a / (p / 100), rel=1e-9)


@given(st.integers(1, 10**6), st.integers(1, 10**6), st.sampled_from(["h", "GB", "tok/s"]))
def test_unitless_dividend_over_quantity_is_always_refused(a, n, unit):
    with pytest.raises(AmbiguousExpressionError) as info:
        evaluate(f"{a} / {n} {unit}")
    tight, loose = info.value.readings
    assert evaluate(tight).value.magnitude * evaluate(loose).value.magnitude > 0


@given(st.integers(1, 1000), st.integers(1, 1000), st.integers(1, 1000))
def test_plain_numbers_keep_left_to_right_order(a, b, c):
    assert evaluate(f"{a} / {b} * {c}").value.magnitude == pytest.approx(a / b * c, rel=1e-12)
    assert evaluate(f"{a} - {b} + {c}").value.magnitude == a - b + c


@settings(max_examples=60)
@given(st.text(max_size=40))
def test_any_text_ends_in_a_value_or_an_inferlab_error(text):
    try:
        evaluate(text)
    except InferlabError:
        pass


# -- the command line --------------------------------------------------------------------------

@pytest.mark.parametrize("expr", ["((9**63)**63)**63", "(2 GB)**64", "9" * 40_000, "ref0_", "1/2 h", "1 h +",
                                  "2 × 3", "h100-sxm.tdp + ref0_", "1e309", "(2 Hz / 7%) * 1 GB + 1 s"])
def test_cli_bad_input_exits_2_with_one_line(capsys, expr):
    code = main(["calc", "--", expr])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("inferlab: error: ") and err.count("\n") == 1
    assert len(err) < 2000  # a 40,000-digit input is not echoed back whole


def test_cli_prints_the_ambiguous_readings(capsys):
    assert main(["calc", "1/2 h"]) == 2
    assert "'1 / (2 h)' or '(1 / 2) h'" in capsys.readouterr().err


def test_a_ridge_point_names_its_one_source_once():
    (ref,) = evaluate("h100-sxm.ridge_point.fp8").references
    assert ref.source.startswith("NVIDIA H100") and ref.source.count("NVIDIA H100 Tensor Core GPU product page") == 1


def test_a_hardware_field_that_is_no_figure_says_what_it_is():
    with pytest.raises(InferlabError, match=r"h100-sxm.name is 'NVIDIA H100 SXM5 80GB', not a figure with a unit; "
                                            r"figures of h100-sxm: memory_capacity, "):
        evaluate("h100-sxm.name")
    with pytest.raises(InferlabError, match="h100-sxm lists no achievable_flops values"):
        evaluate("h100-sxm.achievable_flops.bf16")


def test_a_mig_slice_is_named_as_estimate_names_it():
    """MIG user guide: an H100 3g.40gb slice has 3 of 7 compute slices and 4 of 8 memory slices,
    so 3/7 x 989 TFLOP/s BF16 and 4/8 x 3.35 TB/s; 16 GB over the latter is 9.55 ms."""
    from inferlab.errors import InferlabError, UnitError, UnknownNameError

    result = evaluate("16 GB / h100-sxm:3g.40gb.memory_bandwidth", to="ms")
    assert result.value.magnitude == pytest.approx(16e9 / (3.35e12 * 4 / 8) * 1e3, rel=1e-9)
    assert result.references[0].text == "h100-sxm:3g.40gb.memory_bandwidth"
    assert evaluate("h200:3g.71gb.flops.bf16 / h200.flops.bf16").value.magnitude == pytest.approx(3 / 7)
    with pytest.raises(UnknownNameError, match="unknown MIG profile of h100-sxm '9g.40gb'"):
        evaluate("h100-sxm:9g.40gb.memory_bandwidth")
    with pytest.raises(UnitError, match="a MIG slice .* is a part of a GPU, and llama-3.1-8b is a model"):
        evaluate("llama-3.1-8b:3g.40gb.total_params")
    with pytest.raises(InferlabError, match="names a catalog entry, not a number; name one of its values, e.g. "
                                            "h100-sxm:3g.40gb.memory_bandwidth"):
        evaluate("h100-sxm:3g.40gb")


def test_a_list_of_records_is_reached_by_position():
    """The H100's MIG profiles (NVIDIA MIG user guide): 1g.10gb, 1g.20gb, ... the second holds
    20 GB. A list names its entries instead of printing a Python repr."""
    from inferlab.errors import UnitError

    assert evaluate("h100-sxm.mig.profiles.1.memory / 2").value.to("GB").magnitude == pytest.approx(10.0)
    with pytest.raises(UnitError, match=r"holds 6 entries \(1g.10gb, 1g.20gb.*e.g. h100-sxm.mig.profiles.0.memory"):
        evaluate("h100-sxm.mig.profiles")
    with pytest.raises(UnitError, match="name one by its position 0-5"):
        evaluate("h100-sxm.mig.profiles.9.memory")
    with pytest.raises(UnitError, match="e.g. h100-sxm.mig.profiles$"):
        evaluate("h100-sxm.mig")


@pytest.mark.parametrize("text, message", [
    ("h100-sxm.ridge_point.fp4", "unknown precision in h100-sxm.ridge_point.fp4 (the tensor rates h100-sxm lists) 'fp4'"),
    ("rtx-2080-ti.ridge_point", "'bf16'; did you mean 'fp16'?"),  # (the default precision, where it has none)
    ("h100-sxm.ridge_point.fp8.x", "ridge_point takes one precision after it"),
])
def test_a_ridge_point_of_a_rate_the_gpu_does_not_list_is_one_line(text, message):
    """It had been a KeyError traceback."""
    with pytest.raises(InferlabError) as info:
        evaluate(text)
    assert message in str(info.value)


@pytest.mark.parametrize("argv, shown", [
    (["calc", "-(1)"], "-1"), (["calc", "-1e3"], "-1000"), (["calc", "--", "-(1)"], "-1"),
    (["calc", "--to", "MB", "-(1 GB)"], "-1000 MB"), (["calc", "-(2 GB)", "--to", "MB"], "-2000 MB"),
])
def test_an_expression_may_start_with_a_minus(argv, shown, capsys):
    """argparse had read '-(1)' as an unknown option, and dropped '--' before it."""
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[0] == shown
    assert main(["calc", "-x*2"]) == 2
    assert "in '-x*2'" in capsys.readouterr().err  # as typed


def test_a_units_power_is_whole_and_a_quantitys_takes_parentheses():
    assert evaluate("2 GB**2").value.magnitude == 2 and str(evaluate("2 GB**2").value.units) == "GB²"
    assert evaluate("(2 GB)**2").value.magnitude == 4
    with pytest.raises(UnitError, match="a unit's exponent must be a whole number"):
        evaluate("1 GB ** 0.5")


def test_a_unit_in_the_wrong_case_suggests_the_same_letters_first():
    """'1 gb' had suggested 'b'; GB (bytes) and Gb (bits) are what a user meant."""
    with pytest.raises(UnitError, match=r"did you mean 'GB' or 'Gb'\?"):
        evaluate("1 gb")
