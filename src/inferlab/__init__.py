"""inferlab: an analytical model of LLM inference.

Typed hardware and model specs with sources, a unit registry in which bytes, bits,
FLOPs, tokens and dollars are distinct, and a calculator that checks units.

>>> from inferlab import Q, load_hardware
>>> h100 = load_hardware("h100-sxm")
>>> round(h100.ridge_point("bf16").magnitude)
295
"""

from .calc import evaluate
from .estimate import estimate
from .errors import DimensionError, InfeasibleError, InferlabError, SpecError, UnitError, UnknownNameError
from .precision import FORMATS, NumberFormat, number_format
from .serve import serve
from .specs.catalog import hardware_ids, load_hardware, load_model, model_ids, parse_hardware, parse_model
from .specs.hardware import HardwareSpec
from .specs.model import LayerSpec, MLASpec, ModelSpec, MoESpec
from .sweep import sweep
from .units import Q, to_si, ureg

__version__ = "0.1.0"

__all__ = [
    "DimensionError", "FORMATS", "HardwareSpec", "InfeasibleError", "InferlabError", "LayerSpec", "MLASpec",
    "ModelSpec", "MoESpec", "NumberFormat", "Q", "SpecError", "UnitError", "UnknownNameError", "estimate", "evaluate",
    "hardware_ids", "load_hardware", "load_model", "model_ids", "number_format", "parse_hardware", "parse_model",
    "serve", "sweep", "to_si", "ureg",
]
