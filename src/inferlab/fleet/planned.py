"""A planning scenario's ``fleet:`` section run as the plan would deploy it.

What the section does not name (model, GPU, TP size, format, replicas) is the plan's: the
cheapest configuration that meets the scenario's SLO (:func:`inferlab.plan`, its search
narrowed to what the section names and to one deployment per replica, as a fleet runs) and
the replica count it sized by simulation. A section that names all of them runs as written,
without a search.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ..checks import integer
from ..errors import InfeasibleError, SpecError
from ..specs.validation import format_validation_error

#: Section key -> the scenario's field that lists its choices.
AXES = (("model", "models"), ("hardware", "hardware"), ("tp", "tp"), ("precision", "precisions"))


def open_axes(sc: Any, section: dict[str, Any]) -> list[str]:
    """The section's keys the plan must choose: unnamed, with more than one choice, or ``replicas``."""
    choices = {"models": sc.models, "hardware": sc.hardware, "tp": sc.search.tp, "precisions": sc.search.precisions}
    open_ = [key for key, field in AXES if key not in section and len(choices[field]) > 1]
    return open_ + ([] if "replicas" in section else ["replicas"])


def planned(sc: Any, section: dict[str, Any], where: str) -> Any:
    """The plan of ``sc`` narrowed to the section's choices (its ``best`` the fleet's replica).

    Raises
    ------
    InfeasibleError
        No configuration within the section's choices meets the scenario.
    """
    from ..planning.planner import plan
    from ..planning.scenario import Scenario, Search

    # a fleet replica is one group of GPUs of one deployment (tensor and expert parallel, attention
    # DP): no separate pools, pipeline stages or drafter (fleet() refuses them)
    search = {**sc.search.model_dump(), "disaggregation": False, "pp": (1,), "speculative": (None,)}
    for key in ("model", "hardware", "precision"):  # one choice each, named as the section names it
        if key in section and not (isinstance(section[key], str) or (key == "precision" and section[key] is None)):
            raise SpecError(f"{where}: {key}: one {'catalog id' if key != 'precision' else 'format'}, got "
                            f"{section[key]!r:.60}")
    if "tp" in section:
        integer(f"{where}: tp", section["tp"], maximum=1024, what="GPUs")
        search["tp"] = (section["tp"],)
    if "precision" in section:
        search["precisions"] = (section["precision"] if section["precision"] is not None else "checkpoint",)
    try:
        data = {**sc.model_dump(), "search": Search.model_validate(search)}
    except ValidationError as exc:  # a format the search does not know
        raise SpecError(f"{where}: {format_validation_error(exc).replace('precisions.0', 'precision').replace('precisions', 'precision')}") from None
    if "model" in section:
        data["models"] = (section["model"],)
    if "hardware" in section:  # the prices of the scenario's other GPUs go with them
        data["hardware"] = (section["hardware"],)
        data["prices"] = {hw: usd for hw, usd in sc.prices.items() if hw == section["hardware"]}
    if "allow_long_context" in section:
        data["allow_long_context"] = section["allow_long_context"]
    try:
        narrowed = Scenario.model_validate(data)
    except ValidationError as exc:  # a section's choice the scenario cannot take (a model it does not list...)
        raise SpecError(f"{where}: {format_validation_error(exc)}") from None
    try:
        return plan(narrowed)
    except InfeasibleError as exc:  # plan() raises when no configuration is feasible (its kind kept: exit 2 or 1)
        raise type(exc)(f"{where}: the fleet runs the plan's configuration, and {exc}") from None


def note(best: Any, named: list[str]) -> str:
    """What the fleet took from the plan, for the result's notes."""
    taken = ", ".join(named)
    how = {"simulation": "the serving simulation", "fluid": "the fluid model"}.get(best.sized_by, best.sized_by or "the plan")
    return (f"fleet: {taken} from the plan's cheapest configuration a fleet replica can take ({best.label}, "
            f"{best.replicas} replica{'' if best.replicas == 1 else 's'} sized by {how}; the plan is searched "
            "without pipeline stages, drafters or separate pools, which a fleet replica does not run); name them in "
            "the fleet section to run others")
