"""Score the modality models against published measurements (``data/modalities.yaml``).

Each case names a kind (``embedding``, ``diffusion``, ``on_device``, ``vision``, ``speech``,
``tts``), the model, the hardware, the inputs of that kind's function and one measured
number with its source and quote. The prediction is datasheet-only: the modules' named
default efficiencies, nothing fitted to these cases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from ..errors import SpecError
from ..specs.validation import read_yaml_mapping
from .summary import ErrorStats, error_stats


def _embedding(case: dict[str, Any]) -> float:
    from ..modalities.embeddings import embed

    r = embed(case["model"], case["hardware"], **case["inputs"])
    return {"tokens_per_s": r.tokens_per_s, "sequences_per_s": r.sequences_per_s,
            "latency_s": r.latency_s}[case["metric"]]


def _diffusion(case: dict[str, Any]) -> float:
    from ..modalities.diffusion import diffuse

    return {"latency_s": diffuse(case["model"], case["hardware"], **case["inputs"]).latency_s}[case["metric"]]


def _on_device(case: dict[str, Any]) -> float:
    from ..modalities.on_device import on_device

    r = on_device(case["model"], case["hardware"], **case["inputs"])
    return {"decode_tokens_per_s": r.decode_tokens_per_s, "prefill_tokens_per_s": r.prefill_tokens_per_s}[case["metric"]]


def _speech(case: dict[str, Any]) -> float:
    from ..modalities.whisper import transcribe

    r = transcribe(case["model"], case["hardware"], **case["inputs"])
    return {"latency_s": r.latency_s, "real_time_factor": r.real_time_factor}[case["metric"]]


def _vision(case: dict[str, Any]) -> float:
    from ..modalities.vision import vlm_ttft

    r = vlm_ttft(case["model"], case["hardware"], **case["inputs"])
    return {"ttft_s": r.ttft_s, "encoder_s": r.encoder_s}[case["metric"]]


def _tts(case: dict[str, Any]) -> float:
    from ..modalities.tts import speak

    r = speak(case["model"], case["hardware"], **case["inputs"])
    return {"time_to_first_audio_s": r.time_to_first_audio_s, "real_time_factor": r.real_time_factor}[case["metric"]]


#: The prediction of one case, by kind.
PREDICTORS: dict[str, Callable[[dict[str, Any]], float]] = {
    "embedding": _embedding, "diffusion": _diffusion, "on_device": _on_device, "speech": _speech,
    "vision": _vision, "tts": _tts,
}


@dataclass(frozen=True)
class ModalityScore:
    """Predictions of every case and the error statistics per kind."""

    records: tuple[dict[str, Any], ...]

    def stats(self) -> dict[str, ErrorStats]:
        """Median |error|, bias and share within 25% per kind [%]."""
        kinds = sorted({r["kind"] for r in self.records})
        return {k: error_stats([r["error_pct"] for r in self.records if r["kind"] == k], regime=k,
                               metric="mixed") for k in kinds}

    def table(self) -> str:
        """One line per case, then one per kind."""
        from ..results.table import text_table

        rows = [[r["id"], r["metric"], f"{r['measured']:,.4g}", f"{r['predicted']:,.4g}", f"{r['error_pct']:+.0f}%"]
                for r in self.records]
        text = text_table(["case", "metric", "measured", "predicted", "error"], rows, right={2, 3, 4})
        kinds = [[k, str(s.count), f"{s.median_abs_error_pct:.0f}%", f"{s.bias_pct:+.0f}%"]
                 for k, s in self.stats().items()]
        return text + "\n\n" + text_table(["kind", "cases", "median |error|", "bias"], kinds, right={1, 2, 3})


@functools.cache
def load_cases() -> tuple[dict[str, Any], ...]:
    """The shipped modality cases, each checked for its source and a known kind."""
    data = read_yaml_mapping(resources.files("inferlab.validation") / "data" / "modalities.yaml",
                             "validation/data/modalities.yaml")
    sources = data.get("sources") or {}
    cases = tuple(data.get("cases") or ())
    for c in cases:
        where = f"validation/data/modalities.yaml case {c.get('id')!r}"
        for key in ("id", "kind", "model", "hardware", "inputs", "metric", "measured", "unit", "source", "quote"):
            if key not in c:
                raise SpecError(f"{where}: field {key!r} is missing")
        if c["source"] not in sources or not sources[c["source"]].get("url"):
            raise SpecError(f"{where}: source {c['source']!r} is not listed with a URL under 'sources'")
        if c["kind"] not in PREDICTORS:
            raise SpecError(f"{where}: kind {c['kind']!r} has no predictor ({', '.join(PREDICTORS)})")
    return cases


def score() -> ModalityScore:
    """Predict every shipped case."""
    records = []
    for case in load_cases():
        predicted = float(PREDICTORS[case["kind"]](case))
        measured = float(case["measured"])
        records.append({"id": case["id"], "kind": case["kind"], "metric": case["metric"], "measured": measured,
                        "predicted": predicted, "error_pct": float(100.0 * (predicted - measured) / measured)})
    return ModalityScore(tuple(records))


def median_abs_error_pct(kind: str) -> float:
    """Median |error| of one kind's cases [%]."""
    return float(np.median([abs(r["error_pct"]) for r in score().records if r["kind"] == kind]))
