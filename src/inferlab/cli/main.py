"""``inferlab``: catalogs, estimates, serving, plans and a unit-checked calculator from the shell.

Every command accepts ``--json``. Exit codes, the same for every command, are decided here
and nowhere else (:data:`EXIT_CODES`, :func:`exit_code`):

- ``0``: the command did what was asked (a grid with some points that do not run still
  prints the ones that do, and says why the others do not);
- ``1``: the input was understood but nothing came of it: nothing fits or is feasible, or
  the run failed (:class:`~inferlab.errors.InfeasibleError`);
- ``2``: bad input: an unknown name, a malformed value, a meaningless combination, a file
  that cannot be read (any other :class:`~inferlab.errors.InferlabError`, a usage error,
  a file that is not UTF-8 text or cannot be opened).

Every error is one line on stderr, ``inferlab: error: ...``, never a traceback. Messages
name the command's flags (``--waves``), not the Python keywords (``waves=True``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any


from .. import __version__
from ..errors import CombinationError, InfeasibleError, InferlabError, cli_spelling
from .bands_cmd import add_parser as add_bands_parser
from .calc_cmd import add_parser as add_calc_parser, expression_first
from .catalog_cmd import add_parsers as add_catalog_parsers, modality_instead
from .estimate_cmd import add_parser as add_estimate_parser
from .explore_cmd import add_parser as add_explore_parser
from .fleet_cmd import add_parser as add_fleet_parser
from .modalities_cmd import add_parsers as add_modality_parsers
from .plan_cmd import add_parser as add_plan_parser
from .precision_flags import precision_spelling
from .serve_cmd import add_parser as add_serve_parser
from .validate import add_parsers as add_validate_parsers


#: Exit status per outcome; the first matching class wins.
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (CombinationError, 2),
    (InfeasibleError, 1),
    (InferlabError, 2),
    (UnicodeDecodeError, 2),
    (OSError, 2),
)


class UsageError(Exception):
    """A command line argparse cannot read (unknown flag, malformed value): exit 2."""


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, and which knows each option's flag
    (``flag_names``: destination -> ``--flag``) for messages."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.flag_names: dict[str, str] = {}
        super().__init__(*args, **kwargs)
        self.set_defaults(flag_names=self.flag_names)

    def add_argument(self, *names: Any, **kwargs: Any) -> argparse.Action:
        return self._named(super().add_argument(*names, **kwargs))

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self._naming(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return self._naming(super().add_mutually_exclusive_group(**kwargs))

    def _named(self, action: argparse.Action) -> argparse.Action:
        long = [n for n in action.option_strings if n.startswith("--")]
        if long:
            self.flag_names.setdefault(action.dest, long[0])
        return action

    def _naming(self, group: Any) -> Any:
        """``group`` whose options are named in :attr:`flag_names` too."""
        add = group.add_argument
        group.add_argument = lambda *names, **kwargs: self._named(add(*names, **kwargs))
        return group

    def error(self, message: str) -> None:  # type: ignore[override]
        # a catalog command given a name where its action goes (inferlab hardware h100): show it
        name = re.fullmatch(r"argument action: invalid choice: '(.*)' \(choose from .*\)", message)
        if name and self.prog.split()[-1] in ("hardware", "models"):
            raise UsageError(f"{message}; to show one: {self.prog} show {name.group(1)}")
        raise UsageError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """As argparse's, but arguments no option took are named by the command that was given
        them, with inferlab's name for an engine's spelling or the closest options."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            from .unknown_options import command_parser, unknown_options_text

            raise UsageError(unknown_options_text(command_parser(self, parsed), extras))
        return parsed

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """A command's options may come between its positionals (``estimate MODEL --tp 2 HARDWARE``):
        argparse's intermixed parsing, where the parser has no subcommands. Plain parsing had taken
        an optional HARDWARE as left out when an option came first, and refused it as unrecognized."""
        if getattr(self, "_intermixing", False) or any(a.nargs in (argparse.PARSER, argparse.REMAINDER)
                                                       for a in self._get_positional_actions()):
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def exit_code(exc: BaseException) -> int | None:
    """The exit status of a command that raised ``exc`` (:data:`EXIT_CODES`); None when
    ``exc`` is not an outcome the CLI reports (a defect, which keeps its traceback)."""
    if isinstance(exc, UsageError):
        return 2
    return next((code for kind, code in EXIT_CODES if isinstance(exc, kind)), None)


def _error_line(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"a file is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8"
    if isinstance(exc, OSError) and not isinstance(exc, InferlabError):
        where = f" {exc.filename}" if exc.filename else ""
        return f"cannot use{where}: {exc.strerror or exc}"
    return " ".join(str(exc).split()) or type(exc).__name__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``inferlab`` command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser = _Parser(prog="inferlab", description="Analytical model of LLM inference: catalogs and calculator.")
    parser.add_argument("--version", action="version", version=f"inferlab {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    add_catalog_parsers(sub, common)
    add_estimate_parser(sub, common)
    add_serve_parser(sub, common)
    add_plan_parser(sub, common)
    add_explore_parser(sub, common)
    add_fleet_parser(sub, common)
    add_validate_parsers(sub, common)
    add_bands_parser(sub, common)
    add_modality_parsers(sub, common)
    add_calc_parser(sub, common)

    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit status (0 done, 1 nothing feasible or failed, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["calc"]:  # an expression may start with '-'
        argv = ["calc", *expression_first(argv[1:])]
    try:
        args = build_parser().parse_args(argv)
        args.flag_names = precision_spelling(args)
        with cli_spelling(args.flag_names):
            args.func(args)
    except BrokenPipeError:  # output piped into head
        return 0
    except Exception as exc:  # noqa: BLE001 - mapped to an exit status, or re-raised as a defect
        code = exit_code(exc)
        if code is None:
            raise
        print(f"inferlab: error: {_error_line(modality_instead(exc))}", file=sys.stderr)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
