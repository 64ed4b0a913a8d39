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
import importlib.abc
import importlib.util
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
    "plan": ".planning.planner",
    "load_scenario": ".planning.scenario",
    "DimensionError": ".unit_registry",
    **dict.fromkeys(("Q", "to_si", "ureg"), ".units"),
}

__all__ = sorted(_WHERE)

#: Modules that moved into the layered packages (docs/ARCHITECTURE.md): the old import path
#: still names the same module object, so ``from inferlab.estimate import deployment`` keeps working.
_MOVED: dict[str, str] = {
    "inferlab.estimate": "inferlab.phases.estimate",
    "inferlab.sweep": "inferlab.phases.sweep",
    "inferlab.feasibility": "inferlab.phases.feasibility",
    "inferlab.disaggregated": "inferlab.phases.disaggregated",
    "inferlab.serve": "inferlab.serving.serve",
    "inferlab.estimate_inputs": "inferlab.inputs.resolve",
    "inferlab.deployment_file": "inferlab.inputs.files",
    "inferlab.calc_syntax": "inferlab.calc.syntax",
    "inferlab.calc_tree": "inferlab.calc.tree",
    "inferlab.core.phases": "inferlab.techniques.step",
    "inferlab.techniques.quantization": "inferlab.core.quantization",
    "inferlab.techniques.parallelism": "inferlab.core.parallelism",
    "inferlab.results.estimate": "inferlab.phases.result",
    "inferlab.results.explain": "inferlab.phases.explain",
    "inferlab.results.interval": "inferlab.phases.interval",
    "inferlab.serving.scheduler": "inferlab.engines.scheduler",
    "inferlab.serving.workload": "inferlab.inputs.workload",
    "inferlab.serving.prefixes": "inferlab.inputs.prefixes",
    "inferlab.calibration.fit": "inferlab.fitting.fit",
    "inferlab.calibration.fit_bench": "inferlab.fitting.bench",
    "inferlab.calibration.fit_error_band": "inferlab.fitting.error_bands",
    "inferlab.calibration.fit_ops": "inferlab.fitting.ops",
    "inferlab.calibration.fit_serving": "inferlab.fitting.serving",
}

#: Functions named like a module (or a moved module's old name): the package attribute is the function.
_SHADOWED = frozenset(name for name in _WHERE if f"inferlab.{name}" in _MOVED or _WHERE[name] == "." + name)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'inferlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


#: What this module imports for itself, not for its users.
_OWN_IMPORTS = frozenset({"annotations", "importlib", "sys", "types", "Any"})


def __dir__() -> list[str]:
    return sorted((set(globals()) - _OWN_IMPORTS) | set(_WHERE))


class _Package(types.ModuleType):
    """The package module; importing ``inferlab.explore`` (the package) must not replace
    ``inferlab.explore`` (the function), as it would by default once names load lazily."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path (:data:`_MOVED`) as the module that now holds it."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(fullname, self) if fullname in _MOVED else None

    def __init__(self) -> None:
        self._specs: dict[int, Any] = {}

    def create_module(self, spec: Any) -> types.ModuleType:
        module = importlib.import_module(_MOVED[spec.name])
        self._specs[id(module)] = module.__spec__  # the import system sets the alias's spec on it next
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """The module ran when it was imported under its own name; it keeps its own spec."""
        module.__spec__ = self._specs.pop(id(module))


sys.modules[__name__].__class__ = _Package
if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
