"""Every fuzzed entry point ends each input in a result or a clean error (tests/fuzzing/).

CI runs ``FUZZ_EXAMPLES`` inputs per entry point (default 200), the same ones every run
(derandomized: a new rare input must not make a CI run fail or hang by chance);
``FUZZ_RANDOM=1`` draws fresh ones, and ``benchmarks/fuzz.py`` runs 10,000 random ones and
prints the counts.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from fuzzing import classify, entries

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e.name)
def test_entry_point_ends_every_input_cleanly(entry):
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=not os.environ.get("FUZZ_RANDOM"),
              suppress_health_check=list(HealthCheck))
    @given(entry.inputs())
    def run(value):
        outcome = classify(entry, value)
        assert outcome.kind in ("ok", "clean_error"), f"{entry.name}({value!r}): {outcome.kind}: {outcome.detail}"

    run()
