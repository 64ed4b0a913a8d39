"""Hugging Face repository names on an engine's command line, mapped to catalog ids.

An engine is launched on a checkpoint (``meta-llama/Llama-3.1-8B-Instruct``); inferlab
models an architecture (``llama-3.1-8b``). A name maps when the catalog's model card
names it (``hf_repo`` or an alias, any case), or when it does after dropping the
organisation and one fine-tuning suffix (``-Instruct``, ``-it``, ``-Chat``, ``-hf``,
``-Base``): a fine-tune has its base model's architecture, so the same step costs.
A local folder or ``config.json`` is read as it is. Anything else is refused with the
closest catalog names.
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path

from ..errors import SpecError

#: Suffixes of fine-tuned releases that keep the base model's architecture.
_VARIANT = re.compile(r"-(instruct|it|chat|hf|base)$", re.IGNORECASE)


@functools.cache
def _names() -> dict[str, str]:
    """Every name a catalog card gives a model (lower case, with and without organisation) -> id."""
    from ..specs.catalog import load_model, model_ids

    out: dict[str, str] = {}
    for key in model_ids():
        card = load_model(key).card
        names = [key, *(card.aliases if card else ()), *([card.hf_repo] if card and card.hf_repo else [])]
        for name in names:
            low = name.lower()
            out.setdefault(low, key)
            out.setdefault(low.rsplit("/", 1)[-1], key)
    return out


def catalog_model(name: str) -> tuple[str, str | None]:
    """The catalog id (or config path) of the model an engine is launched on, and a note
    when it was reached through a fine-tuning suffix (None when named as it is).

    Raises
    ------
    SpecError
        With the closest catalog names when the model is neither named by a card nor a
        local folder or config.json.
    """
    names = _names()
    low = name.strip().lower().rstrip("/")
    for candidate in (low, low.rsplit("/", 1)[-1]):
        if candidate in names:
            return names[candidate], None
    base = _VARIANT.sub("", low.rsplit("/", 1)[-1])
    if base in names:
        return names[base], f"{name} taken as {names[base]} (a fine-tune keeps its base model's architecture)"
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file() or path.suffix == ".json" and path.is_file():
        return str(path), None
    close = difflib.get_close_matches(low, list(names), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise SpecError(f"engine model {name!r} is not a catalog model{hint} Give a catalog id (inferlab models list), "
                    "a repository a model card names, or a local folder with its config.json")


def hf_repo(model: str) -> str:
    """The repository to launch a catalog model from (its card's ``hf_repo``), else ``model`` as it is."""
    from ..specs.catalog import load_model, model_ids

    if model.lower() in model_ids():
        card = load_model(model).card
        if card is not None and card.hf_repo:
            return card.hf_repo
    return model
