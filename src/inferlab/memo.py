"""In-process memos of pure functions whose inputs are live objects (a deployment, a GPU's
spec, a model view), keyed by those objects' identity.

An ``id()`` may be reused once its object is gone, so each entry holds the objects it was
keyed by, and a lookup hits only when it finds the very same ones (``is``). Results are
pure functions of their key: evicting an entry only costs its recomputation.
:func:`array_key` keys a small step's arrays by value (their shape, type and bytes).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np


class IdentityMemo:
    """At most ``size`` results, each under the identity of its ``owners`` and a hashable
    ``rest``; the oldest entry goes first when full."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[tuple, tuple[tuple, Any]] = OrderedDict()

    def get(self, owners: tuple, rest: Any = ()) -> Any:
        """The result stored for these very ``owners`` and ``rest``, else None."""
        hit = self._entries.get((tuple(map(id, owners)), rest))
        if hit is None or any(a is not b for a, b in zip(hit[0], owners)):
            return None
        return hit[1]

    def put(self, owners: tuple, rest: Any, value: Any) -> Any:
        """Store ``value`` for ``owners`` and ``rest``, and return it."""
        self._entries[(tuple(map(id, owners)), rest)] = (owners, value)
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)  # the oldest
        return value


def array_key(arrays: Sequence[Any], max_elements: int) -> tuple | None:
    """The arrays (or scalars) by value, as a hashable key: each one's shape, type and bytes;
    None when they hold more than ``max_elements`` elements together (a grid: not memoized)."""
    values = [np.asarray(x) for x in arrays]
    if sum(a.size for a in values) > max_elements:
        return None
    return tuple((a.shape, a.dtype.str, a.tobytes()) for a in values)
