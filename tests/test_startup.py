"""Start-up: quick commands import neither scipy, pandas, matplotlib nor pint, and the lazy
package namespace behaves as the eager one did. (Speed itself is a benchmark:
``benchmarks/bench_startup.py``.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import inferlab

HEAVY = ("scipy", "pandas", "matplotlib", "pint", "dask")


def _imported_after(code: str, cache: str) -> list[str]:
    """The heavy packages in ``sys.modules`` after ``code`` runs in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    env = {**os.environ, "INFERLAB_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    return out.stdout.split()


def test_import_inferlab_loads_nothing_heavy(tmp_path):
    assert _imported_after("import inferlab", str(tmp_path)) == []


@pytest.mark.parametrize("argv", [["--help"], ["hardware", "list"], ["models", "list"]])
def test_quick_commands_load_nothing_heavy_once_the_specs_are_cached(tmp_path, argv):
    run = ("import contextlib, io\nfrom inferlab.cli.main import main\n"
           f"with contextlib.redirect_stdout(io.StringIO()):\n    try: main({argv!r})\n    except SystemExit: pass")
    _imported_after(run, str(tmp_path))  # the first run parses the YAML (with pint) and fills the memo
    assert _imported_after(run, str(tmp_path)) == []


def test_public_names_resolve_to_what_they_name():
    import inferlab.explore  # noqa: F401 - the package, imported the way a user might

    assert callable(inferlab.explore) and inferlab.explore.__module__ == "inferlab.explore"
    assert callable(inferlab.estimate) and inferlab.estimate.__module__ == "inferlab.phases.estimate"
    assert callable(inferlab.sweep) and callable(inferlab.serve)
    assert set(inferlab.__all__) <= set(dir(inferlab))
    for name in inferlab.__all__:
        assert getattr(inferlab, name) is not None
    from inferlab.errors import UnitError
    from inferlab.unit_registry import DimensionError

    assert inferlab.DimensionError is DimensionError and issubclass(DimensionError, UnitError)


def test_an_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        inferlab.nope  # noqa: B018
