"""What :meth:`ServeResult.explain() <inferlab.serving.result.ServeResult.explain>` says: where
a served run's time goes (queueing, prefill, decode, the engine's own iteration work,
speculation and prefix caching, the client's side) and what sets each."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..phases.interval import interval_lines
from ..techniques.serving_overhead import forward_kernels, serving_iteration_s
from .client_phase import closed_loop_lines
from .overheads import outside_gpu_lines


def explain_serving(self: Any) -> str:
    """``ServeResult.explain()``: where the time goes, queueing vs prefill vs decode, and what sets each."""
    s = self.summary()
    ttft, queue = s["ttft"]["mean"], s["queue"]["mean"]
    lines = [str(self).splitlines()[0]]
    if self.deployment is not None:
        lines += [f"precision: {note}" for note in self.deployment.precision_notes]
    share = queue / ttft if ttft > 0 else 0.0
    lines.append(f"TTFT {ttft * 1e3:.1f} ms on average, {share:.0%} of it waiting for admission "
                 f"(P99 {s['ttft']['p99'] * 1e3:.1f} ms)")
    if self.request_overhead_s:
        lines.append(f"each TTFT includes {self.request_overhead_s * 1e3:.1f} ms of server work per request "
                     f"(HTTP, tokenization, hand-off to the scheduler; the {self.engine} engine's, fitted on "
                     "serving cases)")
    if math.isfinite(s["tpot"]["mean"]):
        pp, whole = self.deployment.parallel.pp if self.deployment is not None else 1, \
            self.limits is not None and not self.limits.chunked_prefill
        # admitted (first scheduled to last token): the decode batches' share of the time in flight, at most the
        # engine's running limit (a closed loop's duration is its clients' Little's-law time, not the simulated span)
        admitted = float(np.nansum(self.e2e_s - (self.trace.first_scheduled - self.trace.arrival)))
        running = self.mean_in_flight * admitted / max(float(np.nansum(self.e2e_s)), 1e-300)
        if self.limits is not None and self.limits.max_num_seqs and self.deployment.parallel.attention_groups == 1 \
                and pp == 1:
            running = min(running, float(self.limits.max_num_seqs))
        where = "per replica" if pp == 1 else f"in each of the replica's {pp} pipeline batches ({running * pp:.1f} per replica)"
        waiting = (f" (of {self.mean_in_flight:.1f} in flight, the rest waiting for admission)"
                   if self.mean_in_flight > 1.05 * running else "")
        lines.append(f"TPOT {s['tpot']['mean'] * 1e3:.2f} ms on average: decode steps shared with "
                     f"{running:.1f} running requests{waiting} {where}; prefill"
                     f"{'s of whole prompts' if whole else ' chunks'} mixed into the same iterations stretch them")
    else:
        lines.append("no TPOT: every answer is one token (its first), so there is no time between tokens")
    lines += _iteration_lines(self)
    lim = self.limits
    if lim is not None and self.deployment.model.linear_attention is not None and lim.state_pool_ratio is not None:
        pool = f"{lim.state_pool_slots:,} slots" if lim.state_pool_slots else f"{lim.state_pool_ratio:g} x its KV pool"
        lines.append(f"at most {lim.max_num_seqs:,} requests run at once: the engine's pool of linear-attention states "
                     f"({pool}, {lim.state_slots} slots a request; SGLang's --max-mamba-cache-size or "
                     "--mamba-full-memory-ratio, --mamba-scheduler-strategy) or its sequence limit")
    held = False  # a wait within the balancing timeout (its iterations at the mean step): the hold, not a full engine
    if lim is not None and lim.balance_timeout_iters and self.deployment.parallel.attention_groups > 1:
        n = lim.balance_timeout_iters
        held = math.isfinite(s["tpot"]["mean"]) and queue <= (n + 1) * s["tpot"]["mean"]
        recipe = ", as NVIDIA's DeepSeek recipes set it" if n == 60 else ""
        lines.append(f"attention-DP balancing (TensorRT-LLM's attention_dp_config: enable_balance, timeout_iters {n}"
                     f"{recipe}): while requests run, a new prompt is held until every rank "
                     f"has one to prefill or {n} iterations pass, so at a few clients that hold is most of the TTFT; "
                     "the LLM API's own default leaves balancing off")
    if share > 0.5 and not held:
        lines.append("the queue dominates: the engine is saturated; more replicas, a larger batch limit or "
                     "faster decode (a narrower format) move TTFT more than faster kernels")
    if self.preemptions:
        lines.append(f"{self.preemptions} preemptions: the KV pool ran out; FP8 KV cache or more "
                     "memory per replica avoids the recomputation")
    return "\n".join(lines + closed_loop_lines(self) + _technique_explained(self) + outside_gpu_lines(self)
                     + interval_lines(self))

def _iteration_lines(self: Any) -> list[str]:
    """What each iteration of the engine costs beyond a static step's, and what makes it up."""
    dep = self.deployment
    if dep is None or not (total := serving_iteration_s(dep)):
        return []
    prof = dep.profile
    what = "scheduling, building the mixed batch, updating request state"
    if prof.serving_kernel_overhead_s:
        kernels = forward_kernels(dep)
        what = (f"{prof.serving_step_overhead_s * 1e3:.2f} ms of {what}, and "
                f"{prof.serving_kernel_overhead_s * kernels * 1e3:.2f} ms for the {kernels:,.0f} kernels of the "
                f"forward pass at {prof.serving_kernel_overhead_s * 1e6:.2f} us each beyond the op graph's")
    source = "the median of the engines' fits" if self.engine == "generic" else "the profile's serving terms"
    return [f"each iteration also costs {total * 1e3:.2f} ms of the {self.engine} engine's own work that a "
            f"static batch does not ({what}; {source})"]

def _technique_explained(self: Any) -> list[str]:
    lines = []
    spec = self.speculative
    if spec is not None:
        lines.append(f"speculative decoding ({spec}): {self.tokens_per_step:.2f} tokens per decode step; each step "
                     f"runs {spec.k} draft passes and verifies {spec.k + 1} tokens per request, so it pays while "
                     "decode is memory-bound (few requests, long contexts) and costs throughput once it is "
                     "compute-bound")
    if self.prefix is not None:
        lines.append(f"prefix cache: {self.prefix_hit_rate:.1%} of prompt tokens found in the cache, their prefill "
                     f"skipped; {self.evicted_blocks:,} blocks evicted")
        if self.evicted_blocks:
            lines.append("prefixes were evicted to make room for running requests: a larger KV pool (FP8 KV "
                         "cache, more TP) or fewer distinct prefixes per replica (routing each to one replica) "
                         "keeps more of them")
    return lines
