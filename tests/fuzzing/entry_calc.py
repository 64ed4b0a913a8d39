"""``inferlab.calc.evaluator``: expressions a user types into ``inferlab calc`` (and ``--to``).

Expressions are built from numbers (small, huge, long, with exponents and percent), units,
catalog references (real and misspelled), operators, parentheses, powers and garbage, so that
well-formed, ambiguous and malformed text are all drawn.
"""

from hypothesis import strategies as st

from inferlab.calc.evaluator import evaluate

from . import Entry

_UNITS = ["GB", "GiB", "TB/s", "Gb/s", "ms", "s", "h", "min", "tok", "ktok", "tokens/s", "USD/h", "$", "W",
          "Hz", "FLOP", "TFLOPS", "FLOP/B", "percent", "billion", "B", "kW*h", "s**2", "K", "gilbert", "ref0_"]
_REFS = ["h100-sxm.flops.bf16", "h100-sxm.memory_bandwidth", "h100-sxm.tdp", "h100-sxm.price",
         "mi300x.memory_capacity", "llama-3.1-70b.kv_bytes_per_token.fp8", "llama-3.1-70b.total_params",
         "h100-sxm.ridge_point.fp8", "h100-sxm", "h10-sxm.tdp", "h100-sxm.flops", "llama-3.1-70b.nope"]
_OPERATORS = ["+", "-", "*", "/", "**", "^", "(", ")", "%", "$", " "]
_TO = [None, "ms", "GB/s", "GB", "%", "USD/Mtok", "1/s", "tok", "kelvin", "9**9**9", "", "GB/", "W*h"]


def _numbers():
    return st.one_of(
        st.integers(-10**6, 10**6).map(str),
        st.floats(allow_nan=False, allow_infinity=False).map(repr),
        st.integers(1, 60).map(lambda n: "9" * n),  # literals around the digit bound
        st.sampled_from(["1e308", "1e309", "1e-320", "1e-999", "0.5", ".5", "5.", "10%", "7%", "0", "2**64"]),
    )


def _atoms():
    number = _numbers()
    quantity = st.tuples(number, st.sampled_from(_UNITS)).map(" ".join)
    return st.one_of(number, quantity, st.sampled_from(_UNITS), st.sampled_from(_REFS))


def _expressions():
    """Well-formed trees (sums, products, powers, parentheses) of atoms."""
    return st.recursive(
        _atoms(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(" ".join),
            st.tuples(inner, st.sampled_from(["**", "^"]), st.integers(-80, 80).map(str)).map("".join),
            inner.map(lambda e: f"({e})"),
            inner.map(lambda e: f"-{e}"),
        ),
        max_leaves=8,
    )


def _inputs():
    token_soup = st.lists(st.one_of(_atoms(), st.sampled_from(_OPERATORS)), max_size=12).map(" ".join)
    expression = st.one_of(
        _expressions(), _expressions(), token_soup, st.text(max_size=30),
        st.sampled_from(["9" * 40_000, "((9**63)**63)**63", "(2 GB)**64", "(" * 40 + "1" + ")" * 40]),
        st.one_of(st.integers(), st.floats(), st.none(), st.binary(max_size=8)),
    )
    to = st.one_of(st.sampled_from(_TO), st.text(max_size=8))
    return st.tuples(expression, to)


def _call(value):
    expression, to = value
    return evaluate(expression, to=to)


def _numbers_checked(result):
    """The value may be negative when the user wrote a negative number; catalog values may not."""
    yield "signed value", float(result.value.magnitude)
    for i, ref in enumerate(result.references):
        yield f"references[{i}]", float(ref.value.magnitude)


ENTRY = Entry("calc", _inputs, _call, outputs=_numbers_checked, signed=("signed",))
