"""Argument types shared by the CLI commands."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

from ..results.figure_file import FIGURE_FORMATS


def comma_list(cast: Callable[[str], float], noun: str) -> Callable[[str], list]:
    """An argparse type for ``1,8,64``: distinct values of ``cast``, at least one, a clear error otherwise."""

    def parse(text: str) -> list:
        items = text.split(",")
        if len(items) > 1 and not all(v.strip() for v in items):  # '1,,2' or '1,': a value left out
            raise argparse.ArgumentTypeError(f"expected {noun}s separated by commas, got {text!r} (an empty item)")
        try:
            values = [cast(v) for v in items if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {noun}s separated by commas, got {text!r}{suffix_hint(text)}"
                                             ) from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected at least one {noun}")
        from ..checks import repeated

        twice = repeated(values)
        if twice is not None:  # a sweep's points are distinct: a repeat is a typo or a wasted run
            raise argparse.ArgumentTypeError(f"{twice:g} is given twice in {text!r}; each value once"
                                             if isinstance(twice, (int, float)) else
                                             f"{twice!r} is given twice in {text!r}; each value once")
        return values

    return parse


#: A number written with a thousands suffix: ``128k``, ``1.5M``.
_SUFFIXED = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([kKmM])(?!\w)")
_SCALES = {"k": ((1e3, "1000"), (1024.0, "1024")), "m": ((1e6, "10^6"), (2.0**20, "2^20"))}


def suffix_hint(text: str) -> str:
    """``; write whole numbers: 128k is 128000 (k = 1000) or 131072 (k = 1024)`` for the first
    number of ``text`` written with a k or M suffix; empty when there is none.

    The suffix is refused rather than read: token counts are written both ways (a "128k
    context" is 131072 tokens, a "128k prompt" often 128000).

    >>> suffix_hint("2048,128k")
    '; write whole numbers: 128k is 128000 (k = 1000) or 131072 (k = 1024)'
    >>> suffix_hint("1.3k"), suffix_hint("12")
    ('; write whole numbers: 1.3k is 1300 (k = 1000)', '')
    """
    found = _SUFFIXED.search(text)
    if found is None:
        return ""
    number, suffix = float(found.group(1)), found.group(2)
    readings = [f"{number * scale:.0f} ({suffix} = {name})" for scale, name in _SCALES[suffix.lower()]
                if (number * scale).is_integer()]
    return f"; write whole numbers: {found.group(0)} is {' or '.join(readings)}" if readings else ""


def output_path(text: str) -> str:
    """An argparse type for a file to write (``--out``): its folder must exist.

    Checked before the command runs, so a long computation does not end in a failed write;
    the folder is not created, since a typo in it would silently scatter files.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("no file named (an empty path); name the file to write")
    folder = Path(text).expanduser().parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is a file, not a folder" if folder.exists()
                                         else f"cannot write {text}: the folder {folder} does not exist (create it "
                                         "first)")
    if Path(text).expanduser().is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: it is a folder; name a file in it")
    return text


def output_file(text: str) -> str:
    """An argparse type for a figure to write (``--plot``): its folder must exist
    (:func:`output_path`) and its suffix name an image format."""
    output_path(text)
    suffix = Path(text).suffix.lower().lstrip(".")
    if suffix not in FIGURE_FORMATS:
        raise argparse.ArgumentTypeError(f"cannot write a figure to {text}: its suffix names no image format; use "
                                         f"one of .{', .'.join(FIGURE_FORMATS)}")
    return text




def add_cluster_flags(parser: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--scheduler ADDRESS``: run the command's independent units on Dask."""
    parser.add_argument("--workers", type=int, metavar="N",
                        help="spread the work over a local Dask cluster of N processes (pip install 'inferlab[dask]')")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="spread the work over an existing Dask cluster, e.g. tcp://10.0.0.5:8786")


#: Help of ``--window-kv`` and ``--window-pool-ratio`` (``serve`` and ``estimate``).
WINDOW_KV_HELP = ("windowed attention kinds whose KV the engine frees beyond the window: sliding,chunked, sliding, "
                  "chunked, or none (every layer keeps every token: SGLang's --disable-hybrid-swa-memory, vLLM's "
                  "--disable-hybrid-kv-cache-manager); default the engine's (vLLM, TensorRT-LLM sliding)")
WINDOW_RATIO_HELP = ("SGLang's windowed layers' pool of their own, R tokens for each of the full layers' pool, R in "
                     "(0, 1] (--swa-full-tokens-ratio, default 0.8); the other engines keep one pool and refuse it")


def window_kv_value(text: str | None) -> tuple[str, ...] | None:
    """``--window-kv`` as a ``window_kv`` tuple (None when not given); one line naming the flag otherwise."""
    from ..engines.window_options import window_kinds

    return None if text is None else window_kinds(text, "--window-kv")
