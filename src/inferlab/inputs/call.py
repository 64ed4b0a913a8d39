"""``estimate(deployment, workload)`` and ``serve(deployment, workload)``: the typed forms of the entry points.

The keyword-argument forms stay; a :class:`~inferlab.inputs.deployment.Deployment` and a
:class:`~inferlab.inputs.workload.Workload` passed instead become exactly the keyword
arguments the same deployment written out would give, so the numbers are the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Literal

from .. import checks
from ..errors import SpecError
from .deployment import Deployment
from .workload import Workload

#: Arguments of each entry point that neither a Deployment nor a Workload holds, taken beside them.
EXTRAS = {"estimate": (), "serve": ("overheads", "scheduler", "prompt_gpu_s")}


def typed_call(fn: Callable[..., Any], target: Literal["estimate", "serve"], args: dict[str, Any]) -> dict | None:
    """The keyword arguments of ``fn`` for a call given a Deployment and a Workload, or None for a keyword call.

    ``args`` are the call's arguments as ``fn`` received them (its ``locals()`` on entry):
    the first positional (``model``) a Deployment, the second (``hardware``) a Workload.

    Raises
    ------
    SpecError
        A Workload without a Deployment, no Workload, or other arguments given beside them
        (the Deployment or the Workload holds them).
    """
    deployment, workload = args["model"], args["hardware"]
    if not isinstance(deployment, Deployment):
        if isinstance(workload, Workload):
            raise SpecError(f"{target}(deployment, workload): the first argument must be a Deployment when the second "
                            f"is a Workload, got {type(deployment).__name__}")
        return None
    params = inspect.signature(fn).parameters
    given = sorted(name for name, p in params.items() if name not in ("model", "hardware", *EXTRAS[target])
                   and not checks.is_default(args[name], p.default))
    if not isinstance(workload, Workload):
        beside = (f"; {', '.join(given)} given beside the Deployment: keywords do not combine with one, set them "
                  "in the Deployment or the Workload") if given else ""
        raise SpecError(f"{target}(deployment, workload): give the Workload as the second argument, got "
                        f"{type(workload).__name__} {workload!r:.60}{beside}")
    if given:
        raise SpecError(f"{target}(deployment, workload): {', '.join(given)} given beside them; set them in the "
                        "Deployment or the Workload instead")
    kw = deployment.estimate_kwargs() if target == "estimate" else deployment.serve_kwargs()
    kw.update(workload.estimate_kwargs() if target == "estimate" else workload.serve_kwargs())
    kw.update({name: args[name] for name in EXTRAS[target] if args[name] is not None})
    return kw


def with_inputs(result: Any, deployment: Deployment, workload: Workload) -> Any:
    """``result`` carrying the deployment and workload it was computed for (``to_dict()`` writes them)."""
    from dataclasses import replace

    return replace(result, inputs=(deployment, workload))
