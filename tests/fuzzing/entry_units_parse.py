"""``inferlab.units.parse``: quantity strings a user types (``"400 Gb/s"``, ``"80 GiB"``)."""

from hypothesis import strategies as st

from inferlab.units import parse

from . import Entry

_UNITS = ["GB", "GiB", "Gb/s", "TB/s", "ms", "s", "TFLOPS", "token", "tokens/s", "USD/hour", "%", "", "kelvin", "Gb"]


def _inputs():
    number = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30)).map(str)
    quantity = st.tuples(number, st.sampled_from(_UNITS)).map(lambda t: f"{t[0]} {t[1]}".strip())
    return st.one_of(quantity, st.text(max_size=30))


def _numbers(q):
    return ()  # a parsed quantity may be negative or any magnitude; only the outcome kind is checked


ENTRY = Entry("units.parse", _inputs, parse, outputs=_numbers)
