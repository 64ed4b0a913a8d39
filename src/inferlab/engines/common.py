"""What the three engines' readers and writers share: the model, the speculation methods, the shell form."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import InferlabError, SpecError
from .command_line import choice
from .launch import Rendered, Speculation
from ..specs.catalog import catalog_model, hf_repo

#: Written where a drafter checkpoint is needed that inferlab does not know; read back as none.
DRAFTER_PLACEHOLDER = "DRAFTER_CHECKPOINT"
#: 16-bit and 32-bit dtype spellings engines share.
DTYPES = {"auto": None, "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
          "float32": "fp32", "float": "fp32"}
DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def launched_model(engine: str, flags: Any) -> tuple[str, str, list[str], str | None]:
    """(catalog id, name as written, leftover positionals, note) of the model a command launches:
    its ``--model`` (``--model-path``) flag's, else its first positional word (``flags``: the
    command's :class:`~.command_line.Flags`).

    Leftover words are the values of flags inferlab does not know (``--cuda-graph-bs 1 2 4``
    gives an unknown flag its first value only): listed as unknown, as before, unless one names
    a catalog model, which is a second model.

    Raises
    ------
    SpecError
        No model, or two (a positional beside ``--model`` naming another, or a second
        positional model): the engine serves one and refuses or ignores the other, so inferlab
        does not pick one.
    """
    words, named = list(flags.positionals), flags.get("model")
    flag = flags.flag("model") if named is not None else "--model"
    name = named if named is not None else (words.pop(0) if words else None)
    if name is None:
        # an unknown flag before the model takes it as its value: say so (inferlab cannot tell its switches)
        took = next((e.split()[:2] for e in flags.unknown if len(e.split()) > 1 and "/" in e.split()[1]), None)
        hint = (f": {took[0]}, a flag inferlab does not know, took {took[1]} as its value; put the model first"
                if took else "; add it (e.g. meta-llama/Llama-3.1-8B-Instruct)")
        raise SpecError(f"{engine}: the command names no model{hint}")
    model, note = catalog_model(name)
    for word in list(words):
        other = _catalog_id(word)
        if other is not None and other == model and named is not None and word == words[0]:
            words.remove(word)  # the same model written both ways
        elif other is not None:
            where = f" ({flag})" if named is not None else ""
            raise SpecError(f"{engine}: the command names two models, {word} and {name}{where}; give one")
    return model, name, words, note


def _catalog_id(word: str) -> str | None:
    """The catalog model a word names (an id, an alias, a repository a card names), else None."""
    if "=" in word or "://" in word or word.startswith((".", "/", "~")):
        return None
    try:
        return catalog_model(word)[0]
    except InferlabError:
        return None


def is_moe(model: str) -> bool:
    """Whether the model routes tokens to experts."""
    from ..specs.catalog import load_model

    return load_model(model).moe is not None


def drafter(name: str | None) -> str | None:
    """A drafter checkpoint as written, the placeholder read as none."""
    return None if name in (None, "", DRAFTER_PLACEHOLDER) else name


def speculation(engine: str, where: str, method: str, k: int, model: str | None,
                named: str | None = None, length: str = "") -> Speculation:
    """A :class:`Speculation` from inferlab's method name, refusing a bad draft length or missing drafter
    (``named``: the method as the command wrote it, which tells an EAGLE head's generation;
    ``length``: the field or flag that gives the draft length, named when it is missing or bad)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        field = f" ({length})" if length else ""
        raise SpecError(f"{engine}: {where}: the draft length{field} must be a whole number >= 1, got {k!r}")
    if method == "draft":
        if drafter(model) is None:
            raise SpecError(f"{engine}: {where}: a draft model speculates with a model; name it")
        try:
            return Speculation("draft", k, draft_model=catalog_model(str(model))[0])
        except InferlabError:  # (the catalog's message speaks of the engine's model and suggests those)
            raise SpecError(f"{engine}: {where}: the draft model {model!r} is not a catalog model, so its steps "
                            "cannot be priced; give a catalog id (inferlab models list) or a local folder with its "
                            "config.json") from None
    eagle3 = {"eagle": False, "eagle3": True}.get(str(named).lower()) if method == "eagle" else None
    return Speculation(method, k, drafter=drafter(model), eagle3=eagle3)  # type: ignore[arg-type]


def eagle3_of(spec: Speculation) -> bool:
    """Whether to write an EAGLE head as EAGLE-3: as the command named it, else from the head's name
    (EAGLE-3 unless it says plain EAGLE)."""
    if spec.eagle3 is not None:
        return spec.eagle3
    head = (spec.drafter or "").lower()
    return not ("eagle" in head and "eagle3" not in head)


def checkpoint_of(launch) -> str:
    """The checkpoint to launch: the one the command named, else the catalog card's repository."""
    return launch.checkpoint or hf_repo(launch.model)


def drafter_for(spec: Speculation) -> str:
    """The checkpoint to name for the drafter: the draft model's repository, the head's, or the placeholder."""
    if spec.draft_model:
        return hf_repo(spec.draft_model)
    return spec.drafter or DRAFTER_PLACEHOLDER


def shell_form(engine: str, words: Iterable[str], files: dict[str, str], unexpressed: list[tuple[str, str]],
               notes: Iterable[str] = ()) -> Rendered:
    """The plain shell form: comments, here-documents, then the command, one flag per line."""
    lines = [f"# inferlab: {engine} cannot express {what}: {why}" for what, why in unexpressed]
    lines += [f"# inferlab: {n}" for n in notes]
    for path, text in files.items():
        lines += [f"cat > {path} <<'EOF'", text.rstrip("\n"), "EOF"]
    words = [shlex.quote(w) for w in words]
    head, rest = [], words
    while rest and not rest[0].startswith("--"):
        head.append(rest.pop(0))
    parts, i = [" ".join(head)], 0
    while i < len(rest):
        j = i + 1
        while j < len(rest) and not rest[j].startswith("--"):
            j += 1
        parts.append(" ".join(rest[i:j]))
        i = j
    lines.append(" \\\n  ".join(parts))
    return Rendered(engine, "\n".join(lines) + "\n", tuple(unexpressed))


def kv_spelling_note(flags) -> str | None:
    """A note when the KV cache is FP8 E5M2: inferlab holds one FP8 KV format (the bytes, and so
    the speed, are those of E4M3), so a rendered command says E4M3; E5M2 keeps two mantissa bits
    to E4M3's three, the coarser cache for the same bytes."""
    raw = str(flags.get("kv_cache", "")).lower()
    if raw != "fp8_e5m2":
        return None
    return (f"{flags.flag('kv_cache')} fp8_e5m2 read as fp8: the bytes and speed of fp8_e4m3, which a rendered "
            "command names (e5m2 keeps 2 mantissa bits to e4m3's 3: a coarser KV cache, not modelled)")


def unmodelled_notes(unknown: Iterable[str], what: dict[str, str]) -> list[str]:
    """A note for each unknown flag (as written, with its value) that ``what`` names: what it would
    change that inferlab does not model. The flag stays unknown: a note, not an invented effect."""
    return [f"{entry}: {what[entry.split()[0]]}" for entry in unknown if entry.split()[0] in what]


def source_flags(flags, precision_keys: Iterable[str]) -> dict[str, str]:
    """Field -> the flag that set it, with ``precision`` the first flag that set a format."""
    out = {key: flag for key, (flag, _) in flags.values.items()}
    for key in precision_keys:
        if key in flags.values:
            out.setdefault("precision", flags.flag(key))
    if "max_num_batched_tokens" in out:
        out.setdefault("max_num_tokens", out["max_num_batched_tokens"])
    return out


#: A linear-attention state's format as SGLang's ``--mamba-ssm-dtype`` and vLLM's
#: ``--mamba-ssm-cache-dtype`` name it (vLLM's ``auto``: the config's, else the model's dtype).
STATE_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
STATE_NAMES = {fmt: name for name, fmt in STATE_DTYPES.items()}


#: ``--quantization`` methods that load weights stored quantized that way (AWQ's and GPTQ's packed
#: integers, a ModelOpt checkpoint's scales) and quantize nothing at load, unlike ``fp8``.
PREQUANTIZED = ("awq", "awq_marlin", "gptq", "gptq_marlin", "modelopt", "modelopt_fp4")


def stored_format(model: str, written: str) -> str | None:
    """The format a launched checkpoint stores its (routed experts', where only they are
    quantized) weights in: as its repository's name says (``-FP8``, ``-AWQ``), else as the
    catalog model's released checkpoint (gpt-oss: mxfp4); None for 16-bit weights."""
    from ..specs.catalog import checkpoint_format

    named = checkpoint_format(written)
    if named is not None:
        return named
    spec = known_model(model)
    ckpt = getattr(spec, "checkpoint", None)
    if ckpt is None:
        return None
    fmt = ckpt.moe_weights if ckpt.weights in DTYPE_NAMES and ckpt.moe_weights else ckpt.weights
    return None if fmt in DTYPE_NAMES else fmt


def check_quantization(engine: str, flag: str, method: str, weights: str | None, model: str, written: str,
                       notes: list[str]) -> bool:
    """A ``--quantization`` against the checkpoint it loads: another method than a quantized
    checkpoint's own is refused (vLLM's and SGLang's model config raise on the mismatch); a
    method that needs weights stored its way on a 16-bit checkpoint is said in ``notes``.
    True where it names the checkpoint's own method: the checkpoint's formats are read (its
    block scales, the tensors it leaves in 16 bits), as without the flag.

    Raises
    ------
    SpecError
        ``method`` quantizes to other weights than the checkpoint stores.
    """
    if weights is None:  # compressed-tensors: the checkpoint's own
        return False
    stored = stored_format(model, written)
    if stored is not None and _family(weights) != _family(stored):
        raise SpecError(f"{engine}: {flag} {method} asks for {weights} weights, but {written} stores {stored}: "
                        f"{engine} refuses a method other than the checkpoint's; drop {flag} (the checkpoint's is read)")
    if stored is None and method in PREQUANTIZED:
        notes.append(f"{flag} {method} loads weights stored quantized that way, which {written} (16-bit) is not: "
                     f"read as such a checkpoint of the same model; launch one")
    return stored is not None


def checkpoint_notes(launch, words: list[str]) -> list[str]:
    """What a written command's ``--quantization`` needs of its checkpoint: a method that loads
    weights stored its way (AWQ, GPTQ, ModelOpt) beside a 16-bit checkpoint is refused by the
    engine at load, so the command says to launch such a checkpoint."""
    if "--quantization" not in words:
        return []
    method = words[words.index("--quantization") + 1]
    written = checkpoint_of(launch)
    stored = stored_format(launch.model, written)
    if stored is None and method in PREQUANTIZED:
        return [f"--quantization {method} loads a checkpoint stored quantized that way: replace {written} (16-bit) "
                "with one"]
    if stored is not None and _family(launch.weights) != _family(stored):
        return [f"--quantization {method}: replace {written} (stored in {stored}) with a checkpoint stored in "
                f"{launch.weights}; the engine refuses a method other than its checkpoint's"]
    return []


def _family(fmt: str | None) -> str | None:
    """A weight format's family as a quantization method names it (block-scaled FP8 is FP8)."""
    return "fp8" if fmt and fmt.startswith("fp8") else fmt


def known_model(model: str | None) -> Any:
    """The catalog :class:`~inferlab.specs.model.ModelSpec` a command launches, None for a model
    inferlab does not know (each caller says what an unknown model is taken to do)."""
    from ..specs.catalog import load_model

    try:
        return load_model(model) if model else None
    except InferlabError:
        return None


def state_format(engine: str, flags, model: str, notes: list, names: dict) -> str | None:
    """The linear-attention state format a command's flag sets (``names``: its values), None where
    it sets none, or for a model that keeps no state (the engine ignores the flag: a note)."""
    if "state" not in flags.values:
        return None
    fmt = choice(engine, flags.flag("state"), flags.get("state"), names)
    spec = known_model(model)  # a model inferlab does not know: the flag stands
    if fmt is not None and spec is not None and spec.linear_attention is None:
        notes.append(f"{flags.flag('state')} {flags.get('state')}: {model} keeps no linear-attention state; {engine} "
                     "ignores it")
        return None
    return fmt


def state_words(launch, flag: str) -> list[str]:
    """``flag`` with the launch's linear-attention state format (nothing where it sets none)."""
    return [flag, STATE_NAMES[launch.state]] if launch.state is not None else []


def precision_words(launch, missing: list, quant_names: dict, kv_names: dict, kv_allowed: str,
                    checkpoint_hint: str = "") -> list[str]:
    """``--quantization``, ``--kv-cache-dtype`` and ``--dtype`` of a launch, as vLLM and SGLang
    spell them (``quant_names``: (weights, activations) -> value; ``kv_names``: format -> value);
    what no value expresses goes to ``missing``."""
    out = []
    pair = (launch.weights, launch.activations)
    if pair in quant_names:
        out += ["--quantization", quant_names[pair]]
    elif pair != (None, None):
        missing.append(("weights", f"weights {launch.weights} with activations {launch.activations}: no --quantization "
                                   f"value quantizes to them; serve a checkpoint stored that way{checkpoint_hint}"))
    if launch.kv_cache in kv_names:
        out += ["--kv-cache-dtype", kv_names[launch.kv_cache]]
    elif launch.kv_cache is not None:
        missing.append(("kv_cache", f"a {launch.kv_cache} KV cache (--kv-cache-dtype: {kv_allowed})"))
    if launch.dtype is not None:
        out += ["--dtype", DTYPE_NAMES[launch.dtype]]
    return out


def read_yaml_mapping(engine: str, where: str, path: str, files: dict[str, str], what: str) -> dict[str, Any]:
    """The mapping a YAML file of options holds: a here-document pasted before the command
    (``files``), else the file at ``path``; one line naming ``where`` when it cannot be read."""
    import yaml

    if path in files:
        text = files[path]
    else:
        try:
            text = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(f"{engine}: {where}: cannot read it ({exc.strerror}); give its path, or paste it before the "
                            "command as a here-document (cat > FILE <<'EOF' ... EOF)") from None
        except UnicodeDecodeError as exc:
            raise SpecError(f"{engine}: {where}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise SpecError(f"{engine}: {where} is not YAML: {' '.join(str(exc).split())[:200]}") from None
    except (ValueError, RecursionError):  # an integer past 4,300 digits, nesting too deep
        raise SpecError(f"{engine}: {where} holds a value too long or nested too deep to be an engine setting") \
            from None
    if not isinstance(data, dict):
        raise SpecError(f"{engine}: {where} must hold a mapping of {what}, got {type(data).__name__}")
    return data
