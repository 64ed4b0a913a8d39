"""Examples run as users would run them."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, capsys):
    if path.name == "dask_cluster.py":
        pytest.importorskip("distributed")  # the optional dask extra
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()
