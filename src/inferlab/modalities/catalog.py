"""Model specs of the modalities: ``catalog/<id>.yaml``, one file per model.

Each file names its kind (``embedding``, ``diffusion``, ...), the Hugging Face repository, the
config it was read from (source with URL) and the config fields themselves under their
Hugging Face names, so an architecture module reads them without renaming.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, Mapping

from ..errors import InferlabError, SpecError, UnknownNameError
from ..specs.validation import read_yaml_mapping

KINDS = ("embedding", "diffusion", "vision", "speech", "tts")


@dataclass(frozen=True)
class ModalitySpec:
    """One catalog model of a modality kind.

    Attributes
    ----------
    id, name, kind : str
    hf_repo : str
    config : mapping
        Config fields under their Hugging Face names (read-only).
    sources : mapping of str to mapping
        Documents the fields were read from (``title``, ``kind``, ``url``).
    config_source : str
        Key of ``sources`` the config comes from.
    notes : tuple of str
    """

    id: str
    name: str
    kind: str
    hf_repo: str
    config: Mapping[str, Any]
    sources: Mapping[str, Mapping[str, Any]]
    config_source: str
    notes: tuple[str, ...] = ()

    def field(self, key: str) -> Any:
        """A required config field; a missing one is a :class:`SpecError` naming the file."""
        if key not in self.config:
            raise SpecError(f"modalities catalog {self.id}.yaml: config field {key!r} is missing")
        return self.config[key]


@functools.cache
def _files() -> dict[str, Any]:
    folder = resources.files("inferlab.modalities") / "catalog"
    return {p.name[:-5]: p for p in folder.iterdir() if p.name.endswith(".yaml")}


def modality_ids(kind: str | None = None) -> list[str]:
    """Ids of the catalog models, of one ``kind`` when given, sorted."""
    return sorted(i for i in _files() if kind is None or load_modality(i).kind == kind)


@functools.cache
def _load(key: str) -> ModalitySpec:
    path = _files()[key]
    what = f"modalities catalog {key}.yaml"
    data = read_yaml_mapping(path, what)
    for required in ("id", "name", "kind", "hf_repo", "sources", "config_source", "config"):
        if required not in data:
            raise SpecError(f"{what}: required field {required!r} is missing")
    if data["id"] != key:
        raise SpecError(f"{what}: id {data['id']!r} differs from the file name")
    if data["kind"] not in KINDS:
        raise UnknownNameError("model kind", str(data["kind"]), KINDS)
    if data["config_source"] not in data["sources"]:
        raise SpecError(f"{what}: config_source {data['config_source']!r} is not one of its sources")
    return ModalitySpec(str(data["id"]), str(data["name"]), str(data["kind"]), str(data["hf_repo"]),
                        MappingProxyType(dict(data["config"])), MappingProxyType(dict(data["sources"])),
                        str(data["config_source"]), tuple(data.get("notes") or ()))


#: The command that runs each kind of model, and how a message names the kind.
COMMANDS = {"diffusion": "diffuse", "embedding": "embed", "speech": "transcribe", "tts": "speak", "vision": "vlm"}
KIND_PHRASES = {"diffusion": "an image or video diffusion", "embedding": "an embedding", "speech": "a speech-recognition",
          "tts": "a text-to-speech", "vision": "a vision-language"}


def load_modality(name: str, kind: str | None = None) -> ModalitySpec:
    """A catalog model by id (any case), checked to be of ``kind`` when given.

    Raises
    ------
    UnknownNameError
        With did-you-mean among the models of that kind.
    """
    key = str(name).strip().lower()
    if key not in _files():
        allowed = [i for i in _files() if kind is None or _load(i).kind == kind]
        if kind is not None and _is_language_model(key):
            raise SpecError(f"{name} is a language model of the LLM catalog (inferlab estimate, serve, on-device), "
                            f"not {KIND_PHRASES.get(kind, kind)} one; {kind} models: {', '.join(sorted(allowed))}")
        raise UnknownNameError(f"{kind or 'modality'} model", str(name), allowed)
    spec = _load(key)
    if kind is not None and spec.kind != kind:
        raise SpecError(f"{spec.id} is {KIND_PHRASES.get(spec.kind, spec.kind)} model (inferlab "
                        f"{COMMANDS.get(spec.kind, 'modalities')}), not {KIND_PHRASES.get(kind, kind)} one; "
                        f"{kind} models: {', '.join(i for i in sorted(_files()) if _load(i).kind == kind)}")
    return spec


def _is_language_model(key: str) -> bool:
    """Whether ``key`` is a catalog id or alias of the LLM catalog."""
    from ..specs.catalog import load_model, model_ids

    if key in model_ids():
        return True
    try:  # an alias (llama-3.1-8b-instruct); a path or a repository is not looked up
        return "/" not in key and "\\" not in key and not key.endswith(".json") and bool(load_model(key))
    except InferlabError:
        return False
