"""Provenance of a catalog model: where its config came from and what its makers publish."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .source import Source

_STRICT = ConfigDict(frozen=True, extra="forbid")
_COUNT = re.compile(r"^\s*([0-9][0-9,]*(?:\.[0-9]+)?)\s*([KMBT]?)\s*$")
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}

Component = Literal["input_embedding", "lm_head", "mtp", "vision"]


class PublishedCount(BaseModel):
    """A parameter count as its makers publish it, with what it counts.

    ``stated`` keeps the published text (``"70.6B"``, ``"6,053,381,344"``), so the
    precision of the figure is known: "3.3B" means anything from 3.25B to 3.35B.
    """

    model_config = _STRICT

    stated: str
    source: str
    includes: tuple[Component, ...] = Field(default=(), description="Parts counted beyond the main text decoder.")
    excludes: tuple[Component, ...] = Field(default=(), description="Parts of the main model left out.")
    note: str | None = None

    @model_validator(mode="after")
    def _check(self) -> PublishedCount:
        if not _COUNT.match(self.stated):
            raise ValueError(f"stated count {self.stated!r} must look like '70.6B', '405B' or '6,053,381,344'")
        return self

    @property
    def value(self) -> float:
        """The published count as a number [count]."""
        digits, suffix = _COUNT.match(self.stated).groups()  # type: ignore[union-attr]
        return float(digits.replace(",", "")) * _SCALE[suffix]

    @property
    def rounding(self) -> float:
        """Half a unit of the last published digit [count]: the figure's own precision."""
        digits, suffix = _COUNT.match(self.stated).groups()  # type: ignore[union-attr]
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        return 0.5 * 10.0 ** (-decimals) * _SCALE[suffix]


class ModelCard(BaseModel):
    """Provenance of a catalog model."""

    model_config = _STRICT

    hf_repo: str | None = None
    aliases: tuple[str, ...] = ()
    sources: dict[str, Source] = Field(min_length=1)
    config_source: str
    config_verbatim: bool = Field(description="True when the config fields were read verbatim from config.json.")
    total_params: PublishedCount | None = None
    active_params: PublishedCount | None = None
    notes: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _check(self) -> ModelCard:
        for label, ref in (("config_source", self.config_source),
                           ("total_params.source", self.total_params.source if self.total_params else None),
                           ("active_params.source", self.active_params.source if self.active_params else None)):
            if ref is not None and ref not in self.sources:
                raise ValueError(f"{label}: source {ref!r} is not defined in 'sources' ({', '.join(sorted(self.sources))})")
        return self
