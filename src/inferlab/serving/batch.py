"""The running batch of one engine and the rules of its decode stretches.

:class:`PlainDecoding` (one token per running request per iteration), the running
requests as arrays (:class:`RunningBatch`) or, a small whole-token batch, as plain lists
(:class:`SmallBatch`), the check that every request fits the KV pool,
and how many decode-only iterations can run before an event (:func:`stretch_limits`),
for :class:`~.engine.Engine`.
"""

from __future__ import annotations

import math

import numpy as np

from ..engines.scheduler import SchedulerConfig
from ..errors import InfeasibleError, SpecError


class PlainDecoding:
    """One token per decoding request per iteration (no speculation)."""

    lookahead = 0

    @staticmethod
    def tokens(remaining: np.ndarray) -> float:
        """Tokens each decoding request emits in one iteration."""
        return 1.0

    @staticmethod
    def stretch(t0: float, t1: float, remaining: np.ndarray, max_steps: int,
                free_tokens: float) -> tuple[int, float, float, float]:
        """Decode-only steps until a request finishes, the KV pool fills or ``max_steps``:
        the steps, the tokens each request emitted, their time [s] and mean step [s]."""
        return PlainDecoding.stretch_least(t0, t1, float(np.minimum.reduce(remaining)), len(remaining), max_steps,
                                           free_tokens)

    @staticmethod
    def stretch_least(t0: float, t1: float, least: float, n: int, max_steps: int,
                      free_tokens: float) -> tuple[int, float, float, float]:
        """:meth:`stretch` of ``n`` requests whose fewest tokens still to emit are ``least``."""
        k = min(int(max(1.0, least)), max_steps)
        if free_tokens != math.inf:
            k = min(k, max(1, int(free_tokens // max(n, 1)) + 1))
        return PlainDecoding.steps(k, t0, t1)

    @staticmethod
    def steps(k: int, t0: float, t1: float) -> tuple[int, float, float, float]:
        """:meth:`stretch` of ``k`` steps."""
        if k > 1:  # (the tokens as a float: numpy adds one to an array faster than an int)
            slope = t1 - t0
            return k, float(k), k * t0 + slope * k * (k - 1) / 2.0, t0 + slope * (k - 1) / 2.0
        return k, float(k), t0, t0


def cut_stretch(plan: tuple, gap: float) -> tuple | None:
    """A :class:`PlainDecoding` stretch ``plan`` (``("decode", t0, t1, k, ...)``) stopped for an
    arrival that can be admitted ``gap`` [s] after its start and comes before any other,
    counted as :func:`stretch_limits` counts it; None: the stretch ends before it anyway. What
    the plan carries beyond its steps (``plan[7:]``) holds for the shorter stretch too."""
    t0, t1 = plan[1], plan[2]
    steps = math.ceil(gap / t0)
    if steps < 1:
        steps = 1
    return ("decode", t0, t1, *PlainDecoding.steps(steps, t0, t1), *plan[7:]) if steps < plan[3] else None


def blocks_held(done: list[float], gen: list[float], base: list[float], block: int) -> int:
    """KV blocks of slots as plain floats: each holds ``done + gen - base`` tokens, at least
    one, in whole blocks of ``block`` [block]."""
    return sum([math.ceil((c if (c := d + g - b) > 1.0 else 1.0) / block) for d, g, b in zip(done, gen, base)])


class RunningBatch:
    """Running requests as arrays (one slot per admitted request), in preallocated buffers;
    the public attributes are views of the first ``k`` slots. The float columns share one
    two-dimensional buffer (a row each, :data:`ROWS`), so that :meth:`keep` and
    :meth:`rows` treat them in one call."""

    ROWS = ("done", "gen", "base", "prompt", "osl")
    lists = False  # (:class:`SmallBatch`: plain lists)

    def __init__(self, capacity: int) -> None:
        self.k = 0
        self.prefilling = 0  # slots whose prompt is not prefilled yet
        self._idx = np.zeros(max(capacity, 1), np.int64)
        self._rows = np.zeros((len(self.ROWS), max(capacity, 1)))
        self._views()

    def _views(self) -> None:
        k = self.k
        self.idx = self._idx[:k]
        v = self._rows[:, :k]
        self.done, self.gen, self.base, self.prompt, self.osl = v[0], v[1], v[2], v[3], v[4]

    def rows(self) -> list[list[float]]:
        """The float columns of the running slots as lists, in the order of :data:`ROWS`."""
        return self._rows[:, :self.k].tolist()

    def ids(self) -> list[int]:
        """The running requests, in slot order."""
        return self._idx[:self.k].tolist()

    def add(self, i: int, generated: float, prompt: float, osl: float, done: float = 0.0, views: bool = True) -> None:
        """Admit request ``i`` (``generated`` tokens already produced, ``prompt`` to prefill,
        ``done`` of them already in the cache); ``views=False``: the caller calls :meth:`_views`
        after admitting several."""
        k = self.k
        if k == len(self._idx):
            self._idx = np.concatenate([self._idx, np.zeros_like(self._idx)])
            self._rows = np.concatenate([self._rows, np.zeros_like(self._rows)], axis=1)
        r = self._rows
        self._idx[k], r[0, k], r[1, k], r[2, k], r[3, k], r[4, k] = i, done, generated, generated, prompt, osl
        self.k = k + 1
        self.prefilling += 0 if done >= prompt else 1
        if views:
            self._views()

    def keep(self, mask: np.ndarray) -> None:
        """Keep the slots where ``mask`` is true, in order."""
        m = int(np.count_nonzero(mask))
        k = self.k
        self._idx[:m] = self._idx[:k][mask]
        self._rows[:, :m] = self._rows[:, :k][:, mask]
        self.k = m
        self._views()

    def drop(self, j: int) -> None:
        """Remove slot ``j`` (a request that finished: not prefilling), the later ones moving up."""
        k = self.k
        self._idx[j:k - 1] = self._idx[j + 1:k]
        self._rows[:, j:k - 1] = self._rows[:, j + 1:k]
        self.k = k - 1
        self._views()

    def drop_last(self) -> None:
        if self.done[-1] < self.prompt[-1]:
            self.prefilling -= 1
        self.k -= 1
        self._views()

    @property
    def cached(self) -> np.ndarray:
        """KV tokens each running request holds."""
        return self.done + self.gen - self.base


class SmallBatch:
    """A :class:`RunningBatch` of a small whole-token batch as plain lists (the same float
    values; see :mod:`.iteration`): one list per column, ``idx`` too. :meth:`rows` gives
    the lists themselves (to read, not to change)."""

    lists = True

    def __init__(self, run: RunningBatch | None = None) -> None:
        if run is None:
            self.k = self.prefilling = 0
            self.idx: list[int] = []
            self.done, self.gen, self.base, self.prompt, self.osl = [], [], [], [], []
        else:
            self.k, self.prefilling, self.idx = run.k, run.prefilling, run.ids()
            self.done, self.gen, self.base, self.prompt, self.osl = run.rows()

    def rows(self) -> list[list[float]]:
        return [self.done, self.gen, self.base, self.prompt, self.osl]

    def ids(self) -> list[int]:
        return list(self.idx)

    def arrays(self) -> RunningBatch:
        """The same batch as a :class:`RunningBatch`."""
        run = RunningBatch(max(2 * self.k, 64))
        k = run.k = self.k
        run._idx[:k] = self.idx
        run._rows[:, :k] = self.rows()
        run.prefilling = self.prefilling
        run._views()
        return run

    def add(self, i: int, generated: float, prompt: float, osl: float, done: float = 0.0, views: bool = True) -> None:
        """:meth:`RunningBatch.add`."""
        self.idx.append(int(i))
        self.done.append(float(done))
        self.gen.append(float(generated))
        self.base.append(float(generated))
        self.prompt.append(float(prompt))
        self.osl.append(float(osl))
        self.k += 1
        self.prefilling += 0 if done >= prompt else 1

    def _views(self) -> None:
        pass

    def keep(self, mask: list[bool]) -> None:
        """Keep the slots where ``mask`` is true, in order."""
        self.idx = [x for x, m in zip(self.idx, mask) if m]
        self.done, self.gen, self.base, self.prompt, self.osl = (
            [x for x, m in zip(col, mask) if m] for col in self.rows())
        self.k = len(self.idx)

    def drop(self, j: int) -> None:
        del self.idx[j], self.done[j], self.gen[j], self.base[j], self.prompt[j], self.osl[j]
        self.k -= 1

    def drop_last(self) -> None:
        if self.done[-1] < self.prompt[-1]:
            self.prefilling -= 1
        self.drop(self.k - 1)

    @property
    def cached(self) -> list[float]:
        """KV tokens each running request holds."""
        return [d + g - b for d, g, b in zip(self.done, self.gen, self.base)]

    def held_tokens(self) -> float:
        """KV tokens the running requests hold together (whole numbers: exact in any order)."""
        return float(sum(self.done) + sum(self.gen) - sum(self.base))


def check_fits(isl: np.ndarray, osl: np.ndarray, capacity_blocks: int, block: int, lookahead: int,
               state_blocks: int = 0) -> None:
    """Refuse empty requests, and any request larger than the whole KV pool (engines reject those)."""
    n = len(isl)
    if n and (np.min(isl) < 1 or np.min(osl) < 1):
        raise SpecError("simulate: every request needs a prompt and an output of at least one token")
    need_blocks = np.ceil((isl + osl + lookahead) / block) + state_blocks
    if n and capacity_blocks < need_blocks.max():
        big = int(np.argmax(need_blocks))
        extra = (f" + {lookahead} speculative slots" if lookahead else "") + \
            (f" + its state's {state_blocks * block} tokens" if state_blocks else "")
        raise InfeasibleError(f"the KV pool holds {capacity_blocks * block:.0f} tokens, less than request {big} "
                              f"({int(isl[big])} + {int(osl[big])} tokens{extra}) needs; engines reject such a "
                              "request: shorten the lengths or give the pool more memory (fewer weights per GPU, "
                              "more TP)")


def stretch_limits(sched: SchedulerConfig, run: RunningBatch, t0: float, now: float, waiting: list[int],
                    order: list[int], pos: int, visible: list[float], capacity_blocks: float, block: int,
                    lookahead: int, cached: np.ndarray | None = None,
                    held_blocks: float | None = None) -> tuple[int, float]:
    """Decode-only iterations (every running request decoding) that can run before an
    arrival could be admitted (``t0`` [s]: the first one's time), and the KV tokens free
    for the requests to grow into (unbounded when their outputs are reserved); ``cached``
    (``run.cached``) or ``held_blocks`` (the blocks counted here) when the caller has them."""
    max_steps = 1 << 62
    free_tokens = math.inf
    # KV growth: each running request adds its tokens per step (nothing to check when reserved)
    if not sched.reserve_output:
        if held_blocks is None:
            c = run.cached if cached is None else cached
            held = np.maximum(c, 1.0) + lookahead if lookahead else np.maximum(c, 1.0)
            held_blocks = float(np.add.reduce(np.ceil(held / block)))
        free_tokens = (capacity_blocks - held_blocks) * block
    # an arrival that could be admitted (a slot and its prompt blocks are free)
    if pos < len(order) and run.k < sched.max_num_seqs and not waiting:
        gap = visible[order[pos]] - now
        max_steps = max(1, int(math.ceil(gap / t0)))
    return max_steps, free_tokens


#: Per-request columns of an engine and the value of a request not yet there.
_COLUMNS = {"arrivals": np.nan, "isl": 0.0, "osl": 0.0, "prompt": 0.0, "generated": 0.0, "first_sched": np.nan,
            "first_tok": np.nan, "finish": np.nan, "recompute": False, "started": False}


def request_columns(size: int, old: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The engine's per-request arrays for ``size`` requests, holding ``old``'s values first."""
    cols = {name: np.full(size, fill, bool if fill is False else float) for name, fill in _COLUMNS.items()}
    for name, values in (old or {}).items():
        cols[name][:len(values)] = values
    return cols
