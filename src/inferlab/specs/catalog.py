"""The built-in catalogs: ``hardware_specs/*.yaml`` and ``model_specs/*.yaml``.

The folders ship inside the wheel as package data and are found with
:mod:`importlib.resources`; in a source checkout (editable install) they are read
from the repository root. A parsed spec is kept in the on-disk memo
(:mod:`inferlab.disk_cache`), so a later process reads it back without YAML, validation
or pint.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..disk_cache import file_key, memo
from ..errors import SpecError, UnknownNameError
from .card import ModelCard
from .hardware import HardwareSpec
from .model import ModelSpec
from .validation import format_validation_error, read_yaml_mapping

_CARD_KEYS = ("hf_repo", "aliases", "sources", "config_source", "config_verbatim", "total_params", "active_params", "notes")


def _folder(name: str) -> Traversable:
    packaged = resources.files("inferlab") / name
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[3] / name  # src/inferlab/specs -> repository root
    if checkout.is_dir():
        return checkout
    raise SpecError(f"the {name}/ catalog is missing from this installation; reinstall inferlab")


def _read_yaml(path: Traversable | Path, what: str) -> dict[str, Any]:
    return read_yaml_mapping(path, what)


def parse_hardware(data: dict[str, Any], what: str = "hardware spec") -> HardwareSpec:
    """Validate a parsed hardware YAML mapping into a :class:`HardwareSpec`.

    Raises
    ------
    SpecError
        Listing every problem with its field path.
    """
    if not isinstance(data, dict):
        raise SpecError(f"{what}: expected a mapping of fields, got {type(data).__name__}")
    try:
        return HardwareSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(f"{what}: {format_validation_error(exc)}") from None


def parse_model(data: dict[str, Any], what: str = "model spec") -> ModelSpec:
    """Validate a parsed model YAML mapping (card fields plus ``config:``) into a :class:`ModelSpec`."""
    if not isinstance(data, dict):
        raise SpecError(f"{what}: expected a mapping of fields, got {type(data).__name__}")
    allowed = {"id", "name", "config", *_CARD_KEYS}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(f"{what}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    for key in ("id", "name", "config"):
        if key not in data:
            raise SpecError(f"{what}: required field {key!r} is missing")
    if not isinstance(data["config"], dict):
        raise SpecError(f"{what}: 'config' must be a mapping of Hugging Face config.json fields")
    try:
        card = ModelCard.model_validate({k: data[k] for k in _CARD_KEYS if k in data})
    except ValidationError as exc:
        raise SpecError(f"{what}: {format_validation_error(exc)}") from None
    spec = ModelSpec.from_hf_config(data["config"], id=str(data["id"]), name=str(data["name"]))
    return spec.model_copy(update={"card": card})


@functools.cache
def _hardware_files() -> dict[str, Traversable]:
    return {p.name[:-5]: p for p in _folder("hardware_specs").iterdir() if p.name.endswith(".yaml")}


@functools.cache
def _model_files() -> dict[str, Traversable]:
    return {p.name[:-5]: p for p in _folder("model_specs").iterdir() if p.name.endswith(".yaml")}


def hardware_ids() -> list[str]:
    """Ids of every built-in hardware spec, sorted."""
    return sorted(_hardware_files())


def model_ids() -> list[str]:
    """Ids of every built-in model spec, sorted (aliases not included)."""
    return sorted(_model_files())


class AmbiguousNameError(UnknownNameError):
    """A chip's name with several form factors in the catalog (``h100``: ``h100-nvl``,
    ``h100-pcie``, ``h100-sxm``); ``suggestions`` holds every one of them."""

    def __init__(self, kind: str, name: str, allowed: Iterable[str], candidates: Iterable[str]):
        self.candidates = sorted(candidates)
        super().__init__(kind, name, allowed)

    def _message(self) -> str:
        self.suggestions = self.candidates
        return (f"{self.kind} {self.name!r} is ambiguous; did you mean "
                + " or ".join(repr(c) for c in self.candidates) + "? Give the full id.")


#: Suffixes that name a chip's form factor, not another part: a chip with one of them in the
#: catalog is that part (``h200`` -> ``h200-sxm``). Others name a sibling (``rtx-3090`` vs
#: ``rtx-3090-ti``, ``m2`` vs ``m2-ultra``, ``a100-sxm`` vs its 80 GB model), never read for it.
FORM_FACTORS = ("sxm", "pcie", "nvl")


def short_hardware_names() -> set[str]:
    """The short names :func:`hardware_id` completes: catalog ids less their form factor (``h200``)."""
    return {i.rsplit("-", 1)[0] for i in _hardware_files() if i.rsplit("-", 1)[-1] in FORM_FACTORS}


def hardware_id(name: str) -> str:
    """The catalog id ``name`` stands for: the id itself (any case), else the one id that is
    ``name`` with a form factor (:data:`FORM_FACTORS`: ``h200`` -> ``h200-sxm``).

    Only a form factor: ``rtx-3090`` is not an ``rtx-3090-ti``, ``m2`` not an ``m2-ultra`` nor
    ``a100-sxm`` the 80 GB part (a 40 GB one exists): a sibling part read silently as another
    would give another GPU's numbers.

    Raises
    ------
    UnknownNameError
        With did-you-mean suggestions when no id matches; :class:`AmbiguousNameError` (a
        subclass) naming every candidate when several form factors of ``name`` are (``h100``).
    """
    ids = _hardware_files()
    if not isinstance(name, str):
        raise UnknownNameError("hardware", repr(name), ids)
    key = name.strip().lower()
    if key in ids:
        return key
    begun = [f"{key}-{form}" for form in FORM_FACTORS if f"{key}-{form}" in ids]
    if len(begun) == 1:
        return begun[0]
    if begun:
        raise AmbiguousNameError("hardware", name, ids, begun)
    model = key in _model_files() or key in _aliases()
    raise UnknownNameError("hardware", name, ids, f"{name!r} is a model in the catalog, not hardware: check the "
                                                  "order of the arguments" if model else "")


def load_hardware(id: str) -> HardwareSpec:
    """Load a built-in hardware spec by id (e.g. ``"h100-sxm"``, any case, or a unique short
    name, ``"h200"``: :func:`hardware_id`), or a MIG slice of one as ``"h100-sxm:3g.40gb"``
    (:mod:`inferlab.specs.mig`).

    Raises
    ------
    UnknownNameError
        With did-you-mean suggestions when ``id`` is not in the catalog.
    """
    if not isinstance(id, str):
        raise UnknownNameError("hardware", repr(id), _hardware_files())
    key = id.strip().lower()
    if ":" in key:  # a MIG slice, "h100-sxm:3g.40gb"
        base, _, profile = key.partition(":")
        return _load_slice(hardware_id(base), profile)
    return _load_hardware_id(hardware_id(key))


@functools.cache
def _load_hardware_id(key: str) -> HardwareSpec:
    path = _hardware_files()[key]
    return memo("hardware", file_key(path), lambda: _parse_hardware_file(key, path))


def _parse_hardware_file(key: str, path: Traversable) -> HardwareSpec:
    spec = parse_hardware(_read_yaml(path, f"hardware_specs/{key}.yaml"), f"hardware_specs/{key}.yaml")
    if spec.id != key:
        raise SpecError(f"hardware_specs/{key}.yaml: id {spec.id!r} differs from the file name")
    return spec


@functools.cache
def _aliases() -> dict[str, str]:
    files = _model_files()
    return memo("aliases", "\n".join(file_key(files[k]) for k in sorted(files)), _read_aliases)


def alias_ids() -> dict[str, str]:
    """Every alias a model spec lists (lower case) -> its catalog id."""
    return dict(_aliases())


def _read_aliases() -> dict[str, str]:
    out: dict[str, str] = {}
    for key, path in _model_files().items():
        data = _read_yaml(path, f"model_specs/{key}.yaml")
        for alias in data.get("aliases") or ():
            out[str(alias).lower()] = key
    return out


@functools.cache
def _load_model_id(key: str) -> ModelSpec:
    path = _model_files()[key]
    return memo("model", file_key(path), lambda: _parse_model_file(key, path))


def _parse_model_file(key: str, path: Traversable) -> ModelSpec:
    spec = parse_model(_read_yaml(path, f"model_specs/{key}.yaml"), f"model_specs/{key}.yaml")
    if spec.id != key:
        raise SpecError(f"model_specs/{key}.yaml: id {spec.id!r} differs from the file name")
    return spec


def load_model(name: str | Path) -> ModelSpec:
    """Load a model by catalog id or alias, or from a ``config.json`` path or folder.

    Raises
    ------
    UnknownNameError
        With did-you-mean suggestions when ``name`` is neither an id, an alias nor a file.
    """
    if not isinstance(name, (str, Path)):
        raise UnknownNameError("model", repr(name), _model_files())
    text = str(name).strip()
    key = text.lower()
    files = _model_files()
    if key in files:
        return _load_model_id(key)
    if key in _aliases():
        return _load_model_id(_aliases()[key])
    if isinstance(name, Path) or text.endswith(".json") or text.startswith((".", "~")) or "/" in text or "\\" in text:
        path = Path(text).expanduser()
        if not path.exists():
            if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", text) and not text.endswith(".json"):
                # a Hugging Face repository name, as engines and drafters are named: its catalog model
                try:
                    return load_model(catalog_model(text)[0])
                except SpecError as exc:
                    raise SpecError(str(exc).replace("engine model", "model", 1)) from None
            raise SpecError(f"no such file or folder {text!r} (and it is not a catalog id or alias)")
        return ModelSpec.from_hf_config(path)
    folder = _local_folder(text)
    if folder is not None:  # a bare folder name, "mymodel": as "mymodel/config.json"
        if not (folder / "config.json").is_file():
            raise SpecError(f"model {text!r}: the folder {text} holds no config.json; give a folder with a Hugging "
                            "Face config.json, the file itself, or a catalog id (inferlab models list)")
        return ModelSpec.from_hf_config(folder)
    gpu = text.lower() in _hardware_files() or any(f"{text.lower()}-{f}" in _hardware_files() for f in FORM_FACTORS)
    raise UnknownModelError("model", text, files, f"{text!r} is hardware in the catalog, not a model: check the order "
                                                  "of the arguments" if gpu else "")


def _local_folder(text: str) -> Path | None:
    """``text`` as a folder in the working directory, or None when there is none (or it cannot name one)."""
    try:
        path = Path(text)
        return path if text and path.is_dir() else None
    except (OSError, ValueError):  # a name no file system takes (a NUL byte, too long)
        return None


class UnknownModelError(UnknownNameError):
    """A model name that is neither a catalog id, an alias nor a local ``config.json`` or its folder."""

    def _message(self) -> str:
        if self.hint:
            return super()._message()
        return (super()._message().rstrip(".") + "; or give a path to a Hugging Face config.json, or to the "
                "folder holding one (e.g. ./my-model or ./my-model/config.json).")


@functools.lru_cache(maxsize=128)
def _load_slice(base: str, profile: str) -> HardwareSpec:
    """The view of MIG ``profile`` on the catalog GPU ``base`` (cached: specs are immutable)."""
    from .mig import mig_view

    return mig_view(load_hardware(base), profile)


# Hugging Face repository names on an engine's command line, mapped to catalog ids.
#
# An engine is launched on a checkpoint (``meta-llama/Llama-3.1-8B-Instruct``); inferlab
# models an architecture (``llama-3.1-8b``). A name maps when the catalog's model card
# names it (``hf_repo`` or an alias, any case), or when it does after dropping the
# organisation and one fine-tuning suffix (``-Instruct``, ``-it``, ``-Chat``, ``-hf``,
# ``-Base``, ``-Thinking``): a fine-tune has its base model's architecture, so the same step costs.
# A local folder or ``config.json`` is read as it is. Anything else is refused with the
# closest catalog names.

#: Suffixes of fine-tuned releases that keep the base model's architecture.
_VARIANT = re.compile(r"-(instruct|it|chat|hf|base|thinking)$", re.IGNORECASE)
#: A quantized checkpoint's name ends with its format (Qwen3-235B-A22B-FP8, ...-Instruct-AWQ-INT4,
#: nvidia/DeepSeek-R1-0528-FP4), Red Hat's as ``-quantized.w4a16``/``-quantized.w8a8`` (INT4 weights;
#: INT8 weights and activations), a re-release with a version after it (nvidia/DeepSeek-R1-0528-FP4-v2):
#: suffix -> inferlab's weight format.
_QUANT_SUFFIX = re.compile(r"-(?:quantized\.)?(fp8(?:-dynamic|-static|-block)?|nvfp4|fp4|mxfp4|awq(?:-int4)?|gptq(?:-int4)?"
                           r"|int4|w4a16|int8|w8a8)(?:-v\d+)?$", re.IGNORECASE)
_SUFFIX_FORMAT = {"fp8": "fp8", "nvfp4": "nvfp4", "fp4": "nvfp4", "mxfp4": "mxfp4", "awq": "int4", "gptq": "int4",
                  "int4": "int4", "w4a16": "int4", "int8": "int8", "w8a8": "int8"}
#: A dated revision of one architecture (DeepSeek-R1-0528, DeepSeek-V3-0324 where no card names it).
_REVISION = re.compile(r"-(\d{4})$")
#: An organisation's name before the model's (RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8).
_MAKER = re.compile(r"^meta-")


@functools.cache
def _names() -> dict[str, str]:
    """Every name a catalog card gives a model (lower case, with and without organisation) -> id."""
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
    stem = low.rsplit("/", 1)[-1]
    for strip in (_QUANT_SUFFIX, _REVISION, _VARIANT, _MAKER):  # each form a repository adds
        stem = strip.sub("", stem)
        for candidate in (stem, _VARIANT.sub("", stem)):
            if candidate in names:
                fmt = checkpoint_format(name)
                return names[candidate], (f"{name} taken as {names[candidate]}"
                                          + (f" in {fmt} (the format its name states)" if fmt else "")
                                          + " (a quantized or revised checkpoint keeps its base model's architecture)")
    path = Path(name).expanduser()
    if path.is_dir() and (path / "config.json").is_file() or path.suffix == ".json" and path.is_file():
        return str(path), None
    close = difflib.get_close_matches(low, list(names), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "."
    raise SpecError(f"engine model {name!r} is not a catalog model{hint} Give a catalog id (inferlab models list), "
                    "a repository a model card names, or a local folder with its config.json")


def checkpoint_format(name: str) -> str | None:
    """The weight format a repository's name states (``Qwen/Qwen3-235B-A22B-FP8``: fp8), or None."""
    match = _QUANT_SUFFIX.search(str(name).strip().rstrip("/"))
    return _SUFFIX_FORMAT[match.group(1).lower().split("-")[0]] if match else None


def hf_repo(model: str) -> str:
    """The repository to launch a catalog model from (its card's ``hf_repo``), else ``model`` as it is."""
    if model.lower() in model_ids():
        card = load_model(model).card
        if card is not None and card.hf_repo:
            return card.hf_repo
    return model


@functools.cache
def architectures(model: str) -> tuple[str, ...]:
    """The ``architectures`` of a catalog model's ``config.json`` (by id or alias), as its spec file
    keeps them; () for a name the catalog does not hold. Engines key some behaviour on them (SGLang
    treats ``Gemma3ForConditionalGeneration`` as multimodal, for one)."""
    key = str(model).strip().lower()
    key = _aliases().get(key, key)
    path = _model_files().get(key)
    if path is None:
        return ()
    config = _read_yaml(path, f"model_specs/{key}.yaml").get("config") or {}
    return tuple(str(a) for a in config.get("architectures") or ())
