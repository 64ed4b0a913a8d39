"""Names shared by the fleet's event loop and its parts: request outcomes and event priorities."""

#: Request outcomes.
OK, REJECTED, TIMED_OUT, FAILED, UNSERVED, AFTER, UNFINISHED = 0, 1, 2, 3, 4, 5, 6
STATUS = ("ok", "rejected", "timed out", "failed", "no replica", "not sent", "unfinished")
# event priorities at equal times: an iteration ends before a control tick, before an arrival,
# before an engine plans its next iteration (which must see every arrival up to its clock)
APPLY, CONTROL, ARRIVE, PLAN = 0, 1, 2, 3
