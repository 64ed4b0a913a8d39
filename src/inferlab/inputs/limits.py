"""Bounds of a workload that more than one of its parts checks: prompt and output lengths,
requests, the span of arrivals."""

#: Longest prompt or output a workload may ask for [token]: ten times the longest context
#: window of any released model (10M), so a real workload is never refused.
MAX_TOKENS = 10**8
#: Most requests one simulation may serve: each is simulated, at roughly 0.1-0.2 ms a request on
#: one core (100,000 take ~15 s, ten million most of an hour), work the caller asked for.
MAX_REQUESTS = 10**7
#: Longest span of arrivals [s] (11.6 days): float64 times then resolve 0.1 ns, so a
#: microsecond step is never lost to rounding of the clock (at 1e300 s it would be).
MAX_SPAN_S = 1e6
