"""The gaps between a request's tokens (the ITL distribution) where an iteration does not
emit one token for every running request: prefill iterations the decoding requests sit out
(an unmixed or whole-prompt prefill), and a preempted request's token sampled as its
recompute ends. A mixin of :class:`~.engine.Engine`: its ``itl_v``/``itl_w`` (gap values [s]
and how many tokens each stands for), ``stalls`` (each prefill iteration sat out: its time,
how many waited), ``resumed`` (preempted requests that had emitted tokens: when their last
one came) and ``now``.
"""

from __future__ import annotations


class TokenGaps:
    """Token-gap bookkeeping of :class:`~.engine.Engine`."""

    itl_v: list[float]
    itl_w: list[float]
    stalls: list[tuple[float, float]]
    resumed: dict[int, float]
    now: float

    def _gap(self, step: float, weight: float) -> None:
        """Token gaps of an iteration [s], ``weight`` of them; the requests that waited out
        prefill iterations without decoding (:attr:`stalls`) have every one since they began
        waiting in their first gap (a request whose prompt ended in the first of them waited
        the later ones only)."""
        if self.stalls:
            left, before = sum(e for e, _ in self.stalls), 0.0
            for elapsed, waiting in self.stalls:
                began = min(max(waiting - before, 0.0), weight)  # began waiting in this iteration
                if began:
                    self.itl_v.append(step + left)
                    self.itl_w.append(began)
                    weight -= began
                before, left = max(before, waiting), left - elapsed
            self.stalls = []
        self.itl_v.append(step)
        self.itl_w.append(weight)

    def _prefill_gaps(self, elapsed: float, decoded: float, decoding: float) -> None:
        """Token gaps of a prefill iteration of ``elapsed`` [s] in which ``decoded`` of the
        ``decoding`` requests past their prompts emit a token (all of them in a mixed iteration,
        none in an unmixed one, those of the ranks without prompts under attention DP): the others
        wait it out (:attr:`stalls`)."""
        waited = decoding - decoded
        if decoded or not waited:
            if self.stalls:
                self._gap(elapsed, decoded)
            else:
                self.itl_v.append(elapsed)
                self.itl_w.append(decoded)
        if waited > 0:
            self.stalls.append((elapsed, waited))

    def _resume_gaps(self, ids: list[int]) -> None:
        """The token gap of each of ``ids`` that was preempted after emitting tokens and has just
        been recomputed: from its last token before preemption to now."""
        for i in ids:
            last = self.resumed.pop(i, None)
            if last is not None:
                self.itl_v.append(self.now - last)
                self.itl_w.append(1.0)
