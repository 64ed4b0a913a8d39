"""Names as a user lists them (a scenario's models and GPUs), read as the catalog ids they
stand for where the catalog knows them, else kept as given for the check that loads them to
say what is wrong: two names of one entry then read as one (``h200`` and ``h200-sxm``;
``meta-llama/Llama-3.1-8B`` and ``llama-3.1-8b``)."""

from __future__ import annotations

from typing import Any

from ..errors import UnknownNameError
from .catalog import alias_ids, hardware_id, model_ids


def hardware_id_or_name(name: Any) -> Any:
    """:func:`~.catalog.hardware_id` of ``name`` (a MIG profile after ``:`` kept), or ``name`` as
    given where the catalog reads it as no one id."""
    if not isinstance(name, str):
        return name
    base, colon, profile = name.partition(":")
    try:
        return hardware_id(base) + colon + profile
    except UnknownNameError:
        return name


def model_id_or_name(name: Any) -> Any:
    """The catalog id of a model named by its id or an alias (``meta-llama/Llama-3.1-8B`` ->
    ``llama-3.1-8b``), or ``name`` as given (a path, an unknown name)."""
    if not isinstance(name, str):
        return name
    low = name.strip().lower()
    return low if low in model_ids() else alias_ids().get(low, name)
