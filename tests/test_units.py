"""The unit registry: the traps of pint's default registry must not exist here."""

from __future__ import annotations

import math

import pint
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferlab import DimensionError, InferlabError, Q, UnitError, to_si
from inferlab.units import parse, parse_unit


def test_gigabit_is_not_gilbert():
    # 400 Gb/s NIC (ConnectX-7) = 400e9 bit/s / 8 = 50e9 B/s
    assert Q("400 Gb/s").to("GB/s").magnitude == pytest.approx(50.0)
    with pytest.raises(UnitError):
        Q("1 gilbert")


def test_transfer_time_of_140_gb_at_3_35_tb_per_s():
    # 140e9 B / 3.35e12 B/s = 0.041791 s
    assert (Q("140 GB") / Q("3.35 TB/s")).to("ms").magnitude == pytest.approx(41.791, abs=1e-3)


def test_decimal_and_binary_prefixes_differ():
    assert Q("1 GB").to("B").magnitude == 1e9
    assert Q("1 GiB").to("B").magnitude == 2**30
    # nvidia-smi 81559 MiB on an H100 = 85,520,809,984 B = 85.52 GB
    assert Q("81559 MiB").to("B").magnitude == 81559 * 2**20
    assert Q("1 byte").to("bit").magnitude == 8


def test_bytes_plus_seconds_is_a_clear_error():
    with pytest.raises(DimensionError) as info:
        Q("1 GB") + Q("1 s")
    msg = str(info.value)
    assert "information" in msg and "time" in msg
    assert isinstance(info.value, InferlabError)
    assert isinstance(info.value, pint.DimensionalityError)


@pytest.mark.parametrize(
    "a, b",
    [("1 FLOP", "1 B"), ("1 token", "1 request"), ("1 USD", "1 s"), ("1 token", "1 B"), ("1 FLOP", "1 token")],
)
def test_domain_dimensions_are_distinct(a, b):
    with pytest.raises(DimensionError):
        Q(a).to(Q(b).units)


def test_rates_and_counts():
    # INT8 TOPS count one multiply-add as 2 operations, like FLOPs
    assert Q("1979 TOPS").to("FLOP/s").magnitude == pytest.approx(1.979e15)
    assert Q("989 TFLOPS").dimensionality == Q("1 FLOP/s").dimensionality
    assert Q("1 flops").dimensionality == Q("1 FLOP/s").dimensionality  # lower case is a rate too
    assert Q("1 FLOP").dimensionality != Q("1 FLOP/s").dimensionality
    assert Q("$2.95/hour").to("USD/s").magnitude == pytest.approx(2.95 / 3600)
    assert Q("700 W").to("kW").magnitude == pytest.approx(0.7)


def test_to_si_rejects_bare_numbers_and_wrong_dimensions():
    assert to_si("3.35 TB/s", "byte/second") == 3.35e12
    with pytest.raises(UnitError, match="no unit"):
        to_si(Q(3.35), "byte/second")
    with pytest.raises(UnitError, match=r"\[time\]"):
        to_si("3 GB", "second")


@pytest.mark.parametrize("text", ["", "   ", "3 TB/", "abc def", "1 furlong", "nan GB"])
def test_malformed_text_is_a_unit_error(text):
    with pytest.raises(UnitError):
        parse(text)


@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))
def test_bit_byte_conversion_is_exactly_eight(x):
    assert math.isclose(Q(x, "Gb/s").to("GB/s").magnitude, x / 8, rel_tol=1e-12)


@given(st.text(max_size=30))
def test_parse_never_raises_anything_but_unit_error(text):
    try:
        parse(text)
    except UnitError:
        pass


@pytest.mark.parametrize("fn, text, message", [
    (parse, "1" * 41 + " GB", "has more than 40 digits"),
    (parse, "1" * 4000 + " GB", "at most 1,000 are read"),
    (parse, "9**(9**9) GB", "the exponent after '\\*\\*' .* must be a number"),
    (parse, "2 GB**(9*9)", "must be a number"),
    (parse_unit, "9**9**8", "chained powers are not allowed"),
    (parse_unit, "GB**(9**9)", "must be a number"),
    (parse_unit, "s**-65", "exponent 65 .* is larger than 64"),
    (parse_unit, "B" * 1001, "at most 1,000 are read"),
])
def test_long_numbers_and_nested_powers_are_refused_before_parsing(fn, text, message):
    with pytest.raises(UnitError, match=message):
        fn(text)


def test_a_parenthesized_number_is_still_an_exponent():
    assert parse("10**(-3) s").to("ms").magnitude == pytest.approx(1.0)  # 10^-3 s = 1 ms
    assert parse_unit("s**-2") == parse_unit("1/s**2")
    assert parse("1." + "0" * 39 + " GB").magnitude == 1.0  # 40 digits: the largest literal read


def test_counts_given_as_quantities_are_converted_or_refused():
    """A prompt of 2 ktok is 2,000 tokens (its magnitude alone, 2, had been used); a prompt in
    bytes or seconds, or a batch in GB, is no count of tokens or requests."""
    from inferlab import estimate, serve
    from inferlab.errors import UnitError

    assert estimate("llama-3.1-8b", "h100-sxm", isl=Q(2, "kilotoken")).to_dict()["isl"] in (2000, [2000], [2000.0])
    assert estimate("llama-3.1-8b", "h100-sxm", batch_size=Q(4, "request")).to_dict()["batch_size"] in (4, [4], [4.0])
    for kw, message in ((dict(isl=Q(2048, "byte")), r"isl must be in \[token\]"),
                        (dict(isl=Q(2, "second")), r"isl must be in \[token\]"),
                        (dict(batch_size=Q(4, "GB")), r"batch_size must be in \[request\]")):
        with pytest.raises(UnitError, match=message):
            estimate("llama-3.1-8b", "h100-sxm", **kw)
    r = serve("llama-3.1-8b", "h100-sxm", isl=Q(1, "kilotoken"), osl=Q(16, "token"), rate=1, num_requests=4)
    assert (r.workload.isl.value, r.workload.osl.value) == (1000, 16)


def test_a_comma_only_groups_thousands():
    """pint drops every comma, so '1,2,3' had read as 123 and a European '3,35 TB/s' as 335 TB/s."""
    from inferlab import Q
    from inferlab.errors import UnitError

    assert Q("1,000,000 tok").magnitude == 1_000_000 and Q("12,345.5 tok").magnitude == 12345.5
    for text in ("1,2,3", "3,35 TB/s", "1,00 GB"):
        with pytest.raises(UnitError, match="a comma only groups thousands"):
            Q(text)


def test_a_dollar_amount_may_group_thousands():
    from inferlab import Q

    assert Q("$1,000/h").to("USD/hour").magnitude == 1000.0  # had said a comma only groups thousands


def test_a_whole_count_may_be_a_dimensionless_quantity_and_not_one_with_a_unit():
    """checks.integer() takes a dimensionless quantity as count_array() does (it had refused
    Q(4) as 'not an integer'), and says that a count takes no unit where it is given one."""
    import numpy as np

    from inferlab import checks, estimate, ureg
    from inferlab.errors import SpecError

    assert checks.integer("batch_size", Q(4)) == 4 and type(checks.integer("batch_size", Q(4))) is int
    assert checks.integer("batch_size", 4 * ureg.dimensionless) == 4
    assert checks.integer("tp", Q(np.int64(8))) == 8
    assert checks.integer("kv_block_size", Q(32.0), whole_floats=True) == 32
    with pytest.raises(SpecError, match=r"^batch_size must be an integer, got 4\.0$"):
        checks.integer("batch_size", Q(4.0))  # as the float 4.0 is
    with pytest.raises(SpecError, match=r"^batch_size must be between 1 and 1,000,000,000,000, got 0$"):
        checks.integer("batch_size", Q(0))
    with pytest.raises(UnitError, match=r"^batch_size is a count: give a plain number \(or a dimensionless "
                                        r"quantity\), got 4 GB$"):
        checks.integer("batch_size", Q(4, "GB"))
    with pytest.raises(UnitError, match=r"^chunk is a count: .*, got 2 s$"):
        checks.count_array("chunk", Q(2, "s"))
    assert estimate("llama-3.1-8b", "h100-sxm", kv_block_size=Q(32)).to_dict() == \
        estimate("llama-3.1-8b", "h100-sxm", kv_block_size=32).to_dict()


def test_request_counts_take_quantities_in_requests_as_batch_sizes_do():
    """A workload's request counts take Q(n, "request") as estimate()'s batch_size does
    (count_array with a unit); a fraction of a request or another dimension is refused."""
    import inferlab
    from inferlab import checks
    from inferlab.errors import SpecError

    kw = dict(isl=256, osl=16)
    by_unit = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=2, num_requests=Q(30, "request"), **kw)
    plain = inferlab.serve("llama-3.1-8b", "h100-sxm", rate=2, num_requests=30, **kw)
    assert by_unit.to_dict() == plain.to_dict()
    assert checks.integer("workload: concurrency", Q(4, "request"), unit="request") == 4
    with pytest.raises(SpecError, match=r"must be an integer, got 2\.5"):
        checks.integer("workload: concurrency", Q(2.5, "request"), unit="request")
    with pytest.raises(UnitError):
        checks.integer("workload: num_requests", Q(30, "GB"), unit="request")
