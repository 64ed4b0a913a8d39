"""What a benchmark file does not record: the deployment, from an engine's launch command or
a deployment file, merged with what the file does record, into validation cases.

The file's own records win (a ``trtllm-bench`` report states its layout and formats); the
rest comes from ``--engine-args "vllm serve ..."`` or ``--deployment FILE``, and the GPU
from ``--gpu`` (no benchmark tool records it in a form the catalog names).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from ...errors import InferlabError, SpecError
from ...specs.validation import format_validation_error
from ..cases import Case
from .run import BenchRun

#: The engine a tool's runs are served by when nothing says otherwise (the other tools
#: drive any OpenAI-compatible server: their runs use the ``generic`` profile).
DEFAULT_ENGINES = {"vllm": "vllm", "sglang": "sglang", "trtllm-bench": "trtllm"}
_UNITS = {"output_tokens_per_s": "tokens/s"}


@dataclass(frozen=True)
class GivenDeployment:
    """The deployment the user states beside the benchmark files (any field may be unset)."""

    model: str | None = None
    hardware: str | None = None
    engine: str | None = None
    layout: Mapping[str, Any] = field(default_factory=dict)
    precision: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    notes: tuple[str, ...] = ()
    scheduler: Mapping[str, Any] = field(default_factory=dict)
    #: The speculation the deployment runs, in a case's ``speculative`` form (method,
    #: ``draft_tokens``, ``draft_model``, and ``acceptance`` or ``acceptance_length`` where
    #: stated); a run's recorded acceptance completes it (:func:`run_cases`).
    speculative: Mapping[str, Any] | None = None


def _precision_dict(value: Any) -> dict[str, str]:
    from ...engines.precision_text import precision_kinds

    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items() if v}
    return precision_kinds(value)


def given_deployment(*, engine_args: str | None = None, deployment: str | None = None,
                     gpu: str | None = None) -> GivenDeployment:
    """The deployment of ``--engine-args`` or ``--deployment``, on ``--gpu``.

    Raises
    ------
    SpecError
        Both given, a launch command or deployment file that cannot be read, or a
        ``--gpu`` that contradicts the deployment file's hardware.
    UnknownNameError
        A ``--gpu`` the catalog does not hold.
    """
    if gpu:
        from ...specs.catalog import load_hardware

        load_hardware(gpu)  # an unknown id is refused here, with the closest ids, not once per case
    if engine_args and deployment:
        raise SpecError("--engine-args and --deployment both give the deployment; give one of them")
    if engine_args:
        from ...engines import parse_engine_args

        launch = parse_engine_args(engine_args)
        layout = {"tp": launch.tp, "pp": launch.pp, "ep": launch.ep, "dp": launch.dp,
                  "attention_dp": launch.attention_dp, "attention_tp": launch.attention_tp}
        notes = tuple(launch.report("serve"))
        from ...engines.scheduler import USER_LIMITS

        limits = {k: getattr(launch, k) for k in USER_LIMITS if getattr(launch, k) is not None}
        return GivenDeployment(launch.model, gpu, launch.engine, layout, _precision_dict(launch.precision),
                               "--engine-args", notes, limits, case_speculative(launch.speculation))
    if deployment:
        from ...engines.scheduler import USER_LIMITS
        from ...inputs.files import deployment_file_limits, read_deployment_file

        kwargs, launch = read_deployment_file(deployment, open_acceptance=True, hardware=gpu)
        # the serving limits: the engine args' or the typed file's engine, and a flat file's
        # max_num_tokens (the token budget as estimate names it)
        serving = deployment_file_limits(deployment, hardware=gpu) if launch is None else \
            {k: getattr(launch, k) for k in USER_LIMITS if getattr(launch, k) is not None}
        try:
            speculative = case_speculative(kwargs.pop("speculative", None))
        except InferlabError as exc:
            said = str(exc) if str(exc).startswith(("speculative", "in speculative")) else f"speculative: {exc}"
            raise SpecError(f"{deployment}: {said}") from None
        if launch is not None:
            if launch.speculation is not None and speculative is None:  # the acceptance may come from the runs
                speculative = case_speculative(launch.speculation)
                launch = replace(launch, speculation=None)
            try:
                kwargs = launch.merged(kwargs, "estimate")
            except InferlabError as exc:
                raise SpecError(f"{deployment}: {exc}") from None
        if kwargs.get("max_num_tokens") is not None:
            serving.setdefault("max_num_batched_tokens", kwargs["max_num_tokens"])
        hardware = kwargs.get("hardware")
        if gpu and hardware and gpu != hardware:
            raise SpecError(f"--gpu {gpu} contradicts the deployment file {deployment} (hardware: {hardware}); "
                            "drop one of them")
        layout = {k: kwargs[k] for k in ("tp", "pp", "ep", "dp", "attention_dp", "attention_tp")
                  if kwargs.get(k) is not None}
        limits = {**{k: kwargs[k] for k in USER_LIMITS if kwargs.get(k) is not None}, **serving}
        return GivenDeployment(kwargs.get("model"), gpu or hardware, kwargs.get("engine"), layout,
                               _precision_dict(kwargs.get("precision")) if kwargs.get("precision") else {},
                               f"--deployment {deployment}", (), limits, speculative)
    return GivenDeployment(hardware=gpu)


def case_speculative(spec: Any) -> dict[str, Any] | None:
    """An engine launch's :class:`~inferlab.engines.launch.Speculation` or a
    :class:`~inferlab.techniques.speculative_config.SpeculativeConfig` in a case's
    ``speculative`` form; None for none."""
    if spec is None:
        return None
    from ...techniques.speculative_config import SpeculativeConfig

    if isinstance(spec, str):  # a flat deployment file's preset name or text
        spec = SpeculativeConfig.parse(spec)
    elif isinstance(spec, dict):  # its fields without an acceptance (the run's completes them): checked as a whole
        spec = SpeculativeConfig.of({**spec, "acceptance_length": 1.0})  # with a stand-in, dropped below
        return {k: v for k, v in case_speculative(spec).items() if k != "acceptance_length"}
    out: dict[str, Any] = {"method": spec.method, "draft_tokens": int(spec.k)}
    if spec.draft_model is not None:
        out["draft_model"] = str(getattr(spec.draft_model, "id", None) or getattr(spec.draft_model, "name",
                                                                                   spec.draft_model))
    for key in ("acceptance", "acceptance_length", "draft_vocab_size"):
        if getattr(spec, key, None) is not None:
            out[key] = getattr(spec, key)
    return out


def _run_speculation(run: BenchRun, given: GivenDeployment, engine: str
                     ) -> tuple[dict[str, Any] | None, dict[str, Any], list[str]]:
    """The run's speculation (the deployment's drafter with the acceptance it states or the run
    recorded), the scheduler limits the engine sets for a drafter it runs unmodelled (over the
    deployment's and the run's own), and notes."""
    from ...engines.speculation_limits import drafter_limits
    from ..case_setup import runtime_engine

    # the drafter the file records the server ran (with the acceptance the deployment gives for the
    # same method), else the deployment's
    recorded, named = dict(run.speculative), dict(given.speculative or {})
    spec = named or None
    if recorded:
        spec = {**named, **recorded} if named.get("method") == recorded.get("method") else recorded
    if run.accept_length is not None:
        if spec is None:
            return None, {}, [f"{run.id}: speculative decoding (accept_length {run.accept_length:.3g}) without a "
                              "drafter named: simulated without it; give the engine's speculative flags in "
                              "--engine-args or the deployment's speculative"]
        k = int(spec["draft_tokens"])
        notes = [] if run.accept_length <= k + 1 else [
            f"{run.id}: accept_length {run.accept_length:.3g} is more than the {k + 1} tokens a step of a drafter "
            f"with k={k} can emit (not predicted); check the draft length the deployment names "
            "(--speculative-num-steps, --speculative-num-draft-tokens) against the run"]
        spec = {key: v for key, v in spec.items() if key not in ("acceptance", "acceptance_length")}
        spec["acceptance_length"] = float(run.accept_length)
        return spec, {}, notes
    if spec is not None and spec.get("acceptance") is None and spec.get("acceptance_length") is None:
        # the runtime the case will run as (TensorRT-LLM from 1.0: its PyTorch runtime)
        limits = drafter_limits(runtime_engine(engine, run.engine_version), spec["method"],
                                {**dict(given.scheduler), **dict(run.scheduler)})
        said = ", ".join(f"{k}={v}" for k, v in limits.items())
        return None, limits, [f"{run.id}: the deployment speculates ({spec['method']}, k={spec['draft_tokens']}) "
                              "but neither it nor the file gives an acceptance: simulated without the drafter"
                              + (f", at the limits {engine} sets for one ({said})" if limits else "")]
    return spec, {}, []


def _model(run: BenchRun, given: GivenDeployment, tool: str) -> str:
    from ...specs.catalog import catalog_model

    if run.model:
        try:
            return catalog_model(run.model)[0]
        except SpecError:
            if given.model is None:
                raise SpecError(f"{tool}: {run.id}: recorded model {run.model!r} is not a catalog model; give it "
                                "with --engine-args or --deployment") from None
    if given.model is None:
        command = {"sglang": "python -m sglang.launch_server --model-path MODEL ...",
                   "trtllm-bench": "trtllm-serve MODEL ..."}.get(run.tool, "vllm serve MODEL ...")
        raise SpecError(f"{tool}: {run.id}: the file does not record the model; give --engine-args "
                        f"\"{command}\" or --deployment FILE")
    return catalog_model(given.model)[0] if "/" in given.model else given.model


def _named_precision(run: BenchRun, notes: list[str]) -> dict[str, str]:
    """The formats the recorded model's name states (``RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8``:
    FP8 weights and activations), as the engine reads them from the checkpoint; empty when it
    states none. The file's model is the one predicted, so its format is too."""
    from ...core.quantization import PrecisionConfig
    from ...specs.catalog import checkpoint_format

    fmt = checkpoint_format(run.model) if run.model else None
    if fmt is None:
        return {}
    derived = PrecisionConfig.derived(fmt)
    notes.append(f"{run.id}: the recorded model {run.model} is {fmt} by its name: predicted in {fmt}")
    return {"weights": derived.weights, "activations": derived.activations}


def model_mismatch(run: BenchRun, given: GivenDeployment) -> str | None:
    """Why a run is not predicted when the file records another model than the deployment given
    names (its layout and flags are another run's: a 70B file read with an 8B command would run
    the 70B on the 8B's GPUs), else None."""
    from ...specs.catalog import catalog_model

    if not (run.model and given.model):
        return None
    try:
        recorded, named = catalog_model(run.model)[0], catalog_model(given.model)[0]
    except SpecError:
        return None
    if recorded == named:
        return None
    return (f"{run.id}: the file records the model {run.model} ({recorded}), the {given.source} {named}: give the "
            f"deployment that ran the file (its engine command or --deployment)")


#: A launch command with its tensor-parallel flag, per tool, for the note on an unrecorded layout.
_TP_COMMAND = {"sglang": "python -m sglang.launch_server --model-path {model} --tp-size 4",
               "trtllm-bench": "trtllm-serve {model} --tp_size 4"}


def layout_unknown(run: BenchRun, given: GivenDeployment) -> bool:
    """Whether a run's parallelism is assumed (tp 1): the file records none and neither
    ``--engine-args`` nor ``--deployment`` is given."""
    return not run.layout and not given.source


def assumed_layout(runs: list[BenchRun], *, refused: bool = False) -> str:
    """What is assumed of runs whose layout is unknown (:func:`layout_unknown`) and how to give
    it; ``refused``: why ``calibrate`` will not fit on them."""
    first = runs[0]
    which = first.id if len(runs) == 1 else f"{first.id} and {len(runs) - 1} other run(s)"
    records = "the file records" if len(runs) == 1 else "their files record"
    what = "parallelism" if first.precision else "parallelism or precision"
    formats = "" if first.precision else " in the checkpoint's own formats"
    command = _TP_COMMAND.get(first.tool, "vllm serve {model} -tp 4").format(model=first.model or "MODEL")
    how = f"give the launch command (--engine-args '{command}') or --deployment FILE"
    if refused:
        return (f"calibrate: {which}: {records} no {what}, and no --engine-args or --deployment is given: a "
                f"profile fitted to an assumed layout (tp 1 on one GPU{formats}) would fold the wrong deployment "
                f"into its efficiencies; {how}")
    return (f"{which}: {records} no {what}, and no --engine-args or --deployment is given: modelled as tp 1 "
            f"on one GPU{formats}; if it ran otherwise, {how}")


def recorded_over_given(run: BenchRun, given: GivenDeployment) -> list[str]:
    """A note for each layout size or format the file records that the deployment given (its
    flags or engine args) contradicts: the file's is what ran, so it is predicted with it."""
    notes = []
    for what, recorded, asked in (("", dict(run.layout), dict(given.layout)),
                                  (" format", dict(run.precision), dict(given.precision))):
        for key, value in recorded.items():
            if key in asked and asked[key] != value:
                notes.append(f"{run.id}: the file records {key.replace('_', ' ')}{what} {value}, the deployment "
                             f"given says {asked[key]}: predicted with the file's")
    return notes


def gpu_mismatch(run: BenchRun, hardware: str) -> str | None:
    """A note when the GPU the file records (``NVIDIA H200``) is not the catalog GPU given: its
    chip name (the id less form factor and memory) missing from the recorded name, or another
    form factor (SXM, PCIe, NVL) named; None when they agree or nothing is recorded."""
    from ...specs.catalog import FORM_FACTORS

    if not run.gpu:
        return None
    words = set(re.split(r"[\s_/-]+", run.gpu.lower()))
    parts = hardware.partition(":")[0].lower().split("-")
    chip = [w for w in parts if w not in FORM_FACTORS and not re.fullmatch(r"\d+gb", w)]
    form = next((w for w in parts if w in FORM_FACTORS), None)
    named = {f for f in FORM_FACTORS for w in words if w.startswith(f)}  # sxm4, sxm5: SXM
    if all(w in words for w in chip) and not (form and named and form not in named):
        return None
    return (f"{run.id}: the file records the run on {run.gpu} (machine.name), not the {hardware} given: predicted "
            f"on {hardware}; check --gpu")


def _prompt_pool(run: BenchRun, notes: list[str]) -> dict[str, int] | None:
    """The case's ``prefix_cache`` when the client reused a pool of prompts over more requests
    than it holds (each repeat finds its prompt in the engine's prefix cache while it is kept);
    None when every prompt was sent once at most."""
    if run.prompts is None or (run.num_requests is not None and run.num_requests <= run.prompts):
        return None
    if run.prefix_caching is False:
        notes.append(f"{run.id}: the client drew its prompts from {run.prompts} distinct ones, but the server ran "
                     "without a prefix cache (disable_radix_cache): every repeat is computed again")
        return None
    notes.append(f"{run.id}: the client drew its prompts from {run.prompts} distinct ones, so repeats are simulated "
                 "as found in the engine's prefix cache (an engine run without prefix caching computes them again)")
    return {"prompts": int(run.prompts)}


def run_cases(run: BenchRun, given: GivenDeployment, tool: str, source: str) -> tuple[list[Case], list[str]]:
    """The validation cases of one run (one per measured metric), and notes on what of the run
    and the deployment is not used.

    Raises
    ------
    SpecError
        No model or no GPU to be found, or a case the schema refuses.
    """
    if not given.hardware:
        recorded = f" as a catalog id (it names {run.gpu})" if run.gpu else ""
        raise SpecError(f"{tool}: {run.id}: the file does not record the GPU{recorded}; give --gpu ID "
                        "(inferlab hardware list)")
    layout = {"tp": 1, "pp": 1, "ep": 1, "dp": 1, "attention_dp": False, **given.layout, **dict(run.layout)}
    regime, load = run.regime_and_load()
    engine = run.engine or given.engine or DEFAULT_ENGINES.get(run.tool, "generic")
    speculative, drafter, notes = _run_speculation(run, given, engine)
    notes += [note for note in (gpu_mismatch(run, given.hardware),) if note] + recorded_over_given(run, given)
    # the formats given, those the recorded model's name states, then those the file records
    precision = {**dict(given.precision), **({} if "weights" in dict(run.precision) else _named_precision(run, notes)),
                 **dict(run.precision)}
    common = dict(regime=regime, model=_model(run, given, tool), hardware=given.hardware,
                  num_gpus=layout["tp"] * layout["pp"] * layout["dp"], parallelism=_case_parallelism(layout),
                  precision=precision, engine=engine,
                  engine_version=run.engine_version, isl=max(1, round(run.isl)), osl=max(1, round(run.osl)),
                  load=load, source=source, source_id=run.id,
                  speculative=speculative, prefix_cache=_prompt_pool(run, notes),
                  scheduler={**dict(given.scheduler), **dict(run.scheduler), **drafter} or None)
    if common["prefix_cache"] is None:  # a throughput no GPU reaches prefilling every prompt
        from ...specs.catalog import load_hardware, load_model
        from .roofline import below_floor_notes, beyond_peak_note

        try:
            model, hardware = load_model(common["model"]), load_hardware(given.hardware)
        except SpecError:  # an unknown model or GPU is said where the case is predicted
            model = hardware = None
        if model is not None:
            note = beyond_peak_note(run.id, model, hardware, common["num_gpus"], run.isl, run.osl,
                                    dict(run.metrics).get("output_tokens_per_s"))
            notes += [note] if note else []
            drafts = (speculative or dict(run.speculative) or dict(given.speculative or {})).get("draft_tokens", 0)
            notes += below_floor_notes(run.id, model, hardware, common["num_gpus"], run.isl, dict(run.metrics),
                                       int(drafts))
    cases = []
    for metric, value in run.metrics:
        if regime == "offline" and metric == "ttft_ms" and "num_requests" not in load:  # grows with the count
            notes.append(f"{run.id}: every request sent at once (no request rate or concurrency limit): the mean "
                         "TTFT depends on the request count, which the file does not give, and is not used")
            continue
        try:
            cases.append(Case(id=f"{run.id}:{metric}", metric=metric, measured=value,
                              unit=_UNITS.get(metric, "ms"), **common))
        except ValidationError as exc:  # a value past a case's bounds: pydantic's own text is no line for a user
            raise SpecError(f"{tool}: {run.id}: {format_validation_error(exc)}") from None
        except ValueError as exc:
            raise SpecError(f"{tool}: {run.id}: {' '.join(str(exc).split())[:300]}") from None
    return cases, notes


def _case_parallelism(layout: dict[str, Any]) -> dict[str, Any]:
    """A layout in inferlab's convention as a case writes it: attention ranks of several GPUs as
    the GPUs of a rank (``tp``) and the ranks (``attention_dp_size``)."""
    layout = dict(layout)
    a = int(layout.pop("attention_tp", 1) or 1)
    if a > 1 and layout.get("attention_dp"):
        layout.update(tp=a, attention_dp_size=layout["tp"] // a)
    return layout
