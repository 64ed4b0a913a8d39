"""Error band tables as files: written as YAML (schema ``inferlab-error-bands/1``) by
``inferlab error-bands``, read back, and found beside the profile a prediction ran with."""

from __future__ import annotations

import functools
import math
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError
from ..specs.validation import SAFE_LOADER, read_text
from .error_band import BASES, LEVELS, MIN_CASES, PROBABILITIES, SCHEMA, BandCell, ErrorBandTable, MissingBandError


def table_yaml(table: ErrorBandTable) -> str:
    """The table as YAML (schema ``inferlab-error-bands/1``), one cell per line."""
    head = ["# Written by `inferlab error-bands`; regenerate rather than edit (see `source`).",
            "# log_ratio: quantiles of log(measured / predicted) at `probabilities`; family/engine '*' = pooled."]
    head += [f"# held-out coverage of the {level:g} band: {share:.1%}" for level, share in table.coverage]
    engines: dict[str, list[str]] = {}
    for regime, engine in table.engines:
        engines.setdefault(regime, []).append(engine)
    body = {"schema": SCHEMA, "source": table.source, "min_cases": table.min_cases,
            "probabilities": list(PROBABILITIES), "levels": list(LEVELS),
            "coverage_held_out": {float(level): round(share, 4) for level, share in table.coverage},
            "families": list(table.families), "engines": engines}
    text = yaml.safe_dump(body, sort_keys=False, width=1000)
    # One flow mapping per cell, so that a regenerated table diffs line by line.
    cells = "".join("  - " + yaml.safe_dump({"basis": c.basis, "quantity": c.quantity, "regime": c.regime,
                                             "family": c.family, "engine": c.engine, "count": c.count,
                                             "log_ratio": list(c.log_ratio)},
                                            default_flow_style=True, sort_keys=False, width=1000)
                    for c in table.cells)
    return "\n".join(head) + "\n" + text + "cells:\n" + cells


def parse_table(text: str, label: str) -> ErrorBandTable:
    """A table from its YAML text.

    Raises
    ------
    SpecError
        Not YAML, not ``inferlab-error-bands/1``, or a malformed cell (the message says which).
    """
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as exc:
        raise SpecError(f"error band table {label}: not valid YAML ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise SpecError(f"error band table {label}: expected 'schema: {SCHEMA}' at the top; regenerate it with "
                        "`inferlab error-bands --out PATH`")
    if list(data.get("probabilities", [])) != list(PROBABILITIES):
        raise SpecError(f"error band table {label}: probabilities {data.get('probabilities')} differ from "
                        f"{list(PROBABILITIES)}; regenerate it with `inferlab error-bands --out PATH`")
    cells = []
    for i, raw in enumerate(data.get("cells") or []):
        try:
            cell = BandCell(str(raw["quantity"]), str(raw["regime"]), str(raw["family"]), str(raw["engine"]),
                            str(raw["basis"]), _whole(raw["count"]), tuple(float(v) for v in raw["log_ratio"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"error band table {label}, cell {i}: malformed ({exc!r}); each cell needs basis, "
                            "quantity, regime, family, engine, count (a whole number) and log_ratio") from None
        if cell.basis not in BASES or len(cell.log_ratio) != len(PROBABILITIES):
            raise SpecError(f"error band table {label}, cell {i}: basis must be one of {', '.join(BASES)} with "
                            f"{len(PROBABILITIES)} log ratios; got {cell.basis!r} with {len(cell.log_ratio)}")
        _check_cell(cell, f"error band table {label}, cell {i} ({cell.quantity}, {cell.regime}, {cell.family}, "
                          f"{cell.engine})")
        cells.append(cell)
    engines = tuple(sorted((regime, e) for regime, names in (data.get("engines") or {}).items() for e in names))
    coverage_ = tuple(sorted((float(k), float(v)) for k, v in (data.get("coverage_held_out") or {}).items()))
    return ErrorBandTable(source=str(data.get("source", label)), min_cases=int(data.get("min_cases", MIN_CASES)),
                          families=tuple(data.get("families") or ()), engines=engines, cells=tuple(cells),
                          coverage=coverage_)


def _whole(value: object) -> int:
    """A count as written: a whole number (12 or 12.0), not a fraction or a boolean."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise ValueError(f"count {value!r} is not a whole number")
    return int(value)


def _check_cell(cell: BandCell, where: str) -> None:
    """Refuse a cell no residuals give: a count below one, or log ratios that are not finite
    quantiles in order (a hand edit; an interval from them would be reversed or NaN)."""
    ratios = cell.log_ratio
    if cell.count < 1:
        raise SpecError(f"{where}: count must be at least 1 (the cases its quantiles come from), got {cell.count}")
    if not all(math.isfinite(v) for v in ratios) or any(b < a for a, b in zip(ratios, ratios[1:])):
        raise SpecError(f"{where}: log_ratio must be finite and non-decreasing (quantiles at "
                        f"{list(PROBABILITIES)}), got {list(ratios)}; regenerate it with "
                        "`inferlab error-bands --out PATH`")


def band_file(profile: str) -> Any:
    """The shipped table of the shipped profile ``profile`` (``default``)."""
    return resources.files("inferlab.calibration") / "profiles" / f"{profile}-error-bands.yaml"


@functools.lru_cache(maxsize=16)
def _read(path: str) -> ErrorBandTable:
    text = read_text(path, f"error band table {path}")
    return parse_table(text, path)


def read_table(path: str | Path) -> ErrorBandTable:
    """The table in the file ``path`` (cached: tables do not change while we run)."""
    return _read(str(path))


def table_for_profile(profile_name: str) -> ErrorBandTable:
    """The table of the profile a prediction ran with.

    ``profile_name`` is a resolved profile's ``name`` (``default:trtllm/h100-sxm``): a shipped
    profile's table is shipped beside it, a profile file ``X.yaml``'s is ``X-error-bands.yaml``.

    Raises
    ------
    MissingBandError
        A profile without a table (``roofline``, a mapping, a file with no table beside it).
    """
    label = profile_name.rsplit(":", 1)[0] if ":" in profile_name else profile_name
    if label.endswith((".yaml", ".yml")):
        path = Path(label).with_name(Path(label).stem + "-error-bands.yaml")
        if not path.is_file():
            raise MissingBandError(f"no error band table for profile {label} (looked for {path}); write one with "
                                   f"`inferlab error-bands --profile {label} --out {path}`")
        return read_table(str(path))
    path = band_file(label)
    if not path.is_file():
        raise MissingBandError(f"no error band table for profile {label!r}: intervals come from the validation "
                               "residuals of a calibrated profile (default, or a profile file with "
                               "X-error-bands.yaml beside it)")
    return read_table(str(path))
