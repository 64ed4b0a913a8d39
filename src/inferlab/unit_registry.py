"""The one :class:`pint.UnitRegistry` of inferlab, loaded from ``units.txt``.

Importing pint costs a few tenths of a second (more where dask is installed, which pint
imports when it finds it), so only this module imports it, and :mod:`inferlab.units`
imports this module on the first call that needs a quantity. Use :mod:`inferlab.units`;
``inferlab.units.ureg`` is this registry.
"""

from __future__ import annotations

from importlib import resources

import pint

from .errors import UnitError


class DimensionError(UnitError, pint.DimensionalityError):
    """Two quantities of different dimensions were combined (e.g. bytes + seconds).

    It is also a :class:`pint.DimensionalityError`, so code written for pint still catches it.
    """

    def __init__(self, units1, units2, dim1="", dim2="", extra_msg=""):
        pint.DimensionalityError.__init__(self, units1, units2, dim1, dim2, extra_msg)

    def __str__(self) -> str:
        d1 = self.dim1 or "dimensionless"
        d2 = self.dim2 or "dimensionless"
        return (
            f"cannot combine {self.units1} ({d1}) with {self.units2} ({d2}): "
            f"the dimensions differ{self.extra_msg}"
        )


def _translating(method):
    """Wrap a Quantity method so pint's DimensionalityError becomes inferlab's DimensionError."""

    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except DimensionError:
            raise
        except pint.DimensionalityError as exc:
            raise DimensionError(exc.units1, exc.units2, exc.dim1, exc.dim2, exc.extra_msg) from None

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class _Quantity(pint.UnitRegistry.Quantity):
    """pint Quantity whose dimension errors are inferlab errors."""


for _name in ("__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__",
              "__lt__", "__le__", "__gt__", "__ge__", "to", "ito", "m_as"):
    setattr(_Quantity, _name, _translating(getattr(pint.UnitRegistry.Quantity, _name)))


class _Registry(pint.UnitRegistry):
    Quantity = _Quantity


ureg = _Registry(
    filename=str(resources.files("inferlab") / "units.txt"),
    autoconvert_offset_to_baseunit=False,
    cache_folder=None,
)
ureg.formatter.default_format = "~P"
Quantity = ureg.Quantity
