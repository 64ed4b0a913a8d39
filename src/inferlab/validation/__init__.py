"""Predictions against measurements: validation cases, op-level latencies and error summaries."""

from .cases import Case, load_cases

from .predict import predict_case, predict_cases
from .ops import OpTable, predict_ops, read_ops
from .summary import ErrorStats, summarize

__all__ = ["Case", "ErrorStats", "OpTable", "load_cases", "predict_case", "predict_cases", "predict_ops", "read_ops",
           "summarize"]
