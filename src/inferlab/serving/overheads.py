"""What a user waits for beyond the GPU: network, tokenizer, client, streaming.

The simulation times a request from the moment the engine receives its token ids to the
moment the last token is sampled. A user also waits for the request to cross the network,
for the prompt to be tokenized and the output detokenized, for the client library, and,
without streaming, for the whole answer before seeing anything. :class:`ClientOverheads`
adds these on top of the simulated GPU-side times, request by request.

Notes
-----
With per-request times ``c`` (client), ``r`` (network round trip), ``k_in`` and ``k_out``
(tokenizer and detokenizer per token), a request of ``n_in`` prompt and ``n_out`` output
tokens whose GPU-side TTFT, TPOT and end-to-end latency are ``T``, ``P`` and ``E``:

- before the engine sees it: ``s = c + r/2 + k_in n_in``;
- streaming: the first token reaches the user at ``TTFT_u = s + T + k_out + r/2``; the
  detokenizer works token by token beside the GPU, so the last token arrives at
  ``E_u = max(s + E + k_out + r/2, TTFT_u + (n_out - 1) k_out)`` and the user-side
  ``TPOT_u = (E_u - TTFT_u) / (n_out - 1)`` is ``max(P, k_out)`` for a steady stream;
- a preamble of ``m`` tokens the client does not count (a reasoning model's thinking shown
  apart, a template's opening) delays the first counted token by ``m`` decode steps of the
  request, ``TTFT_u + m P``, and the user-side TPOT spreads over the ``n_out - 1 - m`` gaps
  after it (a benchmark that times the first content token reports these);
- without streaming the answer is detokenized and sent whole:
  ``E_u = s + E + k_out n_out + r/2`` and ``TTFT_u = E_u`` (nothing is seen earlier);
  ``TPOT_u`` stays the server's generation pace ``P``.

The engine sees the same arrivals either way: the overheads do not feed back into the
simulation (in a closed loop, time spent outside the GPU would lower the load a little,
so the user-side figures are slightly pessimistic there), and the tokenizer is assumed to
keep up (:func:`outside_gpu_lines` says when one CPU core would not).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import SpecError

if TYPE_CHECKING:
    from .result import ServeResult


#: The largest value of each time [s], past anything real, and why: (field, largest, why).
LIMITS = (
    # light in fibre goes half round the Earth and back in ~0.2 s, a geostationary satellite hop in ~0.6 s
    ("network_rtt_s", 10.0, "10 s is past any network's round trip"),
    # HTTP, JSON and the hand-off to the engine take milliseconds; the OpenAI client gives up on a
    # request after 600 s (its default timeout)
    ("client_s_per_request", 600.0, "a client waiting past 600 s has timed out"),
    # fast BPE tokenizers take 0.5-2 us a token on one core, pure-Python ones tens of us
    ("tokenize_s_per_token", 1e-3, "1 ms a token would take a second to tokenize a 1,000-token prompt"),
    # a detokenizer and one streamed event are microseconds of CPU a token
    ("detokenize_s_per_token", 1e-2, "10 ms a token would hold every stream under 100 tokens/s on its own"),
)


@dataclass(frozen=True)
class ClientOverheads:
    """Per-request costs outside the GPU.

    Attributes
    ----------
    network_rtt_s : float [s]
        Round trip between the user and the server (same region ~1 ms, across a continent
        ~60-100 ms).
    client_s_per_request : float [s]
        Client library and API server work per request (HTTP, JSON, scheduling hand-off).
    tokenize_s_per_token : float [s/token]
        Tokenizer time per prompt token (fast BPE tokenizers: about 0.5-2 us per token on
        one core).
    detokenize_s_per_token : float [s/token]
        Detokenizer and per-token streaming work (an SSE event per token) per output token.
    streaming : bool
        Tokens are sent as they are generated; without it the user sees the whole answer at
        once, so the user-side TTFT equals the end-to-end latency.
    preamble_tokens : int [token]
        Tokens generated before the first one the client counts (a reasoning model's thinking
        that a benchmark timing the first content token skips, a template's opening): a
        property of the workload and the client, not of the engine.
    """

    network_rtt_s: float = 0.0
    client_s_per_request: float = 0.0
    tokenize_s_per_token: float = 0.0
    detokenize_s_per_token: float = 0.0
    streaming: bool = True
    preamble_tokens: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.preamble_tokens, bool) or not isinstance(self.preamble_tokens, (int, np.integer)) \
                or not 0 <= self.preamble_tokens <= 10**7:
            raise SpecError(f"client overheads: preamble_tokens must be a whole number of tokens from 0 to 10,000,000, "
                            f"got {self.preamble_tokens!r}")
        for name, largest, why in LIMITS:
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and np.isfinite(value) and value >= 0):
                raise SpecError(f"client overheads: {name} must be a time >= 0 in seconds, got {value!r}")
            if value > largest:
                raise SpecError(f"client overheads: {name} must be at most {largest:g} s ({why}), got {value!r}")


@dataclass(frozen=True)
class UserLatencies:
    """Per-request latencies as the user sees them [s]."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    before_gpu_s: np.ndarray
    after_gpu_s: np.ndarray


def user_latencies(result: ServeResult) -> UserLatencies:
    """User-side TTFT, TPOT and end-to-end latency of every request (see the module notes).

    Without overheads these are the GPU-side figures of ``result``.
    """
    o = result.overheads or ClientOverheads()
    isl, osl = result.trace.isl, result.trace.osl
    before = o.client_s_per_request + o.network_rtt_s / 2.0 + o.tokenize_s_per_token * isl
    ttft, tpot, e2e = result.ttft_s, result.tpot_s, result.e2e_s
    if o.streaming:
        after = o.detokenize_s_per_token + o.network_rtt_s / 2.0
        skipped = np.minimum(float(o.preamble_tokens), np.maximum(osl - 1.0, 0.0))  # the preamble's tokens
        first = before + ttft + after  # the first token out of the detokenizer
        # the preamble's tokens pass at the decode pace, or the detokenizer's where it is the slower
        ttft_u = first + np.where(skipped > 0, skipped * np.maximum(np.nan_to_num(tpot), o.detokenize_s_per_token), 0.0)
        gaps = osl - 1.0 - skipped
        e2e_u = np.maximum(before + e2e + after, first + (osl - 1.0) * o.detokenize_s_per_token)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot_u = np.where(gaps > 0, (e2e_u - ttft_u) / gaps, np.nan)
    else:
        after = o.detokenize_s_per_token * osl + o.network_rtt_s / 2.0
        e2e_u = before + e2e + after
        ttft_u, tpot_u = e2e_u, tpot
    return UserLatencies(ttft_u, tpot_u, e2e_u, np.broadcast_to(before, isl.shape), e2e_u - before - e2e)


def outside_gpu_lines(result: ServeResult) -> list[str]:
    """``explain()`` lines: how much of what the user waits for happens outside the GPU."""
    o = result.overheads
    if o is None:
        return []
    u = user_latencies(result)
    ttft_u, ttft_g = float(np.mean(u.ttft_s)), float(np.mean(result.ttft_s))
    if o.streaming:  # the preamble's tokens are the GPU's time, not outside it
        ttft_g = float(np.mean(u.ttft_s - u.before_gpu_s - (o.detokenize_s_per_token + o.network_rtt_s / 2.0)))
    e2e_u, e2e_g = float(np.mean(u.e2e_s)), float(np.mean(result.e2e_s))
    isl = float(np.mean(result.trace.isl))
    parts = {"network": o.network_rtt_s, "tokenizer": o.tokenize_s_per_token * isl,
             "client": o.client_s_per_request,
             "detokenizer": o.detokenize_s_per_token * (1.0 if o.streaming else float(np.mean(result.trace.osl)))}
    detail = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in parts.items() if v > 0) or "none"
    if o.preamble_tokens and o.streaming:
        short = int(np.count_nonzero(result.trace.osl - 1 <= o.preamble_tokens))
        detail += (f"; the first token counted comes after a preamble of {o.preamble_tokens:,} tokens at the decode "
                   f"pace (at the server {float(np.mean(result.ttft_s)) * 1e3:.1f} ms to the first token)"
                   + (f"; {short:,} of the {len(result.trace.osl):,} outputs end within it, their last token the first "
                      "counted" if short else ""))
    lines = [(f"as the user sees it: TTFT {ttft_u * 1e3:.1f} ms (at the server {ttft_g * 1e3:.1f} ms), end to end "
              f"{e2e_u * 1e3:.1f} ms (at the server {e2e_g * 1e3:.1f} ms); outside the server per request: {detail}")]
    if o.streaming:
        outside, wait = 1.0 - ttft_g / ttft_u if ttft_u > 0 else 0.0, "the first token"
    else:
        outside, wait = 1.0 - e2e_g / e2e_u if e2e_u > 0 else 0.0, "the answer"
        skipped = np.minimum(float(o.preamble_tokens), np.maximum(result.trace.osl - 1.0, 0.0))
        preamble = float(np.mean(skipped * np.nan_to_num(result.tpot_s)))  # a streamed answer's preamble
        streamed = ttft_u - e2e_g + ttft_g + preamble - (o.detokenize_s_per_token * (float(np.mean(result.trace.osl)) - 1.0))
        lines.append(f"without streaming the user sees nothing for {e2e_u * 1e3:.0f} ms on average; streaming would "
                     f"show the first token after about {streamed * 1e3:.0f} ms")
    if outside > 0.5:
        lines.append(f"the bottleneck is outside the GPU: {outside:.0%} of the wait for {wait} is network, "
                     "tokenizer and client; a closer region, fewer round trips or a faster tokenizer move it more "
                     "than a faster GPU or engine")
    tpot_g = float(np.nanmean(result.tpot_s)) if np.any(result.trace.osl > 1) else 0.0
    if o.streaming and o.detokenize_s_per_token > tpot_g > 0:
        lines.append(f"the stream is paced by the detokenizer ({o.detokenize_s_per_token * 1e3:.2f} ms per token) "
                     f"rather than decode ({tpot_g * 1e3:.2f} ms per token): the CPU side is the bottleneck")
    cpu_share = o.tokenize_s_per_token * isl * result.requests_per_s
    if cpu_share > 0.5:
        lines.append(f"tokenizing {result.requests_per_s:.1f} req/s of {isl:.0f} tokens keeps {cpu_share:.1f} CPU "
                     "cores busy: a single-threaded tokenizer would queue requests before the GPU sees them "
                     "(not simulated)")
    return lines
