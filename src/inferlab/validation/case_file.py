"""A case file's shape: a mapping with its schema line and a list of cases under ``cases:``.

What a file that is not that shape is told: an empty file, a bare list of cases, a misspelt
``cases`` key, cases that are not a list.
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError, did_you_mean


def case_list(data: Any, label: str, schema: str) -> list:
    """The raw cases of a parsed case file ``data`` (``label``: its name in messages).

    Raises
    ------
    SpecError
        One line saying what the file is and what a case file looks like.
    """
    shape = f"a case file is a mapping: 'schema: {schema}', then the cases in a list under 'cases:'"
    if data is None:
        raise SpecError(f"case file {label}: the file is empty; {shape}")
    if isinstance(data, list):
        raise SpecError(f"case file {label}: a list at the top; {shape}")
    if not isinstance(data, dict) or data.get("schema") != schema:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise SpecError(f"case file {label}: expected 'schema: {schema}' at the top, found {found!r:.60}")
    raw = data.get("cases")
    if raw is None:
        others = sorted(str(k) for k in data if k != "schema")
        hint = did_you_mean(others[0], ("cases",)) if others else ""
        raise SpecError(f"case file {label}: no 'cases' key{hint}; {shape}")
    if not isinstance(raw, list):
        raise SpecError(f"case file {label}: 'cases' must be a list of cases, got {type(raw).__name__}")
    return raw
