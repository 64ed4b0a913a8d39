"""Parsers into :class:`~inferlab.inputs.deployment.Deployment` and :class:`~inferlab.inputs.workload.Workload`.

Keyword arguments of :func:`inferlab.estimate` or :func:`inferlab.serve`
(:func:`from_kwargs`) and deployment files (:func:`from_deployment_file`, ``engine_args``
launch commands included) parse here. The parsers of higher layers sit beside the types
they read: a validation case (:func:`inferlab.validation.case_inputs.case_deployment`), the
CLI's ``inferlab estimate`` flags (:func:`inferlab.cli.estimate_cmd.inputs_of`) and planning
scenario traffic (:meth:`inferlab.planning.scenario.Traffic.workload`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np

from ..errors import SpecError
from .deployment import KWARGS, Deployment
from .static_batch import AXES
from .workload import WORKLOAD_KWARGS, Workload

#: Keyword arguments of the Workload: a static batch's, then traffic's.
_STATIC = ("isl", "osl", "batch_size", "prefill_batch", "waves")
_TRAFFIC = ("isl", "osl", "rate", "concurrency", "trace", "offline", "max_concurrency", "num_requests", "seed", "stagger",
            "prefix")
#: Every keyword argument :func:`from_kwargs` takes.
KEYS = (*KWARGS, *WORKLOAD_KWARGS)


def _axis(value: Any, index: int) -> tuple[Any, bool]:
    """A grid axis as a whole number or a list, and whether it lies along its own axis of three (the CLI's grid)."""
    if not isinstance(value, np.ndarray) or value.ndim <= 1:
        return (value.item() if isinstance(value, np.ndarray) and value.ndim == 0 else value), False
    shape = [1, 1, 1]
    shape[index] = value.size
    if value.ndim == 3 and list(value.shape) == shape:
        return value.ravel().tolist(), True
    raise SpecError(f"a Workload's {AXES[index]} is a whole number or a list of them, got an array of shape "
                    f"{value.shape}; pass such arrays to estimate() as keyword arguments")


def workload_of(kwargs: dict[str, Any], target: Literal["estimate", "serve"] = "estimate") -> Workload:
    """The Workload of keyword arguments: traffic when a rate, trace, concurrency or offline is given
    (or ``target="serve"``), else a static batch (``batch_size`` 1 by default, as estimate's)."""
    traffic = target == "serve" or any(kwargs.get(k) not in (None, False) for k in ("rate", "concurrency", "trace",
                                                                                    "offline"))
    if traffic:
        extra = sorted(k for k in ("batch_size", "prefill_batch", "waves") if kwargs.get(k) not in (None, False))
        if extra:
            raise SpecError(f"{', '.join(extra)} describe a static batch, but the arguments give traffic (a rate, "
                            "trace, concurrency or offline): drop one of them")
        return Workload(**{k: kwargs[k] for k in _TRAFFIC if kwargs.get(k) is not None})
    given = sorted(k for k in _TRAFFIC if k not in _STATIC and kwargs.get(k) is not None)
    if given:
        raise SpecError(f"{', '.join(given)} describe traffic, but the arguments give a static batch (no rate, "
                        "trace, concurrency or offline): drop them, or give the traffic")
    fields = {k: kwargs[k] for k in _STATIC if kwargs.get(k) is not None}
    fields.setdefault("batch_size", 1)
    outer = False
    for i, name in enumerate(AXES):
        if name in fields:
            fields[name], along = _axis(fields[name], i)
            outer = outer or along
    if isinstance(fields.get("prefill_batch"), np.ndarray):
        fields["prefill_batch"] = fields["prefill_batch"].tolist()
    return Workload(**fields, grid="outer" if outer else "broadcast")


def from_kwargs(target: Literal["estimate", "serve"] = "estimate", **kwargs: Any) -> tuple[Deployment, Workload]:
    """The Deployment and Workload of :func:`inferlab.estimate` (or :func:`inferlab.serve`) keyword arguments.

    ``engine_version`` may be given too (the engines' release; estimate does not take it).
    ``estimate(*from_kwargs(**kw))`` gives the numbers ``estimate(**kw)`` gives.

    Raises
    ------
    SpecError
        An unknown argument, an invalid deployment or workload (:class:`Deployment`).
    """
    return Deployment.from_kwargs(**kwargs), workload_of(kwargs, target)


def from_deployment_file(path: str | Path, target: Literal["estimate", "serve"] = "estimate"
                         ) -> tuple[Deployment, Workload]:
    """The Deployment and Workload of a deployment file (:mod:`inferlab.inputs.files`), ``engine_args`` merged.

    Raises
    ------
    SpecError
        What :func:`~inferlab.inputs.files.load_deployment_file` refuses, or an invalid
        deployment, prefixed with the file's path.
    """
    from .files import load_deployment_file

    kwargs = load_deployment_file(path)
    try:
        return from_kwargs(target, **kwargs)
    except SpecError as exc:
        if type(exc) is not SpecError:  # an unknown name keeps its own type and did-you-mean
            raise
        raise SpecError(f"{path}: {exc}") from None
