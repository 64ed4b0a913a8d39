"""Shared test helpers."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"

# The on-disk memo of parsed specs goes to a folder of this run, not the user's cache.
_CACHE = tempfile.mkdtemp(prefix="inferlab-test-cache-")
os.environ["INFERLAB_CACHE_DIR"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def public_predictions() -> tuple[list, list]:
    """Every public case and its prediction under the shipped profile, computed once per run:
    the error bands and the serving levels both score them (the same predictions as each
    computing its own: every grid and simulation is deterministic and independent)."""
    from inferlab.validation.cases import load_cases
    from inferlab.validation.predict import predict_cases

    cases = load_cases()
    return cases, predict_cases(cases)
