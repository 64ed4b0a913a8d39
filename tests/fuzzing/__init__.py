"""Fuzzing harness shared by ``tests/test_fuzz.py`` (a few hundred inputs per entry point,
in CI) and ``benchmarks/fuzz.py`` (10,000 per entry point, counts printed).

Each entry point is a module ``tests/fuzzing/entry_<name>.py`` that defines ``ENTRY``, an
:class:`Entry`: a hypothesis strategy of inputs (valid and invalid mixed), the call that
runs the entry point on one input, and the numbers of its result that must be finite and
non-negative (times, memory, costs). Every input must end in one of two outcomes: a result
whose checked numbers are finite and >= 0, or an :class:`~inferlab.errors.InferlabError`
(a CLI: exit code 1 or 2 with one line on stderr). Anything else is counted:

- ``foreign``: an exception that is not an InferlabError (a traceback for a user);
- ``warning``: a warning escaped to the caller (RuntimeWarning from numpy overflow...);
- ``bad_output``: a checked number is NaN, infinite or negative;
- ``slow``: the call took longer than ``SLOW_S``.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferlab.errors import InferlabError

#: A call slower than this is a defect [s] (issue: "0 calls over 5 s").
SLOW_S = 5.0
OUTCOMES = ("ok", "clean_error", "foreign", "warning", "bad_output", "slow")


def no_numbers(result: Any) -> Iterable[tuple[str, float]]:
    """For entry points whose result has nothing to check numerically."""
    return ()


def finite_numbers(result: Any, prefix: str = "") -> Iterable[tuple[str, float]]:
    """Every number in a nested structure of dicts, lists, tuples and arrays (``to_dict()``
    is used where the result has one), labelled by its path."""
    if hasattr(result, "to_dict") and not isinstance(result, dict):
        result = result.to_dict()
    if isinstance(result, dict):
        for key, value in result.items():
            yield from finite_numbers(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(result, (list, tuple)):
        for i, value in enumerate(result):
            yield from finite_numbers(value, f"{prefix}[{i}]")
    elif isinstance(result, np.ndarray):
        if result.dtype.kind in "fiu":
            for i, value in enumerate(result.ravel()):
                yield f"{prefix}[{i}]", float(value)
    elif isinstance(result, (bool, np.bool_)):
        return
    elif isinstance(result, (int, float, np.integer, np.floating)):
        yield prefix, float(result)


#: Output labels that are signed wherever they appear: an error band's log(measured / predicted).
ALWAYS_SIGNED = ("log_ratio",)


@dataclass(frozen=True)
class Entry:
    """One fuzzed entry point.

    ``outputs(result)`` yields ``(label, value)`` pairs that must be finite and >= 0;
    ``signed`` names labels (substrings) that may be negative (a signed error, a saving);
    an error band's ``log_ratio`` bounds (:data:`ALWAYS_SIGNED`) may be negative everywhere.
    """

    name: str
    inputs: Callable[[], Any]
    call: Callable[[Any], Any]
    outputs: Callable[[Any], Iterable[tuple[str, float]]] = finite_numbers
    signed: tuple[str, ...] = ()
    #: Exception types other than InferlabError that count as a clean refusal (a CLI's SystemExit
    #: with code 1 or 2 after one line on stderr is judged by the entry's own ``call``).
    clean: tuple[type[BaseException], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Outcome:
    kind: str
    detail: str = ""
    seconds: float = 0.0


def classify(entry: Entry, value: Any, slow_s: float = SLOW_S) -> Outcome:
    """Run ``entry`` on one input and say how it ended."""
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = entry.call(value)
        except InferlabError as exc:
            outcome = Outcome("clean_error", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except entry.clean as exc:  # type: ignore[misc]
            outcome = Outcome("clean_error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - counting foreign exceptions is the point
            outcome = Outcome("foreign", f"{type(exc).__name__}: {exc}"[:300])
        else:
            outcome = Outcome("ok")
            for label, number in entry.outputs(result):
                if not np.isfinite(number) or (number < 0 and not any(s in label for s in entry.signed + ALWAYS_SIGNED)):
                    outcome = Outcome("bad_output", f"{label} = {number}")
                    break
    seconds = time.perf_counter() - start
    if outcome.kind in ("ok", "clean_error") and caught:
        w = caught[0]
        outcome = Outcome("warning", f"{w.category.__name__}: {w.message}"[:300])
    if outcome.kind in ("ok", "clean_error") and seconds > slow_s:
        outcome = Outcome("slow", f"{seconds:.1f} s")
    return Outcome(outcome.kind, outcome.detail, seconds)


def entries() -> list[Entry]:
    """Every ``ENTRY`` in ``tests/fuzzing/entry_*.py``."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("entry_"):
            found.append(importlib.import_module(f"{__name__}.{info.name}").ENTRY)
    return found
