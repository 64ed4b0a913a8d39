"""Validation case files: YAML text of a few cases, one of them mutated (a field wrong-typed,
out of range, missing or unknown). The output is each case's result: a case that breaks the
schema or cannot run must come back with its reason, and the intact static case next to it
must still be predicted."""

import copy
import tempfile
from pathlib import Path

import yaml
from hypothesis import strategies as st

from inferlab.validation.cases import load_case_entries

from inferlab.validation.predict import predict_cases

from . import Entry

_SAMPLE = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "cases-sample.yaml").read_text())
_STATIC = [c for c in _SAMPLE["cases"] if c["regime"] == "static_batch"][:4]
#: The intact case every file starts with (GPT-J 6B fp8, one H100, batch 1024): always predictable.
_ANCHOR = dict(_STATIC[0], id="anchor")
_ONLINE = {**copy.deepcopy(_STATIC[2]), "id": "online", "regime": "online", "metric": "ttft_ms",
           "load": {"request_rate": 2.0, "num_requests": 16}}
_JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=5), st.floats(allow_nan=True, allow_infinity=True),
                  st.integers(-2**70, 2**70), st.sampled_from([0, -1, 1, 2.5, "8", 10**9]),
                  st.lists(st.integers(-1, 4), max_size=2), st.just({}))
#: A value a nested load count may take: junk, or a count up to 100 (an online or closed-loop case
#: simulates every request it states, up to the schema's 10^6: a minute of work, by design).
_LOAD_JUNK = _JUNK.filter(lambda v: not (isinstance(v, int) and 100 < v <= 10**6))
_FIELDS = ["regime", "model", "hardware", "num_gpus", "precision", "engine", "engine_version", "isl", "osl", "load",
           "speculative", "metric", "measured", "id", "parallelism"]
_NESTED = {"parallelism": ["tp", "pp", "ep", "dp", "attention_dp", "attention_dp_size", "moe_tp"],
           "load": ["batch_size", "concurrency", "request_rate", "num_requests", "offline"],
           "precision": ["weights", "activations", "kv_cache"], "speculative": ["method", "draft_tokens"]}
_DELETE = object()


def _mutation():
    top = st.tuples(st.sampled_from(_FIELDS), st.none(), st.one_of(_JUNK, st.just(_DELETE)))
    nested = st.sampled_from(sorted(_NESTED)).flatmap(
        lambda f: st.tuples(st.just(f), st.sampled_from(_NESTED[f]),
                            st.one_of(_LOAD_JUNK if f == "load" else _JUNK, st.just(_DELETE))))
    return st.lists(st.one_of(top, nested), max_size=3)


def _mutated(args):
    base, changes = args
    case = copy.deepcopy(base)
    case["id"] = "mutated"
    for field, sub, value in changes:
        if sub is None:
            target, key = case, field
        else:
            target = case.get(field) if isinstance(case.get(field), dict) else case.setdefault(field, {}) or {}
            if not isinstance(target, dict):
                continue
            case[field], key = target, sub
        if value is _DELETE:
            target.pop(key, None)
        else:
            target[key] = value
    return case


def _files():
    case = st.tuples(st.sampled_from(_STATIC + [_ONLINE]), _mutation()).map(_mutated)
    good = st.lists(case, min_size=1, max_size=3).map(lambda cs: {"schema": "inferlab-cases/1", "cases": [_ANCHOR, *cs]})
    text = good.map(lambda d: yaml.safe_dump(d).encode())
    not_case_files = st.one_of(st.binary(max_size=30), st.text(max_size=30).map(str.encode),
                               st.just(b"schema: inferlab-cases/1\ncases: 3\n"),
                               good.map(lambda d: yaml.safe_dump({**d, "schema": "inferlab-cases/0"}).encode()))
    return st.integers(0, 7).flatmap(lambda i: text if i else not_case_files)


def _call(text):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cases.yaml"
        path.write_bytes(text)
        entries = load_case_entries(path)
    results = predict_cases(entries)
    out = []
    for entry, (predicted, reason) in zip(entries, results):
        if predicted is None and not reason:
            raise AssertionError(f"case {entry.id!r} not predicted and no reason given")
        out.append({"id": entry.id, "predicted": predicted, "reason": reason})
    if out and out[0]["id"] == "anchor" and out[0]["predicted"] is None:
        raise AssertionError(f"the intact case was not predicted: {out[0]['reason']}")
    return out


def _numbers(results):
    return ((f"{r['id']}.predicted", r["predicted"]) for r in results if r["predicted"] is not None)


ENTRY = Entry("case_file", _files, _call, outputs=_numbers)
