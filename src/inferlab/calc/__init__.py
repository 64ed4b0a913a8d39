"""The unit-checked calculator behind ``inferlab calc``: :mod:`.syntax` parses an expression
into a :mod:`.tree`, :mod:`.evaluator` evaluates it against the unit registry and the catalog."""

from .evaluator import evaluate  # noqa: F401 - `from inferlab.calc import evaluate`, as before the package
