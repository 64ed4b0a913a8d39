"""Fitting profile fields by least squares in log space: a field's path, start and bounds
(:class:`Param`), and the robust fit of a set of them to log-ratio residuals (:func:`fit_log`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

#: Robust loss of the fits: residuals [log ratio] beyond this scale count less than squared.
LOSS_SCALE = 0.1


@dataclass(frozen=True)
class Param:
    """One fitted profile field: its path in the profile mapping, start value and bounds."""

    path: tuple[str, ...]
    initial: float
    lower: float
    upper: float


def set_path(tree: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """Set ``tree[path[0]][path[1]]... = value``, creating mappings on the way."""
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def get_path(tree: dict[str, Any], path: Sequence[str]) -> Any:
    """``tree[path[0]][path[1]]...``, or None when a key is missing."""
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def fit_log(residuals: Callable[[dict[str, Any]], np.ndarray], params: Sequence[Param],
            sparsity: np.ndarray | None = None) -> dict[str, Any]:
    """Fit ``params`` so that ``residuals(fragment)`` (log ratios) are smallest.

    ``fragment`` is a nested mapping of the parameter values (a partial profile).
    ``sparsity`` [rows x params] says which residuals a parameter can move.
    """
    lower = np.log([p.lower for p in params])
    upper = np.log([p.upper for p in params])
    start = np.clip(np.log([p.initial for p in params]), lower + 1e-9, upper - 1e-9)

    def fragment(x: np.ndarray) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for p, v in zip(params, np.exp(x)):
            set_path(out, p.path, float(v))
        return out

    result = least_squares(lambda x: residuals(fragment(x)), start, bounds=(lower, upper), loss="soft_l1",
                           f_scale=LOSS_SCALE, jac_sparsity=sparsity, diff_step=1e-4, max_nfev=400)
    return fragment(result.x)
