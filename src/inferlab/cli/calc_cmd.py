"""``inferlab calc``: the unit-checked calculator, catalog values named in it."""

from __future__ import annotations

import argparse
from typing import Any

from .output import emit as _emit


def _calc(args: argparse.Namespace) -> None:
    from ..calc.evaluator import evaluate
    from ..results.render import pretty

    result = evaluate(args.expression.strip(), to=args.to)  # (the space expression_first put before a '-')
    text = f"{result.value.magnitude:.6g} {result.value.units:~P}".rstrip()
    for ref in result.references:
        text += f"\n  {ref.text} = {pretty(ref.value)}  [{ref.source}]"
    _emit(args, result.to_dict(), text)


#: The options of ``calc``: any other argument starting with ``-`` is its expression.
_OPTIONS = ("--to", "--json", "-h", "--help")


def expression_first(argv: list[str]) -> list[str]:
    """``calc``'s arguments with an expression that starts with ``-`` (``-(1)``, ``-x*2``) or follows
    ``--`` kept as the expression: argparse had read it as an unknown option (and the intermixed
    parsing of positionals drops ``--``). A leading space keeps it from looking like one."""
    out, after_dashes, value_of = [], False, False
    for arg in argv:
        if arg == "--" and not after_dashes and not value_of:
            after_dashes = True
            continue
        looks_like_option = arg.startswith("-") and arg.split("=")[0] not in _OPTIONS
        out.append(" " + arg if (after_dashes or looks_like_option) and not value_of else arg)
        value_of = arg == "--to"
    return out


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    """``calc EXPR [--to UNIT]``."""
    calc = sub.add_parser("calc", parents=[common], help="unit-checked calculator; catalog values can be named")
    calc.add_argument("expression", metavar="EXPR", help='e.g. "140 GB / (3.35 TB/s)" or "h100-sxm.flops.bf16 / h100-sxm.memory_bandwidth"')
    calc.add_argument("--to", metavar="UNIT", help="express the result in UNIT, e.g. ms or GB/s")
    calc.set_defaults(func=_calc)
