"""What to say about an option a command does not have: inferlab's name for an engine's or a
benchmark's spelling of it, else the command's closest options (did you mean).

Each command is asked about its own options, so ``serve --max-num-tokens`` points to
``--max-num-batched-tokens`` and ``estimate --max-num-batched-tokens`` to ``--max-num-tokens``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence

#: An engine's or benchmark's option (dashes, as vLLM and SGLang write it; TensorRT-LLM's
#: ``--tp_size`` is read with dashes) -> inferlab's options for it, in order of preference: the
#: first the command has is named. A target may carry the value that gives the same meaning.
ENGINE_SPELLINGS: dict[str, tuple[str, ...]] = {
    "--tensor-parallel-size": ("--tp",), "--tp-size": ("--tp",), "-tp": ("--tp",),
    "--pipeline-parallel-size": ("--pp",), "--pp-size": ("--pp",), "-pp": ("--pp",),
    "--data-parallel-size": ("--dp",), "--dp-size": ("--dp",), "-dp": ("--dp",),
    "--expert-parallel-size": ("--ep",), "--ep-size": ("--ep",),
    "--enable-dp-attention": ("--attention-dp",),
    # a static batch of vllm bench latency and trtllm-bench
    "--batch-size": ("--batch",),
    "--max-batch-size": ("--max-num-seqs",), "--max-running-requests": ("--max-num-seqs",),
    "--max-num-batched-tokens": ("--max-num-tokens",), "--max-num-tokens": ("--max-num-batched-tokens",),
    "--chunked-prefill-size": ("--max-num-tokens", "--max-num-batched-tokens"),
    "--block-size": ("--kv-block-size",), "--page-size": ("--kv-block-size",),
    "--tokens-per-block": ("--kv-block-size",),
    "--mem-fraction-static": ("--gpu-memory-utilization",),
    "--kv-cache-free-gpu-memory-fraction": ("--gpu-memory-utilization",),
    "--context-length": ("--max-model-len",), "--max-seq-len": ("--max-model-len",),
    "--quantization": ("--precision",), "-q": ("--precision",), "--dtype": ("--precision",),
    "--speculative-config": ("--spec",), "--speculative-algorithm": ("--spec",),
    "--enable-prefix-caching": ("--prefix-cache", "--prefix"),
    "--enable-chunked-prefill": ("--chunked-prefill",),
    "--enable-mixed-chunk": ("--mixed-prefill",),
    "--async-scheduling": ("--overlap-host",), "--no-async-scheduling": ("--no-overlap-host",),
    "--disable-overlap-schedule": ("--no-overlap-host",),
    "--cuda-graph-max-bs": ("--graph-max-batch",),
    "--enforce-eager": ("--no-cuda-graphs", "--graph-max-batch 0"),
    "--disable-cuda-graph": ("--no-cuda-graphs", "--graph-max-batch 0"),
    "--piecewise-cuda-graph-max-tokens": ("--prefill-graph-tokens",),
    "--swa-full-tokens-ratio": ("--window-pool-ratio",),
    "--mamba-ssm-dtype": ("--state-dtype",), "--mamba-ssm-cache-dtype": ("--state-dtype",),
    "--mamba-full-memory-ratio": ("--state-pool-ratio",), "--max-mamba-cache-size": ("--state-pool-slots",),
    # vllm bench serve
    "--num-prompts": ("--num-requests",), "--request-rate": ("--rate",),
    "--input-len": ("--isl",), "--random-input-len": ("--isl",),
    "--output-len": ("--osl",), "--random-output-len": ("--osl",),
}

#: Engine flags with no inferlab option of their own, whose names sit close to one that means
#: something else (SGLang's --max-total-tokens sizes the KV pool, not the token budget): no
#: did-you-mean for them, only the launch-command route.
ENGINE_ONLY = ("--max-total-tokens", "--max-prefill-tokens", "--max-num-partial-prefills")

_NUMBER = re.compile(r"^-\.?\d")


def command_parser(parser: argparse.ArgumentParser, namespace: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command ``namespace`` was parsed for: ``parser``'s subcommand's,
    down through nested subcommands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(namespace, action.dest, None) or "")
            if chosen is not None:
                return command_parser(chosen, namespace)
    return parser


def unknown_options_text(parser: argparse.ArgumentParser, extras: Sequence[str]) -> str:
    """One line for the arguments ``parser``'s command did not take: for each unknown option,
    inferlab's name for it or the closest options; other arguments listed as argparse does.

    >>> p = argparse.ArgumentParser(prog="inferlab estimate")
    >>> _ = p.add_argument("--tp"), p.add_argument("--batch")
    >>> unknown_options_text(p, ["--tensor-parallel-size", "2", "--bacth", "8"])
    'estimate has no options --tensor-parallel-size (use --tp), --bacth (did you mean --batch?); see inferlab estimate --help'
    """
    options = list(dict.fromkeys(a.split("=", 1)[0] for a in extras if a.startswith("-") and not _NUMBER.match(a)))
    if not options:
        return f"unrecognized arguments: {' '.join(extras)} (see {parser.prog} --help)"
    command = parser.prog.split(maxsplit=1)[-1]
    named = ", ".join(f"{name}{_advice(parser, name)}" for name in options)
    return f"{command} has no option{'s' if len(options) > 1 else ''} {named}; see {parser.prog} --help"


def _advice(parser: argparse.ArgumentParser, name: str) -> str:
    """`` (use --tp)`` or `` (did you mean --a or --b?)`` for the unknown option ``name``;
    empty when nothing is close."""
    import difflib

    own = {o.lstrip("-"): o for o in parser._option_string_actions if o.startswith("--")}
    bare = name.lstrip("-").replace("_", "-").lower()
    for target in ENGINE_SPELLINGS.get(("--" if name.startswith("--") else "-") + bare, ()):
        if target.split()[0].lstrip("-") in own:
            return f" (use {target})"
    positional = {a.dest: str(a.metavar or a.dest) for a in parser._get_positional_actions()}
    if bare in positional:
        return f" ({positional[bare]} goes without a flag: {parser.prog} {' '.join(positional.values())})"
    engine = " (an engine's flag? give the launch command whole: --engine-args)" if "engine-args" in own else ""
    if "--" + bare in ENGINE_ONLY:
        return engine
    close = [own[c] for c in ([bare] if bare in own else difflib.get_close_matches(bare, own, n=3, cutoff=0.65))]
    if not close:
        return engine
    return f" (did you mean {' or '.join([', '.join(close[:-1]), close[-1]] if len(close) > 1 else close)}?)"
