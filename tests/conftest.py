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
