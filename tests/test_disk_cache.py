"""The on-disk memo: a hit gives what parsing gives, a changed input is parsed again, a bad
entry or an unwritable folder falls back to computing; and the pint-free shortcuts it serves
(unit factors, simple quantities) give exactly pint's numbers."""

from __future__ import annotations

import pickle

import pytest
import yaml

from inferlab import disk_cache, units
from inferlab.specs import catalog
from inferlab.units import Q, conversion_factor, ureg


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERLAB_CACHE_DIR", str(tmp_path))
    disk_cache.cache_dir.cache_clear()
    yield tmp_path
    disk_cache.cache_dir.cache_clear()


def test_a_hit_returns_the_stored_value_and_skips_the_computation(cache):
    calls = []
    first = disk_cache.memo("test", "key", lambda: calls.append(1) or {"x": 1.5})
    second = disk_cache.memo("test", "key", lambda: calls.append(1) or {"x": 99})
    assert first == second == {"x": 1.5} and calls == [1]
    assert disk_cache.memo("test", "other key", lambda: 2) == 2


def test_an_unreadable_entry_is_recomputed(cache):
    disk_cache.memo("test", "k", lambda: 1)
    (entry,) = cache.glob("test-*.pickle")
    entry.write_bytes(b"not a pickle")
    assert disk_cache.memo("test", "k", lambda: 2) == 2
    assert pickle.loads(entry.read_bytes()) == 2


def test_off_and_unwritable_folders_compute_every_time(tmp_path, monkeypatch):
    for setting in ("off", str(tmp_path / "file" / "below")):
        if setting != "off":
            (tmp_path / "file").write_text("a file where a folder should be")
        monkeypatch.setenv("INFERLAB_CACHE_DIR", setting)
        disk_cache.cache_dir.cache_clear()
        assert [disk_cache.memo("test", "k", lambda: n) for n in (1, 2)] == [1, 2]
    disk_cache.cache_dir.cache_clear()


def test_an_exception_is_not_cached(cache):
    def fail():
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        disk_cache.memo("test", "k", fail)
    assert disk_cache.memo("test", "k", lambda: 3) == 3


def test_a_changed_file_gets_a_new_key(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("a: 1\n")
    before = disk_cache.file_key(path)
    path.write_text("a: 22\n")
    assert disk_cache.file_key(path) != before


def test_cached_specs_equal_freshly_parsed_ones(cache):
    for load, parse, files in ((catalog._load_hardware_id, catalog._parse_hardware_file, catalog._hardware_files()),
                               (catalog._load_model_id, catalog._parse_model_file, catalog._model_files())):
        load.cache_clear()
        try:
            for key, path in files.items():
                load(key)  # fills the memo
            load.cache_clear()
            for key, path in files.items():
                assert load(key) == parse(key, path), key  # read back from the memo
        finally:
            load.cache_clear()
    assert len(list(cache.glob("hardware-*.pickle"))) == len(catalog.hardware_ids())


def _figures():
    for key in catalog.hardware_ids():
        for path, fig in catalog.load_hardware(key).figures():
            yield f"{key}.{path}", fig


@pytest.mark.parametrize("unit", ["TB/s", "GB/s", "TFLOPS", "USD/hour", "GB", "GiB", "W", "MHz"])
def test_conversion_factors_reproduce_pint_exactly(unit):
    compared = 0
    for where, fig in _figures():
        if Q(1.0, fig.unit).dimensionality == ureg.Unit(unit).dimensionality:
            assert fig.si * conversion_factor(fig.unit, unit) == fig.quantity.to(unit).magnitude, where
            compared += 1
    assert compared > 0


def test_conversion_factor_refuses_mismatched_dimensions():
    with pytest.raises(units.UnitError, match="cannot express byte in second"):
        conversion_factor("byte", "second")


def test_simple_quantities_are_read_as_pint_reads_them():
    texts = {"80 GB", "3.35 TB/s", "1e3 GB", "2.5e-3 s", "400 Gb/s", "7 tok/s", "16 GiB", "80GB", "989 TFLOPS"}
    for path in catalog._hardware_files().values():
        def walk(node):
            if isinstance(node, dict):
                if isinstance(node.get("value"), str):
                    texts.add(node["value"].strip())
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)
        walk(yaml.safe_load(path.read_text(encoding="utf-8")))
    shortcut = 0
    for text in sorted(texts):
        cleaned = units._DOLLAR_AMOUNT.sub(r"\1 USD", text).replace("$", " USD ")
        fast = units._simple_quantity(cleaned)
        if fast is None:
            continue
        shortcut += 1
        full = ureg.parse_expression(cleaned)
        assert repr(fast) == repr(full) and type(fast.magnitude) is type(full.magnitude), text
    assert shortcut > 100
