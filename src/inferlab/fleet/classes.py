"""A fleet's traffic classes (a shape over the day, lengths, a prefix structure, a region and a
model) drawn into one set of requests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import SpecError, did_you_mean
from ..inputs.prefixes import prefixes as parse_prefixes
from .traffic import Profile, Requests, check_count, concat, lengths, plain, sessions, shared

#: The keys a traffic class takes.
CLASS_KEYS = {"shape", "rate", "peak_rate", "start_s", "end_s", "amplitude", "peak_hour", "isl", "osl", "prefix",
               "name", "region", "model"}


def build_requests(traffic: Any, horizon_s: float, seed: int) -> Requests:
    """Requests of every traffic class over ``horizon_s`` (see :func:`~inferlab.fleet.api.fleet`)."""
    if traffic is None:
        raise SpecError("fleet: give traffic (e.g. {'shape': 'daily', 'rate': 20, 'isl': 1500, 'osl': 300}) "
                        "or a trace file")
    classes = traffic if isinstance(traffic, (list, tuple)) else [traffic]
    parts, streams, silent = [], 0, 0
    if not classes:
        raise SpecError("fleet: traffic needs at least one class")
    for k, c in enumerate(classes):
        if not isinstance(c, (dict, Profile)):
            raise SpecError(f"fleet: each traffic class must be a mapping (shape, rate, isl, osl, ...), got {c!r:.60}")
        c = _fields(c)
        unknown = sorted(set(c) - CLASS_KEYS)
        if unknown:
            raise SpecError(f"traffic: unknown key {unknown[0]!r}{did_you_mean(unknown[0], CLASS_KEYS)}; allowed: "
                            f"{', '.join(sorted(CLASS_KEYS))}")
        rng = np.random.default_rng([seed, k])
        prof = Profile(**{f: c[f] for f in Profile.__dataclass_fields__ if f in c})
        silent += prof.rate == 0 and (prof.shape in ("constant", "daily") or prof.peak_rate == 0)
        pre = parse_prefixes(c["prefix"]) if c.get("prefix") else None
        turns = pre.turns if pre is not None and pre.kind == "sessions" else 1
        starts = prof.arrivals(horizon_s, rng, scale=1.0 / turns)
        n = len(starts) * turns
        check_count(sum(map(len, parts)) + n, f"the traffic's first {k + 1} class(es) send")
        drawn = []
        for key, default in (("isl", 1024), ("osl", 256)):
            try:
                drawn.append(lengths(c.get(key, default), n, rng))
            except SpecError as exc:  # which class, which of its lengths
                raise SpecError(f"traffic class {k}: {key}: {str(exc).removeprefix('lengths: ')}") from None
        isl, osl = drawn
        if pre is not None and len(isl):  # as serve refuses it
            try:
                pre.check_held(float(np.max(isl)))
            except SpecError as exc:
                raise SpecError(f"traffic class {k}: {exc}") from None
        if pre is None:
            part = plain(starts, isl, osl)
        elif pre.kind == "sessions":
            part = sessions(starts, isl, osl, turns=turns, think_s=pre.think_s, first_stream=streams)
        else:
            part = shared(starts, isl, osl, tokens=pre.tokens, groups=pre.groups, zipf=pre.zipf, rng=rng,
                          first_stream=streams)
        streams = int(max(streams, int(np.max(part.stream, initial=-1)) + 1))
        tags = {"region": np.full(len(part), str(c.get("region", "local")), object),
                "model": np.full(len(part), str(c.get("model", "")), object)}
        parts.append(replace(part, **tags))
    if silent == len(classes):  # (one class at rate 0 beside others is a class switched off)
        raise SpecError("fleet: every traffic class has rate 0 (and no peak_rate): no request is sent; give a rate "
                        "above 0 [request/s]")
    return concat(parts)


def unsent_shapes(traffic: Any, horizon_s: float) -> tuple[str, ...]:
    """A note for each ramp or burst of ``traffic`` that starts at or after the horizon, whose
    requests are never sent (a day file run shortened with ``--hours``)."""
    classes = traffic if isinstance(traffic, (list, tuple)) else [traffic] if traffic is not None else []
    out = []
    for k, c in enumerate(classes):
        c = _fields(c) if isinstance(c, (dict, Profile)) else {}
        if c.get("shape") in ("ramp", "burst") and float(c.get("start_s", 0.0)) >= horizon_s:
            out.append(f"traffic class {k}'s {c['shape']} starts at {float(c['start_s']):g} s, after the "
                       f"{horizon_s:g} s horizon: it is not sent (give more hours to see it)")
    return tuple(out)


def _fields(c: dict | Profile) -> dict:
    """A traffic class's fields as a mapping (a :class:`~.traffic.Profile`'s or the one given)."""
    return dict(c.__dict__) if isinstance(c, Profile) else dict(c)
