"""The ``deployment`` and ``workload`` entries a result's ``to_dict()`` writes back."""

from __future__ import annotations

from typing import Any


def inputs_dict(inputs: Any) -> dict[str, Any]:
    """``{"deployment": ..., "workload": ...}`` of a ``(Deployment, Workload)`` pair; empty for None."""
    if inputs is None:
        return {}
    deployment, workload = inputs
    return {"deployment": deployment.to_dict(), "workload": workload.to_dict()}
