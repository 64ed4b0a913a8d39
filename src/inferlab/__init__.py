"""inferlab: an analytical model of LLM inference.

Typed hardware and model specs with sources, a unit registry in which bytes, bits,
FLOPs, tokens and dollars are distinct, and a calculator that checks units.

>>> from inferlab import Q, load_hardware
>>> h100 = load_hardware("h100-sxm")
>>> round(h100.ridge_point("bf16").magnitude)
295

The public names are imported on first use (PEP 562), so ``import inferlab`` and the CLI's
quick commands do not pay for pint, pydantic models, scipy or the op graph until a name
that needs them is touched.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

#: Public name -> the module that defines it.
_WHERE: dict[str, str] = {
    "evaluate": ".calc.evaluator",
    "Deployment": ".inputs.deployment",
    "Workload": ".inputs.workload",
    "estimate": ".phases.estimate",
    "explore": ".explore",
    **dict.fromkeys(("InfeasibleError", "InferlabError", "SpecError", "UnitError",
                     "UnknownNameError"), ".errors"),
    **dict.fromkeys(("FORMATS", "NumberFormat", "number_format"), ".precision"),
    "serve": ".serving.serve",
    "fleet": ".fleet",
    **dict.fromkeys(("hardware_ids", "load_hardware", "load_model", "model_ids", "parse_hardware", "parse_model"),
                    ".specs.catalog"),
    "HardwareSpec": ".specs.hardware",
    **dict.fromkeys(("LayerSpec", "MLASpec", "ModelSpec", "MoESpec"), ".specs.model"),
    "sweep": ".phases.sweep",
    "DimensionError": ".unit_registry",
    **dict.fromkeys(("Q", "to_si", "ureg"), ".units"),
}

__all__ = sorted(_WHERE)

#: Functions named like the module that defines them: the package attribute is the function.
_SHADOWED = frozenset(name for name, module in _WHERE.items() if module == "." + name)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'inferlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


class _Package(types.ModuleType):
    """The package module; importing ``inferlab.explore`` (the package) must not replace
    ``inferlab.explore`` (the function), as it would by default once names load lazily."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
