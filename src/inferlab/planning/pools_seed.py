"""The fluid model's seed of separate prefill and decode pools: each pool's replicas from its own
kind's curve, the KV transfer between them, and the count the planner's simulation starts from."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from ..specs.catalog import load_hardware
from ..techniques.disaggregation import FIRST_TOKEN_BY_ENGINE
from .attention_dp import depth_imbalance, prompts_together, shared_prefill
from .candidate import Candidate, pool_link_bandwidth
from .curve import _BATCHES
from .prefill_pool import max_prefill_utilization, prefill_pool_ttft_s
from .scenario import Scenario


def exposed_transfer_s(config: dict[str, Any], est: Any, isl: float, est_d: Any = None,
                       engine: str = "generic") -> float:
    """One prompt's KV transfer from a prefill replica (``est``, of ``config``'s
    ``prefill_kind`` where it has one) to a decode replica (``est_d``, default ``est``) left
    after its prefill [s] (:func:`~inferlab.techniques.kv_transfer.kv_transfer`: a TP replica's
    GPUs each send their share of the cache, the whole of it where an MLA latent or the KV
    heads are replicated; an attention-DP rank its prompt's whole cache), over the NICs (the
    pools' link once they outgrow a scale-up domain; the simulation takes NVLink within one),
    else PCIe on GPUs whose spec has no NIC; its windowed layers as ``engine`` keeps them."""
    from ..techniques.disaggregation import Disaggregation, Pool
    from ..engines.scheduler import default_scheduler
    from ..engines.window_pool import held_windows
    from ..techniques.kv_transfer import kv_transfer

    est_d = est if est_d is None else est_d
    hw = load_hardware(config["hardware"])
    nic = hw.scale_out.bandwidth.si if hw.scale_out is not None else pool_link_bandwidth(hw)
    kind_d = (config["tp"], config["ep"], bool(config.get("attention_dp", False)))
    pools = [Pool(hw, num_gpus=tp, tp=tp, ep=ep, attention_dp=adp)
             for tp, ep, adp in (config.get("prefill_kind") or kind_d, kind_d)]
    model = est_d.deployment.model
    move = kv_transfer(Disaggregation(*pools, link="network", link_bandwidth=nic), est.deployment,
                       est_d.deployment, 1.0, np.asarray(float(isl)), est.prefill_1_s,
                       freed=held_windows(model, default_scheduler(engine))[0])
    return float(np.ravel(move.exposed_s)[0])


def _tpot_tail(percentile: float) -> float:
    """Ratio of a percentile request TPOT to the mean in a decode pool (no prefill mixed in: the
    batch's size and contexts alone vary; a prior, ~10% at P99)."""
    return 1.0 + 0.1 * max(percentile - 50.0, 0.0) / 49.0


def seed_pools(sc: Scenario, config: dict[str, Any], est: Any, ok: np.ndarray, limit: str,
               base: Candidate, est_p: Any = None) -> tuple[Candidate, dict[str, Any]]:
    """Size separate prefill and decode pools: decode replicas of ``config``'s kind (``est``),
    prefill replicas of its ``prefill_kind`` (``est_p``; default the same kind).

    Notes
    -----
    The decode pool runs plain decode steps (no prefill interleaved): at concurrency ``b`` a
    replica serves ``b / (osl x d(b))`` requests/s with TPOT ``d(b)``. A prefill replica
    runs prompts one token budget after another, a single server (``1 / t_pf`` per
    replica) whose admission wait (M/M/1's scaled by Kingman's variability of round-robin
    arrivals and the prompts' prefill times), mixed with each prompt length's own prefill,
    exposed KV transfer (over the NICs, overlapped layer by layer) and first decode step,
    keeps the TTFT percentile within its objective (:func:`~.prefill_pool.max_prefill_utilization`;
    a chat of 3,000-token lognormal prompts: 854 ms against 795 simulated, 626 before the
    lengths were mixed). The pools' replica counts give the P:D ratio.

    An attention-DP prefill replica is a server a rank, prompts dealt to the ranks round robin,
    each rank prefilling its own at its share of the rate of all ranks busy together (one
    iteration shared, the routed experts over all their tokens; :func:`~.attention_dp.shared_prefill`),
    a prompt taking that pace; unbalanced ranks sit at their own depths of their prompts and each
    iteration waits for the deepest rank's attention (:func:`~.attention_dp.depth_imbalance`).
    DeepSeek-V3 FP8 on 8 H200s under SGLang, P90 TTFT within the objective: 4,000-token prompts
    at 20 req/s P2 (simulated P2); 60,000-token prompts at 1 req/s P6 (simulated P5; at P5 the
    fluid P90 TTFT 26.2 s, simulated 26.0 s). One prompt a replica at a time, as before, gave P10
    and P40; the shared rate without the depths P2 and P3.

    Returns the candidate and what :func:`~.search.with_replicas` sets (``replicas``, ``pd``),
    or a ruled-out candidate and ``{}``.
    """
    tr, slo = sc.traffic, sc.slo
    isl, osl = tr.isl.expected, tr.osl.expected
    d = np.asarray(est.tpot_s, float) * _tpot_tail(slo.percentile)
    meets = ok & ((d <= slo.tpot_ms / 1e3) if slo.tpot_ms else True)
    if not meets.any():
        return replace(base, reason=f"TPOT {d[0] * 1e3:.1f} ms > {slo.tpot_ms} ms even alone"), {}
    rate_d = _BATCHES / (max(osl, 1.0) * np.asarray(est.tpot_s, float))
    j = int(np.flatnonzero(meets)[np.argmax(rate_d[meets])])
    est_p = est if est_p is None else est_p
    exposed = exposed_transfer_s(config, est_p, isl, est, sc.engine)
    isl_q = est_p.prompt_lengths
    # a prefill replica as one server of its prompts, one at a time; an attention-DP replica as one
    # server a rank, each prefilling its own prompts, at its share of the rate of all ranks busy
    # (their iterations shared, the routed experts over all their tokens), prompts dealt to ranks
    # round robin (SGLang's and TensorRT-LLM's default dispatch): a prompt waits for its rank only
    ranks = est_p.deployment.parallel.attention_groups
    share = shared_prefill(est_p.deployment, ranks, isl) if ranks > 1 else 1.0
    if ranks > 1 and prompts_together(sc, est_p.deployment) == 1 and est_p.prefill_iterations > 1:
        # dealt round robin, prompts of several chunks: ranks at their own depths of their prompts
        share *= depth_imbalance(est_p.deployment, ranks, isl)
    mu_all = 1.0 / (est_p.prefill_1_s * share)
    cap, mu_p, spread = sc.search.target_utilization, mu_all / ranks, tr.isl.second_moment_ratio
    u_p, n_p = cap, max(1, math.ceil(tr.request_rate / (cap * mu_all)))
    # each prompt length's TTFT alone: the server's work on the request before it reaches the engine,
    # its prefill (a rank's at the all-busy pace, its share of the shared iterations, not its pace
    # alone), the exposed transfer, the first decode step where the decode pool emits the first token
    first = float(est.tpot_s[j]) if FIRST_TOKEN_BY_ENGINE.get(sc.engine, "decode") == "decode" else 0.0
    alone_q = (est_p.deployment.profile.request_overhead_s + est_p.prompt_times_s * max(ranks * share, 1.0)
               + exposed + first)
    if slo.ttft_ms:
        # the wait depends on the servers (round robin smooths each one's arrivals) and they on
        # the utilization the wait allows: from Poisson arrivals (one replica) down to a fixed point
        n_p = 1
        for _ in range(8):
            u_p = max_prefill_utilization(alone_q, isl_q, mu_p, n_p * ranks, spread, slo.percentile,
                                          slo.ttft_ms / 1e3, cap)
            if u_p <= 0:
                alone = prefill_pool_ttft_s(alone_q, isl_q, mu_p, 0.0, n_p * ranks, spread, slo.percentile)
                return replace(base, reason=f"TTFT {alone * 1e3:.0f} ms > {slo.ttft_ms} ms even alone "
                                            "(disaggregated)"), {}
            need = max(1, math.ceil(tr.request_rate / (u_p * mu_all)))
            if need <= n_p:
                break
            n_p = need
    n_d = max(1, math.ceil(tr.request_rate / (cap * float(rate_d[j]))))
    binding = "TPOT SLO" if (slo.tpot_ms and j + 1 < len(_BATCHES) and ok[j + 1]) else limit
    curve = {"mu_p": mu_p, "servers": ranks, "u_p": u_p, "alone_q": alone_q, "isl_q": isl_q, "rate_d": rate_d[ok],
             "tpot_p_s": d[ok], "rate_d_j": float(rate_d[j]), "prefill_spread": spread}
    cand = replace(base, feasible=True, batch=float(_BATCHES[j]), replica_rate=float(rate_d[j]), curve=curve,
                   tokens_per_s_per_user=1.0 / float(est.tpot_s[j]), binding=binding)
    return cand, {"pd": f"P{n_p}:D{n_d}", "replicas": n_p + n_d}
