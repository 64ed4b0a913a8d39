"""Where a spec value comes from."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SourceKind = Literal[
    "vendor datasheet",
    "vendor page",
    "vendor doc",
    "vendor tool data",
    "device-reported",
    "submitter system description",
    "config.json",
    "model card",
    "paper",
    "press",
    "secondary",
    "price survey",
    "derived",
]


class Source(BaseModel):
    """One document a spec value was read from.

    ``kind`` ranks trust: vendor documents and device reports first, press and secondary
    transcriptions last; ``derived`` marks a value computed from other sourced values
    (the ``note`` of the figure says how).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(min_length=1)
    kind: SourceKind
    url: str | None = None
    date: str | None = Field(default=None, description="Publication or access date, ISO 8601 where known.")
