"""Each GPU's collective terms fitted on its all-reduce op rows: for each of NCCL's protocols
(the low-latency ones, and Simple) a fixed latency, a hop a ring step and a share of the link,
then NVLS's where the switch reduces in the fabric.

``hops=False`` fits the older form (``latency_s`` a step, and a one-shot path): the medians of
those are the datasheet-only fallback (a GPU whose family has no rows, such as AMD's MI300X),
whose fabric's steps no row measures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..calibration.profile import Profile
from ..errors import InferlabError
from ..validation.ops import OpTable, predict_group
from .least_squares import Param, fit_log

COLLECTIVE_PARAMS = [Param(("collective", "latency_s"), 5e-6, 1e-8, 1e-3),
                     Param(("collective", "bandwidth_fraction"), 0.7, 0.005, 1.0)]
HOP_PARAM = Param(("collective", "hop_latency_s"), 1e-6, 1e-9, 1e-4)  # fitted where groups of > 2 GPUs show it
#: The ring form's two protocols: the low-latency ones (a short step at a share of the link) and
#: NCCL's Simple (a longer fill at most of it), started apart so that each takes its own sizes.
LOW_LATENCY_PARAMS = [COLLECTIVE_PARAMS[0], replace(COLLECTIVE_PARAMS[1], initial=0.3)]
SIMPLE_PARAMS = [Param(("collective", "simple_latency_s"), 2e-5, 1e-7, 1e-3),
                 Param(("collective", "simple_bandwidth_fraction"), 0.7, 0.005, 1.0)]
SIMPLE_HOP_PARAM = Param(("collective", "simple_hop_latency_s"), 1e-6, 1e-9, 1e-4)
#: Where the switch reduces in the fabric (NVLS), its share of the link too.
NVLS_PARAMS = [Param(("collective", "nvls_bandwidth_fraction"), 0.5, 0.005, 1.0),
               Param(("collective", "nvls_latency_s"), 5e-5, 1e-6, 1e-3)]


def fit_collective(table: OpTable, hardware: str, base: dict[str, Any], hops: bool = True) -> dict[str, Any]:
    """Collective latency and bandwidth share on one GPU (``base``: the rest of its profile),
    and NVLS's share where the GPU's switch reduces in the fabric.

    In two stages: the ring (and, without a hop latency, one-shot) on every row without NVLS, then NVLS's share
    and fixed time with those kept, so that NVLS wins only where the rows it can serve
    (16-bit) run faster than those paths predict, and the rows it cannot serve (8-bit; an
    engine with NVLS off, SGLang's) keep the paths' own fit. On 8 H100s the 16-bit rows run
    up to 20% faster than the int8 ones from 128 MiB; on 8 B200s the two are alike, so what
    NVLS gains there is where the ring's fit misses both.

    On a PCIe-only GPU only the two-GPU rows are fitted: two GPUs move their data over the
    same two x16 links with or without peer-to-peer, so those rows measure the link; larger
    groups also measure the server's PCIe topology (switch or host-staged,
    :func:`~inferlab.core.interconnect.pcie_share`), which an op table does not record.
    """
    groups = {k: rows for k, rows in table.groups().items() if k[0] == "all_reduce" and k[2] == hardware}
    if _pcie_only(hardware):
        groups = {k: rows[table["num_gpus"][rows] == 2] for k, rows in groups.items()}
        groups = {k: rows for k, rows in groups.items() if rows.size}
    if not groups:
        return {}
    measured = {k: table.measured_s[rows] for k, rows in groups.items()}

    def fit(params: Sequence[Param], fixed: dict[str, Any]) -> dict[str, Any]:
        def residuals(fragment: dict[str, Any]) -> np.ndarray:
            merged = {**base, "collective": {**base.get("collective", {}), **fixed.get("collective", {}),
                                             **fragment.get("collective", {})}}
            prof = Profile(**merged)
            return np.concatenate([np.log(predict_group(table, rows, prof) / measured[k])
                                   for k, rows in groups.items()])

        return fit_log(residuals, params)

    wide = hops and any(np.any(table["num_gpus"][r] > 2) for r in groups.values())
    ring = LOW_LATENCY_PARAMS + [HOP_PARAM] * wide + SIMPLE_PARAMS + [SIMPLE_HOP_PARAM] * wide
    paths = fit(ring if hops else COLLECTIVE_PARAMS, {})
    paths["collective"].setdefault("hop_latency_s", 0.0)  # not fitted: latency_s a step, as fitted
    if hops:
        paths["collective"].setdefault("simple_hop_latency_s", 0.0)
    if not _nvls(hardware):
        return paths
    nvls = fit(NVLS_PARAMS, paths)
    return {"collective": {**paths["collective"], **nvls["collective"]}}


def _hardware(hardware: str) -> Any:
    """The catalog spec of an op table's GPU, or None for one the catalog lacks."""
    from ..specs.catalog import load_hardware

    try:
        return load_hardware(hardware)
    except InferlabError:
        return None


def _nvls(hardware: str) -> bool:
    from ..core.interconnect import in_switch_reduction

    hw = _hardware(hardware)
    return hw is not None and in_switch_reduction(hw)


def _pcie_only(hardware: str) -> bool:
    hw = _hardware(hardware)
    return hw is not None and hw.scale_up.kind in ("pcie", "none")
