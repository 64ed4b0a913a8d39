"""Where an engine keeps the KV of a model's sliding-window (or chunked) attention layers, as
arithmetic on a token's bytes.

A windowed layer (gpt-oss's 128-token sliding layers, Gemma's local layers, Llama 4's chunked
ones) needs a sequence's last ``W`` tokens only. An engine that frees a sequence's blocks that
leave a window (the kinds in :attr:`~inferlab.engines.scheduler.SchedulerConfig.window_kv`:
vLLM's hybrid KV-cache manager for sliding windows, which it leaves off for chunked attention
by default; TensorRT-LLM's pool per window) holds, in one pool, a sequence's ``L`` tokens in the
layers that keep every token and at most ``W`` in a freed windowed one. SGLang keeps the
windowed layers in a pool of their own that holds ``window_pool_ratio`` tokens for each token of
the full layers' pool (``--swa-full-tokens-ratio``, 0.8 by default), the two splitting the
budget.

The serving simulation counts a KV pool in tokens of the layers that keep every token: a request
holds its own tokens there and, in one pool, what its freed windowed layers hold as a fixed
number of such tokens beside them (:func:`window_tokens`), as a hybrid model's state is counted.
Where every layer's window is freed, a pool token is a token of every layer at the requests'
length (:func:`pool_token_share`), as the static memory plan counts it.
"""

from __future__ import annotations

from typing import Any

#: Tokens past any window: the windowed layers' holding is saturated there.
_FAR = 1.0e7


def held_windows(model: Any, sched: Any) -> tuple[tuple[str, ...], float | None]:
    """``(window_kv, window_pool_ratio)`` the engine of ``sched`` applies to ``model``: its own,
    or none freed and no pool of their own for a model type it keeps whole
    (:attr:`~inferlab.engines.scheduler.SchedulerConfig.whole_window_models`: SGLang's Gemma)."""
    if getattr(model, "model_type", None) in sched.whole_window_models:
        return (), None
    return sched.window_kv, sched.window_pool_ratio


def pool_token_share(model: Any, sched: Any, context: float | None = None) -> float:
    """Bytes of one token of the pool the simulation counts, as a share of a token of every layer:
    the share of the layers that keep every token, and with a windowed layers' pool of their own
    (SGLang) that pool's ``window_pool_ratio`` tokens for each; where every layer's window is
    freed, a token's share at ``context`` tokens (None: 1, every layer at every token)."""
    freed, ratio = held_windows(model, sched)
    whole = model.kv_share_held_whole(freed)
    if whole == 1.0:
        return 1.0
    if whole == 0.0:
        if context is None:
            return 1.0
        length = max(float(context), 1.0)
        return float(model.kv_cache_bytes(length, freed=freed)) / (float(model.kv_cache_bytes(1.0)) * length)
    return whole + (float(ratio) * (1.0 - whole) if ratio is not None else 0.0)


def window_tokens(model: Any, sched: Any, context: float | None = None) -> float:
    """Tokens of the layers that keep every token that a sequence's freed windowed layers hold in
    one pool [token]: their bytes at ``context`` tokens (None: past every window, their most)
    over such a token's; 0 with a pool of their own, where nothing is freed, or where every
    layer is (:func:`pool_token_share` then counts them)."""
    freed, ratio = held_windows(model, sched)
    whole = model.kv_share_held_whole(freed)
    if whole in (0.0, 1.0) or ratio is not None:
        return 0.0
    length = _FAR if context is None else max(float(context), 1.0)
    every = float(model.kv_cache_bytes(1.0))
    windowed = float(model.kv_cache_bytes(length, freed=freed)) - whole * every * length
    return max(windowed, 0.0) / (whole * every)
