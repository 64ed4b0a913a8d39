"""A pasted launch command, split into words and read flag by flag.

A command is split with :mod:`shlex` (quotes as a POSIX shell reads them, ``#``
comments dropped) after joining ``\\``-continued lines. Leading ``env`` and ``NAME=value``
words are kept apart as the environment. Shell here-documents
(``cat > FILE <<'EOF' ... EOF``, the plain shell form :mod:`.render` writes, or
``cat << EOF > FILE`` as the engines' guides write it) become
files the command may read, so a rendered script parses back as it is.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError

_HEREDOC = re.compile(r"^\s*cat\s*>\s*(\S+)\s*<<\s*-?\s*['\"]?(\w+)['\"]?\s*\n(.*?)\n\s*\2\s*$", re.M | re.S)
#: The order the engines' deployment guides write it in: ``cat << EOF > ${EXTRA_LLM_API_FILE}``.
_HEREDOC_FIRST = re.compile(r"^\s*cat\s*<<\s*-?\s*['\"]?(\w+)['\"]?\s*>\s*(\S+)\s*\n(.*?)\n\s*\1\s*$",
                            re.M | re.S)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Command:
    """Words of one launch command, its environment and the files written before it."""

    words: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()


def split_command(text: str) -> Command:
    """Split a pasted launch command (see the module docstring).

    Raises
    ------
    SpecError
        On unbalanced quotes or an empty command.
    """
    if not isinstance(text, str):
        raise SpecError(f"engine args must be the launch command as text, got {type(text).__name__}")
    files = tuple((m.group(1), m.group(3)) for m in _HEREDOC.finditer(text)) \
        + tuple((m.group(2), m.group(3)) for m in _HEREDOC_FIRST.finditer(text))
    body = _HEREDOC_FIRST.sub("", _HEREDOC.sub("", text)).replace("\\\r\n", " ").replace("\\\n", " ")
    try:
        words = shlex.split(body, comments=True)
    except ValueError as exc:
        raise SpecError(f"engine args: cannot split the command ({exc}); check its quotes") from None
    env = []
    while words and (words[0] == "env" or _ASSIGNMENT.match(words[0])):
        word = words.pop(0)
        if word != "env":
            name, _, value = word.partition("=")
            env.append((name, value))
    if not words:
        raise SpecError("engine args: no command given; paste e.g. 'vllm serve meta-llama/Llama-3.1-8B-Instruct --tp 2'")
    return Command(tuple(words), tuple(env), files)


@dataclass(frozen=True)
class Spec:
    """What a flag means to inferlab: the field it sets and how its value reads.

    ``kind`` is ``int`` (>= 1), ``count0`` (>= 0), ``signed`` (any integer), ``fraction`` (in
    (0, 1]), ``text``, ``on``/``off`` (a switch setting the field true/false), ``bool``
    (a switch, or ``--flag true|false``).
    """

    key: str
    kind: str = "text"


@dataclass
class Flags:
    """The flags of a command after reading: values by field, the rest sorted out."""

    values: dict[str, tuple[str, Any]] = field(default_factory=dict)  # key -> (flag as written, value)
    positionals: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    no_effect: list[str] = field(default_factory=list)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values[key][1] if key in self.values else default

    def flag(self, key: str) -> str:
        return self.values[key][0]


def read_flags(words: Iterable[str], known: Mapping[str, Spec], no_effect_value: Iterable[str],
               no_effect_switch: Iterable[str], engine: str, normalize: Any = None,
               unmodelled: Iterable[str] = ()) -> Flags:
    """Read ``--flag value``, ``--flag=value`` and switches into :class:`Flags`.

    An unknown flag keeps the word after it when that is not a flag (its probable value);
    both are listed in ``unknown``, never dropped. ``unmodelled`` names the engine's real flags
    inferlab does not model: unknown too, but never offered as another flag's misspelling.
    """
    norm = normalize or (lambda s: s)
    value_noop, switch_noop = {norm(f) for f in no_effect_value}, {norm(f) for f in no_effect_switch}
    real = {norm(f) for f in unmodelled}
    words, out, i = list(words), Flags(), 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("-") or word == "-":
            out.positionals.append(word)
            continue
        name, eq, inline = word.partition("=")
        name = norm(name)
        takes = name in known and known[name].kind not in ("on", "off", "bool") or name in value_noop
        value = inline if eq else None
        is_bool = name in known and known[name].kind == "bool"
        if value is None and i < len(words) and (
                is_bool and words[i].lower() in _BOOL_WORDS
                or (takes or name not in known and name not in switch_noop) and not words[i].startswith("--")
                and (takes or not words[i].startswith("-"))):
            value, i = words[i], i + 1
        if name in known:
            out.values[known[name].key] = (name, _convert(name, value, known[name].kind, engine))
        elif name in value_noop or name in switch_noop:
            out.no_effect.append(name)
        else:  # kept, with the flag it likely misspells (the engine itself would refuse the typo)
            near = "" if name in real else typo_of(name, [*known, *value_noop, *switch_noop])
            out.unknown.append((name if value is None else f"{name} {value}") + near)
    return out


#: How alike an unknown flag or key must be to a known one to be named as its likely misspelling.
TYPO_CUTOFF = 0.85


def typo_of(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'x'?)"`` for the known name ``name`` most likely misspells (a close
    spelling, not a prefix: vLLM's real ``--model-impl`` is no typo of ``--model``), else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=TYPO_CUTOFF)
    return f" (did you mean {close[0]!r}?)" if close else ""


_BOOL_WORDS = ("true", "false")
_WHAT = {"int": "a whole number >= 1", "count0": "a whole number >= 0", "signed": "a whole number",
         "fraction": "a number in (0, 1]", "positive": "a number above 0", "bool": "true or false"}


def _convert(flag: str, raw: str | None, kind: str, engine: str) -> Any:
    if kind in ("on", "off"):
        if raw is not None:
            raise SpecError(f"{engine}: {flag} is a switch and takes no value, got {raw!r}")
        return kind == "on"
    if kind == "bool":
        if raw is None:
            return True
        if raw.lower() in _BOOL_WORDS:
            return raw.lower() == "true"
    if raw is None:
        raise SpecError(f"{engine}: {flag} needs a value ({_WHAT.get(kind, 'text')})")
    if kind == "text":
        return raw
    try:
        if kind in ("fraction", "positive"):
            value = float(raw)
            if math.isfinite(value) and 0.0 < value and (kind == "positive" or value <= 1.0):
                return value
        elif kind in ("int", "count0", "signed"):
            number = int(raw)
            if kind == "signed" or number >= (1 if kind == "int" else 0):
                return number
    except ValueError:
        pass
    raise SpecError(f"{engine}: {flag} {raw!r} is not {_WHAT[kind]}")


def choice(engine: str, flag: str, raw: str, table: Mapping[str, Any]) -> Any:
    """``table[raw]`` (any case), or one line naming the flag and the values allowed."""
    key = str(raw).strip().lower()
    if not key:
        raise SpecError(f"{engine}: {flag} is missing; give one of {', '.join(table)}")
    if key not in table:
        raise SpecError(f"{engine}: {flag} {raw!r} is not one inferlab models; allowed: {', '.join(table)}")
    return table[key]
