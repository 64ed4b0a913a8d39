"""What every command prints: a table for people, or with ``--json`` the same data as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Print ``text``, or with ``--json`` the data (a callable is called only then)."""
    if args.json:
        from ..results.render import json_ready

        print(json.dumps(json_ready(data() if callable(data) else data), indent=2, default=str, allow_nan=False))
    else:
        print(text)
