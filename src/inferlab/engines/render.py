"""Engine launch commands in and out: which engine a command is, and a deployment as each engine's command.

:func:`parse_engine_args` reads a pasted command; :func:`launch_from_deployment` builds the
:class:`EngineLaunch` of an inferlab deployment; :func:`launch_command` writes one as an
engine's plain shell form. ``parse_engine_args(launch_command(x, e).script)`` gives ``x``
back on every field the engine can express; the others are named in ``unexpressed``.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from ..errors import SpecError
from . import sglang, trtllm, vllm
from .command_line import split_command
from .common import known_model, speculation
from .launch import LAUNCH_ENGINES, EngineLaunch, Rendered, Speculation
from .precision_text import precision_kinds

_WRITERS = {"vllm": vllm.render, "sglang": sglang.render, "trtllm-pytorch": trtllm.render, "trtllm": trtllm.render}
_USAGE = ("start with 'vllm serve MODEL', 'python -m sglang.launch_server --model-path MODEL' (or "
          "sglang_router.launch_server) or 'trtllm-serve MODEL'")


def parse_engine_args(text: str) -> EngineLaunch:
    """The :class:`EngineLaunch` of a pasted vLLM, SGLang or TensorRT-LLM launch command.

    Raises
    ------
    SpecError
        One line: a command of no known engine, a flag with a bad value (the flag, the
        value, what is allowed), a model the catalog does not name.
    """
    cmd = split_command(text)
    words = list(cmd.words)
    program = os.path.basename(words[0])
    if program == "vllm" and words[1:2] == ["serve"]:
        return _named_format(_own_flags(vllm.parse(cmd, words[2:]), "vllm"))
    if program.startswith("python") and words[1:2] == ["-m"] and len(words) > 2:
        if words[2] == "sglang.launch_server":
            return _named_format(_own_flags(sglang.parse(cmd, words[3:]), "sglang"))
        if words[2] == "sglang_router.launch_server":  # the router and --dp-size workers behind it
            rest, router = _router_flags(words[3:])
            launch = _own_flags(sglang.parse(cmd, rest), "sglang")
            note = ("sglang_router: its --dp-size workers are data-parallel replicas, each taking an even share of "
                    "the requests (the router's own policy is not modelled)")
            return _named_format(replace(launch, no_effect=launch.no_effect + router, notes=launch.notes + (note,)))
        if words[2] == "vllm.entrypoints.openai.api_server":
            return _named_format(_own_flags(vllm.parse(cmd, words[3:]), "vllm"))
    if program == "trtllm-serve":
        return _named_format(_own_flags(trtllm.parse(cmd, words[2:] if words[1:2] == ["serve"] else words[1:]),
                                        "trtllm"))
    raise SpecError(f"engine args: cannot tell the engine of {' '.join(words[:3])!r}; {_USAGE}")


#: Each engine's flags, and the command a user knows it by.
_FLAGS = {"vllm": (vllm.FLAGS, "vllm serve"), "sglang": (sglang.FLAGS, "sglang.launch_server"),
          "trtllm": (trtllm.FLAGS, "trtllm-serve")}


def _own_flags(launch: EngineLaunch, engine: str) -> EngineLaunch:
    """``launch``, checked for another engine's spelling of a setting this engine has: that flag
    would be refused by the engine (an unrecognized argument) and, read past, would leave the
    setting at its default (``trtllm-serve M --tensor-parallel-size 2`` on one GPU).

    Raises
    ------
    SpecError
        Naming the other engine and this engine's own spelling.
    """
    own, program = _FLAGS[engine]
    keys = {spec.key for spec in own.values()}
    for entry in launch.unknown:
        name = entry.split()[0].split("=")[0]
        for other, (flags, other_program) in _FLAGS.items():
            if other != engine and name in flags and flags[name].key in keys:
                raise SpecError(f"{engine}: {name} is {other_program}'s flag; {_spelling(own, flags[name], program)}")
            if other != engine and name in flags and flags[name].key in _ELSEWHERE[engine]:
                raise SpecError(f"{engine}: {name} is {other_program}'s flag, which {program} would refuse; {program} "
                                f"{_ELSEWHERE[engine][flags[name].key]}")
    return launch


#: Settings another engine's flag sets that this engine sets another way (not a flag of the same
#: setting, which :func:`_own_flags` names itself): read past, the setting would stay at its default.
_ELSEWHERE = {
    "trtllm": {"kv_cache": "sets the KV cache's format in the --extra_llm_api_options YAML (kv_cache_config: {dtype: fp8})",
               "prefix_caching": "keeps its prefix cache on unless the --extra_llm_api_options YAML turns it off "
                                 "(kv_cache_config: {enable_block_reuse: false})",
               "quantization": "reads the weights' format from the checkpoint (serve a quantized one, e.g. "
                               "nvidia/Llama-3.1-8B-Instruct-FP8)",
               "dp": "has no data-parallel flag: run one server per replica, or attention data parallelism with "
                     "enable_attention_dp: true in the --extra_llm_api_options YAML",
               "attention_dp": "sets it in the --extra_llm_api_options YAML (enable_attention_dp: true)",
               "chunk": "spells the iteration's token budget --max_num_tokens",
               "expert_parallel": "spreads the experts with --ep_size"},
    "vllm": {"chunk": "spells the iteration's token budget --max-num-batched-tokens",
             "ep": "spreads the experts over its tensor- and data-parallel ranks with --enable-expert-parallel",
             "attention_dp": "runs attention data-parallel with --data-parallel-size beside --enable-expert-parallel"},
    "sglang": {"max_num_batched_tokens": "spells the iteration's token budget --chunked-prefill-size",
               "expert_parallel": "spells it --ep-size",
               "chunked_prefill": "chunks prompts by default (--chunked-prefill-size N; -1 turns it off)"},
}


def _effect(kind: str) -> str:
    """What a flag of ``kind`` does to its setting: turns it ``on`` (a switch or a true/false
    flag given alone), ``off``, or sets a ``value``."""
    return {"on": "on", "bool": "on", "off": "off"}.get(kind, "value")


def _spelling(own: dict, spec: Any, program: str) -> str:
    """``program``'s own flag doing what ``spec`` does; a switch to a setting it has no flag
    that way for is its default (SGLang keeps the prefix cache and the overlap scheduler on
    unless told)."""
    same = next((f for f, s in own.items() if s.key == spec.key and _effect(s.kind) == _effect(spec.kind)), None)
    if same is not None:
        return f"{program} spells it {same}"
    return f"{program} does that by default (it has a flag for the other way only): drop it"


def _router_flags(words: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """``words`` without SGLang router's own ``--router-*`` flags (and their values), and those
    flags' names: they place requests over the workers, which the replicas' even split stands for."""
    rest, router, i = [], [], 0
    while i < len(words):
        word = words[i]
        if word.startswith("--router-"):
            name = word.split("=", 1)[0]
            router.append(name)
            takes = "=" not in word and i + 1 < len(words) and not words[i + 1].startswith("--")
            i += 2 if takes else 1
            continue
        rest.append(word)
        i += 1
    return rest, tuple(router)


def _named_format(launch: EngineLaunch) -> EngineLaunch:
    """``launch`` with the weight format its checkpoint's name states where no flag set one (the
    engines read a quantized checkpoint's format from its config: ``Qwen/Qwen3-235B-A22B-FP8``
    serves FP8 with no --quantization); the activations as the format computes, the KV cache as
    the engine's default."""
    from ..core.quantization import PrecisionConfig
    from ..specs.catalog import checkpoint_format

    fmt = checkpoint_format(launch.checkpoint or "")
    if fmt is None or launch.weights is not None:
        return launch
    return replace(launch, weights=fmt, activations=PrecisionConfig.derived(fmt).activations).with_sources(
        weights=f"the checkpoint's name ({launch.checkpoint})")


def launch_command(launch: EngineLaunch, engine: str | None = None) -> Rendered:
    """``launch`` as the launch command of ``engine`` (default: its own), in plain shell form.

    Raises
    ------
    SpecError
        For an engine whose commands are not written (allowed: vllm, sglang, trtllm-pytorch, trtllm).
    """
    name = engine or launch.engine
    if name not in _WRITERS:
        raise SpecError(f"launch commands are written for {', '.join(_WRITERS)}, not {name!r}")
    converted, said = _across_engines(launch, name)
    target = replace(converted, engine=name if name in ("trtllm", "trtllm-pytorch") else launch.engine)
    out = replace(_WRITERS[name](target), engine=name)
    if launch.notes or said:
        out = replace(out, script="".join(f"# inferlab: {n}\n" for n in (*launch.notes, *said)) + out.script)
    return out


def _trtllm(engine: str) -> bool:
    return engine in ("trtllm", "trtllm-pytorch")


def _across_engines(launch: EngineLaunch, target: str) -> tuple[EngineLaunch, list[str]]:
    """``launch``'s limits in ``target``'s terms, and what was converted or could not be.

    Under attention DP, SGLang's sequence limit and chunk are the totals over its DP ranks (it
    divides them), vLLM's and TensorRT-LLM's each rank's: converted by the ranks. TensorRT-LLM's
    memory fraction is a share of what the weights leave, vLLM's of the whole GPU, SGLang's of the
    whole GPU for weights and KV cache (:mod:`~inferlab.engines.memory_share`): not convertible
    without the GPU and the weights, so said."""
    from .memory_share import share_words
    from .scheduler import default_scheduler

    source, said = launch.engine, []
    if source == target or _trtllm(source) and _trtllm(target):
        return launch, said
    ranks = launch.tp // launch.attention_tp if launch.attention_dp else 1
    per_rank = (default_scheduler(source).limits_per_rank, default_scheduler(target).limits_per_rank)
    if ranks > 1 and per_rank[0] != per_rank[1]:
        scale = (lambda v: v * ranks) if per_rank[0] else (lambda v: max(1, -(-v // ranks)))
        changed = {k: scale(getattr(launch, k)) for k in ("max_num_seqs", "max_num_batched_tokens")
                   if getattr(launch, k) is not None}
        if changed:
            launch = replace(launch, **changed)
            said.append(f"{' and '.join(changed)} per attention-DP rank in {source if per_rank[0] else target}, over "
                        f"all {ranks} ranks in {target if per_rank[0] else source}: written "
                        + ("x" if per_rank[0] else "/") + f"{ranks}")
    sizing = (default_scheduler(source), default_scheduler(target))
    states = {k: getattr(launch, k) for k in ("state_pool_ratio", "state_pool_slots", "state_slots", "hybrid_overlap")
              if getattr(launch, k) is not None}
    if launch.state is None and (kept := _default_state(launch.model, source, target)):
        launch = replace(launch, state=kept)
        said.append(f"state {kept}: {source}'s default for this model's linear-attention state, written for {target} "
                    "(whose own default differs)")
    whole = sizing[0].chunked_prefill is False if launch.chunked_prefill is None else launch.chunked_prefill is False
    if whole and sizing[1].context_budget:  # vLLM unchunked needs a budget of its whole context: left to chunk
        launch = replace(launch, chunked_prefill=None)
        said.append(f"{source} prefills each prompt whole here; {target} chunks them (its default: without chunking "
                    "it needs a token budget of its whole context)")
    elif launch.chunked_prefill is None and sizing[0].chunked_prefill != sizing[1].chunked_prefill:
        launch = replace(launch, chunked_prefill=sizing[0].chunked_prefill)  # TensorRT-LLM prefills whole unless told
        said.append(f"chunked prefill {'on' if sizing[0].chunked_prefill else 'off'}: {source}'s default, "
                    f"written for {target} (whose own default differs)")
    if states and target != "sglang":  # a hybrid model's state pool: SGLang's flags alone
        launch = replace(launch, **dict.fromkeys(states))
        said.append(f"{', '.join(states)} ({source}'s hybrid state pool) not written: {target} keeps the states in "
                    "its KV pool")
    if launch.gpu_memory_utilization is not None and sizing[0].memory_sizing != sizing[1].memory_sizing \
            and not _trtllm(target):  # (TensorRT-LLM's command says it of its own flag)
        said.append(f"memory fraction {launch.gpu_memory_utilization:g} written as it was, but {source}'s is a share "
                    f"{share_words(sizing[0])}, {target}'s {share_words(sizing[1])}: set it for the GPU")
    return launch, said


def launch_from_deployment(model: str, *, engine: str = "vllm", tp: int = 1, pp: int = 1, ep: int = 1, dp: int = 1,
                           attention_dp: bool = False, attention_tp: int = 1, precision: Any = None,
                           speculative: Any = None,
                           max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None,
                           max_prefill_tokens: int | None = None,
                           chunked_prefill: bool | None = None, mixed_prefill: bool | None = None,
                           gpu_memory_utilization: float | None = None,
                           kv_block_size: int | None = None, max_model_len: int | None = None,
                           prefix_caching: bool | None = None, reserve_output: bool | None = None,
                           overlap_host: bool | None = None, window_kv: Any = None,
                           window_pool_ratio: float | None = None,
                           prefill_graph_tokens: int | None = None) -> EngineLaunch:
    """The :class:`EngineLaunch` of an inferlab deployment (the arguments of :func:`inferlab.serve`).

    ``precision`` is inferlab's text (None or ``checkpoint``: the checkpoint's formats);
    the routed experts' and the attention weights' own formats have no engine flag and are
    named in ``notes``; ``window_kv`` and ``window_pool_ratio`` are checked as serve checks them
    (:mod:`~inferlab.engines.window_options`).
    """
    from .window_options import window_kinds, window_ratio

    window_kv = None if window_kv is None else window_kinds(window_kv)
    window_pool_ratio = None if window_pool_ratio is None else window_ratio(window_pool_ratio)
    kinds = precision_kinds(None if precision in (None, "checkpoint") else precision)
    if kinds.get("state") is not None:  # a format engines keep states in, or one line saying which
        from ..core.quantization import PrecisionConfig

        PrecisionConfig.parse({"state": kinds["state"]})
    notes = []
    if "moe_weights" in kinds and kinds["moe_weights"] != kinds.get("weights"):
        notes.append(f"routed experts in {kinds['moe_weights']}: no engine flag sets them apart; serve a checkpoint "
                     "stored that way")
    if "attention_weights" in kinds and kinds["attention_weights"] != kinds.get("weights"):
        notes.append(f"attention weights in {kinds['attention_weights']}: no engine flag sets them apart; serve a "
                     "checkpoint stored that way (NVIDIA's NVFP4 DeepSeek-R1 keeps them in BF16)")
    spec = _speculation(speculative)
    from ..specs.catalog import catalog_model

    return EngineLaunch(engine=engine if engine in _WRITERS else "vllm", model=catalog_model(model)[0], tp=tp, pp=pp,
                        ep=ep, dp=dp, attention_dp=attention_dp, attention_tp=attention_tp, weights=kinds.get("weights"),
                        activations=kinds.get("activations"), kv_cache=kinds.get("kv_cache"), state=kinds.get("state"),
                        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                        max_prefill_tokens=max_prefill_tokens, chunked_prefill=chunked_prefill,
                        mixed_prefill=mixed_prefill,
                        gpu_memory_utilization=gpu_memory_utilization,
                        kv_block_size=kv_block_size, max_model_len=max_model_len, prefix_caching=prefix_caching,
                        reserve_output=reserve_output, overlap_host=overlap_host, window_kv=window_kv,
                        window_pool_ratio=window_pool_ratio, speculation=spec, prefill_graph_tokens=prefill_graph_tokens,
                        notes=tuple(notes))


def _default_state(model: str, source: str, target: str) -> str | None:
    """The state format ``source`` keeps ``model``'s linear-attention states in by default where
    ``target``'s default differs (the config names none: SGLang FP32, the others the model's
    BF16), so that a converted command runs the same states; None otherwise."""
    from .state_pool import ENGINE_STATE_FORMATS

    spec = known_model(model)
    lin = spec.linear_attention if spec is not None else None
    if lin is None or lin.state_format is not None:
        return None
    kept = ENGINE_STATE_FORMATS.get(source, "bf16")
    return kept if kept != ENGINE_STATE_FORMATS.get(target, "bf16") else None


def _speculation(value: Any) -> Speculation | None:
    if value is None or isinstance(value, Speculation):
        return value
    from ..techniques.speculative_config import SpeculativeConfig

    spec = value if isinstance(value, SpeculativeConfig) else SpeculativeConfig.parse(str(value))
    model = spec.draft_model if isinstance(spec.draft_model, str) or spec.draft_model is None else spec.draft_model.id
    return speculation("inferlab", "speculative", spec.method, int(spec.k), model)


__all__ = ["LAUNCH_ENGINES", "EngineLaunch", "Rendered", "launch_command", "launch_from_deployment",
           "parse_engine_args"]
