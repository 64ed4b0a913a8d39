"""Turn pydantic validation errors into one readable line per problem."""

from __future__ import annotations

from pydantic import ValidationError


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
