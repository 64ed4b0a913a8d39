"""Engines' own language: launch commands of vLLM, SGLang and TensorRT-LLM, read and written.

``parse_engine_args("vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 2 ...")`` gives an
:class:`EngineLaunch` whose ``to_kwargs()`` feeds :func:`inferlab.estimate` or
:func:`inferlab.serve`; ``launch_command(launch, "sglang")`` writes it back as another
engine's command. One module per engine (:mod:`.vllm`, :mod:`.sglang`, :mod:`.trtllm`),
each stating the versions whose flag names it follows.
"""

from .launch import LAUNCH_ENGINES, EngineLaunch, Rendered, Speculation
from .render import launch_command, launch_from_deployment, parse_engine_args

__all__ = ["LAUNCH_ENGINES", "EngineLaunch", "Rendered", "Speculation", "launch_command", "launch_from_deployment",
           "parse_engine_args"]
