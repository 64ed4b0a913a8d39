"""Turn pydantic validation errors into one readable line per problem; read the user's text files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import SpecError

#: libyaml's safe loader when PyYAML was built with it (the same documents, about ten times
#: faster than the pure-Python scanner, which dominated loading the catalogs).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def format_validation_error(exc: ValidationError) -> str:
    """``"memory_bandwidth: bare number 3.35 has no unit; ..."`` for each error, joined by ``; ``."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not part of the schema; check the spelling)"
        elif err["type"] == "missing":
            msg = "required field is missing"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def read_text(path: Path | str | Any, what: str) -> str:
    """The UTF-8 text of a file the user named; a file that cannot be read (missing, a folder,
    a name with a NUL byte) or is not UTF-8 is one :class:`SpecError` naming ``what``."""
    try:
        return (path if hasattr(path, "read_text") else Path(path)).read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{what}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{what}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except ValueError:  # open() refuses a path with a NUL byte
        raise SpecError(f"{what}: cannot read (the file name {str(path)!r:.80} holds a NUL byte)") from None


def read_yaml_mapping(path: Path | Any, what: str) -> dict[str, Any]:
    """Parse a YAML file that must hold a mapping; every failure is one :class:`SpecError`
    naming ``what`` (the file or its role) and the line of a syntax error."""
    text = read_text(path, what)
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{what}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{what}: expected a mapping of fields, got {type(data).__name__}")
    return data
