"""Jupyter HTML and JSON forms of specs carry values and sources."""

from __future__ import annotations

import json

from inferlab import load_hardware, load_model
from inferlab.results.render import text_table
from inferlab.specs.render import hardware_dict, model_dict


def test_hardware_html_lists_figures_with_sources():
    html = load_hardware("h100-sxm")._repr_html_()
    assert "<table>" in html and "flops.bf16" in html and "989 TFLOPS" in html and "NVIDIA H100" in html


def test_model_html():
    html = load_model("gemma-3-27b")._repr_html_()
    assert "sliding(1024)" in html and "total_params" in html


def test_dicts_are_json_serialisable():
    json.dumps(hardware_dict(load_hardware("mi355x")))
    json.dumps(model_dict(load_model("deepseek-v3")))


def test_text_table_aligns():
    out = text_table(["a", "bb"], [["1", "2"], ["333", "4"]], right={1})
    assert out.splitlines() == ["a    bb", "---  --", "1     2", "333   4"]
