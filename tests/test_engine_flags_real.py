"""Launch commands and checkpoint names as published (engine docs, recipes, Hugging Face), read with
hand-written expectations from the engines' own sources."""

from __future__ import annotations

from inferlab.engines import parse_engine_args

SGLANG = "python3 -m sglang.launch_server --trust-remote-code"


def test_sglang_enable_deepep_moe_spreads_the_experts_over_the_tp_gpus():
    """SGLang 0.4.x server_args: ``if self.enable_deepep_moe: ... self.ep_size = self.tp_size``;
    later releases map the deprecated flag to ``--moe-a2a-backend deepep``, which sets the same.
    A two-node DeepSeek launch of the 0.4 era: 16 GPUs, experts over all 16."""
    launch = parse_engine_args(f"{SGLANG} --model-path deepseek-ai/DeepSeek-V3-0324 --tp 16 --dist-init-addr 10.0.0.1:5000 "
                               "--nnodes 2 --node-rank 0 --enable-deepep-moe --deepep-mode auto")
    assert (launch.tp, launch.ep) == (16, 16)
    assert "--enable-deepep-moe" not in " ".join(launch.unknown)
