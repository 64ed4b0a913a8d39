"""An engine launch as inferlab reads it: the deployment and scheduler limits its flags set.

:class:`EngineLaunch` is what :func:`~inferlab.engines.parse_engine_args` returns and what
:func:`~inferlab.engines.launch_command` renders. Its fields are those both inferlab and
the engines know; a field left None is the engine's default. Flags inferlab does not
know are kept in ``unknown``, flags that change nothing it models in ``no_effect``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from ..errors import SpecError, option_name
from .precision_text import precision_text_kinds, short_text
from .scheduler import SERVING_ONLY_LIMITS, UNCHUNKED_BUDGET, USER_LIMITS, default_scheduler, unchunked_token_budget

#: Engines whose launch commands are read and written.
LAUNCH_ENGINES = ("vllm", "sglang", "trtllm-pytorch")
#: Inferlab's short names of the tensor kinds, in the order the precision text writes them.
_KIND_LABELS = (("weights", "w"), ("activations", "a"), ("kv_cache", "kv"))


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding as launch flags state it: the method, the draft length, the drafter.

    Engines carry no acceptance rate: it is measured, and joins at :meth:`EngineLaunch.to_kwargs`.
    ``draft_model`` is the catalog id of a separate draft model (method ``draft``);
    ``drafter`` the checkpoint of an EAGLE or Medusa head as written on the command line.
    """

    method: Literal["draft", "eagle", "medusa", "mtp", "ngram"]
    k: int
    draft_model: str | None = None
    drafter: str | None = None
    #: An EAGLE head's generation as the command named it (``eagle3``: True, ``eagle``: False;
    #: None: not named, told from the head's name). The engines load the two differently;
    #: the simulation times them alike, so it does not take part in comparisons.
    eagle3: bool | None = field(default=None, compare=False)

    def __str__(self) -> str:
        model = f"model={self.draft_model}," if self.draft_model else ""
        return f"{self.method}:{model}k={self.k}"


@dataclass(frozen=True)
class EngineLaunch:
    """A deployment as an engine's launch flags state it.

    Attributes
    ----------
    engine : str
        ``vllm``, ``sglang`` or ``trtllm-pytorch`` (``trtllm`` for TensorRT-LLM's
        compiled-engine backend).
    model : str
        Catalog id (or a config.json path) of the launched model.
    checkpoint : str or None
        The checkpoint the command launches, as written; None: the catalog card's repository.
    tp, pp, ep, dp : int
        inferlab's layout (:class:`~inferlab.core.parallelism.Parallelism`): GPUs per
        stage, stages, expert groups inside a stage, independent replicas.
    attention_dp : bool
        Attention data-parallel over the stage's GPUs.
    attention_tp : int
        With ``attention_dp``, the GPUs of each attention rank (SGLang's ``--tp`` over ``--dp``,
        vLLM's ``-tp`` next to ``-dp``); 1: a GPU a rank.
    weights, activations, kv_cache : str or None
        Formats set by the flags; None: the checkpoint's (KV: the engine's ``auto``).
    state : str or None
        A hybrid model's linear-attention state format (SGLang ``--mamba-ssm-dtype``, vLLM
        ``--mamba-ssm-cache-dtype``); None: the config's, else the engine's default.
    dtype : str or None
        The 16-bit activation type asked for (``--dtype``); None: the checkpoint's.
    max_num_seqs, max_num_batched_tokens, max_prefill_tokens, chunked_prefill, mixed_prefill, gpu_memory_utilization, kv_block_size, graph_max_batch, prefill_graph_tokens
        Scheduler limits (:class:`~inferlab.engines.scheduler.SchedulerConfig`); None: the
        engine's default (:data:`~inferlab.engines.scheduler.ENGINE_SCHEDULERS`).
    max_model_len : int or None
        Longest prompt plus output the engine accepts [token]; kept for the round trip.
    reserve_output : bool or None
        The capacity policy: admit a request only when the KV for its whole output is free
        (TensorRT-LLM's ``GUARANTEED_NO_EVICT``) or on its prompt, preempting when the cache
        fills (``MAX_UTILIZATION``, vLLM's and SGLang's way); None: the engine's default.
    prefix_caching : bool or None
        The engine's prefix cache on or off; None: the default (on in all three).
    overlap_host : bool or None
        The host plans the next iteration while the GPU runs this one
        (:attr:`~inferlab.engines.scheduler.SchedulerConfig.overlap_host`: SGLang's and
        TensorRT-LLM's PyTorch runtime's overlap scheduler, vLLM's async scheduling); None:
        the engine's default (on in SGLang, TensorRT-LLM's PyTorch runtime and vLLM from 0.14).
    balance_timeout_iters : int or None
        Attention-DP context balancing (TensorRT-LLM's ``attention_dp_config``): new prompts
        held until every rank has one or this many iterations pass, 0 off; None: the engine's.
    state_pool_ratio, state_pool_slots, state_slots, hybrid_overlap : float, int, int, bool or None
        A hybrid model's state pool (:class:`~inferlab.engines.scheduler.SchedulerConfig`; SGLang's
        ``--mamba-full-memory-ratio``, ``--max-mamba-cache-size`` and ``--mamba-scheduler-strategy``);
        None: the engine's default.
    window_kv, window_pool_ratio : tuple of str, float or None
        A windowed-attention model's KV (:mod:`~inferlab.engines.window_options`): ``()`` where
        every layer keeps every token (SGLang's ``--disable-hybrid-swa-memory``, vLLM's
        ``--disable-hybrid-kv-cache-manager``), SGLang's ``--swa-full-tokens-ratio``; None: the engine's.
    speculation : Speculation or None
    unknown : tuple of str
        Flags inferlab does not know, as written (with their values).
    no_effect : tuple of str
        Flags known to change nothing inferlab models (ports, logging, API keys...).
    notes : tuple of str
        How a flag was read where the mapping is not one to one.
    sources : tuple of (field, flag)
        The flag that set each field, for messages.
    """

    engine: str
    model: str
    checkpoint: str | None = None
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    attention_dp: bool = False
    attention_tp: int = 1
    weights: str | None = None
    activations: str | None = None
    kv_cache: str | None = None
    state: str | None = None
    dtype: str | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_prefill_tokens: int | None = None
    chunked_prefill: bool | None = None
    mixed_prefill: bool | None = None
    graph_max_batch: int | None = None
    prefill_graph_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    kv_block_size: int | None = None
    max_model_len: int | None = None
    reserve_output: bool | None = None
    prefix_caching: bool | None = None
    overlap_host: bool | None = None
    balance_timeout_iters: int | None = None
    state_pool_ratio: float | None = None
    state_pool_slots: int | None = None
    state_slots: int | None = None
    hybrid_overlap: bool | None = None
    window_kv: tuple[str, ...] | None = None
    window_pool_ratio: float | None = None
    speculation: Speculation | None = None
    unknown: tuple[str, ...] = ()
    no_effect: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def precision(self) -> str | None:
        """inferlab's precision text of the formats the flags set (None: the checkpoint's).

        ``--dtype`` sets the activations, left ``auto`` the KV cache, and the weights where the
        checkpoint stores them in 16 bits (a quantized checkpoint's weights keep their format:
        the engines' ``dtype`` is "the data type for model weights and activations" of what is
        not quantized).
        """
        kinds = {"weights": self.weights or self._dtype_weights(), "activations": self.activations or self.dtype,
                 "kv_cache": self.kv_cache or (self.dtype if self.dtype else None)}
        state = f"state:{self.state}" if self.state is not None else ""
        if not any(kinds.values()):
            return state or None
        if all(kinds.values()) and self.weights:  # --dtype's weights leave a quantized MoE's experts as stored
            from ..core.quantization import PrecisionConfig

            if PrecisionConfig.derived(kinds["weights"]) == PrecisionConfig(**kinds):  # type: ignore[arg-type]
                return " ".join(filter(None, (kinds["weights"], state)))
        return " ".join([f"{label}:{kinds[kind]}" for kind, label in _KIND_LABELS if kinds[kind]]
                        + ([state] if state else []))

    def _dtype_weights(self) -> str | None:
        """``--dtype`` for the weights when the checkpoint's are 16-bit (None otherwise)."""
        if not self.dtype or not self.model:
            return None
        from ..errors import InferlabError
        from ..precision import number_format
        from ..specs.catalog import load_model
        from ..techniques.deployed_precision import checkpoint_precision

        try:
            stored = checkpoint_precision(load_model(self.model)).weights
        except InferlabError:  # a model inferlab does not know: its formats are the user's to give
            return None
        return self.dtype if number_format(stored).bits_per_element >= 16 else None

    def modelled(self) -> dict[str, Any]:
        """The fields both inferlab and the engines know (what a round trip keeps)."""
        skip = {"engine", "unknown", "no_effect", "notes", "sources"}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}

    def flag_of(self, key: str) -> str:
        """The flag that set ``key``, as written."""
        return dict(self.sources).get(key, key)

    def to_kwargs(self, target: Literal["estimate", "serve"] = "estimate", *,
                  speculative: Any = None) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.estimate` or :func:`inferlab.serve`.

        ``speculative`` (inferlab's text, a preset or a SpeculativeConfig) gives the
        acceptance the engine flags cannot carry; it must name the launch's method and
        draft length.

        Raises
        ------
        SpecError
            Speculation in the flags without an acceptance, or one that contradicts them.
        """
        kw: dict[str, Any] = {"model": self.model, "engine": self.engine, "tp": self.tp, "pp": self.pp,
                              "ep": self.ep, "dp": self.dp, "attention_dp": self.attention_dp}
        if self.attention_dp:
            kw["attention_tp"] = self.attention_tp
        if self.precision is not None:
            kw["precision"] = self.precision
        from .window_options import engine_windows

        window_kv, window_pool_ratio = engine_windows(self.model, self.window_kv, self.window_pool_ratio)
        limits = {"gpu_memory_utilization": self.gpu_memory_utilization, "kv_block_size": self.kv_block_size,
                  "window_kv": window_kv, "window_pool_ratio": window_pool_ratio}
        if target == "serve":
            limits.update(max_num_seqs=self.max_num_seqs, max_num_batched_tokens=self.max_num_batched_tokens,
                          max_prefill_tokens=self.max_prefill_tokens, chunked_prefill=self.chunked_prefill,
                          mixed_prefill=self.mixed_prefill, graph_max_batch=self.graph_max_batch,
                          prefill_graph_tokens=self.prefill_graph_tokens,
                          max_model_len=self.max_model_len, reserve_output=self.reserve_output,
                          overlap_host=self.overlap_host, state_pool_ratio=self.state_pool_ratio,
                          state_slots=self.state_slots, hybrid_overlap=self.hybrid_overlap,
                          state_pool_slots=self.state_pool_slots, balance_timeout_iters=self.balance_timeout_iters)
        else:
            limits.update(max_num_tokens=self._estimate_budget(), graph_max_batch=self.graph_max_batch,
                          max_num_seqs=self.max_num_seqs, prefill_graph_tokens=self.prefill_graph_tokens,
                          max_model_len=self.max_model_len)
        kw.update({k: v for k, v in limits.items() if v is not None})
        spec = self.speculative_config(speculative)
        if spec is not None:
            kw["speculative"] = spec
        return kw

    def _estimate_budget(self) -> int | None:
        """The token budget the engine reserves activation memory for (the static estimate's
        workspace): vLLM without chunked prefill holds its longest context in one iteration."""
        if self.chunked_prefill is not False:
            return self.max_num_batched_tokens
        sched = replace(default_scheduler(self.engine), chunked_prefill=False)
        if sched.context_budget:
            from ..specs.catalog import load_model

            context = self.max_model_len or load_model(self.model).max_position_embeddings
            return unchunked_token_budget(sched, context, self.max_num_batched_tokens)
        if self.max_num_batched_tokens is None and sched.max_num_batched_tokens is None:
            return UNCHUNKED_BUDGET  # SGLang's prefill budget without chunking (--chunked-prefill-size -1)
        return self.max_num_batched_tokens

    def speculative_config(self, given: Any = None) -> Any:
        """The :class:`SpeculativeConfig` of the launch, its acceptance taken from ``given``."""
        from ..techniques.speculative_config import SpeculativeConfig

        if given is None:
            if self.speculation is None:
                return None
            raise SpecError(f"the engine flags speculate ({self.speculation}) but carry no acceptance rate: add "
                            f"{option_name('speculative')} {self.speculation},accept=A with a measured A, or a preset")
        spec = given if isinstance(given, SpeculativeConfig) else SpeculativeConfig.parse(str(given))
        if self.speculation is None:
            raise SpecError(f"{option_name('speculative')} {given} but the engine flags do not speculate; add the "
                            "engine's speculative flags, or drop it")
        s = self.speculation
        if (spec.method, spec.k) != (s.method, s.k) or s.draft_model and str(spec.draft_model) != s.draft_model:
            raise SpecError(f"{option_name('speculative')} {given} contradicts the engine flags ({s}, set by "
                            f"{self.flag_of('speculation')}); give the same method, model and k")
        return spec

    def merged(self, explicit: dict[str, Any], target: Literal["estimate", "serve"] = "estimate") -> dict[str, Any]:
        """:meth:`to_kwargs` with ``explicit`` options added; one that contradicts a flag is refused.

        Raises
        ------
        SpecError
            ``--tp 4`` with ``--tensor-parallel-size 2`` in the engine args, and the like.
        """
        kw = self.to_kwargs(target, speculative=explicit.get("speculative"))
        for key, value in explicit.items():
            if key == "speculative" or value is None:
                continue
            # a dp the command does not set is copies of it behind a load balancer (a plan's "launch it N times")
            if key in kw and not _same(key, kw[key], value) and not (key == "dp" and key not in dict(self.sources)):
                if key == "precision" and isinstance(value, str) and ":" in (value.split() or [""])[0]:
                    kinds = precision_text_kinds(value)  # one kind's own flag (--kv-cache-dtype): its format alone
                    bare = len(kinds) == 1 and option_name(key) not in ("precision", "--precision")
                    value = next(iter(kinds.values())) if bare else short_text(kinds)  # else as kw's is written
                raise SpecError(f"{option_name(key)} {_shown(value)} contradicts the engine args ({self.flag_of(key)} "
                                f"gives {_shown(kw[key])}); drop one of them")
            if key == "precision" and key in kw:  # agreeing: the command's kinds and the option's together
                value = short_text({**precision_text_kinds(kw[key]), **precision_text_kinds(value)})
            kw[key] = value
        return kw

    def report(self, target: Literal["estimate", "serve"] = "estimate") -> list[str]:
        """Lines saying what of the command inferlab does not use: unknown flags (kept, not
        modelled), flags that change nothing it models, limits only serving uses, notes."""
        name = self.engine.split("-")[0]
        lines = [f"{name} engine args: {n}" for n in self.notes]
        if self.unknown:
            lines.append(f"{name} engine args: unknown to inferlab, not modelled: {'; '.join(self.unknown)}")
        if self.no_effect:
            lines.append(f"{name} engine args: change nothing inferlab models: {', '.join(self.no_effect)}")
        # (a flag that also sets a limit a static batch uses, SGLang's --chunked-prefill-size its token budget, is used)
        used = {self.flag_of(k) for k in USER_LIMITS
                if k not in SERVING_ONLY_LIMITS and getattr(self, k, None) is not None}
        off = {"balance_timeout_iters": 0}  # (balancing off holds nothing: nothing to say)
        serve_only = [f for k in SERVING_ONLY_LIMITS
                      if getattr(self, k) not in (None, off.get(k)) and (f := self.flag_of(k)) not in used]
        if target == "estimate" and serve_only:
            lines.append(f"{name} engine args: {', '.join(serve_only)} limit serving (inferlab serve), not a static "
                         "batch")
        return lines

    def read_lines(self) -> list[str]:
        """One line naming each field the flags set, with the flag as written: what ``--explain``
        shows, so that every number of a pasted command traces to the flag behind it."""
        shown = {"kv_cache": "KV cache", "weights": "weights", "activations": "activations", "dtype": "dtype",
                 "overlap_host": "overlap scheduling", "attention_dp": "attention DP"}
        parts = []
        for key, flag in self.sources:
            if key == "quantization":  # the formats it sets, as the precision they give
                parts.append(f"precision {self.precision} ({flag})")
                continue
            if key == "precision" or not hasattr(self, key):  # precision is derived from the kinds below
                continue
            value = getattr(self, key)
            text = "on" if value is True else "off" if value is False else str(value)
            if key == "window_kv":  # the kinds freed beyond their window
                text = ", ".join(value) if value else "none (every layer keeps every token)"
            elif key == "kv_cache" and value is None:  # --kv-cache-dtype auto
                text = "auto (the model's format)"
            elif key == "balance_timeout_iters":
                key, text = "attention-DP balancing", f"timeout_iters {value}" if value else "off"
            parts.append(f"{shown.get(key, key)} {text} " + (f"({flag})" if flag.startswith("-") else f"from {flag}"))
        name = self.engine.split("-")[0]
        return [f"{name} engine args read: {'; '.join(parts)}"] if parts else []

    def with_sources(self, **sources: str) -> EngineLaunch:
        """This launch with the flags of some fields recorded."""
        return replace(self, sources=tuple({**dict(self.sources), **sources}.items()))


def _shown(value: Any) -> Any:
    """A value as a message says it: a tuple of kinds as the flag writes it (empty: none)."""
    return (",".join(map(str, value)) or "none") if isinstance(value, (tuple, list)) else value


def _same(key: str, a: Any, b: Any) -> bool:
    if key == "model":
        from ..specs.catalog import load_model

        try:
            return load_model(str(a)).id == load_model(str(b)).id
        except Exception:  # noqa: BLE001 - an unloadable name differs from any other
            return str(a).lower() == str(b).lower()
    if key == "precision":  # every kind the option sets, the flags set alike
        launched = precision_text_kinds(a)
        return all(launched.get(kind) == fmt for kind, fmt in precision_text_kinds(b).items())
    return a == b


@dataclass(frozen=True)
class Rendered:
    """A launch command in an engine's own flags, and what it cannot say.

    ``script`` is a plain shell form: any config file as a here-document, then the
    command, with ``#`` lines naming what the engine cannot express. ``unexpressed`` pairs
    each such field with the reason.
    """

    engine: str
    script: str
    unexpressed: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:
        return self.script
