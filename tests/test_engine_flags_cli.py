"""``--engine-args`` on estimate and serve, ``engine_args`` in deployment files, ``plan --launch``: end to end, in-process."""

from __future__ import annotations

import json

import pytest

import inferlab
from inferlab.cli.main import main
from inferlab.errors import SpecError
from inferlab.engines import parse_engine_args

VLLM = ("vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --quantization fp8 "
        "--kv-cache-dtype fp8 --max-num-batched-tokens 4096 --gpu-memory-utilization 0.85 --block-size 32 "
        "--port 8000 --swap-space 4")


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_estimate_engine_args_equal_the_explicit_flags(capsys):
    workload = ("--isl", "2048", "--osl", "256", "--batch", "1,8")
    code, pasted, err = run(capsys, "estimate", "--engine-args", VLLM, "h100-sxm", *workload)
    assert code == 0
    assert "unknown to inferlab, not modelled: --swap-space 4" in err and "change nothing inferlab models: --port" in err
    code, explicit, _ = run(capsys, "estimate", "llama-3.1-70b", "h100-sxm", "--engine", "vllm", "--tp", "4",
                            "--precision", "fp8", "--max-num-tokens", "4096", "--gpu-memory-utilization", "0.85",
                            "--kv-block-size", "32", *workload)
    assert code == 0 and pasted == explicit and "(tp4), fp8, engine vllm" in pasted


def test_serve_engine_args_equal_the_explicit_flags(capsys):
    sglang = ("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp 2 "
              "--max-running-requests 32 --chunked-prefill-size 2048 --mem-fraction-static 0.8")
    load = ("--rate", "4", "--num-requests", "200", "--isl", "512", "--osl", "64")
    code, pasted, _ = run(capsys, "serve", "--engine-args", sglang, "h100-sxm", *load)
    assert code == 0
    code, explicit, _ = run(capsys, "serve", "llama-3.1-8b", "h100-sxm", "--engine", "sglang", "--tp", "2",
                            "--max-num-seqs", "32", "--max-num-batched-tokens", "2048", "--gpu-memory-utilization",
                            "0.8", *load)
    assert code == 0 and pasted == explicit


def test_contradicting_flags_are_refused_in_one_line(capsys):
    code, _, err = run(capsys, "estimate", "--engine-args", VLLM, "h100-sxm", "--tp", "8")
    assert code == 2
    assert err.strip().splitlines()[-1] == ("inferlab: error: --tp 8 contradicts the engine args "
                                            "(--tensor-parallel-size gives 4); drop one of them")
    code, _, err = run(capsys, "estimate", "--engine-args", "vllm serve meta-llama/Llama-3.1-8B -tp x", "h100-sxm")
    assert code == 2 and "-tp 'x' is not a whole number >= 1" in err


def test_deployment_file_engine_args(tmp_path, capsys):
    path = tmp_path / "dep.yaml"
    path.write_text(f"engine_args: {VLLM}\nhardware: h100-sxm\nisl: 2048\nosl: 256\n")
    code, from_file, _ = run(capsys, "estimate", "--file", str(path))
    code2, pasted, _ = run(capsys, "estimate", "--engine-args", VLLM, "h100-sxm", "--isl", "2048", "--osl", "256")
    assert code == code2 == 0 and from_file == pasted
    path.write_text(f"engine_args: {VLLM}\nhardware: h100-sxm\ntp: 2\n")
    code, _, err = run(capsys, "estimate", "--file", str(path))
    assert code == 2 and f"{path}: tp 2 contradicts the engine args" in err


def test_a_bad_value_of_a_deployment_file_is_named_as_its_key_there(tmp_path, capsys):
    # they had been named as flags the user never gave ('--tp must be an integer')
    path = tmp_path / "dep.yaml"
    path.write_text('model: llama-3.1-8b\nhardware: h100-sxm\ntp: "2"\n')
    code, _, err = run(capsys, "estimate", "--file", str(path))
    assert code == 2 and f"{path}: tp must be an integer (it counts GPUs), got '2'" in err
    path.write_text("model: llama-3.1-8b\nhardware: h100-sxm\nosl: 0\n")
    code, _, err = run(capsys, "estimate", "--file", str(path))
    assert code == 2 and f"{path}: osl must hold whole numbers" in err
    code, _, err = run(capsys, "estimate", "--file", str(path), "--osl", "0")  # the flag's value: the flag
    assert code == 2 and "--osl must hold whole numbers" in err and str(path) not in err


def test_plan_exports_the_winner_as_launch_commands(capsys):
    code, out, _ = run(capsys, "plan", "examples/scenarios/chat.yaml", "--verify", "0", "--launch", "all", "--json")
    assert code == 0
    data = json.loads(out)
    best = next(c for c in data["candidates"] if c["feasible"])
    assert set(data["launch"]) == {"vllm", "sglang", "trtllm-pytorch"}
    for engine, section in data["launch"].items():
        launch = parse_engine_args(section["script"])
        assert (launch.model, launch.tp, launch.engine) == (best["model"], best["tp"], engine)
        assert launch.max_num_seqs == 1024  # vLLM's default on a GPU of >= 70 GiB, which the chat scenario plans with
        assert launch.max_num_batched_tokens == 8192
    # vLLM admits on the prompt: TensorRT-LLM's command says so (its own default reserves the
    # whole output's KV), the others by saying nothing
    assert parse_engine_args(data["launch"]["trtllm-pytorch"]["script"]).reserve_output is False
    assert parse_engine_args(data["launch"]["vllm"]["script"]).reserve_output is None


def test_serve_max_prefill_tokens_flag_equals_the_engine_args(capsys):
    sglang = "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --max-prefill-tokens 2048"
    load = ("--concurrency", "8", "--num-requests", "40", "--isl", "1500", "--osl", "64")
    code, pasted, _ = run(capsys, "serve", "--engine-args", sglang, "h100-sxm", *load)
    assert code == 0
    code, explicit, _ = run(capsys, "serve", "llama-3.1-8b", "h100-sxm", "--engine", "sglang",
                            "--max-prefill-tokens", "2048", *load)
    assert code == 0 and pasted == explicit
    code, without, _ = run(capsys, "serve", "llama-3.1-8b", "h100-sxm", "--engine", "sglang", *load)
    assert without != explicit  # 1,500-token prompts arriving together: the second waits an iteration
    code, _, err = run(capsys, "serve", "--engine-args", sglang, "h100-sxm", "--max-prefill-tokens", "4096", *load)
    assert code != 0 and "--max-prefill-tokens 4096 contradicts the engine args" in err


def test_a_plans_launch_for_another_engine_says_whose_limits_it_carries(capsys):
    # the chat scenario plans with vLLM: its SGLang command writes vLLM's 1,024 sequences (its default on a
    # GPU of 70 GiB or more) and says so;
    # its vLLM command needs no such line
    from pathlib import Path

    from inferlab.cli.main import main

    scenario = str(Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "chat.yaml")
    assert main(["plan", scenario, "--launch", "sglang"]) == 0
    out = capsys.readouterr().out
    assert "the plan simulated vllm's scheduler" in out and "--max-running-requests 1024" in out
    assert main(["plan", scenario, "--launch", "vllm"]) == 0
    assert "the plan simulated" not in capsys.readouterr().out


def test_a_plans_launch_writes_no_tensorrt_command_for_an_amd_winner(capsys, tmp_path):
    # TensorRT-LLM runs on NVIDIA GPUs only (estimate refuses it on an MI300X): a plan won by an
    # MI300X says so instead of writing a trtllm-serve script
    from inferlab.cli.main import main

    scenario = tmp_path / "amd.yaml"
    scenario.write_text("name: amd\nmodels: [llama-3.1-8b]\nhardware: [mi300x]\nengine: vllm\n"
                        "traffic: {rate: 5, isl: 1000, osl: 200}\nslo: {ttft_ms: 1000, tpot_ms: 50}\n"
                        "search: {precisions: [fp8], tp: [1]}\n")
    assert main(["plan", str(scenario), "--launch", "trtllm-pytorch"]) == 0
    out = capsys.readouterr().out
    assert "# inferlab: engine trtllm-pytorch runs on NVIDIA GPUs only, not on mi300x" in out
    assert "trtllm-serve" not in out


def test_the_capacity_policy_is_a_limit_every_path_takes(capsys):
    # TensorRT-LLM's GUARANTEED_NO_EVICT (its default) admits a request only when the KV of its
    # whole output is free, so it never preempts; MAX_UTILIZATION admits on the prompt and
    # preempts when the cache fills. On one L4 (about 5 GB of KV for Llama-3.1-8B in BF16),
    # 32 clients of 1,000 + 3,000 tokens cannot all hold their whole output: the reserving
    # policy queues them (no preemption, a longer TTFT), the other runs them all and preempts.
    import pytest

    import inferlab
    from inferlab import Deployment, SpecError, Workload
    from inferlab.engines import launch_command, launch_from_deployment

    work = dict(isl=1000, osl=3000, concurrency=32, num_requests=96)
    reserving = inferlab.serve("llama-3.1-8b", "l4", engine="trtllm", **work)
    packing = inferlab.serve("llama-3.1-8b", "l4", engine="trtllm", reserve_output=False, **work)
    assert reserving.trace.preemptions == 0 < packing.trace.preemptions
    assert reserving.ttft_s.mean() > packing.ttft_s.mean()
    # the same from TensorRT-LLM's options file, from a Deployment, and from the CLI flag
    options = ("cat > o.yml <<'EOF'\nscheduler_config: {capacity_scheduler_policy: MAX_UTILIZATION}\nEOF\n"
               "trtllm-serve meta-llama/Llama-3.1-8B-Instruct --extra_llm_api_options o.yml")
    assert main(["serve", "--engine-args", options, "l4", "--isl", "1000", "--osl", "3000", "--concurrency", "32",
                 "--num-requests", "96", "--json"]) == 0
    # trtllm-serve runs the PyTorch runtime (its own host terms): the same run through the API
    pytorch = inferlab.serve("llama-3.1-8b", "l4", engine="trtllm-pytorch", reserve_output=False, **work)
    assert json.loads(capsys.readouterr().out)["preemptions"] == pytorch.trace.preemptions > 0
    dep = Deployment(model="llama-3.1-8b", hardware="l4", engine={"name": "trtllm", "reserve_output": False})
    assert inferlab.serve(dep, Workload(**work)).trace.preemptions == packing.trace.preemptions
    assert main(["serve", "llama-3.1-8b", "l4", "--engine", "trtllm", "--no-reserve-output", "--isl", "1000",
                 "--osl", "3000", "--concurrency", "32", "--num-requests", "96", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["preemptions"] == packing.trace.preemptions
    # written back: TensorRT-LLM's policy by name; vLLM cannot reserve, and says so
    launch = launch_from_deployment("llama-3.1-8b", reserve_output=False)
    assert "capacity_scheduler_policy: MAX_UTILIZATION" in launch_command(launch, "trtllm-pytorch").script
    assert "cannot express reserve_output" in launch_command(
        launch_from_deployment("llama-3.1-8b", reserve_output=True), "vllm").script
    with pytest.raises(SpecError, match="STATIC_BATCH' is not modelled; allowed: GUARANTEED_NO_EVICT, MAX_UTILIZATION"):
        parse_engine_args(options.replace("MAX_UTILIZATION", "STATIC_BATCH"))


def test_vllm_takes_true_or_false_after_its_optional_boolean_switches():
    # vLLM before 0.10 read "--enable-chunked-prefill false" (StoreBoolean); it had set chunking on
    from inferlab.engines import parse_engine_args

    assert parse_engine_args("vllm serve llama-3.1-8b --enable-chunked-prefill false").chunked_prefill is False
    launch = parse_engine_args("vllm serve llama-3.1-8b --enable-chunked-prefill --enable-prefix-caching=False "
                               "--max-num-seqs 8")
    assert (launch.chunked_prefill, launch.prefix_caching, launch.max_num_seqs, launch.unknown) == (True, False, 8, ())


def test_estimate_refuses_a_launch_whose_max_model_len_the_model_cannot_take(capsys):
    command = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 200000"
    assert main(["estimate", "--engine-args", command, "h100-sxm"]) == 2
    assert "max_model_len=200,000 exceeds the 131,072 positions" in capsys.readouterr().err
    assert main(["estimate", "--engine-args", command, "h100-sxm", "--allow-long-context"]) == 0


def test_estimate_marks_the_points_past_a_launchs_max_model_len(capsys):
    # vLLM refuses a request whose prompt plus max_tokens passes --max-model-len, in a static batch
    # as under load; estimate had said the flag limits serving only and priced 2,048 + 256 tokens
    command = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 1024"
    code, out, err = run(capsys, "estimate", "--engine-args", command, "h100-sxm", "--isl", "512,2048", "--osl",
                         "256")
    assert code == 0 and "limit serving" not in err
    assert ("batch 1, isl 2048, osl 256 does not run: isl + osl = 2,304 tokens exceeds the engine's "
            "max_model_len=1,024") in out
    code, _, err = run(capsys, "estimate", "--engine-args", command, "h100-sxm", "--isl", "2048", "--osl", "256")
    assert code == 1 and "exceeds the engine's max_model_len=1,024: it refuses such a request" in err
    # the same from the option and the API; 768 + 256 = 1,024 is within it
    assert main(["estimate", "llama-3.1-8b", "h100-sxm", "--max-model-len", "1024", "--isl", "768", "--osl", "256"]) == 0
    est = inferlab.estimate("llama-3.1-8b", "h100-sxm", isl=[768, 769], osl=256, max_model_len=1024)
    assert est.feasible.ravel().tolist() == [True, False]
    # separate pools refuse it as well (a first version left max_model_len, and with it the model's
    # positions check, out of a disaggregated estimate)
    pools = inferlab.estimate("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", isl=[768, 769],
                              osl=256, max_model_len=1024)
    assert pools.feasible.ravel().tolist() == [True, False] and "max_model_len=1,024" in str(pools)
    with pytest.raises(SpecError, match="exceeds the 131,072 positions"):
        inferlab.estimate("llama-3.1-8b", disaggregation="prefill=h100-sxmx1,decode=h100-sxmx1", max_model_len=200000)


def test_explain_names_the_flag_behind_each_field(capsys):
    code, out, _ = run(capsys, "estimate", "--engine-args", VLLM, "h100-sxm", "--isl", "2048", "--explain")
    assert code == 0
    read = next(line for line in out.splitlines() if line.startswith("vllm engine args read:"))
    for part in ("tp 4 (--tensor-parallel-size)", "KV cache fp8 (--kv-cache-dtype)",
                 "gpu_memory_utilization 0.85 (--gpu-memory-utilization)", "kv_block_size 32 (--block-size)"):
        assert part in read
    code, out, _ = run(capsys, "serve", "--engine-args", VLLM, "h100-sxm", "--rate", "1", "--num-requests", "8",
                       "--isl", "512", "--osl", "16", "--explain", "--json")
    assert code == 0 and "max_num_batched_tokens 4096 (--max-num-batched-tokens)" in json.loads(out)["explain"]
    # --quantization: the precision it gives, with its flag (it had been left out)
    launch = parse_engine_args("vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --quantization fp8")
    assert launch.read_lines() == ["vllm engine args read: tp 4 (-tp); precision w:fp8 a:fp8 (--quantization)"]
    launch = parse_engine_args("trtllm-serve nvidia/DeepSeek-R1-FP4 --tp_size 8")
    assert launch.read_lines() == ["trtllm engine args read: tp 8 (--tp_size); weights nvfp4 from the checkpoint's "
                                   "name (nvidia/DeepSeek-R1-FP4)"]


def test_serve_refuses_a_prefix_cache_the_engine_args_turn_off(capsys):
    # the flag switches caching off; --prefix asking for it on had been simulated with hits (49%)
    command = "vllm serve meta-llama/Llama-3.1-8B-Instruct --no-enable-prefix-caching"
    code, _, err = run(capsys, "serve", "--engine-args", command, "h100-sxm", "--rate", "2", "--num-requests", "10",
                       "--isl", "2048", "--osl", "16", "--prefix", "shared:tokens=1500,groups=4,cache=on")
    assert code == 2 and err.strip() == (
        "inferlab: error: --prefix shared:tokens=1500,groups=4,cache=on asks for cache=on but the engine args turn "
        "prefix caching off (--no-enable-prefix-caching); drop one of them")
    code, out, _ = run(capsys, "serve", "--engine-args", command, "h100-sxm", "--rate", "2", "--num-requests", "10",
                       "--isl", "2048", "--osl", "16", "--prefix", "shared:tokens=1500,groups=4", "--json")
    assert code == 0 and json.loads(out)["prefix_hit_rate"] == 0.0


@pytest.mark.parametrize("argv, said", [
    # the flag the user wrote, not the keyword behind it
    (["--engine-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct --kv-cache-dtype fp8", "h100-sxm",
      "--kv-cache-dtype", "bf16"],
     "--kv-cache-dtype bf16 contradicts the engine args (--kv-cache-dtype gives kv:fp8); drop one of them"),
    (["--engine-args", "trtllm-serve meta-llama/Llama-3.1-8B-Instruct --ep_size 2", "h100-sxm"],
     "llama-3.1-8b has no experts: --ep_size 2 needs a mixture-of-experts model"),
    # the drafter, not the engine's model, with no 70B suggestions
    (["--engine-args", "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --speculative-config "
      "'{\"model\": \"meta-llama/Llama-3.2-1B-Instruct\", \"num_speculative_tokens\": 4}'", "h100-sxm"],
     "vllm: --speculative-config: the draft model 'meta-llama/Llama-3.2-1B-Instruct' is not a catalog model, so its "
     "steps cannot be priced; give a catalog id (inferlab models list) or a local folder with its config.json"),
    (["--engine-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{\"method\": \"ngram\"}'",
      "h100-sxm"],
     "vllm: --speculative-config: the draft length (num_speculative_tokens) must be a whole number >= 1, got None"),
])
def test_engine_args_errors_name_what_the_user_wrote(capsys, argv, said):
    code, _, err = run(capsys, "estimate", *argv)
    assert code == 2 and err.strip() == f"inferlab: error: {said}"


def test_a_case_file_given_as_a_deployment_says_what_reads_it(capsys):
    # it had suggested 'waves' for the case file's 'schema' key
    code, _, err = run(capsys, "estimate", "--file", "tests/data/cases-sample.yaml")
    assert code == 2 and "is a file of measured cases, not a deployment: predict them with inferlab validate" in err


def test_the_tensorrt_backends_command_says_how_it_gets_its_format(capsys):
    # --backend tensorrt quantizes while it builds the engine; the PyTorch runtime's note (it reads a
    # pre-quantized checkpoint) had been written under it too
    from pathlib import Path

    from inferlab.cli.main import main

    scenario = str(Path(__file__).resolve().parents[1] / "examples" / "scenarios" / "chat.yaml")
    assert main(["plan", scenario, "--launch", "trtllm"]) == 0
    out = capsys.readouterr().out
    assert "--backend tensorrt" in out and "the TensorRT backend quantizes the checkpoint while it builds" in out
    assert "PyTorch runtime" not in out


@pytest.mark.parametrize("nodes, said", [("0", "--nnodes '0' is not a whole number >= 1"),
                                         ("16", "--nnodes 16 is more nodes than the 8 GPUs of --tp 8 x --pp 1")])
def test_sglang_nodes_are_checked(nodes, said):
    with pytest.raises(SpecError, match=said):
        parse_engine_args(f"python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp 8 --nnodes {nodes}")
    # two nodes of a TP-16 launch: read, and said to change nothing inferlab models (the hardware's nodes place them)
    launch = parse_engine_args("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp 16 --nnodes 2")
    assert launch.tp == 16 and "--nnodes" in launch.no_effect
