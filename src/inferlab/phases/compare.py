"""A disaggregated deployment beside an aggregated replica serving the same requests: what
splitting prefill and decode costs in TTFT and buys in throughput per GPU."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..calibration.profile import Profile
from ..results.render import text_table
from ..specs.model import ModelSpec
from ..techniques.disaggregation import Disaggregation, Pool
from .disaggregated import DisaggEstimate, estimate_disaggregated
from .estimate import estimate
from .result import Estimate


@dataclass(frozen=True)
class DisaggComparison:
    """A disaggregated deployment next to an aggregated one serving the same requests."""

    disaggregated: DisaggEstimate
    aggregated: Estimate

    @property
    def ttft_delta_s(self) -> np.ndarray:
        """Disaggregated minus aggregated TTFT [s]."""
        return self.disaggregated.ttft_s - self.aggregated.ttft_s

    @property
    def per_gpu_throughput_ratio(self) -> np.ndarray:
        """Disaggregated over aggregated output tokens/s per GPU [1]."""
        return self.disaggregated.output_tokens_per_s_per_gpu / self.aggregated.throughput["per_gpu"].magnitude

    def __str__(self) -> str:
        dis, agg = self.disaggregated, self.aggregated
        at = lambda x: float(np.ravel(x)[0])
        rows = [[f"aggregated {agg.deployment.hardware.id}x{agg.deployment.tp} (batch {at(agg.batch_size):.0f})",
                 str(agg.deployment.tp), f"{at(agg.ttft_s) * 1e3:.1f}", f"{at(agg.tpot_s) * 1e3:.2f}",
                 f"{at(agg.throughput['per_gpu'].magnitude):.0f}"],
                [f"disaggregated {dis.disaggregation.prefill} + {dis.disaggregation.decode} (batch "
                 f"{at(dis.prefill_batch):.0f}/{at(dis.decode_batch):.0f})", str(dis.num_gpus),
                 f"{at(dis.ttft_s) * 1e3:.1f}", f"{at(dis.tpot_s) * 1e3:.2f}",
                 f"{at(dis.output_tokens_per_s_per_gpu):.0f}"]]
        table = text_table(["setup", "GPUs", "TTFT ms", "TPOT ms", "tok/s/GPU"], rows, right={1, 2, 3, 4})
        return (f"isl {at(dis.isl):.0f}, osl {at(dis.osl):.0f}\n{table}\n"
                f"disaggregation: TTFT {at(self.ttft_delta_s) * 1e3:+.1f} ms (KV transfer exposed "
                f"{at(dis.transfer.exposed_s) * 1e3:.2f} ms, first decode step "
                f"{at(dis.first_token_step_s) * 1e3:.2f} ms), tok/s/GPU x{at(self.per_gpu_throughput_ratio):.2f} ({dis.bottleneck.flat[0]}-bound pools, "
                f"balanced P:D {at(dis.pd_ratio):.2f})")


def compare_with_aggregated(model: str | ModelSpec, disagg: Disaggregation | str, *, isl: Any = 1024,
                            osl: Any = 128, prefill_batch: Any = 1, decode_batch: Any = 1,
                            aggregated: Pool | str | None = None, engine: str = "generic",
                            profile: str | Path | Profile = "default", precision: Any = None,
                            **memory: Any) -> DisaggComparison:
    """The disaggregated estimate and a static batch of ``decode_batch`` on one aggregated replica.

    ``aggregated`` defaults to a replica like the decode pool's (same GPU, ``tp``, ``ep``,
    attention DP, precision). At small scale disaggregation loses: the transfer and the decode pool's
    first step lengthen TTFT, and two pools hold GPUs that a single replica would share
    between the phases. ``memory`` passes ``gpu_memory_utilization``, ``kv_block_size``
    and ``max_num_tokens`` to both.

    The aggregated side is :func:`inferlab.estimate`'s static batch: at ``decode_batch > 1``
    its TTFT is the prefill of all the batch's prompts together, the disaggregated TTFT that
    of ``prefill_batch`` prompts; compare TTFT at equal batches (or with the serving
    simulation), throughput per GPU at any.
    """
    d = disagg if isinstance(disagg, Disaggregation) else Disaggregation.parse(disagg)
    pool = Pool.parse(aggregated) if isinstance(aggregated, str) else aggregated or Pool(
        d.decode.hardware, d.decode.tp or 1, precision=d.decode.precision, engine=d.decode.engine,
        profile=d.decode.profile, ep=d.decode.ep, attention_dp=d.decode.attention_dp)
    dis = estimate_disaggregated(model, d, isl=isl, osl=osl, prefill_batch=prefill_batch, decode_batch=decode_batch,
                                 engine=engine, profile=profile, precision=precision, **memory)
    agg_precision = pool.precision if pool.precision is not None else precision
    agg = estimate(model, pool.hardware, tp=int(pool.tp or 1), ep=pool.ep, attention_dp=pool.attention_dp,
                   precision=agg_precision, isl=isl, osl=osl,
                   batch_size=decode_batch, engine=pool.engine or engine,
                   profile=profile if pool.profile is None else pool.profile, **memory)
    return DisaggComparison(dis, agg)
