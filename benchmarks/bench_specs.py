"""Speed of the spec layer: catalog loading and vectorized KV-cache sizing.

Run with ``make bench`` (or ``.venv/bin/python benchmarks/bench_specs.py``). Prints
figures; asserts nothing, so a noisy machine cannot fail it.
"""

from __future__ import annotations

import time

import numpy as np

from inferlab import hardware_ids, load_hardware, load_model, model_ids
from inferlab.specs import catalog


def _best_of(fn, repeat=5):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def load_all_cold():
    for cached in (catalog._load_hardware_id, catalog._load_model_id, catalog._hardware_files, catalog._model_files,
                   catalog._aliases):
        cached.cache_clear()
    for i in hardware_ids():
        load_hardware(i)
    for i in model_ids():
        load_model(i)


def main() -> None:
    n_specs = len(hardware_ids()) + len(model_ids())
    t = _best_of(load_all_cold)
    print(f"load every catalog spec (cold, {n_specs} files): {t * 1e3:8.1f} ms  ({t / n_specs * 1e3:.2f} ms/spec)")

    model = load_model("gemma-3-27b")  # mixed sliding/full layers: the harder case
    contexts = np.random.default_rng(0).integers(1, 131_072, size=1_000_000)
    t = _best_of(lambda: model.kv_cache_bytes(contexts))
    print(f"kv_cache_bytes over 1,000,000 contexts:        {t * 1e3:8.1f} ms  ({t / 1e6 * 1e9:.1f} ns/point)")

    t = _best_of(lambda: [load_model(i).param_counts for i in model_ids()], repeat=20)
    print(f"parameter counts of every catalog model:       {t * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
