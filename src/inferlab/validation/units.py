"""Validation split into independent units for a cluster: every grid of static-batch cases
and every serving simulation stays whole, so each case is predicted exactly as it is here."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

from ..cluster import check_client, map_units
from .cases import Case
from .predict import predict_cases, static_group_key
from .serving import serving_group_key, serving_unsupported_reason, sweep_request_counts
from .support import unsupported_reason

#: Tasks the units are packed into (consecutive units per task): enough to keep a few dozen
#: workers busy, few enough that the scheduler's cost per task stays small.
TASKS = 64


def unit_key(case: Any) -> tuple:
    """The unit a case belongs to: its grid or its simulation; cases that are not predicted
    (invalid, unsupported) share one unit, as they cost nothing."""
    if not isinstance(case, Case):
        return ("not predicted",)
    if case.regime == "static_batch":
        return ("not predicted",) if unsupported_reason(case) is not None else ("static", static_group_key(case))
    return ("not predicted",) if serving_unsupported_reason(case) is not None else ("serving", serving_group_key(case))


def case_units(cases: Sequence[Any]) -> list[list[int]]:
    """Indices of ``cases`` per unit, each in the cases' order, units in order of first case."""
    units: dict[tuple, list[int]] = {}
    for i, case in enumerate(cases):
        units.setdefault(unit_key(case), []).append(i)
    return list(units.values())


def predict_cases_on(cases: Sequence[Any], profile: Any = "default",
                     client: Any = None) -> list[tuple[float | None, str | None]]:
    """:func:`~inferlab.validation.cases.predict_cases`, its units on ``client``'s workers when
    one is given (a ``dask.distributed.Client``); the predictions are the same."""
    cases = list(cases)
    if check_client(client) is None:
        return predict_cases(cases, profile)
    cases = sweep_request_counts(cases)  # (a unit holds an infinite-rate row without its sweep's others)
    units = case_units(cases)
    size = math.ceil(len(units) / TASKS)
    tasks = [[[cases[i] for i in idx] for idx in units[k:k + size]] for k in range(0, len(units), size)]
    results = map_units(functools.partial(_predict_units, profile=profile), tasks, client)
    out: list[tuple[float | None, str | None]] = [(None, None)] * len(cases)
    for idx, predictions in zip(units, (p for task in results for p in task)):
        for i, prediction in zip(idx, predictions):
            out[i] = prediction
    return out


def _predict_units(units: list[list[Any]], profile: Any) -> list[list[tuple[float | None, str | None]]]:
    return [predict_cases(unit, profile, swept=True) for unit in units]
