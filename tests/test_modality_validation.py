"""The modality models against published measurements: median |error| per kind, datasheet-only."""

from __future__ import annotations

import pytest

from inferlab.validation.modalities import load_cases, median_abs_error_pct, score

#: The target of issue 17: median |error| per kind at most this [%].
TARGET_PCT = 25.0


def test_every_case_has_a_source_url_and_a_quote():
    cases = load_cases()
    assert len(cases) >= 10
    assert all(c["quote"].strip() and c["unit"] for c in cases)
    assert {c["kind"] for c in cases} >= {"embedding", "diffusion", "on_device", "speech"}


@pytest.mark.parametrize("kind", ["embedding", "diffusion", "on_device", "speech"])
def test_median_error_within_target(kind):
    assert median_abs_error_pct(kind) <= TARGET_PCT


def test_every_prediction_is_positive_and_finite():
    for r in score().records:
        assert 0 < r["predicted"] < float("inf"), r["id"]
