"""Op-level measurements (schema ``inferlab-ops/1``): single-kernel latencies on real GPUs.

Each row is one GEMM, attention call or all-reduce with its measured latency. The rows
are predicted with the same ops and timing rules the step model uses
(:mod:`inferlab.core.ops`, :func:`inferlab.core.timing.time_op`), one vectorized op per
group of rows that share op kind, engine, GPU and formats.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..calibration.profile import Profile, hardware_family, load_profile
from ..core.ops import Attention, Collective, Gemm, Op
from ..core.timing import time_op
from ..errors import SpecError
from ..precision import number_format
from ..specs.catalog import load_hardware
from ..specs.validation import read_text
from .cases import PROFILE_ENGINES

OP_KINDS = ("gemm", "attention_prefill", "attention_decode", "all_reduce")
TEXT_COLUMNS = ("op", "hardware", "engine", "dtype", "kv_dtype")
NUMBER_COLUMNS = ("m", "n", "k", "batch", "seq_len", "kv_len", "num_heads", "num_kv_heads", "head_dim", "window",
                  "num_gpus", "message_bytes", "measured_ms")
#: Columns each op kind needs (besides op, hardware, engine, measured_ms).
REQUIRED = {
    "gemm": ("dtype", "m", "n", "k"),
    "attention_prefill": ("dtype", "kv_dtype", "batch", "seq_len", "num_heads", "num_kv_heads", "head_dim"),
    "attention_decode": ("dtype", "kv_dtype", "batch", "kv_len", "num_heads", "num_kv_heads", "head_dim"),
    "all_reduce": ("num_gpus", "message_bytes"),
}
#: GEMM kernel dtype -> (tensor precision it computes at, weight format, activation format).
GEMM_DTYPES = {
    "bf16": ("bf16", "bf16", "bf16"),
    "fp16": ("fp16", "fp16", "fp16"),
    "fp8": ("fp8", "fp8", "fp8"),
    "fp8_block": ("fp8", "fp8_block", "fp8"),
    "nvfp4": ("fp4", "nvfp4", "nvfp4"),
    "int8_wo": ("bf16", "int8", "bf16"),
    "int4_wo": ("bf16", "int4", "bf16"),
    "int8_sq": ("int8", "int8", "int8"),
}


@dataclass(frozen=True)
class OpTable:
    """Rows of an op-level file as columns: text columns as str arrays, numbers as float (nan if empty)."""

    text: dict[str, np.ndarray]
    numbers: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.text["op"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.text[name] if name in self.text else self.numbers[name]

    @property
    def measured_s(self) -> np.ndarray:
        """Measured latency [s]."""
        return self.numbers["measured_ms"] * 1e-3

    def take(self, rows: Any) -> OpTable:
        """The rows selected by a boolean mask or an index array."""
        return OpTable({k: v[rows] for k, v in self.text.items()}, {k: v[rows] for k, v in self.numbers.items()})

    def groups(self) -> dict[tuple[str, ...], np.ndarray]:
        """Row indices per (op, engine, hardware, dtype, kv_dtype), in a fixed order."""
        keys = np.stack([self.text[c] for c in ("op", "engine", "hardware", "dtype", "kv_dtype")], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = np.ravel(inverse)
        return {tuple(str(x) for x in u): np.flatnonzero(inverse == g) for g, u in enumerate(uniq)}


#: Longest one op's measurement may be [ms]: a quarter of an hour, beyond any kernel or collective
#: a step runs (a 1e300 ms row had pinned a fitted profile at its bounds).
MAX_MEASURED_MS = 1e6


def _parse(reader: csv.DictReader, label: str) -> OpTable:
    missing = [c for c in TEXT_COLUMNS + NUMBER_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SpecError(f"op file {label}: missing column(s) {', '.join(missing)} (schema inferlab-ops/1)")
    text: dict[str, list[str]] = {c: [] for c in TEXT_COLUMNS}
    numbers: dict[str, list[float]] = {c: [] for c in NUMBER_COLUMNS}
    for line, row in enumerate(reader, start=2):
        op = row["op"]
        if op not in REQUIRED:
            raise SpecError(f"op file {label}, line {line}: unknown op {op!r}; allowed: {', '.join(OP_KINDS)}")
        for c in TEXT_COLUMNS:
            text[c].append((row[c] or "").strip())
        for c in NUMBER_COLUMNS:
            cell = (row[c] or "").strip()
            try:
                numbers[c].append(float(cell) if cell else np.nan)
            except ValueError:
                raise SpecError(f"op file {label}, line {line}: column {c} must be a number, got {cell!r}") from None
            if cell and np.isnan(numbers[c][-1]):  # written 'nan': not a missing cell
                raise SpecError(f"op file {label}, line {line}: column {c} must be a number, got {cell!r}")
        empty = [c for c in REQUIRED[op] + ("hardware", "engine", "measured_ms")
                 if (text[c][-1] == "" if c in text else np.isnan(numbers[c][-1]))]
        if empty:
            raise SpecError(f"op file {label}, line {line}: {op} needs {', '.join(empty)}")
        if not 0 < numbers["measured_ms"][-1] <= MAX_MEASURED_MS:
            raise SpecError(f"op file {label}, line {line}: measured_ms must be > 0 and at most {MAX_MEASURED_MS:g} "
                            f"(a quarter of an hour for one op: a unit slip), got {numbers['measured_ms'][-1]:g}")
        for c in REQUIRED[op]:  # sizes the op is built from: 0, a fraction or inf had been timed as given
            v = numbers[c][-1] if c in numbers else None
            if v is not None and not (np.isfinite(v) and v >= 1 and (c == "message_bytes" or v == round(v))):
                what = "a finite number >= 1" if c == "message_bytes" else "a whole number >= 1"
                raise SpecError(f"op file {label}, line {line}: {c} must be {what}, got {v:g}")
        if op == "all_reduce" and numbers["num_gpus"][-1] < 2:
            raise SpecError(f"op file {label}, line {line}: an all_reduce over one GPU moves nothing; num_gpus "
                            "must be at least 2")
        if op == "gemm" and text["dtype"][-1] not in GEMM_DTYPES:
            raise SpecError(f"op file {label}, line {line}: unknown GEMM dtype {text['dtype'][-1]!r}; "
                            f"allowed: {', '.join(GEMM_DTYPES)}")
    if not text["op"]:
        raise SpecError(f"op file {label}: no measurements below the header; add a row per op (schema inferlab-ops/1)")
    return OpTable({c: np.asarray(v, dtype=str) for c, v in text.items()},
                   {c: np.asarray(v, dtype=float) for c, v in numbers.items()})


def read_ops(path: str | Path) -> OpTable:
    """Read an op-level CSV (schema ``inferlab-ops/1``).

    Raises
    ------
    SpecError
        A missing column, an unknown op or dtype, a non-numeric cell, a row without the
        columns its op needs, or a non-positive latency (with the line number).
    """
    text = read_text(path, f"op file {path}")
    return _parse(csv.DictReader(io.StringIO(text)), str(path))


def profile_engine(engine: str) -> str:
    """Profile engine of a row: NCCL (collectives) and unknown engines use ``generic``."""
    return engine if engine in PROFILE_ENGINES else "generic"


def build_op(kind: str, dtype: str, kv_dtype: str, rows: dict[str, np.ndarray]) -> Op:
    """One vectorized op for rows that share op kind and formats.

    ``rows`` maps column names to arrays. A GEMM computes at its dtype's tensor precision
    and reads weights and activations in their formats (weight-only kernels read 16-bit
    activations); attention reads and writes the KV cache in ``kv_dtype``; an all-reduce
    reduces ``message_bytes`` over ``num_gpus`` GPUs (in the switch only when ``dtype`` has
    16 bits or more).
    """
    if kind == "gemm":
        precision, weights, acts = GEMM_DTYPES[dtype]
        return Gemm("gemm", m=rows["m"], n=rows["n"], k=rows["k"], precision=precision, kernel=dtype,
                    weight_bytes_per_element=number_format(weights).bytes_per_element,
                    act_bytes_per_element=number_format(acts).bytes_per_element)
    if kind in ("attention_prefill", "attention_decode"):
        prefill = kind == "attention_prefill"
        head_dim = rows["head_dim"]
        window = np.where(rows["window"] > 0, rows["window"], np.inf)
        return Attention(kind, batch=rows["batch"], new_tokens=rows["seq_len"] if prefill else 1.0,
                         context=0.0 if prefill else rows["kv_len"], heads=rows["num_heads"],
                         kv_heads=rows["num_kv_heads"], qk_dim=head_dim, v_dim=head_dim, window=window,
                         kv_elements=2.0 * rows["num_kv_heads"] * head_dim,
                         kv_bytes_per_element=number_format(kv_dtype).bytes_per_element,
                         act_bytes_per_element=number_format(dtype).bytes_per_element, precision=dtype)
    if kind == "all_reduce":
        return Collective("all_reduce", collective="all_reduce", message_bytes=rows["message_bytes"],
                          group_size=rows["num_gpus"], switch_reducible=number_format(dtype).element_bits >= 16)
    raise SpecError(f"unknown op {kind!r}; allowed: {', '.join(OP_KINDS)}")


def group_profile(profile: str | Path | Profile, engine: str, hardware: str) -> Profile:
    """The efficiency profile of one (engine, GPU) group of rows."""
    hw = load_hardware(hardware)
    return load_profile(profile, profile_engine(engine), hw.id, hardware_family(hw.architecture))


def predict_group(table: OpTable, rows: np.ndarray, profile: Profile) -> np.ndarray:
    """Predicted latency [s] of ``rows`` (one group) under a resolved profile."""
    kind, engine, hardware, dtype, kv_dtype = (str(table.text[c][rows[0]]) for c in
                                              ("op", "engine", "hardware", "dtype", "kv_dtype"))
    hw = load_hardware(hardware)
    phase = "decode" if kind == "attention_decode" else "prefill"
    out = np.empty(rows.shape)
    # A collective's group size picks the link, so all-reduce rows are timed per group size.
    parts = [rows == rows] if kind != "all_reduce" else \
        [table.numbers["num_gpus"][rows] == g for g in np.unique(table.numbers["num_gpus"][rows])]
    for part in parts:
        sel = rows[part]
        cols = {c: table.numbers[c][sel] for c in REQUIRED.get(kind, ()) + ("window",) if c in table.numbers}
        if kind == "all_reduce":
            cols["num_gpus"] = int(cols["num_gpus"][0])
        t = time_op(build_op(kind, dtype, kv_dtype, cols), hw, profile, phase, standalone=True)
        out[part] = np.broadcast_to(np.asarray(t.time_s, float), sel.shape)
    return out


def predict_ops(table: OpTable, profile: str | Path | Profile = "default") -> np.ndarray:
    """Predicted latency [s] of every row of ``table``."""
    out = np.empty(len(table))
    for (_, engine, hardware, _, _), rows in table.groups().items():
        out[rows] = predict_group(table, rows, group_profile(profile, engine, hardware))
    return out
