"""How long a replica the autoscaler orders takes to serve: the cold start of
:mod:`inferlab.economics.cold_start`, each phase shortened by its remedy.

================  =========================================  ==============================
phase             remedy                                     effect here
================  =========================================  ==============================
provisioning      ``warm_pool``: nodes kept up and empty      0 s
image pull        ``slim_image``: runtime layers only         image of ``SLIM_IMAGE_BYTES``
                  ``preloaded_image``: pulled onto the pool   0 s
weight load       ``local_weights``: weights on local NVMe,   storage at ``LOCAL_NVME_BYTES_PER_S``
                  streamed into GPU memory
warm-up           ``cached_engine``: compile cache and        ``CACHED_WARMUP_S``
                  CUDA graphs reused
================  =========================================  ==============================

References
----------
.. [1] BentoML, "Cold-starting LLMs on Kubernetes in under 30 seconds" (2025-04-11): the
   CUDA and torch layers of an engine image are 5.2 GB of 20.2 GB; weights streamed from
   object storage straight into GPU memory.
.. [2] Spheron, "GPU cold start on serverless LLM inference" (2026): local NVMe at 3+ GB/s.
.. [3] vLLM documentation, "torch.compile integration" (v0.11): the compile cache shortens
   later starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..checks import boolean
from ..economics.cold_start import ColdStart, cold_start

#: Engine image with the weights left out and only its runtime layers: [1]'s 5.2 GB of CUDA,
#: torch and libraries, rounded down for a slimmed image. An assumption within [1].
SLIM_IMAGE_BYTES = 5e9
#: Local NVMe read rate [2].
LOCAL_NVME_BYTES_PER_S = 3e9
#: Warm-up with a cached compiled engine: "a few seconds" (economics.cold_start's note) [3].
CACHED_WARMUP_S = 5.0


@dataclass(frozen=True)
class Startup:
    """Which cold-start remedies the fleet has."""

    warm_pool: bool = False
    preloaded_image: bool = False
    slim_image: bool = False
    local_weights: bool = False
    cached_engine: bool = False

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            boolean(f"startup.{name}", getattr(self, name))

    def cold_start(self, deployment: Any) -> ColdStart:
        """The phases [s] of one replica of ``deployment`` with these remedies."""
        kwargs: dict[str, Any] = {}
        if self.warm_pool:
            kwargs["provisioning_s"] = 0.0
        if self.slim_image or self.preloaded_image:
            kwargs["image_bytes"] = 0.0 if self.preloaded_image else SLIM_IMAGE_BYTES
        if self.local_weights:
            kwargs["storage_bytes_per_s"] = LOCAL_NVME_BYTES_PER_S
        if self.cached_engine:
            kwargs["warmup_s"] = CACHED_WARMUP_S
        return cold_start(deployment, **kwargs)


def dominant_phase(cs: ColdStart) -> tuple[str, float]:
    """The longest phase of ``cs`` and its share of the total."""
    phases = {"provisioning": cs.provisioning_s, "image pull": cs.image_pull_s,
              "weight load": cs.weight_load_s, "warm-up": cs.warmup_s}
    name = max(phases, key=lambda k: float(phases[k]))
    total = float(cs.total_s)
    return name, float(phases[name]) / total if total > 0 else 0.0
