"""Bad spec files give SpecError or UnitError with a useful message, never another exception."""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferlab import InferlabError, SpecError, UnitError, parse_hardware, parse_model

ROOT = Path(__file__).resolve().parents[1]
H100 = yaml.safe_load((ROOT / "hardware_specs" / "h100-sxm.yaml").read_text())
QWEN = yaml.safe_load((ROOT / "model_specs" / "qwen3-30b-a3b.yaml").read_text())


def _paths(obj, prefix=()):
    """Every (path, value) in a nested dict/list."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _set(doc, path, value):
    out = copy.deepcopy(doc)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return out


def _delete(doc, path):
    out = copy.deepcopy(doc)
    target = out
    for part in path[:-1]:
        target = target[part]
    del target[path[-1]]
    return out


H100_PATHS = [p for p, _ in _paths(H100) if p]
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.sampled_from(["-3 TB/s", "3.35", "3.35 TB", "3.35 furlong/s", "1e400 GB", "80 Gb", "nan GB", "", "  "]),
)


def _accept_or_clear_error(fn, doc):
    try:
        fn(doc)
    except (SpecError, UnitError) as exc:
        assert str(exc).strip(), "error message must not be empty"
        assert isinstance(exc, InferlabError)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(H100_PATHS), junk=JUNK)
def test_hardware_replace_any_value_with_junk(path, junk):
    _accept_or_clear_error(parse_hardware, _set(H100, path, junk))


@settings(max_examples=150, deadline=None)
@given(path=st.sampled_from(H100_PATHS))
def test_hardware_delete_any_key(path):
    if isinstance(path[-1], int):
        return
    _accept_or_clear_error(parse_hardware, _delete(H100, path))


@settings(max_examples=100, deadline=None)
@given(path=st.sampled_from([p for p in H100_PATHS if not isinstance(p[-1], int)]), key=st.text(min_size=1, max_size=10))
def test_hardware_unknown_keys(path, key):
    parent = path[:-1]
    doc = copy.deepcopy(H100)
    target = doc
    for part in parent:
        target = target[part]
    if not isinstance(target, dict) or key in target or parent[:1] == ("sources",) and len(parent) == 1:
        return
    target[key] = "x"
    _accept_or_clear_error(parse_hardware, doc)


QWEN_PATHS = [p for p, _ in _paths(QWEN) if p]


@settings(max_examples=300, deadline=None)
@given(path=st.sampled_from(QWEN_PATHS), junk=JUNK)
def test_model_replace_any_value_with_junk(path, junk):
    _accept_or_clear_error(parse_model, _set(QWEN, path, junk))


@settings(max_examples=100, deadline=None)
@given(doc=st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_not_a_mapping(doc):
    with pytest.raises(SpecError, match="mapping"):
        parse_hardware(doc)
    with pytest.raises(SpecError, match="mapping"):
        parse_model(doc)


@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("memory_bandwidth",), {"value": 3.35, "source": "nv_h100_page"}, "bare number 3.35 has no unit"),
        (("memory_bandwidth",), {"value": "3.35 TB", "source": "nv_h100_page"}, "[information] / [time]"),
        (("memory_bandwidth",), {"value": "-3.35 TB/s", "source": "nv_h100_page"}, "below the allowed minimum"),
        (("memory_bandwidth",), {"value": "3.35 TB/s", "source": "nowhere"}, "source 'nowhere' is not defined"),
        (("memory_bandwidth",), {"value": "3.35 TB/s", "source": "nv_h100_page", "colour": "red"}, "unknown key"),
        (("flops", "bf17"), {"value": "1 TFLOPS", "source": "nv_h100_page"}, "flops.bf17"),
        (("usable_memory_capacity",), {"value": "95 GiB", "source": "nvsmi_h100"}, "GB vs GiB"),
        (("status",), "rumoured", "status"),
        (("price",), {"value": "2.95 USD/hour", "source": "price_aimultiple_2026"}, "as_of"),
    ],
)
def test_hardware_messages_say_what_where_and_what_is_allowed(path, value, fragment):
    with pytest.raises(SpecError) as info:
        parse_hardware(_set(H100, path, value), "h100-sxm.yaml")
    msg = str(info.value)
    assert fragment in msg
    assert msg.startswith("h100-sxm.yaml: ")


def test_every_bundled_spec_file_parses():
    folder = resources.files("inferlab")
    for name in ("hardware_specs", "model_specs"):
        root = folder / name if (folder / name).is_dir() else ROOT / name
        files = [p for p in root.iterdir() if p.name.endswith(".yaml")]
        assert len(files) >= 24
        for path in files:
            doc = yaml.safe_load(path.read_text())
            spec = (parse_hardware if name == "hardware_specs" else parse_model)(doc, path.name)
            assert spec.id == path.name[:-5]


def test_figure_accepts_a_pint_quantity_from_python():
    from inferlab import Q

    doc = _set(H100, ("memory_bandwidth",), {"value": Q("3.35 TB/s"), "source": "nv_h100_page"})
    assert parse_hardware(doc).memory_bandwidth.si == 3.35e12


@pytest.mark.parametrize(
    "path, value, fragment",
    [
        (("scale_out", "bandwidth"), {"value": "50 GB/s", "source": "nv_dgx_h100_guide"}, "state NIC bandwidth in bits"),
        (("memory_bandwidth",), {"value": "3.35 TB/s", "source": "nv_h100_page",
                                 "alternatives": [{"value": "banana", "source": "mleng_accel"}]}, "alternative 'banana'"),
        (("memory_bandwidth",), {"value": "3.35 TB/s", "source": "nv_h100_page",
                                 "alternatives": [{"value": "3 TB", "source": "mleng_accel"}]}, "alternative '3 TB'"),
        (("scale_up", "domain_size"), {"value": 0, "source": "nv_dgx_h100_guide"}, "minimum"),
        (("sparse_flops", "bf16"), {"value": "989 TFLOPS", "source": "nv_h100_page"}, "not above the dense figure"),
        (("memory_bandwidth",), {"value": "10**400 TB/s", "source": "nv_h100_page"}, "larger than 64"),
    ],
)
def test_schema_catches_classic_traps(path, value, fragment):
    with pytest.raises(SpecError) as info:
        parse_hardware(_set(H100, path, value))
    assert fragment in str(info.value)
