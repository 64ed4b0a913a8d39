"""Plain-text tables: the one layout every command prints (no pint, no specs, quick to import)."""

from __future__ import annotations


def text_table(headers: list[str], rows: list[list[str]], *, right: set[int] | None = None) -> str:
    """Align ``rows`` under ``headers``; columns in ``right`` are right-aligned."""
    right = right or set()
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])
