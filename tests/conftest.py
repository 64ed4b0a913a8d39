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


@pytest.fixture(scope="session")
def fluid_over_served():
    """``ratio(model, hardware, engine, tp, rate, isl, osl, attention_dp=False, seconds=60)``: the
    fluid model's mean TPOT at ``rate`` over the serving simulation's (requests arriving between
    30% and 80% of a run of ``seconds`` of traffic, steady), less one. The fluid model of the
    planner's candidate of that layout (expert parallelism over the TP group where ``attention_dp``)."""
    import numpy as np

    import inferlab
    from inferlab.planning.scenario import load_scenario
    from inferlab.planning.search import candidates, evaluate

    def ratio(model: str, hardware: str, engine: str, tp: int, rate: float, isl: int, osl: int, *,
              attention_dp: bool = False, seconds: float = 60.0) -> float:
        sc = load_scenario({"name": "fluid", "models": [model], "hardware": [hardware], "engine": engine,
                            "traffic": {"rate": rate, "isl": isl, "osl": osl},
                            "slo": {"ttft_ms": 20000, "tpot_ms": 900, "percentile": 99},
                            "search": {"precisions": ["fp8"], "tp": [tp], "expert_parallel": attention_dp},
                            "verify": 0})
        config = next(c for c in candidates(sc) if not c["disaggregated"] and c["attention_dp"] == attention_dp)
        curve = evaluate(sc, config).curve
        served = inferlab.serve(model, hardware, tp=tp, ep=config["ep"], attention_dp=attention_dp, precision="fp8",
                                engine=engine, rate=rate, num_requests=int(rate * seconds), isl=isl, osl=osl)
        a = np.asarray(served.trace.arrival)
        steady = (a > np.percentile(a, 30)) & (a < np.percentile(a, 80))
        fluid = 1.0 / float(np.interp(rate, curve["rate"], curve["output_tokens_per_s_per_user"]))
        return fluid / float(np.nanmean(served.tpot_s[steady])) - 1.0

    return ratio
