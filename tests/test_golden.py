"""scripts/golden.py: a diff finds what moved, what went missing and what is new."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "scripts" / "golden.py"


def _module():
    spec = importlib.util.spec_from_file_location("golden", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_diff_reports_moved_missing_and_new(tmp_path, monkeypatch, capsys):
    golden = _module()
    before = {"a": 1.0, "b": 2.0, "c": math.nan, "gone": 3.0}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(before))
    monkeypatch.setattr(golden, "grid", lambda: {"a": 1.0, "b": 2.0 * (1 + 1e-9), "c": math.nan, "new": 4.0})
    assert golden.main(["diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert "moved   b: 2.0 -> 2.000000002" in out and "missing gone" in out and "new     new" in out
    assert "4 figures: 1 moved, 1 missing, 1 new" in out
    monkeypatch.setattr(golden, "grid", lambda: dict(before))
    assert golden.main(["diff", str(path)]) == 0  # NaN equals NaN here: an unpredicted case stays unpredicted
