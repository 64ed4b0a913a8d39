"""Figures of inferlab results: roofline, memory breakdown, Pareto front.

Every plot function returns a :class:`matplotlib.figure.Figure` built without pyplot (no
global figure state, no GUI backend needed): save it with ``fig.savefig("x.png")`` or show
it in Jupyter. matplotlib is the optional ``plot`` extra and is imported only when a figure
is drawn; :func:`pareto_mask` and :func:`pareto_front` need numpy only.

>>> import numpy as np
>>> from inferlab.plots import pareto_mask
>>> pareto_mask(np.array([1.0, 2.0, 3.0]), np.array([3.0, 1.0, 2.0])).tolist()
[True, False, True]
"""

from __future__ import annotations

from typing import Any

from ..errors import InferlabError
from .memory import memory_breakdown
from .pareto import pareto_front, pareto_mask, pareto_plot
from .roofline import roofline_chart, write_estimate_plot

__all__ = ["memory_breakdown", "new_figure", "pareto_front", "pareto_mask", "pareto_plot", "roofline_chart",
           "write_estimate_plot"]


def new_figure(caller: str, **kwargs: Any):
    """A new :class:`matplotlib.figure.Figure`, or a clear error when matplotlib is missing.

    Parameters
    ----------
    caller : str
        Name of the plot function, for the error message.
    **kwargs
        Passed to ``Figure`` (``figsize`` [inch], ``layout``...).
    """
    try:
        from matplotlib.figure import Figure
    except ImportError:  # matplotlib is the optional "plot" extra
        raise InferlabError(f"{caller}() needs matplotlib: pip install 'inferlab[plot]'") from None
    return Figure(**kwargs)
