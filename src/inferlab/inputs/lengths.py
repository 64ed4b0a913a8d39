"""Lengths of prompts and outputs: fixed, or drawn from uniform, lognormal or empirical
distributions (:class:`Lengths`), and their one YAML/JSON form (:func:`lengths_dict`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..checks import integer, real, repeated
from ..errors import SpecError, did_you_mean
from .limits import MAX_REQUESTS, MAX_TOKENS

#: Largest sigma of a lognormal length: at 3 a request in a million is ~e^(3 x 4.75) ~ 10^6
#: times the median already.
MAX_SIGMA = 3.0

@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts.

    ``kind``: ``fixed`` (``value``), ``uniform`` (``low``..``high`` inclusive),
    ``lognormal`` (``mean`` tokens and ``sigma`` of the log), ``empirical`` (``values``
    drawn with replacement).
    """

    kind: Literal["fixed", "uniform", "lognormal", "empirical"] = "fixed"
    value: int = 0
    low: int = 0
    high: int = 0
    mean: float = 0.0
    sigma: float = 0.0
    values: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        kinds = ("fixed", "uniform", "lognormal", "empirical")
        if not isinstance(self.kind, str) or self.kind not in kinds:
            raise SpecError(f"lengths: unknown kind {self.kind!r}; allowed: {', '.join(kinds)}")
        tokens = {"minimum": 1, "maximum": MAX_TOKENS, "what": "tokens", "whole_floats": True}
        if self.kind == "fixed":
            object.__setattr__(self, "value", integer("lengths: value", self.value, **tokens))
        elif self.kind == "uniform":
            unset = [name for name in ("low", "high") if isinstance(getattr(self, name), int) and getattr(self, name) == 0]
            if unset:  # (0, the field's default: not given)
                raise SpecError(f"lengths: uniform lengths need low and high (token counts >= 1); {' and '.join(unset)} "
                                "missing (or 0)")
            low = integer("lengths: low", self.low, **tokens)
            high = integer("lengths: high", self.high, **tokens)
            if low > high:
                raise SpecError(f"lengths: uniform low {low} is above high {high}; give low <= high")
            object.__setattr__(self, "low", low)
            object.__setattr__(self, "high", high)
        elif self.kind == "lognormal":
            object.__setattr__(self, "mean", real("lengths: mean", self.mean, minimum=1.0, maximum=MAX_TOKENS,
                                                  unit="token"))
            object.__setattr__(self, "sigma", real("lengths: sigma", self.sigma, minimum=0.0, maximum=MAX_SIGMA))
        else:
            values = self.values
            if not isinstance(values, (list, tuple, np.ndarray)) or len(values) == 0:
                raise SpecError(f"lengths: empirical values must be a non-empty list of token counts, got {values!r:.80}")
            if len(values) > MAX_REQUESTS:
                raise SpecError(f"lengths: {len(values):,} empirical values; at most {MAX_REQUESTS:,}")
            object.__setattr__(self, "values", tuple(integer("lengths: values", v, **tokens) for v in values))

    @classmethod
    def of(cls, value: int | str | Mapping[str, Any] | Lengths | Sequence[int]) -> Lengths:
        """A fixed count, a list (empirical), a text as the command line takes it (:meth:`parse`),
        a mapping of the fields (``{"kind": "lognormal", "mean": 1024, "sigma": 0.5}``, as scenario
        and workload files hold it) or a ready distribution."""
        if isinstance(value, Lengths):
            return value
        from ..units import is_quantity, to_si_array

        if is_quantity(value):  # 2 ktok is 2,000 tokens; another dimension is refused
            value = to_si_array(value, "token", "lengths")
            value = value.item() if value.ndim == 0 else value
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)  # 1.5e3 in a file: a whole count written as a number with an exponent
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return cls("fixed", value=int(value))
        if isinstance(value, (list, tuple)) or isinstance(value, np.ndarray) and value.ndim == 1:
            return cls("empirical", values=tuple(value))
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            allowed = tuple(cls.__dataclass_fields__)
            unknown = sorted(str(k) for k in value if k not in allowed)
            if unknown:
                raise SpecError(f"lengths: unknown key {unknown[0]!r}{did_you_mean(unknown[0], allowed)} in a "
                                f"distribution; allowed: {', '.join(allowed)}")
            if value.get("kind") == "lognormal" and "sigma" not in value:
                raise SpecError("lengths: a lognormal's sigma is missing (the spread of log lengths: 0.5 is wide, 0 a "
                                "fixed length); e.g. {kind: lognormal, mean: 1024, sigma: 0.5}")
            return cls(**value)
        raise SpecError(f"lengths must be a token count, a list of counts, a text like "
                        f"'lognormal:mean=1024,sigma=0.5', a mapping of its fields or a Lengths, got {value!r:.80}")

    @classmethod
    def parse(cls, text: str) -> Lengths:
        """Token counts as text: ``2048`` (fixed), ``128,512,2048`` (drawn from these),
        ``uniform:128-2048``, ``lognormal:mean=1024,sigma=0.5``.

        >>> Lengths.parse("uniform:128-2048")
        Lengths(kind='uniform', value=0, low=128, high=2048, mean=0.0, sigma=0.0, values=())
        """
        kind, _, rest = text.strip().partition(":")
        try:
            if not rest:
                items = kind.split(",")
                if len(items) > 1 and not all(v.strip() for v in items):
                    raise SpecError("an empty item between commas; give integers separated by commas")
                values = [int(v) for v in items]
                if len(values) == 1:
                    return cls("fixed", value=values[0])
                return cls("empirical", values=tuple(values))
            if kind == "uniform":
                low, high = (int(v) for v in rest.split("-"))
                return cls("uniform", low=low, high=high)
            if kind == "lognormal":
                pairs = [part.split("=", 1) for part in rest.split(",")]
                fields = dict(pairs)
                unknown = sorted(set(fields) - {"mean", "sigma"})
                if unknown:  # (a pair without '=' has raised already: dict() needs two items)
                    raise SpecError(f"{unknown[0]}= is not a lognormal field{did_you_mean(unknown[0], ('mean', 'sigma'))}; "
                                    "it takes mean= and sigma=, e.g. lognormal:mean=1024,sigma=0.5")
                if "mean" not in fields:
                    raise SpecError("mean= is missing (the mean length in tokens); e.g. lognormal:mean=1024,sigma=0.5")
                if set(fields) <= {"mean", "sigma"}:
                    twice = repeated([key for key, _ in pairs])
                    if twice is not None:
                        raise SpecError(f"{twice}= is given twice; give it once")
                    if "sigma" not in fields:  # it had been read as 0: every length the mean
                        raise SpecError("sigma= is missing (the spread of log lengths: 0.5 is wide, 0 a fixed "
                                        "length); e.g. lognormal:mean=1024,sigma=0.5")
                    return cls("lognormal", mean=float(fields["mean"]), sigma=float(fields["sigma"]))
        except SpecError as exc:  # well formed, but not a valid distribution: its own message says why
            raise SpecError(f"lengths {text!r}: {exc}") from None
        except (ValueError, KeyError, TypeError):
            pass
        hint = did_you_mean(kind, ("uniform", "lognormal")) if rest and kind not in ("uniform", "lognormal") else ""
        raise SpecError(f"lengths {text!r}{hint} is not an integer, integers separated by commas, uniform:LOW-HIGH or "
                        "lognormal:mean=M,sigma=S")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws as int64 (at least 1)."""
        if self.kind == "fixed":
            out = np.full(n, self.value)
        elif self.kind == "uniform":
            out = rng.integers(self.low, self.high + 1, size=n)
        elif self.kind == "lognormal":
            mu = np.log(self.mean) - self.sigma**2 / 2.0  # so that the mean is ``mean``
            out = np.rint(rng.lognormal(mu, self.sigma, size=n))
            if out.size and out.max() > MAX_TOKENS:  # a tail this long means sigma describes no real workload
                raise SpecError(f"lengths: lognormal(mean={self.mean:g}, sigma={self.sigma:g}) drew "
                                f"{out.max():.3g} tokens, more than {MAX_TOKENS:,}; give a smaller sigma")
        else:
            out = rng.choice(np.asarray(self.values), size=n)
        return np.maximum(np.asarray(out, np.int64), 1)

    @property
    def expected(self) -> float:
        """Mean token count."""
        return {"fixed": float(self.value), "uniform": (self.low + self.high) / 2.0, "lognormal": self.mean,
                "empirical": float(np.mean(self.values) if self.values else 0.0)}[self.kind]

    @property
    def second_moment_ratio(self) -> float:
        """``E[X^2] / E[X]^2`` of the token count (1 for a fixed one; ``exp(sigma^2)`` for a lognormal)."""
        if self.kind == "fixed":
            return 1.0
        if self.kind == "uniform":
            mean, n = (self.low + self.high) / 2.0, self.high - self.low + 1.0
            return 1.0 + (n * n - 1.0) / 12.0 / mean**2
        if self.kind == "lognormal":
            return float(np.exp(self.sigma**2))
        v = np.asarray(self.values, float)
        return float(np.mean(v * v) / np.mean(v) ** 2)

    def quantiles(self, u: np.ndarray) -> np.ndarray:
        """Token counts at probabilities ``u`` in (0, 1) (unrounded for the continuous kinds)."""
        from scipy.special import ndtri

        u = np.asarray(u, float)
        if self.kind == "fixed":
            return np.full(u.shape, float(self.value))
        if self.kind == "uniform":
            return self.low + u * (self.high - self.low)
        if self.kind == "lognormal":
            return self.mean * np.exp(self.sigma * ndtri(u) - self.sigma**2 / 2.0)
        return np.quantile(np.asarray(self.values, float), u, method="inverted_cdf")  # the values drawn, not between them


def lengths_dict(lengths: Lengths) -> Any:
    """A :class:`Lengths` as a number (fixed), a list (empirical) or a mapping of its fields."""
    if lengths.kind == "fixed":
        return lengths.value
    if lengths.kind == "empirical":
        return list(lengths.values)
    if lengths.kind == "uniform":
        return {"kind": "uniform", "low": lengths.low, "high": lengths.high}
    return {"kind": "lognormal", "mean": lengths.mean, "sigma": lengths.sigma}
