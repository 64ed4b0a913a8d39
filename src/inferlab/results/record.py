"""Results that hold numpy arrays: compared by content, and read-only once made.

A frozen dataclass compares its fields with ``==``, which for arrays is an array, so
``estimate(...) == estimate(...)`` raised "truth value of an array is ambiguous"; and its
arrays stayed writable, so editing ``result.ttft_s`` changed what ``best()`` or ``explain()``
said afterwards. :func:`array_record` fixes both for a result class.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")


def same(a: Any, b: Any) -> bool:
    """Whether two values hold the same content: arrays element by element (NaN equal to
    NaN, same shape), containers and dataclasses field by field, anything else by ``==``."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape:
            return False
        try:
            return bool(np.array_equal(x, y, equal_nan=True))
        except TypeError:  # strings or objects: NaN has no meaning there
            return bool(np.array_equal(x, y))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(same(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a) if f.compare)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    result = a == b
    if isinstance(result, np.ndarray):
        return bool(result.all())
    return bool(result)


def _frozen(value: Any) -> Any:
    """A read-only copy of a writable array (the result owns its values: the caller's array stays
    writable, and writing into it later changes nothing here); a dict, list or tuple of arrays (a
    sweep's columns) anew with its arrays so; anything else as is."""
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.copy()
        value.flags.writeable = False
    elif isinstance(value, dict) and any(isinstance(v, np.ndarray) for v in value.values()):
        value = {k: _frozen(v) for k, v in value.items()}
    elif type(value) in (list, tuple) and any(isinstance(v, np.ndarray) for v in value):
        value = type(value)(_frozen(v) for v in value)
    return value


def array_record(cls: type[T]) -> type[T]:
    """Class decorator, applied above ``@dataclass``: equality by content and read-only
    array fields. Such results are unhashable, as mutable-looking containers of arrays are."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            frozen = _frozen(value)
            if frozen is not value:
                object.__setattr__(self, field.name, frozen)

    def __eq__(self: Any, other: Any) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return same(self, other)

    def __setstate__(self: Any, state: Any) -> None:  # unpickled (a Dask worker's result): read-only again
        dict_state = state[0] if isinstance(state, tuple) else state
        self.__dict__.update({k: _frozen(v) for k, v in (dict_state or {}).items()})

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__setstate__ = __setstate__  # type: ignore[attr-defined]
    cls.__eq__ = __eq__  # type: ignore[assignment]
    cls.__hash__ = None  # type: ignore[assignment]
    return cls
