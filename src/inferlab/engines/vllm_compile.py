"""vLLM's compilation options (``-O3``, ``--compilation-config``), read into what inferlab models of them.

vLLM's engine arguments (0.10-0.11): ``--compilation-config, -O`` is "torch.compile and cudagraph
capture configuration"; a number is the compilation level ("level 3 is the recommended level for
production, also default in V1"), ``-O3`` the same as ``-O 3``, a JSON object the full config,
and ``-O.key=value`` or ``--compilation-config.key value`` one key of it. In later releases
``-O<n>`` is an optimization level whose ``O3`` is "currently the same as" the default ``O2``
(``vllm.config.vllm.OptimizationLevel``, the 0.17 API docs), and ``-cc.key`` spells one key (vllm
PR #29557). Either way ``-O3`` is vLLM's default.

inferlab times vLLM's steps compiled and run from CUDA graphs (its profile holds no host time per
kernel for vLLM run eagerly), so: the default level changes nothing; ``cudagraph_mode`` ``NONE`` is
``--enforce-eager``'s case (a note); ``PIECEWISE``, ``FULL`` and ``FULL_AND_PIECEWISE`` graph both
decode and mixed iterations as simulated (which layers run inside the graphs is not modelled);
``FULL_DECODE_ONLY`` runs prefill and mixed iterations eagerly, and other levels and keys change
kernels or host time that is not measured: kept unknown, with a note where it is known what they change.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..errors import SpecError

#: The compilation level vLLM runs by default (and ``-O3`` in the later optimization levels).
DEFAULT_LEVEL = 3
#: vLLM's ``CUDAGraphMode`` names (vllm/config/compilation.py, 0.10-0.11).
GRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")
#: What running without CUDA graphs leaves out (``--enforce-eager`` too).
EAGER = ("vLLM's host time per kernel without CUDA graphs is not measured, so the steps are simulated as with them "
         "(its decode will run slower than this)")
_PREFIX = ("-O", "-cc", "--compilation-config")


def split_compilation(words: list[str], normalize: Any) -> tuple[list[str], list[tuple[str, str, Any]]]:
    """``words`` without vLLM's compilation options, and each setting they make as (the setting as
    written, key, value): ``-O3``, ``-O 3``, ``-O=3``, ``--compilation-config 3`` or a JSON object,
    ``-O.key=value``, ``-cc.key value``, ``--compilation-config.key value``."""
    rest: list[str] = []
    settings: list[tuple[str, str, Any]] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        name, eq, inline = word.partition("=")
        head, dot, key = name.partition(".")
        head, key = normalize(head), key.replace("-", "_")
        if re.fullmatch(r"-O\d", name) and not eq:
            settings.append((name, "level", int(name[2:])))
            continue
        if head not in _PREFIX or head == "-cc" and not dot:
            rest.append(word)
            continue
        if not eq:
            if i >= len(words) or words[i].startswith("--"):
                raise SpecError(f"vllm: {name} needs a value (a compilation level or a JSON object)")
            inline, i = words[i], i + 1
        if dot:
            settings.append((f"{head}.{key} {inline}", key, _value(inline)))
        elif isinstance(level := _value(inline), int) and not isinstance(level, bool):
            settings.append((f"{head} {level}", "level", level))
        else:
            settings += [(f"{head}.{k} {v if isinstance(v, str) else json.dumps(v)}", k, v)
                         for k, v in _config(head, inline).items()]
    return rest, settings


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _config(flag: str, text: str) -> dict[str, Any]:
    value = _value(text)
    if not isinstance(value, dict):
        raise SpecError(f"vllm: {flag} {text!r:.80} is neither a compilation level (0-3) nor a JSON object, e.g. "
                        "'{\"cudagraph_mode\": \"FULL_AND_PIECEWISE\"}'")
    return value


def read_compilation(settings: list[tuple[str, str, Any]], unknown: list[str], no_effect: list[str],
                     notes: list[str]) -> None:
    """Sort the settings of :func:`split_compilation` into ``no_effect``, ``unknown`` and ``notes``."""
    for shown, key, value in settings:
        if key in ("level", "mode"):
            if str(value).upper() in (str(DEFAULT_LEVEL), "VLLM_COMPILE"):
                no_effect.append(shown)
            else:
                unknown.append(shown)
                notes.append(f"{shown}: compilation other than vLLM's default (level {DEFAULT_LEVEL}: torch.compile "
                             "with piecewise CUDA graphs; at -O0, later releases also run without CUDA graphs): other "
                             "kernels and host time, not measured; the steps are simulated compiled and graphed")
        elif key == "cudagraph_mode":
            mode = str(value).upper()
            if mode not in GRAPH_MODES:
                raise SpecError(f"vllm: {shown}: cudagraph_mode is one of {', '.join(GRAPH_MODES)}")
            if mode == "NONE":
                notes.append(f"{shown}: no CUDA graphs, as --enforce-eager: {EAGER}")
            elif mode == "FULL_DECODE_ONLY":
                unknown.append(shown)
                notes.append(f"{shown}: prefill and mixed iterations run without CUDA graphs, whose host time per "
                             "kernel vLLM's profile does not hold: they are simulated as graphed")
            else:
                no_effect.append(shown)
        else:
            unknown.append(shown)
