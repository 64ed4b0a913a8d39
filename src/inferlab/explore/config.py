"""The explorer's knobs: one configuration read from a URL query string, checked, and turned
into the keyword arguments of :func:`inferlab.estimate` and :func:`inferlab.serve`.

The page writes the same names into its own URL, so a shared link reopens the same view. A
second configuration (compare mode) uses the same names with the prefix ``b_``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import SpecError

#: Precision knobs: ``checkpoint`` keeps the format of the model's shipped checkpoint.
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class Knobs:
    """One deployment and static batch, as the page's controls set them.

    ``weights``, ``activations`` and ``kv`` are format names or ``checkpoint``;
    ``spec`` is speculative decoding as :func:`inferlab.estimate` reads it
    (``eagle:k=4,accept=0.7``, a preset), empty for none; ``prefix_hit`` the share of the
    prompt found in the prefix cache [1]; ``disagg`` separate prefill and decode pools
    (``prefill=h200x4,decode=h200x8``), empty for none.
    """

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    engine: str = "vllm"
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    weights: str = CHECKPOINT
    activations: str = CHECKPOINT
    kv: str = CHECKPOINT
    batch: int = 8
    isl: int = 1024
    osl: int = 256
    spec: str = ""
    prefix_hit: float = 0.0
    disagg: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, Any], prefix: str = "") -> Knobs:
        """Knobs from query parameters (``prefix + name``); missing ones keep their defaults.

        Raises
        ------
        SpecError
            A value of the wrong type, or out of range.
        """
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = query.get(prefix + f.name)
            if isinstance(raw, list):  # parse_qs gives lists
                raw = raw[-1] if raw else None
            if raw is None or raw == "" and f.type != "str":
                continue
            values[f.name] = _convert(f.name, f.type, str(raw).strip())
        knobs = cls(**values)
        knobs.check()
        return knobs

    def check(self) -> None:
        """Range checks the library would make later, said in the page's words."""
        for name in ("tp", "pp", "ep", "dp", "batch", "isl", "osl"):
            if getattr(self, name) < 1:
                raise SpecError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.prefix_hit < 1.0:
            raise SpecError(f"prefix hit rate must be in [0, 1), got {self.prefix_hit:g}")

    def query(self, prefix: str = "") -> dict[str, str]:
        """The knobs that differ from the defaults, as query parameters."""
        default = Knobs()
        return {prefix + f.name: str(getattr(self, f.name)) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}

    @property
    def precision(self) -> dict[str, str] | None:
        """The formats set (a mapping; the kinds left out are the checkpoint's), or None."""
        chosen = {kind: value for kind, value in (("weights", self.weights), ("activations", self.activations),
                                                  ("kv_cache", self.kv)) if value != CHECKPOINT}
        return chosen or None

    def deployment_kwargs(self) -> dict[str, Any]:
        """Model, hardware, layout, precision, engine and techniques, as both
        :func:`inferlab.estimate` and :func:`inferlab.serve` take them (without the load)."""
        if self.disagg:
            return {"model": self.model, "hardware": None, "precision": self.precision, "engine": self.engine,
                    "disaggregation": self.disagg}
        return {"model": self.model, "hardware": self.gpu, "tp": self.tp, "pp": self.pp, "ep": self.ep,
                "dp": self.dp, "precision": self.precision, "engine": self.engine,
                **({"speculative": self.spec} if self.spec else {})}

    def serve_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.serve` for this configuration, without the load:
        a prefix hit rate becomes one prefix of that share of the prompt, shared by every
        request (:func:`~inferlab.inputs.prefixes.shared_by_hit_rate`)."""
        from ..inputs.prefixes import shared_by_hit_rate

        prefix = shared_by_hit_rate(self.prefix_hit, self.isl) if self.prefix_hit > 0 else None
        return {**self.deployment_kwargs(), "isl": self.isl, "osl": self.osl,
                **({"prefix": prefix} if prefix is not None else {})}

    def estimate_kwargs(self, batch: Any = None) -> dict[str, Any]:
        """Keyword arguments of :func:`inferlab.estimate` for this configuration (``batch``
        replaces the batch size, e.g. with an array for the batch curve)."""
        kw = self.deployment_kwargs()
        if self.disagg and self.spec:
            kw["speculative"] = self.spec
        if self.prefix_hit > 0:
            kw["prefix_cache"] = self.prefix_hit
        return {**kw, "isl": self.isl, "osl": self.osl, "batch_size": self.batch if batch is None else batch}


def _convert(name: str, kind: Any, raw: str) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    if kind in ("int", "float"):
        try:
            number = float(raw)
        except ValueError:
            return _bad(name, raw, "a number")
        if kind == "float":
            return number
        return int(number) if number.is_integer() else _bad(name, raw, "a whole number")
    if len(raw) > 200:
        _bad(name, raw[:40] + "...", "at most 200 characters")
    return raw


def _bad(name: str, raw: str, wanted: str) -> Any:
    raise SpecError(f"{name} must be {wanted}, got {raw!r:.60}")
