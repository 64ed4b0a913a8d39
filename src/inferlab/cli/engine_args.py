"""``--engine-args "vllm serve ..."``: a pasted engine launch command as the deployment of ``estimate`` and ``serve``.

The command gives the model, engine, layout, precision, scheduler limits and speculation;
HARDWARE stays the positional argument. An inferlab flag given alongside must agree with
the command (``--tp 4`` next to ``--tensor-parallel-size 2`` is refused); the speculative
acceptance, which no engine flag carries, comes from ``--spec``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Literal

from ..errors import SpecError

HELP = ("a vLLM, SGLang or TensorRT-LLM launch command, quoted ('vllm serve MODEL -tp 2 ...'): model, engine, "
        "layout, precision, limits and speculation from its flags; HARDWARE stays an argument")


def add_engine_args_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--engine-args``."""
    parser.add_argument("--engine-args", metavar="COMMAND", default=None, help=HELP)


def positionals(args: argparse.Namespace) -> None:
    """With engine args the model comes from the command: one positional is the hardware."""
    if args.hardware is not None and args.model is not None:
        raise SpecError(f"with --engine-args the model comes from the command: give the HARDWARE alone (got "
                        f"{args.model} and {args.hardware})")
    if args.hardware is None and args.model is not None:
        args.model, args.hardware = None, args.model


def apply(launch: Any, explicit: dict[str, Any], target: Literal["estimate", "serve"],
          names: dict[str, str] | None = None) -> dict[str, Any]:
    """The keyword arguments of ``launch`` with ``explicit`` options, after printing what it
    does not model to stderr; the prefix cache switched off by the flags reaches the workload.
    ``names`` (the CLI's option names for messages) then names each option the command's flags
    set, and no option gave, as its flag (``--ep_size 2``, not ``--ep 2``)."""
    kw = launch.merged(explicit, target)
    if names is not None:
        names.update({key: flag for key, flag in launch.sources
                      if explicit.get(key) is None and key != "precision" and str(flag).startswith("-")})
    if launch.prefix_caching is False:
        if target == "estimate" and kw.get("prefix_cache") is not None:
            raise SpecError(f"--prefix-cache {kw['prefix_cache']} but the engine args turn prefix caching off "
                            f"({launch.flag_of('prefix_caching')}); drop one of them")
        if target == "serve" and isinstance(kw.get("prefix"), str):
            items = [item.replace(" ", "").lower() for item in kw["prefix"].split(",")]
            if "cache=on" in items:
                raise SpecError(f"--prefix {kw['prefix']} asks for cache=on but the engine args turn prefix caching "
                                f"off ({launch.flag_of('prefix_caching')}); drop one of them")
            if not any(item.startswith("cache=") for item in items):
                kw["prefix"] += ",cache=off"
    for line in launch.report(target):
        print(f"inferlab: warning: {line}", file=sys.stderr)
    return kw
