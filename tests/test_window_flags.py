"""Where an engine keeps a windowed-attention model's KV, as a user (``serve``/``estimate``
keywords, a Deployment, the CLI) or an engine command sets it (``engines/window_options.py``).

Hand figures (gpt-oss-120b, config.json, as in ``test_window_pool.py``): 36 layers alternating
``sliding_attention`` (window 128) and ``full_attention``, 8 KV heads of 64, BF16: 2,048 B a
token a layer, 36,864 B a token over the 18 layers of each kind, 73,728 B over all 36. A
sequence of 9,216 tokens (1,024 + 8,192) holds:

* every layer at every token (``window_kv=()``, SGLang ``--disable-hybrid-swa-memory``, vLLM
  ``--disable-hybrid-kv-cache-manager``): 9,216 x 73,728 = 679,477,248 B;
* one pool freeing what leaves a sliding window (vLLM's default): 18 x 2,048 x (9,216 + 128)
  = 344,457,216 B;
* SGLang's two pools at ratio r: 9,216 x 36,864 x (1 + r): 611,529,523.2 B at its default 0.8,
  679,477,248 B at 1.0 (the same as every layer at every token), 509,607,936 B at 0.5.

A pool of P bytes holds floor(P / those) sequences; the flags leave P as it is.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferlab
from inferlab import load_model
from inferlab.cli.main import main
from inferlab.engines import launch_command, launch_from_deployment, parse_engine_args
from inferlab.errors import SpecError
from inferlab.inputs.deployment import Deployment
from inferlab.inputs.resolve import deployment
from inferlab.inputs.workload import Workload
from inferlab.serving.replica import engine_scheduler, kv_capacity_tokens, state_tokens

LENGTH = 9216.0
EVERY_LAYER = 9216 * 73_728  # 679,477,248 B
ONE_POOL = 18 * 2048 * (9216 + 128)  # 344,457,216 B
SGLANG = {0.8: 9216 * 36_864 * 1.8, 1.0: 9216 * 36_864 * 2.0, 0.5: 9216 * 36_864 * 1.5}
SGLANG_CMD = "python -m sglang.launch_server --model-path openai/gpt-oss-120b"
VLLM_CMD = "vllm serve openai/gpt-oss-120b"


def _estimate(model="gpt-oss-120b", engine="sglang", **kw):
    return inferlab.estimate(model, "b200", engine=engine, isl=1024, osl=8192, **kw)


def _served(engine: str, model: str = "gpt-oss-120b", **limits) -> float:
    """Sequences of 9,216 tokens the serving simulation's pool holds (its tokens over a sequence's)."""
    dep = deployment(model, "b200", engine=engine)
    sched = engine_scheduler(engine, None, **limits)
    return kv_capacity_tokens(dep, sched, context=LENGTH) / (LENGTH + state_tokens(dep, sched, context=LENGTH))


def _every_layer_full(model):
    """``model`` with every windowed layer made a full-attention one."""
    return model.model_copy(update={"layers": tuple(layer.model_copy(update={"attention": "full", "window": None})
                                                    for layer in model.layers)})


def test_the_sequence_bytes_by_hand():
    oss = load_model("gpt-oss-120b")
    assert oss.kv_cache_bytes(LENGTH, freed=()) == pytest.approx(EVERY_LAYER)
    assert oss.kv_cache_bytes(LENGTH) == pytest.approx(ONE_POOL)
    assert _every_layer_full(oss).kv_cache_bytes(LENGTH) == pytest.approx(EVERY_LAYER)


def test_sglang_without_its_window_pool_holds_what_a_model_of_full_layers_holds():
    """``--disable-hybrid-swa-memory``: the pool P over 679,477,248 B a sequence, as a gpt-oss whose
    every layer is full-length; 0.9 of the default's count (611,529,523.2 / 679,477,248)."""
    launch = parse_engine_args(f"{SGLANG_CMD} --disable-hybrid-swa-memory")
    assert (launch.window_kv, launch.window_pool_ratio) == ((), None)
    kw = launch.to_kwargs("estimate")
    flagged = inferlab.estimate(kw.pop("model"), "b200", isl=1024, osl=8192, **kw)
    default = _estimate()
    full = _estimate(_every_layer_full(load_model("gpt-oss-120b")))
    pool = float(default.memory.kv_budget)
    assert float(flagged.memory.kv_budget) == pytest.approx(pool)
    assert float(flagged.memory.max_sequences) == math.floor(pool / EVERY_LAYER) == float(full.memory.max_sequences)
    assert float(default.memory.max_sequences) == math.floor(pool / SGLANG[0.8]) == 162
    assert _served("sglang", window_kv=()) == pytest.approx(0.9 * _served("sglang"), rel=1e-9)


@pytest.mark.parametrize("ratio", [1.0, 0.5])
def test_swa_full_tokens_ratio_changes_capacity_by_the_bytes_a_sequence_holds(ratio):
    """At 1.0 a sequence takes 2.0 / 1.8 of the default's bytes (fewer sequences, as many as with
    every layer full); at 0.5, 1.5 / 1.8 (more)."""
    launch = parse_engine_args(f"{SGLANG_CMD} --swa-full-tokens-ratio {ratio:g}")
    assert launch.window_pool_ratio == ratio
    kw = launch.to_kwargs("estimate")
    flagged = inferlab.estimate(kw.pop("model"), "b200", isl=1024, osl=8192, **kw)
    pool = float(_estimate().memory.kv_budget)
    assert float(flagged.memory.max_sequences) == math.floor(pool / SGLANG[ratio])
    assert _served("sglang", window_pool_ratio=ratio) / _served("sglang") == pytest.approx(1.8 / (1.0 + ratio),
                                                                                            rel=1e-9)
    direction = 1 if ratio < 0.8 else -1
    assert direction * (float(flagged.memory.max_sequences) - 162) > 0


def test_vllm_without_its_hybrid_manager_holds_the_all_layer_count():
    """318 sequences at 344,457,216 B: the pool P is in [318, 319) of them, so at 679,477,248 B it
    holds P / 679,477,248 in [161.2, 161.7): 161."""
    launch = parse_engine_args(f"{VLLM_CMD} --disable-hybrid-kv-cache-manager")
    assert launch.window_kv == ()
    kw = launch.to_kwargs("estimate")
    flagged = inferlab.estimate(kw.pop("model"), "b200", isl=1024, osl=8192, **kw)
    default = _estimate(engine="vllm")
    assert float(default.memory.max_sequences) == 318
    assert float(flagged.memory.max_sequences) == 161 == math.floor(float(default.memory.kv_budget) / EVERY_LAYER)


@pytest.mark.parametrize("engine, limits, fits", [
    ("sglang", {"window_kv": ()}, 146), ("sglang", {"window_pool_ratio": 1.0}, 146),
    ("sglang", {"window_pool_ratio": 0.5}, None), ("vllm", {"window_kv": ()}, 161),
    ("trtllm-pytorch", {"window_kv": ()}, None), ("sglang", {"window_kv": ("sliding",)}, None),
])
def test_serve_and_estimate_agree_with_the_flags_set(engine, limits, fits):
    planned = float(_estimate(engine=engine, **limits).memory.max_sequences)
    assert _served(engine, **limits) == pytest.approx(planned, abs=1.0)
    if fits is not None:
        assert planned == fits


def test_serve_runs_with_the_pool_the_flags_leave():
    """256 closed-loop clients of 9,216 tokens under vLLM: 318 fit with its hybrid manager, none
    preempted; 161 without it, so the pool fills and requests are preempted."""
    run = dict(model="gpt-oss-120b", hardware="b200", engine="vllm", isl=1024, osl=8192, concurrency=256,
               num_requests=256)
    assert inferlab.serve(**run).preemptions == 0
    assert inferlab.serve(**run, window_kv=[]).preemptions > 0


def test_an_engine_command_on_a_model_without_windows_is_unaffected():
    """The engines take their window flags on any model and ignore them where no layer is windowed."""
    for command, engine in ((VLLM_CMD + " --disable-hybrid-kv-cache-manager", "vllm"),
                            (SGLANG_CMD + " --disable-hybrid-swa-memory", "sglang"),
                            (SGLANG_CMD + " --swa-full-tokens-ratio 0.5", "sglang")):
        kw = parse_engine_args(command.replace("openai/gpt-oss-120b", "meta-llama/Llama-3.1-8B-Instruct")) \
            .to_kwargs("estimate")
        assert "window_kv" not in kw and "window_pool_ratio" not in kw
        flagged = inferlab.estimate(kw.pop("model"), "b200", isl=1024, osl=8192, **kw).memory
        assert float(flagged.max_sequences) == float(_estimate("llama-3.1-8b", engine=engine).memory.max_sequences)


@pytest.mark.parametrize("limits, message", [
    ({"window_kv": ()}, "window_kv: llama-3.1-8b has no windowed attention layers (its layers: 32 full)"),
    ({"window_pool_ratio": 0.5}, "window_pool_ratio: llama-3.1-8b has no windowed attention layers"),
    ({"window_kv": ("sliding",), "window_pool_ratio": 0.5}, "window_kv and window_pool_ratio: llama-3.1-8b has no"),
])
def test_a_window_setting_on_a_model_without_windows_is_refused(limits, message):
    """Given directly it would change nothing: estimate and serve say so."""
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _estimate("llama-3.1-8b", **limits)
    with pytest.raises(SpecError, match="llama-3.1-8b has no windowed attention layers"):
        inferlab.serve("llama-3.1-8b", "b200", engine="sglang", isl=512, osl=64, rate=1, num_requests=4, **limits)


def test_a_window_kind_the_model_has_no_layers_of_is_refused():
    """gpt-oss has sliding windows only (18 sliding(128), 18 full); Llama 4 Scout chunked ones."""
    with pytest.raises(SpecError, match=r"gpt-oss-120b has no chunked attention layers .*allowed: sliding, or none"):
        _estimate(window_kv=("chunked",))
    with pytest.raises(SpecError, match="has no sliding attention layers"):
        _estimate("llama-4-scout", engine="vllm", window_kv=("sliding",), tp=8)
    assert _estimate(window_kv=("sliding",)).memory.max_sequences == _estimate().memory.max_sequences


def test_explain_says_the_ratio_given():
    """0.5 x 36,864 + 36,864 = 55,296 B a token: 55.3 kB."""
    text = _estimate(batch_size=8, window_pool_ratio=0.5).explain()
    assert "55.3 kB/token at 9,216 tokens" in text and "0.5 of a token" in text
    assert "--swa-full-tokens-ratio" not in _estimate(batch_size=8, window_kv=()).explain()


@pytest.mark.parametrize("command", [
    f"{SGLANG_CMD} --swa-full-tokens-ratio 0.5", f"{SGLANG_CMD} --disable-hybrid-swa-memory",
    f"{VLLM_CMD} --disable-hybrid-kv-cache-manager",
])
def test_parse_render_parse_keeps_them(command):
    first = parse_engine_args(command)
    rendered = launch_command(first)
    assert rendered.unexpressed == ()
    assert parse_engine_args(rendered.script).modelled() == first.modelled()
    assert first.unknown == () and not any("not modelled" in line for line in first.report("estimate"))


def test_across_engines_and_what_cannot_be_said():
    off = parse_engine_args(f"{VLLM_CMD} --disable-hybrid-kv-cache-manager")
    assert "--disable-hybrid-swa-memory" in launch_command(off, "sglang").script
    assert "window_kv" in dict(launch_command(off, "trtllm-pytorch").unexpressed)  # no such TensorRT-LLM option
    ratio = parse_engine_args(f"{SGLANG_CMD} --swa-full-tokens-ratio 0.5")
    for engine in ("vllm", "trtllm-pytorch"):
        assert "window_pool_ratio" in dict(launch_command(ratio, engine).unexpressed)
    both = parse_engine_args(f"{SGLANG_CMD} --disable-hybrid-swa-memory --swa-full-tokens-ratio 0.5")
    assert (both.window_kv, both.window_pool_ratio) == ((), None)
    assert any("sizes nothing" in note for note in both.notes)
    made = launch_from_deployment("gpt-oss-120b", engine="sglang", window_kv=[], window_pool_ratio=None)
    assert "--disable-hybrid-swa-memory" in launch_command(made).script


def _connector(name: str) -> str:
    return "--kv-transfer-config '{\"kv_connector\": \"%s\", \"kv_role\": \"kv_both\"}'" % name


def test_a_kv_connector_without_hma_support_turns_vllms_hybrid_manager_off():
    """vLLM turns the hybrid KV-cache manager off beside a ``--kv-transfer-config`` whose connector
    does not declare ``SupportsHMA`` (LMCacheConnectorV1); NixlConnector keeps it (vllm PRs
    #35758, #41847); the ``--no-`` form keeps it; a model without windows is not concerned."""
    launch = parse_engine_args(f"{VLLM_CMD} {_connector('LMCacheConnectorV1')}")
    assert launch.window_kv == () and any(n.startswith("--kv-transfer-config") for n in launch.notes)
    assert launch.unknown and launch.unknown[0].startswith("--kv-transfer-config")  # the transfer: not modelled
    nixl = parse_engine_args(f"{VLLM_CMD} {_connector('NixlConnector')}")
    assert nixl.window_kv is None and any("earlier ones turn it off" in n for n in nixl.notes)
    multi = ("--kv-transfer-config '{\"kv_connector\": \"MultiConnector\", \"kv_role\": \"kv_both\", "
             "\"kv_connector_extra_config\": {\"connectors\": [{\"kv_connector\": \"NixlConnector\"}, "
             "{\"kv_connector\": \"%s\"}]}}'")
    assert parse_engine_args(f"{VLLM_CMD} {multi % 'NixlConnector'}").window_kv is None
    assert parse_engine_args(f"{VLLM_CMD} {multi % 'LMCacheConnectorV1'}").window_kv == ()
    # Llama 4's chunked layers: vLLM keeps them whole anyway, so a connector changes nothing there
    scout = parse_engine_args(f"vllm serve meta-llama/Llama-4-Scout-17B-16E-Instruct {_connector('LMCacheConnectorV1')}")
    assert scout.window_kv is None and not any(n.startswith("--kv-transfer-config") for n in scout.notes)
    kept = parse_engine_args(f"{VLLM_CMD} {_connector('LMCacheConnectorV1')} --no-disable-hybrid-kv-cache-manager")
    assert kept.window_kv is None
    llama = parse_engine_args(f"vllm serve meta-llama/Llama-3.1-8B-Instruct {_connector('LMCacheConnectorV1')}")
    assert llama.window_kv is None and not any(n.startswith("--kv-transfer-config") for n in llama.notes)


@pytest.mark.parametrize("kw, match", [
    ({"window_pool_ratio": 0}, "above 0 and at most 1"), ({"window_pool_ratio": 1.5}, "swa-full-tokens-ratio"),
    ({"window_pool_ratio": True}, "window_pool_ratio"), ({"window_kv": ["global"]}, "'global' is not a windowed"),
    ({"window_kv": "sliding,full"}, "allowed: sliding, chunked"), ({"window_kv": 3}, "window_kv must be a list"),
    ({"window_kv": (), "window_pool_ratio": 0.5}, "no windowed layers' pool is left"),
])
def test_bad_values_are_refused_in_one_line(kw, match):
    for call in (lambda: _estimate(**kw), lambda: inferlab.serve("gpt-oss-120b", "b200", engine="sglang", rate=1.0,
                                                                 num_requests=4, **kw)):
        with pytest.raises(SpecError, match=match) as info:
            call()
        assert "\n" not in str(info.value)


def test_a_ratio_is_sglangs():
    for engine in ("vllm", "trtllm-pytorch", "generic"):
        with pytest.raises(SpecError, match="is SGLang's"):
            _estimate(engine=engine, window_pool_ratio=0.5)
        with pytest.raises(SpecError, match="is SGLang's"):
            inferlab.serve("gpt-oss-120b", "b200", engine=engine, rate=1.0, num_requests=4, window_pool_ratio=0.5)
    with pytest.raises(SpecError, match="is SGLang's"):
        inferlab.serve("gpt-oss-120b", disaggregation="prefill=b200x1,decode=b200x1", engine="vllm", rate=1.0,
                       num_requests=4, window_pool_ratio=0.5)


def test_a_deployment_carries_them_to_estimate_and_serve():
    dep = Deployment(model="gpt-oss-120b", hardware="b200", engine={"name": "sglang", "window_kv": []})
    assert Deployment.from_dict(dep.to_dict()) == dep and dep.engine.window_kv == ()
    assert dep.estimate_kwargs()["window_kv"] == () and dep.serve_kwargs()["window_kv"] == ()
    est = inferlab.estimate(dep, Workload(isl=1024, osl=8192, batch_size=1))
    assert float(est.memory.max_sequences) == 146
    with pytest.raises(SpecError, match="'global' is not"):
        Deployment(model="gpt-oss-120b", hardware="b200", engine={"name": "sglang", "window_kv": ["global"]})


def test_a_disaggregation_takes_them_for_both_pools():
    est = inferlab.estimate("gpt-oss-120b", disaggregation="prefill=b200x1,decode=b200x1", engine="vllm", isl=1024,
                            osl=8192, batch_size=8, window_kv=())
    assert float(est.decode_memory.max_sequences) == 161
    served = inferlab.serve("gpt-oss-120b", disaggregation="prefill=b200x1,decode=b200x1", engine="sglang",
                            isl=1024, osl=64, rate=2.0, num_requests=8, window_kv=())
    assert served.requests_per_s > 0


@pytest.mark.parametrize("argv", [
    ["serve", "gpt-oss-120b", "b200", "--engine", "sglang", "--rate", "1", "--window-kv", "global"],
    ["serve", "gpt-oss-120b", "b200", "--engine", "sglang", "--rate", "1", "--window-pool-ratio", "1.5"],
    ["estimate", "gpt-oss-120b", "b200", "--engine", "vllm", "--window-pool-ratio", "0.5"],
    ["estimate", "gpt-oss-120b", "b200", "--engine", "sglang", "--window-kv", "sliding,,"],
])
def test_the_cli_refuses_a_bad_value_in_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inferlab: error: --window-")


def test_the_cli_reads_them(capsys):
    assert main(["estimate", "gpt-oss-120b", "b200", "--engine", "sglang", "--isl", "1024", "--osl", "8192",
                 "--window-kv", "none", "--json"]) == 0
    assert '"window_kv": []' in capsys.readouterr().out


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(["gpt-oss-120b", "llama-4-scout", "mistral-7b", "llama-3.1-8b"]),
       engine=st.sampled_from(["vllm", "trtllm-pytorch", "generic", "sglang"]),
       kinds=st.sampled_from([("sliding",), ("chunked",), ("sliding", "chunked")]),
       length=st.integers(256, 65536))
def test_freeing_windows_never_lowers_capacity(model, engine, kinds, length):
    """Whatever kinds an engine frees, it holds at least the sequences it holds freeing none."""
    dep = deployment(model, "h200-sxm", engine=engine, tp=4 if model == "llama-4-scout" else 1)

    def sequences(window_kv):
        sched = engine_scheduler(engine, None, window_kv=window_kv)
        return kv_capacity_tokens(dep, sched, context=float(length)) / (
            length + state_tokens(dep, sched, context=float(length)))

    assert sequences(kinds) >= sequences(()) * (1 - 1e-12)


def test_a_case_states_window_settings_as_a_yaml_list():
    """A measured case's ``scheduler: {window_kv: []}`` (YAML gives a list) is read as the kinds'
    tuple and predicted, closed loop and static batch alike; the static batch at 300 sequences
    of 9,216 tokens on one B200 runs in waves where every layer keeps every token (161 fit, by
    hand above) and in one where vLLM frees the windows (318 fit)."""
    from inferlab.validation.cases import Case
    from inferlab.validation.predict import predict_cases

    base = dict(id="a", regime="closed_loop", model="gpt-oss-120b", hardware="b200", num_gpus=1, parallelism={"tp": 1},
                precision={}, engine="vllm", isl=1024, osl=8192, load={"concurrency": 64}, metric="tpot_ms",
                measured=10.0, unit="ms", source="test")
    loop = Case(**{**base, "scheduler": {"window_kv": []}})
    assert loop.scheduler == {"window_kv": ()}
    static = {**base, "regime": "static_batch", "load": {"batch_size": 300}}
    whole, freed = Case(**{**static, "id": "b", "scheduler": {"window_kv": []}}), Case(**{**static, "id": "c"})
    (p_loop, why), (p_whole, _), (p_freed, _) = predict_cases([loop, whole, freed])
    assert p_loop is not None and why is None
    assert p_whole < p_freed  # two waves of 150 decode faster than one of 300
    with pytest.raises(ValueError, match="'global' is not a windowed"):
        Case(**{**base, "scheduler": {"window_kv": ["global"]}})
