"""Turn pydantic validation errors into one readable line per problem; read the user's text files."""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import SpecError

#: libyaml's safe loader when PyYAML was built with it (the same documents, about ten times
#: faster than the pure-Python scanner, which dominated loading the catalogs).
_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SAFE_LOADER(_BASE_LOADER):  # type: ignore[misc,valid-type]  # noqa: N801  (the loader, as yaml names them)
    """The safe loader, reading ``1e7`` and ``2.5e-3`` as numbers: YAML 1.2 and JSON do, but
    PyYAML follows YAML 1.1, whose floats need a dot (``1.0e7``), and would hand a scenario's
    ``rate: 1e7`` on as the text '1e7'. A key given twice in one mapping is an error, as YAML
    says it is: PyYAML would keep the last one and drop the first without a word."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *base': its keys may be overridden
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:  # an unhashable key: the base constructor says so
                    continue
                if first is not key_node:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r:.60} is given twice (first at line {first.start_mark.line + 1}); a "
                        "mapping holds each key once, and the later value would silently replace the earlier: keep "
                        "one", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # past Python's 4,300-digit conversion limit: no count or size is that long
            raise yaml.constructor.ConstructorError(None, None, f"integer of {len(str(node.value)):,} digits is "
                                                    "too long to be a value", node.start_mark) from None


SAFE_LOADER.add_constructor("tag:yaml.org,2002:int", SAFE_LOADER.construct_yaml_int)
SAFE_LOADER.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789"))


def format_validation_error(exc: ValidationError, model: Any = None) -> str:
    """``"memory_bandwidth: bare number 3.35 has no unit; ..."`` for each error, joined by ``; ``.
    With ``model`` (the pydantic model validated), an unknown key gets the closest allowed ones."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"]
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                msg = msg[len(prefix):]
        if err["type"] == "extra_forbidden":
            allowed = _keys_at(model, [p for p in err["loc"] if not str(p).startswith("function-")][:-1])
            close = difflib.get_close_matches(str(err["loc"][-1]), allowed or (), n=1, cutoff=0.6)
            msg = (f"unknown key; did you mean {close[0]!r}?" if close else
                   "unknown key (not part of the schema; check the spelling)")
            if allowed:
                msg += f"{' ' if close else '; '}allowed: {', '.join(allowed)}"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] in ("tuple_type", "list_type"):  # one value where a list goes
            value = err.get("input")
            shown = f"[{value}]" if isinstance(value, (str, int, float)) and not isinstance(value, bool) else "[...]"
            msg = f"expected a list, e.g. {shown}, got {type(value).__name__} {value!r:.60}"
        elif err["type"] in ("string_type", "int_type", "float_type", "bool_type") and isinstance(
                err.get("input"), (list, tuple, dict)):  # a list or mapping where one value goes
            value = err["input"]
            kind = {"string_type": "name or text", "int_type": "whole number", "float_type": "number",
                    "bool_type": "true or false"}[err["type"]]
            msg = f"expected one {kind}, got a {'mapping' if isinstance(value, dict) else 'list'} {value!r:.60}"
        elif err["type"] == "too_short" and not err.get("input"):
            msg = "expected at least one item, got none"
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def _keys_at(model: Any, loc: list) -> tuple[str, ...] | None:
    """The field names of the pydantic model found at ``loc`` inside ``model`` (list indices and
    mapping keys skipped), or None where the path leaves the models."""
    cls = model
    for part in loc:
        fields = getattr(cls, "model_fields", None)
        if isinstance(part, int) or fields is None:
            continue
        if part not in fields:
            continue  # a mapping's key (a pool name, a hardware id): the same model below it
        cls = _model_in(fields[part].annotation)
        if cls is None:
            return None
    fields = getattr(cls, "model_fields", None)
    return tuple(fields) if fields else None


def _model_in(annotation: Any) -> Any:
    """The first pydantic model class in a type annotation (``X | None``, ``list[X]``, ``dict[str, X]``)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def read_text(path: Path | str | Any, what: str) -> str:
    """The UTF-8 text of a file the user named, without the byte-order mark a spreadsheet or an
    editor may put first ("CSV UTF-8"); a file that cannot be read (missing, a folder, a name with
    a NUL byte) or is not UTF-8 is one :class:`SpecError` naming ``what``."""
    try:
        return (path if hasattr(path, "read_text") else Path(path)).read_text(encoding="utf-8-sig")
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
    if data is None:
        raise SpecError(f"{what}: the file is empty; expected a mapping of fields")
    if not isinstance(data, dict):
        raise SpecError(f"{what}: expected a mapping of fields, got {type(data).__name__}")
    return data
