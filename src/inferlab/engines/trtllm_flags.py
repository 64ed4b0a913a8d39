"""``trtllm-serve``'s command-line flags: what each sets, which change nothing inferlab
models, and which are real but not modelled.

Names as TensorRT-LLM's ``tensorrt_llm/commands/serve.py`` declares its click options (1.0 to
1.2): each setting's short spelling first (the one :mod:`.trtllm` writes, and names to a user of
another engine's flag), then the long alias of the same option (``--tensor_parallel_size`` of
``--tp_size``, ``--free_gpu_memory_fraction`` of ``--kv_cache_free_gpu_memory_fraction``).
``--enable_chunked_prefill`` is a switch (click ``is_flag``): it takes no value.
"""

from __future__ import annotations

from typing import Any

from .command_line import Spec

FLAGS = {
    "--backend": Spec("backend"), "--tp_size": Spec("tp", "int"), "--pp_size": Spec("pp", "int"),
    "--ep_size": Spec("ep", "int"), "--max_batch_size": Spec("max_num_seqs", "int"),
    "--max_num_tokens": Spec("max_num_batched_tokens", "int"), "--max_seq_len": Spec("max_model_len", "int"),
    "--kv_cache_free_gpu_memory_fraction": Spec("gpu_memory_utilization", "fraction"),
    "--extra_llm_api_options": Spec("options"), "--config": Spec("options"),
    "--enable_chunked_prefill": Spec("chunked_prefill", "on"),
    "--tensor_parallel_size": Spec("tp", "int"), "--pipeline_parallel_size": Spec("pp", "int"),
    "--moe_expert_parallel_size": Spec("ep", "int"),
    "--free_gpu_memory_fraction": Spec("gpu_memory_utilization", "fraction"),
}
NO_EFFECT_VALUE = ("--host", "--port", "--log_level", "--tokenizer", "--custom_tokenizer", "--gpus_per_node",
                   "--num_postprocess_workers", "--reasoning_parser", "--tool_parser", "--metadata_server_config_file",
                   "--server_role", "--served_model_name", "--chat_template", "--revision", "--otlp_traces_endpoint",
                   "--media_io_kwargs", "--custom_module_dirs")
NO_EFFECT_SWITCH = ("--trust_remote_code", "--fail_fast_on_attention_window_too_large")
BACKENDS = {"pytorch": "trtllm-pytorch", "tensorrt": "trtllm", "trt": "trtllm", "_autodeploy": "trtllm-pytorch"}
#: Real flags whose effect inferlab does not model -> (the engine's default, as written; what a
#: value other than the default would change). At the default a flag changes nothing.
UNMODELLED_FLAGS = {
    "--cp_size": ("1", "context parallelism (a long prompt's attention split over ranks) is not modelled; "
                       "simulated without it"),
    "--moe_cluster_parallel_size": (None, "expert cluster parallelism is not modelled; the experts are laid out by "
                                          "--ep_size alone"),
    "--max_beam_width": ("1", "beam search is not modelled; simulated as one beam a request"),
    "--disagg_cluster_uri": (None, "a disaggregated server's cluster: inferlab simulates one server; give separate "
                                   "prefill and decode pools to model the pair"),
}
UNMODELLED_FLAGS["--context_parallel_size"] = UNMODELLED_FLAGS["--cp_size"]
UNMODELLED_FLAGS["--cluster_size"] = UNMODELLED_FLAGS["--moe_cluster_parallel_size"]


def unmodelled_flags(flags: Any) -> list[str]:
    """Notes for the unmodelled flags of ``flags`` (a :class:`~.command_line.Flags`), which stay
    unknown; one at its default value moves to ``no_effect`` instead."""
    notes = []
    for entry in list(flags.unknown):
        name, _, value = entry.partition(" ")
        if name in UNMODELLED_FLAGS:
            default, what = UNMODELLED_FLAGS[name]
            if value == default:
                flags.unknown.remove(entry)
                flags.no_effect.append(f"{name} {value}")
            else:
                notes.append(f"{entry}: {what}")
    return notes
