"""Messages and values of the Python API and the catalog commands where a user's first guess is
off by a convention: one output token has no TPOT, a level is a share, a Deployment takes no
keywords beside it, a deployment file's keys are not a Deployment's, a catalog name goes after
``show``."""

from __future__ import annotations

import math

import pytest

import inferlab
from inferlab import Deployment, InferlabError, SpecError
from inferlab.cli.main import main


def test_one_output_token_has_no_tpot_in_python_as_in_the_table():
    # no decode step follows the first token: the table prints '-', the JSON null; the API's TPOT
    # had been 0.0 ms (a wrong number), its per-user rate and $/M out NaN beside it
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm", osl=1)
    assert math.isnan(est.tpot.magnitude) and est.tpot.units == inferlab.Q(1, "ms").units
    assert float(est.tpot_s) == 0.0  # inside, for the sums: TTFT + (osl - 1) x TPOT
    assert est.ttft.magnitude > 0 and not math.isnan(inferlab.estimate("llama-3.1-8b", "h100-sxm", osl=2).tpot.magnitude)


def test_an_interval_level_given_as_a_percentage_says_it_is_a_share():
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm")
    with pytest.raises(InferlabError, match="a level is a share: 0.8, not 80"):
        est.interval(80)
    with pytest.raises(InferlabError) as info:
        est.interval(0.7)
    assert "a level is a share" not in str(info.value)


def test_keywords_beside_a_deployment_are_named():
    dep = Deployment(model="llama-3.1-8b", hardware="h100-sxm")
    with pytest.raises(SpecError, match="tp given beside the Deployment: keywords do not combine with one"):
        inferlab.estimate(dep, tp=2)


def test_engine_args_in_a_deployment_mapping_says_where_it_is_read():
    with pytest.raises(SpecError, match="engine_args is a deployment file's key .*parse_engine_args"):
        Deployment.from_dict({"hardware": "h100-sxm", "engine_args": "vllm serve meta-llama/Llama-3.1-8B-Instruct"})


@pytest.mark.parametrize("command, name", [("hardware", "h100"), ("models", "llama-3.1-8b")])
def test_a_catalog_name_where_the_action_goes_suggests_show(command, name, capsys):
    assert main([command, name]) == 2
    assert capsys.readouterr().err.strip().endswith(f"; to show one: inferlab {command} show {name}")
