"""Packing small models onto MIG slices."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab.cli.main import main
from inferlab.errors import InfeasibleError, SpecError
from inferlab.planning.slices import pack, smallest_profile

SMALL = ["llama-3.1-8b", "qwen3-8b", "phi-3-mini", "mistral-7b", "llama-2-7b", "gpt-oss-20b"]


def test_smallest_profile_by_hand():
    # phi-3-mini: 3.82B params x 2 B = 7.6 GB, x 1.25 headroom = 9.6 GB <= 10 GB -> 1g.10gb.
    assert smallest_profile("phi-3-mini", "h100-sxm")[0] == "1g.10gb"
    # llama-3.1-8b: 16.06 GB x 1.25 = 20.1 GB > 20 GB -> the next profile, 3g.40gb.
    assert smallest_profile("llama-3.1-8b", "h100-sxm")[0] == "3g.40gb"
    with pytest.raises(InfeasibleError, match="largest slice of h100-sxm holds 80 GB"):
        smallest_profile("llama-3.1-70b", "h100-sxm")
    with pytest.raises(SpecError, match="l4 has no MIG profiles"):
        smallest_profile("phi-3-mini", "l4")


@settings(max_examples=30, deadline=None)
@given(models=st.lists(st.sampled_from(SMALL), min_size=1, max_size=12))
def test_packing_never_overfills_a_gpu_and_never_needs_more_gpus_than_models(models):
    from fractions import Fraction

    from inferlab.specs.catalog import load_hardware
    from inferlab.specs.mig import slice_shares

    p = pack(models, "h100-sxm")
    assert p.gpus <= len(models)
    hw = load_hardware("h100-sxm")
    for g in range(p.gpus):
        shares = [slice_shares(hw, x.profile) for x in p.placements if x.gpu == g]
        assert sum((c for c, _ in shares), Fraction(0)) <= 1
        assert sum((m for _, m in shares), Fraction(0)) <= 1


def test_cli(capsys):
    assert main(["slices", "h100-sxm", "llama-3.1-8b", "qwen3-8b", "phi-3-mini", "mistral-7b"]) == 0
    assert "2 GPUs instead of 4" in capsys.readouterr().out


@pytest.mark.parametrize("models, headroom, message", [
    (["llama-3.1-8b"], -1.0, r"headroom \(a share of the weights\) must be a finite number in \[0, 100\], got -1"),
    (["llama-3.1-8b"], float("nan"), "headroom .* got nan"),  # had been 'needs nan GB with nan% headroom'
    ("llama-3.1-8b", 0.25, "pack takes a list of models"),  # had been packed letter by letter: "unknown model 'l'"
])
def test_pack_refuses_a_headroom_or_models_it_cannot_use(models, headroom, message):
    with pytest.raises(SpecError, match=message):
        pack(models, "h100-sxm", headroom=headroom)
