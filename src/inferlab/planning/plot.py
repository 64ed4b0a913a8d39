"""The plan as a picture: every operating point, the Pareto front, the planner's choice."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..results.figure_file import figure_file
from .planner import Plan


def plan_pareto_plot(result: Plan, y: str = "output_tokens_per_s_per_gpu"):
    """Tokens/s per user against ``y`` (per GPU, or ``output_tokens_per_usd``) for every
    operating point of every candidate, the Pareto front, and the chosen point marked."""
    from ..plots.pareto import pareto_plot

    table = result.operating_table()
    table["feasible"] = np.ones(len(table["label"]), bool)
    # colour by model and GPU (precision and TP variants of one pair share a colour)
    table["model_gpu"] = np.array([" ".join(label.split()[:2]) for label in table["label"]])
    chosen = np.flatnonzero(table["chosen"])
    return pareto_plot(table, "output_tokens_per_s_per_user", y, label="model_gpu", connect=None,
                       chosen=int(chosen[0]) if len(chosen) else None,
                       title=f"plan '{result.scenario.name}': operating points and Pareto front")


def write_plan_plot(result: Plan, path: str | Path) -> Path:
    """Save :func:`plan_pareto_plot` to ``path`` (PNG or SVG by suffix)."""
    path = figure_file(path, "Plan.plot")
    fig = plan_pareto_plot(result)
    fig.savefig(path, dpi=100)
    return path
