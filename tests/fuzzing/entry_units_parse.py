"""``inferlab.units.parse`` and ``parse_unit``: quantity and unit strings a user types (``"400 Gb/s"``,
``"80 GiB"``, ``"GB/s"``), with long numbers and powers that must be refused fast."""

from hypothesis import strategies as st

from inferlab.units import parse, parse_unit

from . import Entry

_UNITS = ["GB", "GiB", "Gb/s", "TB/s", "ms", "s", "TFLOPS", "token", "tokens/s", "USD/hour", "%", "", "kelvin", "Gb"]


def _inputs():
    number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30),
                       st.integers(1, 5000).map(lambda n: "7" * n)).map(str)
    quantity = st.tuples(number, st.sampled_from(_UNITS)).map(lambda t: f"{t[0]} {t[1]}".strip())
    unit = st.one_of(st.sampled_from(_UNITS), st.sampled_from(["9**9**8", "s**99", "GB**(9**9)", "B" * 3000,
                                                                "(((s)))**2", "GB^64", "s**-65"]),
                     st.text(max_size=30))
    return st.one_of(quantity.map(lambda q: (parse, q)), st.text(max_size=30).map(lambda q: (parse, q)),
                     unit.map(lambda u: (parse_unit, u)))


def _call(value):
    fn, text = value
    return fn(text)


def _numbers(q):
    return ()  # a parsed quantity may be negative or any magnitude; only the outcome kind is checked


ENTRY = Entry("units.parse", _inputs, _call, outputs=_numbers)
