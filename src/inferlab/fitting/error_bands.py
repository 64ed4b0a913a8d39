"""``inferlab error-bands``: the error-band table of a profile, from its validation residuals.

The cases of the *fit half* (:attr:`Case.holdout_half` 0) are predicted three times:

* with the profile as it is: the ``calibrated`` residuals;
* with the fits of the case's GPU family removed from the profile (its ``hardware``
  entries and every engine's entries for that family or its GPUs), as if nobody had
  measured that family: ``gpu_left_out``;
* as the ``generic`` engine (its scheduler, no engine's overrides), as if nobody had
  measured the case's engine: ``engine_left_out``.

:func:`~.error_band.build_table` turns them into the table; the cases of the held-out
half, predicted with the profile as it is, give its coverage. Nothing is fitted, so the
table is regenerated in the time of about two predictions of the public cases.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..calibration.error_band import (LEVELS, METRIC_QUANTITY, MIN_CASES, QUANTITIES, REGIMES, ErrorBandTable,
                                      Residual, band_regime, build_table, coverage)
from ..calibration.profile import hardware_family, load_profile, profile_file
from ..errors import InferlabError, SpecError
from ..validation.cases import Case, case_engine
from ..validation.predict import predict_cases

#: What a case of an engine without a profile of its own runs as (see :func:`case_engine`).
UNCALIBRATED_ENGINE = "other"


@functools.lru_cache(maxsize=128)
def gpu_family(hardware_id: str) -> str:
    """The GPU family (``hopper``) of a catalog GPU; ``unknown`` for an id the catalog lacks."""
    from ..specs.catalog import load_hardware

    try:
        return hardware_family(load_hardware(hardware_id).architecture)
    except InferlabError:
        return "unknown"


def case_residual(case: Case, predicted: float | None, engine: str | None = None) -> Residual | None:
    """The residual of one case's prediction (None when it was not predicted)."""
    if predicted is None or not np.isfinite(predicted) or predicted <= 0:
        return None
    quantity, sign = METRIC_QUANTITY[case.metric]
    return Residual(quantity, band_regime(case.regime), gpu_family(case.hardware), engine or case_engine(case),
                    float(sign * np.log(case.measured / predicted)))


def residuals(cases: Sequence[Case], predictions: Sequence[tuple[float | None, Any]],
              engine: str | None = None) -> list[Residual]:
    """Residuals of every predicted case (``engine``: the cell's engine, else the case's)."""
    out = [case_residual(c, p, engine) for c, (p, _) in zip(cases, predictions)]
    return [r for r in out if r is not None]


def profile_text(profile: str | Path) -> str:
    """The YAML text of a shipped profile name or a profile file.

    Raises
    ------
    SpecError
        ``roofline`` (it has no residuals worth a band) or a file that cannot be read.
    """
    if str(profile).endswith((".yaml", ".yml")):
        try:
            return Path(profile).read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"error-bands: cannot read profile {profile} ({exc.strerror or exc})") from None
        except UnicodeDecodeError as exc:
            raise SpecError(f"error-bands: profile {profile} is not UTF-8 text (byte {exc.start}); save the file as "
                            "UTF-8") from None
    shipped = profile_file(str(profile))
    if not shipped.is_file():
        raise SpecError(f"error-bands: profile {profile!r} is not a shipped profile (default) or a .yaml file")
    return shipped.read_text(encoding="utf-8")


def without_family(profile: dict[str, Any], family: str) -> dict[str, Any]:
    """The profile with every entry for GPU ``family`` or one of its GPUs removed."""
    def keep(key: str) -> bool:
        return key == "all" or (key != family and gpu_family(key) != family)

    out = dict(profile)
    out["hardware"] = {k: v for k, v in (profile.get("hardware") or {}).items() if keep(k)}
    out["overrides"] = {engine: {k: v for k, v in section.items() if keep(k)}
                        for engine, section in (profile.get("overrides") or {}).items()}
    return out


def gpu_left_out_residuals(cases: Sequence[Case], text: str) -> list[Residual]:
    """Residuals of each family's cases predicted with that family's fits removed from the profile ``text``."""
    data = yaml.safe_load(text)
    by_family: dict[str, list[Case]] = {}
    for case in cases:
        by_family.setdefault(gpu_family(case.hardware), []).append(case)
    out: list[Residual] = []
    with tempfile.TemporaryDirectory() as folder:
        for family, members in sorted(by_family.items()):
            # A file, not a mapping: worker processes read it, and profiles resolve cached on its text.
            path = Path(folder) / f"without-{family}.yaml"
            path.write_text(yaml.safe_dump(without_family(data, family)), encoding="utf-8")
            out += residuals(members, predict_cases(members, str(path)))
    return out


def engine_left_out_residuals(cases: Sequence[Case], profile: str | Path) -> list[Residual]:
    """Residuals of calibrated engines' cases predicted as the ``generic`` engine, kept in their engine's cell."""
    mine = [c for c in cases if case_engine(c) != "generic"]
    as_generic = [c.model_copy(update={"engine": UNCALIBRATED_ENGINE}) for c in mine]
    out = [case_residual(c, p, case_engine(c)) for c, (p, _) in zip(mine, predict_cases(as_generic, str(profile)))]
    return [r for r in out if r is not None]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def source_line(command: str, case_labels: Sequence[str], profile: str | Path, text: str, num_fit: int,
                num_held_out: int) -> str:
    """What the table was built from, by which command, and when (``SOURCE_DATE_EPOCH`` if set)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc) if epoch else \
        datetime.datetime.now(datetime.timezone.utc)
    return (f"built by `{command}` on {when.date().isoformat()}: residuals of the {num_fit} predicted cases of the "
            f"fit half (by a hash of the case id) of {', '.join(case_labels)}, predicted with profile {profile} "
            f"(sha256 {_digest(text)}); coverage on the {num_held_out} predicted cases of the held-out half")


@dataclass(frozen=True)
class BandReport:
    """A table and the held-out residuals its coverage was measured on."""

    table: ErrorBandTable
    held_out: tuple[Residual, ...]

    def coverage_rows(self, level: float = 0.8) -> list[tuple[str, str, int, float]]:
        """``(quantity, regime, cases, share inside the band)`` of the held-out half, per quantity and regime."""
        rows = []
        for quantity in QUANTITIES:
            for regime in REGIMES:
                mine = [r for r in self.held_out if r.quantity == quantity and r.regime == regime]
                if mine:
                    rows.append((quantity, regime, len(mine), coverage(self.table, mine, level)))
        return rows


def fit_error_bands(cases: Sequence[Case], profile: str | Path = "default", *, command: str = "",
                    case_labels: Sequence[str] = ("the shipped public cases",)) -> BandReport:
    """The error-band table of ``profile`` from the fit half of ``cases``, with its held-out coverage."""
    text = profile_text(profile)
    load_profile(profile, "generic", "")  # a malformed file says so here, not as every case unpredicted
    fit = [c for c in cases if c.holdout_half == 0]
    held = [c for c in cases if c.holdout_half == 1]
    both = predict_cases([*fit, *held], str(profile))
    calibrated = residuals(fit, both[:len(fit)])
    held_out = residuals(held, both[len(fit):])
    counts = {q: sum(r.quantity == q for r in calibrated) for q in QUANTITIES}
    if min(counts.values()) < MIN_CASES:
        raise InferlabError(f"error-bands: the fit half has too few predicted cases: "
                            f"{', '.join(f'{q} {n}' for q, n in counts.items())}, and each quantity needs at least "
                            f"{MIN_CASES}; give more case files (the shipped public cases have hundreds)")
    predicted_fit = [c for c, (p, _) in zip(fit, both) if p is not None]
    table = build_table(calibrated, gpu_left_out=gpu_left_out_residuals(predicted_fit, text),
                        engine_left_out=engine_left_out_residuals(predicted_fit, profile),
                        source=source_line(command or f"inferlab error-bands --profile {profile}", case_labels,
                                           profile, text, len(calibrated), len(held_out)))
    return BandReport(with_coverage(table, held_out), tuple(held_out))


def with_coverage(table: ErrorBandTable, held_out: Sequence[Residual]) -> ErrorBandTable:
    """``table`` with the share of ``held_out`` residuals inside each level's band."""
    return replace(table, coverage=tuple((level, coverage(table, held_out, level)) for level in LEVELS))
