"""Exceptions raised by inferlab.

Every error a user can cause derives from :class:`InferlabError`, so a script can catch
one type. Messages say what is wrong, where, what is allowed and how to fix it.

:class:`~inferlab.unit_registry.DimensionError` is also a :class:`pint.DimensionalityError`, so
it is defined beside the unit registry in :mod:`inferlab.unit_registry` (and named
``inferlab.DimensionError``), so that this module does not load pint.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
from collections.abc import Iterable, Iterator
from typing import Any


class InferlabError(Exception):
    """Root of every error inferlab raises on bad input or impossible requests."""


class UnitError(InferlabError, ValueError):
    """A quantity has the wrong dimension, no unit, or a unit the registry does not know."""


class SpecError(InferlabError, ValueError):
    """A hardware or model specification is malformed or incomplete."""


class UnknownNameError(InferlabError, KeyError):
    """A name (catalog id, field, precision) is not one of the allowed names.

    Parameters
    ----------
    kind : str
        What was looked up, e.g. ``"hardware"``.
    name : str
        The name given.
    allowed : iterable of str
        Every valid name; the closest ones are offered as suggestions.
    """

    def __init__(self, kind: str, name: str, allowed: Iterable[str], hint: str = ""):
        self.kind = kind
        self.name = name
        self.allowed = sorted(allowed)
        self.hint = hint
        self.suggestions = [] if hint else closest(name, self.allowed, n=3, cutoff=0.5)
        super().__init__(self._message())

    def _message(self) -> str:
        msg = f"unknown {self.kind} {self.name!r}"
        if self.hint:  # what the name is instead (a GPU given as the model): the list would not help
            return f"{msg}: {self.hint}"
        if self.suggestions:
            msg += "; did you mean " + " or ".join(repr(s) for s in self.suggestions) + "?"
        else:
            msg += "."
        shown = ", ".join(self.allowed[:40])
        more = f" (and {len(self.allowed) - 40} more)" if len(self.allowed) > 40 else ""
        return f"{msg} Allowed: {shown}{more}."

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.args[0]


class InfeasibleError(InferlabError):
    """A deployment cannot run as asked (for example, it does not fit in memory).

    Attributes
    ----------
    needed_bytes, available_bytes : float or None
        Memory needed and available per GPU [B], when memory is the reason.
    suggestion : dict
        What would fit, e.g. ``{"tp": 4}`` or ``{"batch_size": 37}``.
    """

    def __init__(self, message: str, *, needed_bytes: float | None = None, available_bytes: float | None = None,
                 suggestion: dict | None = None):
        super().__init__(message)
        self.needed_bytes = needed_bytes
        self.available_bytes = available_bytes
        self.suggestion = suggestion or {}


class CombinationError(InfeasibleError, SpecError):
    """Options that mean nothing together for this model (expert parallelism or attention data
    parallelism on a dense model): bad input, exit status 2 from the CLI, where a grid over
    several models marks the rows it concerns as a layout that does not run."""


#: How messages spell a user option: unset in Python (``waves=True``); the CLI sets a map of
#: keyword -> flag for the command it runs, so that its messages say ``--waves``.
_OPTION_SPELLING: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("option_spelling",
                                                                                           default=None)


def closest(name: object, allowed: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The ``n`` names of ``allowed`` closest to ``name``: those it begins (``h200`` ->
    ``h200-sxm``), then those that begin it (``gb200-nvl72`` -> ``gb200``), then difflib's
    closest by spelling."""
    text, names = str(name).strip().lower(), list(allowed)
    begun = [a for a in names if text and a.lower().startswith(text) and a.lower() != text]
    begins = sorted((a for a in names if len(a) >= 3 and text.startswith(a.lower()) and a.lower() != text),
                    key=len, reverse=True)
    same = [a for a in names if a.lower() == text]  # the name in another case ('VLLM' -> 'vllm')
    out: list[str] = []
    for a in same + sorted(begun, key=len) + begins + difflib.get_close_matches(str(name), names, n=n, cutoff=cutoff):
        if a not in out:
            out.append(a)
    return out[:n]


def did_you_mean(name: object, allowed: Iterable[str], n: int = 1, cutoff: float = 0.6) -> str:
    """``" (did you mean 'x'?)"`` for the ``n`` closest of ``allowed`` to ``name`` (:func:`closest`), or ``""``."""
    close = closest(name, allowed, n=n, cutoff=cutoff)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def placed(exc: InferlabError, where: str) -> InferlabError:
    """``exc`` said of ``where`` (``"pool 1"``): its message prefixed, its kind kept, so its exit
    status too; an unknown name's as a :class:`SpecError` (its class is built from the name and
    the allowed ones, not from a message)."""
    kind = SpecError if isinstance(exc, UnknownNameError) else type(exc)
    return kind(f"{where}: {exc.args[0] if exc.args else exc}")


def option(keyword: str, value: object = True) -> str:
    """The option ``keyword=value`` as the user wrote it: ``waves=True`` from Python,
    ``--waves`` (or ``--tp 4``) from the CLI, whose commands name their flags with
    :func:`cli_spelling`."""
    flags = _OPTION_SPELLING.get()
    if flags is not None and keyword in flags:
        return flags[keyword] if value is True else f"{flags[keyword]} {value}"
    return f"{keyword}={value!r}"


def option_name(keyword: str) -> str:
    """The name of option ``keyword`` as the user wrote it: ``tp`` from Python, ``--tp`` from the CLI."""
    flags = _OPTION_SPELLING.get()
    return flags[keyword] if flags is not None and keyword in flags else keyword


@contextlib.contextmanager
def cli_spelling(flags: dict[str, str]) -> Iterator[None]:
    """Within the block, :func:`option` spells the keywords of ``flags`` as their flags."""
    token = _OPTION_SPELLING.set(flags)
    try:
        yield
    finally:
        _OPTION_SPELLING.reset(token)
