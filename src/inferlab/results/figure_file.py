"""Where a figure is written: a file whose folder exists and whose suffix names an image format,
checked before drawing (``--plot`` on the command line, ``.plot(path)`` in Python)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import SpecError

#: Suffixes matplotlib writes figures to (its ``savefig`` formats; pgf needs a LaTeX install).
FIGURE_FORMATS = ("png", "svg", "pdf", "jpg", "jpeg", "webp", "tif", "tiff", "eps", "ps", "svgz")


def figure_file(path: Any, caller: str) -> Any:
    """``path`` as a :class:`~pathlib.Path` a figure can be written to, or :class:`SpecError`
    saying why not (not a path, a suffix that names no image format, a folder that does not exist)."""
    if hasattr(path, "write"):  # a file-like object (io.BytesIO): savefig writes to it as it is
        return path
    if not isinstance(path, (str, os.PathLike)):
        raise SpecError(f"{caller}: path must be a file name (a str or Path), got {type(path).__name__} {path!r:.40}")
    p = Path(path)
    if p.suffix.lower().lstrip(".") not in FIGURE_FORMATS:
        raise SpecError(f"{caller}: cannot write a figure to {p}: its suffix names no image format; use one of "
                        f".{', .'.join(FIGURE_FORMATS)}")
    if not p.parent.is_dir():
        raise SpecError(f"{caller}: cannot write {p}: the folder {p.parent} does not exist")
    return p
