"""Names shared by the fleet's event loop and its parts: request outcomes and event priorities."""

#: Request outcomes.
OK, REJECTED, TIMED_OUT, FAILED, UNSERVED, AFTER, UNFINISHED, TOO_LONG = 0, 1, 2, 3, 4, 5, 6, 7
STATUS = ("ok", "rejected", "timed out", "failed", "no replica", "not sent", "unfinished", "too long")
# event priorities at equal times: an iteration ends before a control event (a sample, a
# replica's state), before the autoscalers act on what was sampled, before an arrival, before
# an engine plans its next iteration (which must see every arrival up to its clock)
APPLY, CONTROL, SCALE, ARRIVE, PLAN = 0, 1, 2, 3, 4
