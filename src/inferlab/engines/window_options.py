"""How an engine keeps a windowed-attention model's KV, as a user or an engine command sets it.

Two settings of :class:`~inferlab.engines.scheduler.SchedulerConfig` (the arithmetic is
:mod:`~inferlab.engines.window_pool`'s):

* ``window_kv``: the windowed attention kinds (``sliding``, ``chunked``) whose KV the engine
  frees beyond their window; empty: every layer keeps every token in one pool. SGLang's
  ``--disable-hybrid-swa-memory`` and vLLM's ``--disable-hybrid-kv-cache-manager`` set it empty.
* ``window_pool_ratio``: the windowed layers' pool of their own, this many tokens for each token
  of the full layers' pool (SGLang's ``--swa-full-tokens-ratio``, "between 0 and 1", 0.8 by
  default). The engines that keep one pool have no such setting and refuse it.

TensorRT-LLM has neither flag: it sizes its pools by ``max_attention_window``, which sets the
windows themselves (the attention a model computes), not where their KV is kept.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..errors import InferlabError, SpecError, option_name
from .scheduler import WINDOW_KINDS, SchedulerConfig, default_scheduler

#: The scheduler fields these settings are (:data:`~inferlab.engines.scheduler.USER_LIMITS` holds them).
WINDOW_LIMITS = ("window_kv", "window_pool_ratio")
#: Words for an empty ``window_kv`` in text (the CLI's ``--window-kv none``).
_NONE = ("", "none")


def window_kinds(value: Any, where: str = "window_kv") -> tuple[str, ...]:
    """``value`` as a ``window_kv`` tuple in :data:`WINDOW_KINDS` order: a list or tuple of
    kinds, or text (``"sliding,chunked"``; ``"none"``: empty). One line naming ``where`` and
    what is allowed otherwise.

    >>> window_kinds("chunked,sliding"), window_kinds(["sliding"]), window_kinds("none")
    (('sliding', 'chunked'), ('sliding',), ())
    """
    if isinstance(value, str):
        text = value.strip().lower()
        items: list[Any] = [] if text in _NONE else [word.strip() for word in text.split(",")]
    elif isinstance(value, (tuple, list)):
        items = list(value)
    else:
        raise SpecError(f"{where} must be a list of windowed attention kinds ({', '.join(WINDOW_KINDS)}), or empty "
                        f"for every layer keeping every token; got {value!r:.60}")
    unknown = [item for item in items if item not in WINDOW_KINDS]
    if unknown:
        raise SpecError(f"{where}: {unknown[0]!r} is not a windowed attention kind; allowed: "
                        f"{', '.join(WINDOW_KINDS)} (the kinds whose KV the engine frees beyond the window), or none "
                        "(an empty list): every layer keeps every token")
    return tuple(kind for kind in WINDOW_KINDS if kind in items)


def window_ratio(value: Any, where: str = "window_pool_ratio") -> float:
    """``value`` as a ``window_pool_ratio``: a number above 0 and at most 1, else one line."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) \
        and 0.0 < value <= 1.0
    if not ok:
        raise SpecError(f"{where} must be a number above 0 and at most 1 (the windowed layers' tokens for each token "
                        f"of the full layers' pool, SGLang's --swa-full-tokens-ratio), got {value!r:.40}")
    return float(value)


def window_limits(base: SchedulerConfig, limits: dict[str, Any], engine: Any, custom: bool = False) -> dict[str, Any]:
    """``limits`` with their window settings checked and in canonical form, for ``engine``'s
    scheduler ``base``. A ``window_pool_ratio`` is refused where the engine keeps one pool (unless
    ``custom``: a scheduler the user wrote), and beside an empty ``window_kv``, which leaves no
    windowed layers' pool to size."""
    out = dict(limits)
    kinds, ratio = limits.get("window_kv"), limits.get("window_pool_ratio")
    if kinds is not None:
        out["window_kv"] = kinds = window_kinds(kinds, option_name("window_kv"))
    if ratio is None:
        return out
    out["window_pool_ratio"] = window_ratio(ratio, option_name("window_pool_ratio"))
    if base.window_pool_ratio is None and not custom:
        name = engine if isinstance(engine, str) else "this engine"
        raise SpecError(f"{option_name('window_pool_ratio')}: a pool of their own for the windowed layers is SGLang's "
                        f"(--swa-full-tokens-ratio); {name} keeps them in its one KV pool, a sequence holding at "
                        "most a window of each: drop it, or run SGLang")
    if kinds == ():
        raise SpecError(f"{option_name('window_pool_ratio')} {ratio:g} with an empty {option_name('window_kv')}: every "
                        "layer then keeps every token in one pool, and no windowed layers' pool is left to size (SGLang "
                        "ignores --swa-full-tokens-ratio beside --disable-hybrid-swa-memory); drop one of them")
    return out


def window_scheduler(engine: str, window_kv: Any = None, window_pool_ratio: Any = None) -> SchedulerConfig:
    """``engine``'s default scheduler with the window settings given (None: the engine's),
    checked by :func:`window_limits`: what the static estimate plans its memory with."""
    base = default_scheduler(engine)
    given = {k: v for k, v in window_limits(base, {"window_kv": window_kv, "window_pool_ratio": window_pool_ratio},
                                            engine).items() if v is not None}
    return replace(base, **given) if given else base


def windowed_kinds(model: Any) -> tuple[str, ...]:
    """The windowed attention kinds ``model`` has layers of, in :data:`WINDOW_KINDS` order.

    >>> from inferlab import load_model
    >>> windowed_kinds(load_model("gpt-oss-120b")), windowed_kinds(load_model("llama-3.1-8b"))
    (('sliding',), ())
    """
    return tuple(kind for kind in WINDOW_KINDS if model.kv_share_held_whole((kind,)) < 1.0)


def check_model_windows(model: Any, window_kv: Any = None, window_pool_ratio: Any = None,
                        engine: Any = None) -> None:
    """Refuse window settings that change nothing for ``model``: any of them on a model without
    windowed layers or on one ``engine`` keeps whole (SGLang's Gemma,
    :attr:`~inferlab.engines.scheduler.SchedulerConfig.whole_window_models`), or a ``window_kv``
    naming a kind it has no layers of (one line saying what the model's attention is). An engine
    command's flags are not checked here: the engines accept them on any model and ignore them."""
    has = windowed_kinds(model)
    given = [option_name(key) for key, value in (("window_kv", window_kv), ("window_pool_ratio", window_pool_ratio))
             if value is not None]
    layers = ", ".join(f"{n} {kind}" for kind, n in model.layer_kinds.items())
    name = model.id or model.name
    if given and not has:
        raise SpecError(f"{' and '.join(given)}: {name} has no windowed attention layers (its layers: {layers}); "
                        "every layer keeps every token whatever the setting: drop it")
    whole = default_scheduler(engine).whole_window_models if isinstance(engine, str) else ()
    if given and getattr(model, "model_type", None) in whole:
        raise SpecError(f"{' and '.join(given)}: {engine} keeps every token of {name}'s windowed layers in its one "
                        f"KV pool (no windowed layers' pool for {model.model_type} models), whatever the setting: "
                        "drop it")
    kinds = () if window_kv is None else window_kinds(window_kv, option_name("window_kv"))
    missing = [kind for kind in kinds if kind not in has]
    if missing:
        raise SpecError(f"{option_name('window_kv')}: {name} has no {missing[0]} attention layers (its layers: "
                        f"{layers}); allowed: {', '.join(has)}, or none")


def engine_windows(model_id: Any, window_kv: Any, window_pool_ratio: Any) -> tuple[Any, Any]:
    """An engine command's window settings as they act on the model it launches (as given for a
    model inferlab does not know): none on a model without windowed layers, and only the kinds
    it has of ``window_kv``. The engines accept their flags on any model and ignore what does
    not apply; :func:`check_model_windows` refuses the same settings given directly."""
    from ..specs.catalog import load_model

    try:  # (not engines.common.known_model: common imports launch, which imports this module)
        model = load_model(model_id) if model_id else None
    except InferlabError:
        model = None
    if model is None:
        return window_kv, window_pool_ratio
    has = windowed_kinds(model)
    if not has:
        return None, None
    return (window_kv if window_kv is None else tuple(kind for kind in window_kv if kind in has)), window_pool_ratio
