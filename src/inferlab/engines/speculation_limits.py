"""What an engine changes in its own scheduler when it runs a drafter: SGLang's running-request
reset, and the overlap scheduler the engines turn off beside some drafters."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .scheduler import SchedulerConfig

#: SGLang with a drafter that runs on the GPU (EAGLE, EAGLE3, NEXTN/MTP, a standalone draft
#: model) and no ``--max-running-requests``: 48 running requests, over the replica's DP ranks, and
#: the overlap scheduler off (sgl-project/sglang server_args.py ``_handle_speculative_decoding``:
#: "Max running requests is reset to 48 for speculative decoding", "Overlap scheduler is disabled
#: because of using eagle3 or standalone speculative decoding", unless SGLANG_ENABLE_SPEC_V2).
SPECULATIVE_RUNNING_REQUESTS = 48
SPECULATIVE_RESETS = {"sglang": ("eagle", "mtp", "draft")}


#: Drafters beside which an engine schedules without overlap: SGLang's (:data:`SPECULATIVE_RESETS`),
#: vLLM's draft model, n-gram and Medusa (v0.14 release notes: async scheduling on by default
#: "excludes ... non-MTP/Eagle spec decoding"), TensorRT-LLM's PyTorch runtime's n-gram drafter
#: (``create_py_executor`` sets ``disable_overlap_scheduler`` where
#: ``SpeculativeDecodingMode.support_overlap_scheduler()`` is false, which it is for NGRAM from 1.0
#: to 2026's main branch: tensorrt_llm/_torch/pyexecutor/py_executor_creator.py and
#: _torch/speculative/interface.py). A draft model and two-model EAGLE-3 turned it off too in 1.0;
#: from 1.1 (PR #7651) they keep it with the default chain drafter and TRTLLM attention backend, as
#: MTP and one-model EAGLE-3 always have.
NO_OVERLAP_DRAFTERS = {**SPECULATIVE_RESETS, "vllm": ("draft", "ngram", "medusa"), "trtllm-pytorch": ("ngram",)}


def drafter_limits(engine: str, method: str, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """The :data:`USER_LIMITS` ``engine`` sets for itself when it runs a ``method`` drafter, over
    the ``given`` ones (by name; an unset one absent or None): SGLang's 48 running requests with
    EAGLE, MTP or a draft model where none is given (:data:`SPECULATIVE_RESETS`), and no overlap
    scheduling beside the drafters of :data:`NO_OVERLAP_DRAFTERS`, whatever is given (the engines
    turn it off themselves). Only the limits it sets; for a run simulated with the drafter
    (:func:`for_speculation`) or without it (a measured run whose acceptance is unknown)."""
    given = given or {}
    out: dict[str, Any] = {}
    if method in SPECULATIVE_RESETS.get(engine, ()) and given.get("max_num_seqs") is None:
        out["max_num_seqs"] = SPECULATIVE_RUNNING_REQUESTS
    if method in NO_OVERLAP_DRAFTERS.get(engine, ()):
        out["overlap_host"] = False
    return out


def for_speculation(engine: str, sched: SchedulerConfig, method: str) -> SchedulerConfig:
    """``sched`` as ``engine`` runs it with a speculative ``method``: with its :func:`drafter_limits`."""
    limits = drafter_limits(engine, method, {"max_num_seqs": sched.max_num_seqs})
    return replace(sched, **limits) if limits else sched
