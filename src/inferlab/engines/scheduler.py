"""The scheduler of an in-flight-batching engine, as data.

Each iteration runs one decode token for every running request plus up to a token
budget of prefill (``max_num_batched_tokens``, like vLLM's setting and TensorRT-LLM's
``max_num_tokens``): with chunked prefill a long prompt is split over iterations, without
it a prompt is prefilled whole. The decodes run in the iterations that prefill and take
their tokens from the budget (vLLM, TensorRT-LLM), or an iteration that prefills runs the
prompts alone and the decodes wait for it (``mixed_prefill=False``: SGLang's default).
Requests are admitted first come, first served while a sequence slot (``max_num_seqs``)
and KV blocks for the prompt are free; when the growing KV cache no longer fits, the most
recently admitted request is preempted and recomputed later.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from typing import TYPE_CHECKING

from ..checks import boolean, fraction, integer
from ..errors import SpecError
from .sglang_sizing import UNCHUNKED_BUDGET, memory_budget

if TYPE_CHECKING:
    from ..specs.hardware import HardwareSpec

#: Bounds far past any engine's setting: sequences in one batch, tokens in one iteration,
#: tokens in one KV page.
MAX_SEQS = 10**6
MAX_TOKENS = 10**8
MAX_BLOCK = 2**20
#: What an engine's memory share holds (:mod:`inferlab.engines.memory_share`).
SIZINGS = ("all", "free", "static")
#: Windowed attention kinds an engine may free beyond their window (:attr:`SchedulerConfig.window_kv`).
WINDOW_KINDS = ("sliding", "chunked")


@dataclass(frozen=True)
class SchedulerConfig:
    """Engine scheduling limits.

    Attributes
    ----------
    max_num_seqs : int or None
        Running requests at most; None: the engine sizes it, from the GPU (``batch_defaults``)
        or from its KV pool (SGLang: :func:`~inferlab.engines.sglang_sizing.running_requests`), set for a deployment by
        :func:`inferlab.serving.replica.scheduler_for`.
    max_num_batched_tokens : int or None
        Tokens per iteration at most (decode tokens plus prefill chunk); None: the engine sizes
        it from the GPU (``batch_defaults``, else SGLang's :func:`memory_budget`), set for a
        deployment's hardware by :func:`for_hardware`.
    batch_defaults : tuple of (kinds or ids, bytes, excluded ids, seqs, tokens)
        The engine's own sizing of unset ``max_num_seqs`` and ``max_num_batched_tokens`` by
        the device: the first row whose kinds or id prefixes (empty: any) name it and whose
        visible memory it reaches, unless its catalog id starts with one of the excluded
        (:data:`VLLM_BATCH_DEFAULTS`); empty: SGLang's rules.
    max_prefill_tokens : int or None
        Prompt tokens after which an iteration takes no further prompt (SGLang's
        ``--max-prefill-tokens``: ``PrefillAdder.rem_input_tokens``, less the decodes mixed
        in): prompts are added while some remain, the one that spends it whole (within the
        token budget). None: the token budget alone.
    chunked_prefill : bool
        Split prompts over iterations (else a prompt is prefilled whole, when it fits the budget).
    prompt_within_budget : bool
        Without chunked prefill, a prompt longer than the token budget (a rank's) is refused (TensorRT-LLM's
        LLM API: "The sum of prompt length ... should not exceed max_num_tokens"; its C++ runtime's
        ``maxInputLen = min(maxSequenceLen - 1, maxNumTokens)``); False: prefilled whole alone (SGLang).
    mixed_prefill : bool
        The running requests decode in the iterations that prefill, chunks or whole prompts
        (vLLM's and TensorRT-LLM's batches; the decodes take their tokens from the budget);
        False: an iteration that prefills runs prompts only, the decodes wait for it, and the
        budget is the prompts' alone (SGLang's default: ``--enable-mixed-chunk`` off).
    kv_block_size : int
        Tokens per KV page.
    gpu_memory_utilization : float or None
        The engine's memory share, read as ``memory_sizing`` says; None: the engine sizes it
        from the GPU and the launch (SGLang, :func:`~inferlab.engines.memory_share.sglang_static_share`).
    reserve_output : bool
        Admit a request only when the KV for its whole prompt and output is free, so that
        nothing is ever preempted (TensorRT-LLM's guaranteed-no-evict policy); otherwise
        admit on the prompt's blocks and preempt when decoding fills the pool (vLLM).
    overlap_host : bool
        The engine prepares the next iteration on the CPU while the GPU runs this one
        (TensorRT-LLM's PyTorch-runtime overlap scheduler and SGLang's, both on by default;
        vLLM's ``--async-scheduling``), so the host's per-iteration work shows only where it
        outlasts the GPU's (:meth:`~inferlab.serving.stepmodel.StepModel._with_host`).
    memory_sizing : {"all", "free", "static"}
        What the share holds (:mod:`inferlab.engines.memory_share`): weights, activations and
        the KV pool out of all memory (vLLM's ``gpu_memory_utilization``); the KV pool alone out
        of what weights and activations leave (TensorRT-LLM's ``free_gpu_memory_fraction``,
        LMDeploy's ``cache_max_entry_count``); weights and the KV pool out of all memory, the
        rest reserved (SGLang's ``mem_fraction_static``).
    balance_timeout_iters : int
        Attention-DP context balancing (TensorRT-LLM's ``attention_dp_config``:
        ``enable_balance`` with ``timeout_iters``): new prompts are held until every
        attention-DP rank has one to prefill, so that their prefills share one iteration
        instead of each stalling all ranks in turn, or until they have waited this many
        iterations. 0 turns it off; it acts only with attention DP (more than one rank).
    graph_max_batch : int or None
        Decode iterations of more running requests than this (on one attention-DP rank) run
        without a CUDA graph, kernel by kernel, and last at least the host's issue time of
        their kernels (SGLang's ``--cuda-graph-max-bs``; it applies where the profile knows
        the engine's eager rate, ``eager_host_per_kernel_s``). Default: every decode batch
        replays a graph; None: the engine sizes it from the GPU's memory and the
        tensor-parallel size (SGLang: :func:`~inferlab.engines.sglang_sizing.graph_batch_limit`).
    prefill_graph_tokens : int or None
        Iterations with prompt tokens of at most this many tokens (decodes mixed in counted) run
        in piecewise CUDA graphs, without the host's eager floor; longer ones run eagerly (SGLang's
        ``--piecewise-cuda-graph-max-tokens``, TensorRT-LLM's ``capture_num_tokens``:
        :mod:`~inferlab.engines.piecewise_graphs`). None: every such iteration runs eagerly where
        the engine graphs decode only (``eager_host_per_kernel_s``): every engine's default.
        Modelling limits: under attention DP N is compared with the whole replica's tokens in an
        iteration, not one rank's (SGLang turns the graphs off under DP attention unless enforced);
        the static estimate counts a chunked prefill as graphed only where its largest chunk fits
        N (conservative: serve graphs each iteration that fits, :mod:`~inferlab.techniques.prefill_graphs`).
    max_model_len : int or None
        Longest prompt plus output the engine accepts [token] (vLLM's ``--max-model-len``,
        SGLang's ``--context-length``, TensorRT-LLM's ``max_seq_len``); a longer request is
        refused. SGLang sizes its request pool from it (:func:`~inferlab.engines.sglang_sizing.running_requests`). None: the
        model's ``max_position_embeddings``.
    context_budget : bool
        Without chunked prefill the token budget holds the longest context: it defaults to
        ``max(max_model_len, 2048)`` (the model's positions for an unset ``max_model_len``) and a
        budget below ``max_model_len`` is refused (vLLM's ``SchedulerConfig``:
        :func:`unchunked_token_budget`). False: the budget stays what is set, a longer prompt
        waiting for a whole iteration to itself.
    state_pool_ratio : float or None
        A hybrid model's linear-attention states (a fixed size per running request) in a pool of
        their own, this many times the KV pool, the two splitting what the weights leave (SGLang's
        ``--mamba-full-memory-ratio``, 0.9 by default), capping the running requests. None: one
        pool holds both, each running request taking pages for its state (vLLM's).
    state_pool_slots : int or None
        The states' pool pinned at this many states of a running request's slots (SGLang's
        ``--max-mamba-cache-size``, over the attention-DP ranks: ``// dp_size`` a rank), the KV
        pool taking what is left; None: sized by ``state_pool_ratio``.
    state_slots : int
        Slots of the state pool a running request takes (SGLang with its radix cache on, the
        default: 3, ``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``: its own state and the slots
        its cached prefix locks and donates).
    state_pages : bool
        Where one pool holds both, a page holds one layer's state: the attention page grows to
        ``16 x ceil(state / (16 x KV a token))`` tokens of a layer, a running request taking a
        page per linear layer (vLLM: "Setting attention block size to N tokens to ensure that
        attention page size is >= mamba page size").
    hybrid_overlap : bool
        The overlap scheduler (``overlap_host``) stays on for a hybrid model; SGLang 0.5's default
        strategy for the states (``--mamba-scheduler-strategy auto``: ``no_buffer``) turns it off.
    window_pool_ratio : float or None
        A model's sliding-window layers keep their KV in a pool of their own holding this many
        tokens for each token of the full-attention layers' pool, the two splitting the budget
        (SGLang's ``--swa-full-tokens-ratio``, 0.8 by default). None: one pool, where a sequence
        holds at most a window's tokens of a windowed layer (vLLM's hybrid KV-cache manager,
        TensorRT-LLM's variable sliding-window cache); :mod:`~inferlab.engines.window_pool`.
    window_kv : tuple of str
        The windowed attention kinds (``sliding``, ``chunked``) whose KV the engine keeps to a
        window, freeing a sequence's blocks that leave it; a layer of another kind holds every
        token. vLLM frees sliding windows only: its hybrid KV-cache manager is off for chunked
        local attention unless ``VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE`` is set (a
        latency regression, its log says), and TensorRT-LLM sizes its pools by
        ``max_attention_window``, the sliding windows. Empty: every layer keeps every token (SGLang's
        ``--disable-hybrid-swa-memory``, vLLM's ``--disable-hybrid-kv-cache-manager``).
    whole_window_models : tuple of str
        Model types (``config.json``'s ``model_type``) whose windowed layers the engine keeps at
        every token whatever ``window_kv`` says: SGLang's Gemma 2 and 3 ("Disable hybrid SWA memory
        for Gemma3ForCausalLM as it is not yet supported"; later releases still on FA3, Hopper's default).
    limits_per_rank : bool
        With attention DP, ``max_num_seqs`` and ``max_num_batched_tokens`` hold for each rank's
        scheduler (``max_prefill_tokens`` always does: SGLang's ranks read it undivided) (TensorRT-LLM's ``max_batch_size`` and ``max_num_tokens``, vLLM's per
        data-parallel engine); False: they hold for the replica, divided over the ranks (SGLang
        with ``--enable-dp-attention`` gives each rank ``chunked_prefill_size // dp_size``,
        server_args.py ``_handle_data_parallelism``, and ``max_running_requests // dp_size``).
    """

    max_num_seqs: int | None = 256
    max_num_batched_tokens: int | None = 8192
    max_prefill_tokens: int | None = None
    chunked_prefill: bool = True
    prompt_within_budget: bool = False
    mixed_prefill: bool = True
    kv_block_size: int = 16
    gpu_memory_utilization: float | None = 0.9
    reserve_output: bool = False
    memory_sizing: str = "all"
    overlap_host: bool = False
    balance_timeout_iters: int = 0
    graph_max_batch: int | None = MAX_SEQS
    prefill_graph_tokens: int | None = None
    max_model_len: int | None = None
    context_budget: bool = False
    limits_per_rank: bool = True
    batch_defaults: tuple = ()
    state_pool_ratio: float | None = None
    state_pool_slots: int | None = None
    state_slots: int = 1
    state_pages: bool = False
    hybrid_overlap: bool = True
    window_pool_ratio: float | None = None
    window_kv: tuple = ("sliding", "chunked")
    whole_window_models: tuple = ()

    def __post_init__(self) -> None:
        for name, what, most in (("max_num_seqs", "requests", MAX_SEQS), ("max_num_batched_tokens", "tokens", MAX_TOKENS),
                                 ("kv_block_size", "tokens", MAX_BLOCK)):
            if name in ("max_num_seqs", "max_num_batched_tokens") and getattr(self, name) is None:
                continue  # sized by the engine for the GPU (for_hardware) or its KV pool (running_requests)
            integer(f"scheduler: {name}", getattr(self, name), maximum=most, what=what)
        if self.graph_max_batch is not None:  # 0: no decode batch runs from a graph
            integer("scheduler: graph_max_batch", self.graph_max_batch, minimum=0, maximum=MAX_SEQS, what="requests")
        for name in ("max_model_len", "max_prefill_tokens", "prefill_graph_tokens"):  # None: unset
            if getattr(self, name) is not None:
                integer(f"scheduler: {name}", getattr(self, name), maximum=MAX_TOKENS, what="tokens")
        integer("scheduler: balance_timeout_iters", self.balance_timeout_iters, minimum=0, maximum=MAX_SEQS,
                what="iterations")
        if isinstance(self.window_kv, list):  # as a YAML file gives it
            object.__setattr__(self, "window_kv", tuple(self.window_kv))
        if not isinstance(self.window_kv, tuple) or not set(self.window_kv) <= set(WINDOW_KINDS):
            raise SpecError(f"scheduler: window_kv must be a tuple of sliding and chunked, got {self.window_kv!r}")
        if self.window_pool_ratio is not None and (isinstance(self.window_pool_ratio, bool) or not isinstance(
                self.window_pool_ratio, (int, float)) or not 0.0 < self.window_pool_ratio <= 1.0):
            raise SpecError(f"scheduler: window_pool_ratio must be above 0 and at most 1 (SGLang's "
                            f"--swa-full-tokens-ratio), got {self.window_pool_ratio!r}")
        if self.state_pool_ratio is not None:
            if isinstance(self.state_pool_ratio, bool) or not isinstance(self.state_pool_ratio, (int, float)) \
                    or not 0.0 < self.state_pool_ratio < 1e3:
                raise SpecError("scheduler: state_pool_ratio must be a number above 0 and below 1,000, got "
                                f"{self.state_pool_ratio!r}")
        integer("scheduler: state_slots", self.state_slots, maximum=64, what="slots")
        if self.state_pool_slots is not None:
            integer("scheduler: state_pool_slots", self.state_pool_slots, maximum=MAX_SEQS, what="slots")
        for name in ("chunked_prefill", "prompt_within_budget", "mixed_prefill", "reserve_output", "overlap_host",
                     "context_budget", "limits_per_rank", "hybrid_overlap", "state_pages"):
            boolean(f"scheduler: {name}", getattr(self, name))
        if self.gpu_memory_utilization is not None:
            object.__setattr__(self, "gpu_memory_utilization",
                               fraction("scheduler: gpu_memory_utilization", self.gpu_memory_utilization))
        if self.memory_sizing not in SIZINGS:
            raise SpecError(f"scheduler: memory_sizing must be one of {', '.join(SIZINGS)}, got {self.memory_sizing!r}")


#: vLLM's ``vllm serve`` limits when ``--max-num-seqs`` and ``--max-num-batched-tokens`` are not
#: given (vllm ``EngineArgs.get_batch_defaults``, v0.9 on, OPENAI_API_SERVER context): 1,024
#: sequences and 8,192 tokens on a GPU of at least 70 GiB that is not an A100 ("setting large
#: max_num_batched_tokens for A100 reduces throughput", vllm PR #17885), else 256 and 2,048; an
#: unset sequence limit is at most the token budget (``min(default, max_num_batched_tokens)``).
#: Its CPU backend takes 128 and 2,048 (times the CPUs' tp x pp, here one), a TPU 256 and its
#: chip's budget (v5e 512, v6e 1,024).
VLLM_BATCH_DEFAULTS = ((("cpu",), 0.0, (), 128, 2048), (("tpu-v5e",), 0.0, (), 256, 512),
                       (("tpu-v6e",), 0.0, (), 256, 1024),
                       ((), 70 * 2**30, ("a100",), 1024, 8192), ((), 0.0, (), 256, 2048))


def batch_limits(rows: tuple, hw: HardwareSpec) -> tuple[int, int]:
    """``(max_num_seqs, max_num_batched_tokens)`` an engine with ``batch_defaults`` ``rows``
    sizes for ``hw``."""
    memory = hw.usable_memory_capacity.si
    return next((seqs, tokens) for names, least, excluded, seqs, tokens in rows
                if (not names or hw.kind in names or hw.id.startswith(tuple(names)))
                and memory >= least and not hw.id.startswith(tuple(excluded)))


def for_hardware(sched: SchedulerConfig, hw: HardwareSpec) -> SchedulerConfig:
    """``sched`` with the limits the engine sizes for ``hw`` where it leaves them to the engine
    (None): its ``batch_defaults``; else (SGLang) the token budget by the GPU's visible memory
    when it chunks prompts, :data:`UNCHUNKED_BUDGET` when it does not."""
    if sched.batch_defaults and (sched.max_num_seqs is None or sched.max_num_batched_tokens is None):
        seqs, tokens = batch_limits(sched.batch_defaults, hw)
        tokens = tokens if sched.max_num_batched_tokens is None else sched.max_num_batched_tokens
        # an unset sequence limit is at most the budget (vLLM: min(default, max_num_batched_tokens))
        return replace(sched, max_num_seqs=min(seqs, tokens) if sched.max_num_seqs is None else sched.max_num_seqs,
                       max_num_batched_tokens=tokens)
    if sched.max_num_batched_tokens is not None:
        return sched
    budget = memory_budget(hw.usable_memory_capacity.si) if sched.chunked_prefill else UNCHUNKED_BUDGET
    return replace(sched, max_num_batched_tokens=budget)


#: Scheduler defaults per engine, from their documentation: vLLM chunked prefill with its limits by
#: the GPU (:data:`VLLM_BATCH_DEFAULTS`); SGLang ``chunked_prefill_size`` by the GPU's
#: memory, its running requests by its KV pool
#: (:mod:`~inferlab.engines.sglang_sizing`) and the decode batches it runs from CUDA graphs by the GPU's
#: memory and the tensor-parallel size (:func:`~inferlab.engines.sglang_sizing.graph_batch_limit`), its
#: prefill batches run without the decodes (``enable_mixed_chunk`` off by default: the decodes
#: wait while a prefill batch runs);
#: TensorRT-LLM ``max_num_tokens`` 8192, ``max_batch_size`` 2048, prompts whole (LLM API
#: ``enable_chunked_prefill`` false unless set, long-sequence docs) and longer ones refused
#: (``LLM._check_arguments``; ``trtllm-bench`` never refuses one: its readers read it as chunked);
#: LMDeploy ``max_batch_size`` 256 (the generic default follows vLLM). TensorRT-LLM's default
#: capacity policy (guaranteed no evict) reserves KV for the whole output on admission.
#: SGLang's overlap scheduler is on by default since v0.4 ("zero-overhead batch scheduler",
#: LMSYS blog, 2024-12-04), TensorRT-LLM's PyTorch-runtime one since 0.17
#: (``disable_overlap_scheduler: false`` in the LLM API), vLLM's (``--async-scheduling``, v0.10)
#: since v0.14 (release notes: "Async scheduling is now enabled by default", PR #27614; runs of
#: earlier releases: :mod:`inferlab.validation.case_setup`). With attention DP, TensorRT-LLM
#: runs as NVIDIA's DeepSeek-R1 serving recipes configure it (``attention_dp_config:
#: enable_balance: true, batching_wait_iters: 0, timeout_iters: 60``; the LLM API's own
#: default leaves balancing off): ``balance_timeout_iters`` 60. A hybrid model's states under
#: SGLang: a pool of their own at 0.9 of the KV pool (``--mamba-full-memory-ratio``, "The default
#: is 0.9", SGLang's Qwen3-Next usage docs), three slots a running request with the radix cache on
#: (``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``), and the overlap scheduler off (``no_buffer``,
#: the 0.5 default, "will automatically close overlap schedule").
#: Memory shares as each engine
#: takes them by default: :mod:`inferlab.engines.memory_share`.
_TRTLLM = SchedulerConfig(max_num_seqs=2048, max_num_batched_tokens=8192, chunked_prefill=False,
                          prompt_within_budget=True, reserve_output=True,
                          memory_sizing="free", balance_timeout_iters=60, window_kv=("sliding",))
#: The largest decode batch TensorRT-LLM's PyTorch runtime captures when ``cuda_graph_config``
#: names neither ``batch_sizes`` nor ``max_batch_size`` (LLM API reference,
#: ``DecodeCudaGraphConfig``: "If neither is provided, a default max_batch_size of 128 is used").
TRTLLM_GRAPH_BATCH = 128
SGLANG_WHOLE_WINDOW_MODELS = ("gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text")
ENGINE_SCHEDULERS = {  # (generic, LMDeploy: an unchunked prompt past the budget refused, not starved by decodes)
    "generic": SchedulerConfig(prompt_within_budget=True),
    "vllm": SchedulerConfig(max_num_seqs=None, max_num_batched_tokens=None, context_budget=True,
                            gpu_memory_utilization=0.92, overlap_host=True,
                            batch_defaults=VLLM_BATCH_DEFAULTS, state_pages=True, window_kv=("sliding",)),
    "sglang": SchedulerConfig(max_num_seqs=None, max_num_batched_tokens=None, mixed_prefill=False, overlap_host=True,
                              gpu_memory_utilization=None, memory_sizing="static",
                              graph_max_batch=None,
                              limits_per_rank=False, state_pool_ratio=0.9, state_slots=3, hybrid_overlap=False,
                              window_pool_ratio=0.8, whole_window_models=SGLANG_WHOLE_WINDOW_MODELS),
    "trtllm": _TRTLLM,
    # the 1.x PyTorch runtime keeps the limits and capacity policy, overlaps host work and by
    # default graphs decode batches up to TRTLLM_GRAPH_BATCH
    "trtllm-pytorch": replace(_TRTLLM, overlap_host=True, graph_max_batch=TRTLLM_GRAPH_BATCH),
    "lmdeploy": SchedulerConfig(max_num_seqs=256, max_num_batched_tokens=8192, gpu_memory_utilization=0.8,
                                memory_sizing="free", prompt_within_budget=True),
}


#: Limits a launch sets (the engines' flags) and a measured case may record; the window settings
#: (:mod:`~inferlab.engines.window_options`) change the static memory plan too.
USER_LIMITS = ("max_num_seqs", "max_num_batched_tokens", "max_prefill_tokens", "chunked_prefill", "mixed_prefill",
               "gpu_memory_utilization", "kv_block_size", "graph_max_batch", "prefill_graph_tokens", "max_model_len",
               "reserve_output", "overlap_host", "window_kv", "window_pool_ratio", "balance_timeout_iters")
STATE_LIMITS = ("state_pool_ratio", "state_pool_slots", "state_slots", "hybrid_overlap")  # SGLang's state pool
#: Those of them only the serving simulation uses: a static batch (:func:`inferlab.estimate`)
#: prefills its prompts in chunks of the token budget and decodes them together, in waves of
#: ``max_num_seqs`` where that is set.
SERVING_ONLY_LIMITS = ("max_prefill_tokens", "chunked_prefill", "mixed_prefill", "reserve_output", "overlap_host",
                       "balance_timeout_iters", *STATE_LIMITS)


def serving_only(limits: dict, disaggregated: bool = False) -> str | None:
    """What of ``limits`` (by :data:`USER_LIMITS` name) a static batch leaves to serving, as a
    sentence; None when they set none of :data:`SERVING_ONLY_LIMITS`. A disaggregated
    estimate's pools run the batches they are given, so ``max_num_seqs`` is left too."""
    names = SERVING_ONLY_LIMITS + (("max_num_seqs",) if disaggregated else ())
    set_ = [f"{k}={limits[k]}" for k in names if limits.get(k) is not None]
    if not set_:
        return None
    return f"{', '.join(set_)} limit serving (inferlab serve), not a static batch: not used here"


def unused_limits_notes(limits: dict, disaggregated: bool = False) -> list[str]:
    """:func:`serving_only` as the line results carry (``explain()``, ``DisaggEstimate.notes``,
    ``inferlab estimate --file --json``); empty when every limit was used."""
    unused = serving_only(limits, disaggregated)
    return [f"engine limits of the deployment: {unused}"] if unused else []


def default_scheduler(engine: str) -> SchedulerConfig:
    """The engine's default scheduling limits and admission policy (the generic ones for an
    engine without its own entry)."""
    return ENGINE_SCHEDULERS.get(engine, ENGINE_SCHEDULERS["generic"])


#: vLLM's least token budget without chunked prefill (vllm ``SchedulerConfig``: ``max(max_model_len,
#: 2048)`` when the budget is not set).
VLLM_UNCHUNKED_MIN_BUDGET = 2048


def unchunked_token_budget(sched: SchedulerConfig, context: int, given: int | None) -> int | None:
    """The token budget of a scheduler whose budget holds its longest context without chunked
    prefill (:attr:`SchedulerConfig.context_budget`, vLLM's): ``max(context, 2048)`` when
    ``given`` is None (``context``: ``max_model_len``, or the model's positions for an unset one),
    and a ``given`` budget below ``context`` refused, as vLLM refuses to start with it. ``given``
    for other schedulers, or with chunked prefill."""
    if not sched.context_budget or sched.chunked_prefill:
        return given
    if given is None:
        return max(int(context), VLLM_UNCHUNKED_MIN_BUDGET)
    if given < context:
        raise SpecError(f"max_num_batched_tokens ({given:,}) is smaller than max_model_len ({int(context):,}): vLLM "
                        "without chunked prefill refuses to start with it (a prompt must fit one iteration); raise it, "
                        "lower max_model_len, or enable chunked prefill")
    return given


def prompt_cap(sched: SchedulerConfig, ranks: int = 1) -> int | None:
    """The longest prompt ``sched`` takes unchunked where it refuses longer ones (``prompt_within_budget``):
    a rank's token budget, ``ranks`` the attention-DP ranks its limits hold; None: no such bound."""
    if sched.chunked_prefill or not sched.prompt_within_budget or sched.max_num_batched_tokens is None:
        return None
    return sched.max_num_batched_tokens // ranks


def token_budget(engine: str, hw: HardwareSpec) -> int:
    """The tokens per iteration ``engine`` runs with on ``hw`` when none is set (8,192 for
    TensorRT-LLM; vLLM's and SGLang's by the GPU, :func:`for_hardware`)."""
    return int(for_hardware(default_scheduler(engine), hw).max_num_batched_tokens)  # type: ignore[arg-type]
