"""One Deployment and one Workload: every way of writing a deployment parses into the same value.

The expected Deployments are written out field by field here (from reading the inputs),
never produced by the parsers under test.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from inferlab import Deployment, SpecError, UnknownNameError, Workload, estimate, serve
from inferlab.cli.estimate_cmd import inputs_of
from inferlab.cli.main import build_parser
from inferlab.inputs.convert import from_deployment_file, from_kwargs
from inferlab.inputs.deployment import Engine, Layout
from inferlab.inputs.precision import Precision
from inferlab.inputs.techniques import PoolSpec, Pools, PrefixCacheSpec, Speculative
from inferlab.inputs.workload import Lengths
from inferlab.validation.case_inputs import case_deployment
from inferlab.validation.cases import Case

FP8 = {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}

#: name -> (estimate keyword arguments, the same as a deployment file, a case, CLI arguments, expected Deployment)
SAME = {
    "dense tp fp8": (
        {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "precision": FP8, "engine": "vllm",
         "allow_long_context": True},
        "model: llama-3.1-70b\nhardware: h100-sxm\ntp: 4\nengine: vllm\nallow_long_context: true\n"
        "precision: {weights: fp8, activations: fp8, kv_cache: fp8}\n",
        {"parallelism": {"tp": 4}, "num_gpus": 4, "model": "llama-3.1-70b", "hardware": "h100-sxm",
         "precision": {"weights": "fp8", "activations": "fp8"}, "engine": "vllm"},
        "llama-3.1-70b h100-sxm --tp 4 --weights fp8 --activations fp8 --kv-cache-dtype fp8 --engine vllm "
        "--allow-long-context",
        Deployment.model_construct(
            model="llama-3.1-70b", hardware="h100-sxm", num_gpus=4, layout=Layout.model_construct(
                tp=4, pp=1, ep=1, dp=1, attention_dp=False, expert_imbalance=1.0, micro_batches=None),
            precision=Precision.model_construct(weights="fp8", moe_weights=None, activations="fp8", kv_cache="fp8"),
            engine=Engine(name="vllm"), profile="default", attention="flash", cuda_graphs=True,
            allow_long_context=True, price_per_gpu_hour=None, utilization=1.0, speculative=None, prefix_cache=None,
            disaggregation=None)),
    "moe ep attention_dp": (
        {"model": "qwen3-30b-a3b", "hardware": "h200-sxm", "tp": 4, "ep": 4, "attention_dp": True, "engine": "sglang",
         "gpu_memory_utilization": 0.85, "allow_long_context": True},
        "model: qwen3-30b-a3b\nhardware: h200-sxm\ntp: 4\nep: 4\nattention_dp: true\nengine: sglang\n"
        "gpu_memory_utilization: 0.85\nallow_long_context: true\n",
        {"parallelism": {"tp": 4, "ep": 4, "attention_dp": True}, "num_gpus": 4, "model": "qwen3-30b-a3b",
         "hardware": "h200-sxm", "precision": {}, "engine": "sglang", "scheduler": {"gpu_memory_utilization": 0.85}},
        "qwen3-30b-a3b h200-sxm --tp 4 --ep 4 --attention-dp --engine sglang --gpu-memory-utilization 0.85 "
        "--allow-long-context",
        Deployment.model_construct(
            model="qwen3-30b-a3b", hardware="h200-sxm", num_gpus=4, layout=Layout.model_construct(
                tp=4, pp=1, ep=4, dp=1, attention_dp=True, expert_imbalance=1.0, micro_batches=None),
            precision=None, engine=Engine(name="sglang", gpu_memory_utilization=0.85), profile="default",
            attention="flash", cuda_graphs=True, allow_long_context=True, price_per_gpu_hour=None, utilization=1.0,
            speculative=None, prefix_cache=None, disaggregation=None)),
    "speculative and prefix cache": (
        {"model": "llama-3.1-8b", "hardware": "h100-sxm", "speculative": "eagle:k=4,accept=0.7", "prefix_cache": 0.5,
         "engine": "trtllm", "allow_long_context": True},
        "model: llama-3.1-8b\nhardware: h100-sxm\nengine: trtllm\nspeculative: eagle:k=4,accept=0.7\n"
        "prefix_cache: 0.5\nallow_long_context: true\n",
        {"model": "llama-3.1-8b", "hardware": "h100-sxm", "num_gpus": 1, "precision": {}, "engine": "trtllm",
         "speculative": {"method": "eagle", "draft_tokens": 4, "acceptance": 0.7}, "prefix_cache": {"hit_rate": 0.5}},
        "llama-3.1-8b h100-sxm --engine trtllm --spec eagle:k=4,accept=0.7 --prefix-cache 0.5 --allow-long-context",
        Deployment.model_construct(
            model="llama-3.1-8b", hardware="h100-sxm", num_gpus=1, layout=Layout(), precision=None,
            engine=Engine(name="trtllm"), profile="default", attention="flash", cuda_graphs=True,
            allow_long_context=True, price_per_gpu_hour=None, utilization=1.0,
            speculative=Speculative.model_construct(method="eagle", k=4, acceptance=0.7, acceptance_length=None,
                                                    draft_model=None, draft_vocab_size=None, host_s=0.0,
                                                    source="stated by the user"),
            prefix_cache=PrefixCacheSpec.model_construct(cached_tokens=None, hit_rate=0.5, stable_prefix_first=True,
                                                         replicas=1, cache_aware_routing=True),
            disaggregation=None)),
    "disaggregated": (
        {"model": "llama-3.1-8b", "hardware": None, "disaggregation": "prefill=h200x4,decode=h200x8:tp4",
         "allow_long_context": True},
        "model: llama-3.1-8b\nallow_long_context: true\ndisaggregation:\n  prefill: {hardware: h200-sxm, num_gpus: 4}\n"
        "  decode: {hardware: h200-sxm, num_gpus: 8, tp: 4}\n",
        {"model": "llama-3.1-8b", "hardware": "h200-sxm", "num_gpus": 12, "precision": {}, "engine": "generic",
         "disaggregation": {"prefill": {"hardware": "h200-sxm", "num_gpus": 4},
                            "decode": {"hardware": "h200-sxm", "num_gpus": 8, "parallelism": {"tp": 4}}}},
        "llama-3.1-8b --disagg prefill=h200x4,decode=h200x8:tp4 --allow-long-context",
        Deployment.model_construct(
            model="llama-3.1-8b", hardware=None, num_gpus=12, layout=Layout(), precision=None, engine=Engine(),
            profile="default", attention="flash", cuda_graphs=True, allow_long_context=True,
            price_per_gpu_hour=None, utilization=1.0, speculative=None, prefix_cache=None,
            disaggregation=Pools.model_construct(
                prefill=PoolSpec.model_construct(hardware="h200-sxm", num_gpus=4, tp=4, precision=None, engine=None,
                                                 profile=None),
                decode=PoolSpec.model_construct(hardware="h200-sxm", num_gpus=8, tp=4, precision=None, engine=None,
                                                profile=None),
                link="auto", link_bandwidth=None, link_latency_s=None, overlap=True, first_token=None))),
}


def _case(fields: dict) -> Case:
    base = {"id": "x", "regime": "static_batch", "isl": 1024, "osl": 128, "load": {"batch_size": 8},
            "metric": "output_tokens_per_s", "measured": 1.0}
    return Case(**base, **fields)


@pytest.mark.parametrize("name", SAME)
def test_one_deployment_from_kwargs_file_case_and_cli(name, tmp_path):
    kwargs, text, case, argv, expected = SAME[name]
    path = tmp_path / "deployment.yaml"
    path.write_text(text)
    args = build_parser().parse_args(["estimate", *argv.split()])
    written = [from_kwargs(**kwargs)[0], Deployment.from_kwargs(**kwargs), from_deployment_file(path)[0],
               case_deployment(_case(case)), inputs_of(args)[0]]
    assert all(d == expected for d in written), [d for d in written if d != expected]


def test_dense_num_gpus_and_precision_per_kind():
    d = Deployment(model="llama-3.1-70b", hardware="h100-sxm", layout={"tp": 2, "pp": 2}, precision="fp8 kv:bf16")
    assert d.num_gpus == 4  # tp 2 x pp 2
    # "fp8" sets every kind (the routed experts follow the weights), then kv:bf16 overrides one
    assert d.precision.to_dict() == {"weights": "fp8", "moe_weights": "fp8", "activations": "fp8", "kv_cache": "bf16"}
    assert Deployment(model="llama-3.1-8b", hardware="h100-sxm", precision="kv:fp8").precision.to_dict() == \
        {"kv_cache": "fp8"}
    assert Deployment(model="llama-3.1-8b", hardware="h100-sxm", precision="checkpoint").precision is None


def test_aliases_are_stored_as_catalog_ids():
    d = Deployment(model="llama-3.1-8b", hardware="h200-sxm")
    assert (d.model, d.hardware) == ("llama-3.1-8b", "h200-sxm")
    assert Deployment(model="llama-3.1-8b", hardware="h100-sxm:3g.40gb").hardware == "h100-sxm:3g.40gb"


@pytest.mark.parametrize("name", SAME)
def test_dict_json_and_yaml_round_trips(name, tmp_path):
    d = SAME[name][4]
    assert Deployment.from_dict(d.to_dict()) == d
    assert Deployment.from_dict(json.loads(json.dumps(d.to_dict()))) == d
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(d.to_dict()))
    assert Deployment.from_file(path) == d
    (tmp_path / "d.json").write_text(json.dumps(d.to_dict()))
    assert Deployment.from_file(tmp_path / "d.json") == d


_KINDS = st.fixed_dictionaries({}, optional={k: st.sampled_from(["bf16", "fp8", "int4", "fp16"] if k != "activations"
                                                                 else ["bf16", "fp8", "fp16"])  # int4: weight-only
                                             for k in ("weights", "moe_weights", "activations", "kv_cache")})


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 3]),
       pp=st.sampled_from([1, 2]), adp=st.booleans(), kinds=_KINDS)
def test_round_trip_over_layouts_and_precisions(tp, ep, dp, pp, adp, kinds):
    if tp % ep:
        ep = 1
    if kinds.get("activations") == "fp8" and not {"fp8", "int4"} & {kinds.get("weights"), kinds.get("moe_weights")}:
        kinds = {**kinds, "weights": "fp8"}  # FP8 activations beside 16-bit weights alone are refused: no such GEMM
    d = Deployment(model="qwen3-30b-a3b", hardware="h200-sxm", layout={"tp": tp, "ep": ep, "dp": dp, "pp": pp,
                                                                       "attention_dp": adp},
                   precision=kinds or None)
    assert d.num_gpus == tp * pp * dp
    assert Deployment.from_dict(d.to_dict()) == d
    assert Deployment.from_dict(yaml.safe_load(yaml.safe_dump(d.to_dict()))) == d


def test_workload_round_trips_and_modes():
    static = Workload(batch_size=[1, 8], isl=[128, 2048], osl=256)
    assert static.mode == "static_batch" and static.to_dict() == {"batch_size": [1, 8], "isl": [128, 2048],
                                                                  "osl": 256}
    traffic = Workload(rate=4.0, num_requests=50, isl=[100, 200], osl=64, prefix="shared:tokens=64,groups=2")
    assert traffic.isl.kind == "empirical"  # a list is a distribution when serving
    for w in (static, traffic, Workload(concurrency=8, stagger=False), Workload(offline=True, num_requests=3)):
        assert Workload.from_dict(json.loads(json.dumps(w.to_dict()))) == w


def test_estimate_with_deployment_and_workload_is_the_keyword_call():
    kw = {"model": "llama-3.1-70b", "hardware": "h100-sxm", "tp": 4, "precision": "fp8 kv:bf16",
          "batch_size": [1, 8, 64], "isl": 2048, "osl": [128, 256, 512], "engine": "vllm", "max_num_tokens": 4096}
    d, w = from_kwargs(**kw)
    typed, plain = estimate(d, w).to_dict(), estimate(**kw).to_dict()
    assert typed.pop("deployment") == d.to_dict() and typed.pop("workload") == w.to_dict()
    assert typed == plain


@pytest.mark.parametrize("name", SAME)
def test_every_key_deployment_estimates_as_its_keywords(name):
    kwargs = {**SAME[name][0], "batch_size": 8, "isl": 1024, "osl": 128}
    typed = estimate(*from_kwargs(**kwargs)).to_dict()
    typed.pop("deployment"), typed.pop("workload")
    assert typed == estimate(**kwargs).to_dict()


def test_cli_grid_is_the_cli_estimate(capsys):
    args = build_parser().parse_args(["estimate", "llama-3.1-8b", "h100-sxm", "--batch", "1,8", "--isl", "128,512"])
    d, w = inputs_of(args)
    assert w.grid == "outer" and w.batch_size == (1, 8) and w.isl == (128, 512) and w.osl == 128
    from inferlab.cli.estimate_cmd import _kwargs

    typed = estimate(d, w).to_dict()
    assert np.shape(typed["ttft_s"]) == (2, 2, 1)  # batch x isl x osl
    typed.pop("deployment"), typed.pop("workload")
    kw = _kwargs(args)
    assert typed == estimate(kw.pop("model"), kw.pop("hardware"), **kw).to_dict()


def test_serve_with_deployment_and_workload_is_the_keyword_call():
    kw = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", "max_num_seqs": 32, "rate": 4.0,
          "num_requests": 40, "isl": 512, "osl": 32, "seed": 3}
    d, w = from_kwargs("serve", **kw)
    assert d.engine.max_num_seqs == 32 and w.rate == 4.0 and w.num_requests == 40
    typed, plain = serve(d, w).to_dict(), serve(**kw).to_dict()
    assert typed.pop("deployment") == d.to_dict() and typed.pop("workload") == w.to_dict()
    assert typed == plain


@pytest.mark.parametrize("fields, message", [
    ({"layout": {"tp": 2}, "num_gpus": 3}, "num_gpus=3 but the layout tp=2 x pp=1 x dp=1 uses 2 GPUs"),
    ({"disaggregation": "prefill=h200x4,decode=h200x8", "layout": {"tp": 2}}, "tp would be ignored"),
    ({"disaggregation": "prefill=h200x4,decode=h200x8", "speculative": "eagle:k=4,accept=0.7"},
     "speculative would be ignored"),
    ({"colour": "red"}, "unknown key(s) colour"),
    ({"layout": {"tp": 2, "sp": 2}}, "layout: unknown field(s) sp"),
    ({"engine": {"name": "vllm", "max_batch": 8}}, "engine: unknown field(s) max_batch"),
    ({"layout": {"micro_batches": 4}}, "there is one stage"),
])
def test_bad_deployments_say_what_is_wrong(fields, message):
    base = {"model": "llama-3.1-8b", "hardware": "h200-sxm"}
    with pytest.raises(SpecError) as err:
        Deployment(**{**base, **fields})
    assert message in str(err.value)


def test_unknown_names_keep_did_you_mean(tmp_path):
    with pytest.raises(UnknownNameError, match="did you mean 'llama-3.1-8b'"):
        Deployment(model="llama-3.1-8bb", hardware="h100-sxm")
    with pytest.raises(UnknownNameError, match="engine"):
        Deployment(model="llama-3.1-8b", hardware="h100-sxm", engine="vlm")
    path = tmp_path / "d.yaml"
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\ncolour: red\n")
    with pytest.raises(SpecError, match="unknown key"):
        from_deployment_file(path)
    with pytest.raises(SpecError, match="unknown key"):
        Deployment.from_file(path)


def test_typed_calls_refuse_mixed_arguments():
    d, w = from_kwargs(model="llama-3.1-8b", hardware="h100-sxm")
    with pytest.raises(SpecError, match="tp given beside them"):
        estimate(d, w, tp=2)
    with pytest.raises(SpecError, match="static batch"):
        serve(d, w)
    with pytest.raises(SpecError, match="estimate predicts a static batch"):
        estimate(d, Workload(rate=1.0, num_requests=5))
    with pytest.raises(SpecError, match="static batch"):
        Workload(batch_size=4, rate=1.0)


def test_engine_args_in_a_file_and_on_the_command_line(tmp_path):
    command = "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --quantization fp8 --max-num-batched-tokens 4096"
    path = tmp_path / "launch.yaml"
    path.write_text(f"engine_args: {command}\nhardware: h100-sxm\n")
    # --quantization fp8 quantizes weights and activations (w:fp8 a:fp8); the KV cache stays the checkpoint's
    expected = Deployment(model="llama-3.1-70b", hardware="h100-sxm", layout={"tp": 4},
                          precision={"weights": "fp8", "activations": "fp8"},
                          engine={"name": "vllm", "max_num_batched_tokens": 4096})
    args = build_parser().parse_args(["estimate", "h100-sxm", "--engine-args", command])
    assert from_deployment_file(path)[0] == expected
    assert inputs_of(args)[0] == expected


def test_workload_refusals():
    with pytest.raises(SpecError, match="unknown key"):
        Workload.from_dict({"batch_size": 1, "colour": "red"})
    with pytest.raises(SpecError, match="not a uniform distribution"):
        Workload(batch_size=1, isl=Lengths("uniform", low=1, high=4))
    with pytest.raises(SpecError, match="applies only to a static batch"):
        Workload(rate=1.0, waves=True)
    with pytest.raises(SpecError, match="prefix structure is simulated with traffic"):
        Workload(batch_size=1, prefix="shared:tokens=10")
    with pytest.raises(SpecError, match="describe traffic"):
        from_kwargs(model="llama-3.1-8b", hardware="h100-sxm", seed=2)


@pytest.mark.parametrize("name", SAME)
def test_every_field_written_out_is_the_same_deployment(name):
    d = SAME[name][4]
    assert Deployment(**d.model_dump()) == d  # defaults spelt out change nothing


def test_hardware_beside_pools_must_agree():
    pools = "prefill=h200x4,decode=h200x8:tp4"
    assert Deployment(model="llama-3.1-8b", hardware="h200-sxm", disaggregation=pools).hardware is None
    with pytest.raises(SpecError, match="disagrees with the pools"):
        Deployment(model="llama-3.1-8b", hardware="h100-sxm", disaggregation=pools)
    with pytest.raises(SpecError, match="num_gpus=8 but the pools have 4 \\+ 8 = 12 GPUs"):
        Deployment(model="llama-3.1-8b", num_gpus=8, disaggregation=pools)


def test_unknown_keyword_and_one_chunk_limit():
    with pytest.raises(SpecError, match="unknown argument\\(s\\) tensor_parallel"):
        from_kwargs(model="llama-3.1-8b", hardware="h100-sxm", tensor_parallel=2)
    with pytest.raises(SpecError, match="same limit"):
        Deployment.from_kwargs(model="llama-3.1-8b", hardware="h100-sxm", max_num_tokens=4096,
                               max_num_batched_tokens=2048)
    d = Deployment.from_kwargs(model="llama-3.1-8b", hardware="h100-sxm", max_num_tokens=4096, engine_version="0.9")
    assert (d.engine.max_num_batched_tokens, d.engine.version) == (4096, "0.9")


def test_what_the_resolver_refuses_a_deployment_refuses():
    from inferlab import InfeasibleError

    with pytest.raises(InfeasibleError, match="MIG slice"):
        Deployment(model="llama-3.1-8b", hardware="h100-sxm:3g.40gb", layout={"tp": 2})
    with pytest.raises(SpecError, match="moe_weights"):
        Deployment(model="llama-3.1-8b", hardware="h100-sxm", precision={"moe_weights": "mxfp4"})


def test_a_workloads_prefix_is_parsed_once_into_its_structure():
    """Text, a mapping and the object name one prefix structure: the Workload holds the parsed
    Prefixes, so the three forms are equal and a bad one is refused when the Workload is made."""
    from inferlab.inputs.prefixes import Prefixes

    text = Workload(rate=1.0, prefix="shared:tokens=1000,groups=8")
    mapping = Workload(rate=1.0, prefix={"kind": "shared", "tokens": 1000, "groups": 8})
    typed = Workload(rate=1.0, prefix=Prefixes("shared", tokens=1000, groups=8))
    assert text == mapping == typed and isinstance(text.prefix, Prefixes)
    assert Workload.from_dict(text.to_dict()) == text
    with pytest.raises(SpecError, match="workload: prefix:"):
        Workload(rate=1.0, prefix="shared:tokens=-5")


def test_an_engine_on_hardware_it_does_not_run_on_is_refused_and_a_grid_keeps_the_rest():
    import inferlab
    from inferlab.errors import InfeasibleError

    with pytest.raises(InfeasibleError, match=r"engine trtllm runs on NVIDIA GPUs only, not on mi300x \(an AMD GPU\); "
                                              r"the engines that do: generic, vllm, sglang$"):
        inferlab.estimate("llama-3.1-8b", "mi300x", engine="trtllm")
    # a TPU is a TPU; the server engines do not run on a phone, nor SGLang on a Mac
    with pytest.raises(InfeasibleError, match=r"not on tpu-v5e \(a Google TPU\)"):
        inferlab.estimate("llama-3.1-8b", "tpu-v5e", engine="trtllm")
    for engine, hw, others in (("sglang", "snapdragon-8-gen-3", "generic"), ("vllm", "snapdragon-8-gen-3", "generic"),
                               ("sglang", "m4-max", "generic, vllm")):
        with pytest.raises(InfeasibleError, match=f"engine {engine} does not run on {hw} .*; the engines that do: "
                                                  f"{others}$"):
            inferlab.estimate("llama-3.1-8b", hw, engine=engine, precision="int4")
    with pytest.raises(InfeasibleError, match="engine lmdeploy runs on NVIDIA GPUs only, not on m3-max"):
        inferlab.estimate("llama-3.1-8b", "m3-max", engine="lmdeploy")
    assert inferlab.estimate("llama-3.1-8b", "mi300x", engine="vllm").tpot > 0
    table = inferlab.sweep(["llama-3.1-8b"], ["h100-sxm", "mi300x"], engine="trtllm-pytorch", batch_size=[1])
    assert list(table.columns["feasible"]) == [True, False]


def test_a_hugging_face_name_reaches_its_catalog_model_as_engine_args_do():
    import inferlab

    assert inferlab.estimate("meta-llama/Llama-3.1-8B-Instruct", "h100-sxm").deployment.model.id == "llama-3.1-8b"
    with pytest.raises(SpecError, match="is not a catalog model; did you mean .*'meta-llama/llama-3.1-8b'"):
        inferlab.estimate("meta-llama/Llama-3.1-7B-Instruct", "h100-sxm")
    with pytest.raises(SpecError, match="no such file or folder './nope/config.json'"):
        inferlab.estimate("./nope/config.json", "h100-sxm")


def test_an_expert_imbalance_without_expert_parallelism_is_refused():
    import inferlab

    with pytest.raises(SpecError, match="with ep=1 one group holds every expert"):
        inferlab.estimate("qwen3-30b-a3b", "h100-sxm", batch_size=64, expert_imbalance=2.0)
    assert inferlab.estimate("qwen3-30b-a3b", "h100-sxm", tp=2, ep=2, batch_size=64, expert_imbalance=2.0).tpot > 0
    # the busiest of ep groups carries at most every routed token: ep times the mean load
    with pytest.raises(SpecError, match="busiest of 4 expert-parallel groups carries at most all the routed tokens, "
                                        "4x the mean load; give 1 to 4"):
        inferlab.estimate("qwen3-30b-a3b", "h100-sxm", tp=4, ep=4, batch_size=64, expert_imbalance=4.5)


@pytest.mark.parametrize("lengths", ["lognormal:mean=1000,sigma=0.8", "uniform:10-2000", [5, 9, 100, 3], 512])
def test_more_requests_extend_a_run_rather_than_redraw_it(lengths):
    """Prompt lengths, output lengths and arrival gaps are separate streams of the seed: the
    first 1,000 of 3,000 requests are the 1,000 of a shorter run (the planner lengthens its
    probes; a user who asks for more requests sees the same ones first)."""
    from inferlab.inputs.workload import Lengths, Workload

    def draw(n):
        return Workload(isl=Lengths.of(lengths), osl=Lengths.of(lengths), rate=3.0, num_requests=n, seed=7).draw()

    short, long = draw(1000), draw(3000)
    for a, b in zip(short, long):
        assert np.array_equal(a, b[:1000])
    assert not np.array_equal(long[0][1000:2000], long[0][:1000] + long[0][999])  # new requests, not a copy
