"""Scenario files' schema: the pydantic models a YAML scenario validates into.

A config file holds run-wide settings (device, dtype, implementations, timing) and a list of
scenarios. Any size field of a scenario may be a list; :mod:`mhabench.scenario.cases` expands a
scenario to the cartesian product of its lists. Reading a file into these models, with one-line
errors, is :mod:`mhabench.scenario.loading`.
"""

from __future__ import annotations

import itertools
import re
from typing import Annotated, Any, Literal

import torch
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mhabench.errors import (
    quote,
)
from mhabench.impls.tensor_parallel import divisibility_problem
from mhabench.pattern import Layout, MaskName, ScoreModName
from mhabench.scenario import lengths as doc_lengths
from mhabench.scenario.limits import (
    MAX_HEAD_WIDTH,
    MAX_HEADS,
    MAX_MODEL_WIDTH,
    MAX_SEQ_LEN,
    MAX_SOFTCAP,
)

DtypeName = Literal["float32", "float16", "bfloat16"]
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}
# Upper bounds (scenario/limits.py) a data-centre GPU could still need; beyond them a value is a typo.
SeqLen = Annotated[int, Field(gt=0, le=MAX_SEQ_LEN, strict=True)]
ModelWidth = Annotated[int, Field(gt=0, le=MAX_MODEL_WIDTH, strict=True)]
BatchSize = Annotated[int, Field(gt=0, le=65_536, strict=True)]
HeadCount = Annotated[int, Field(gt=0, le=MAX_HEADS, strict=True)]
HeadWidth = Annotated[int, Field(gt=0, le=MAX_HEAD_WIDTH, strict=True)]
Seconds = Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)]
INT64_MAX = 2**63 - 1
DEFAULT_MAX_ROWS = 10_000
MAX_ROWS_LIMIT = 100_000_000
MAX_REPLICATES = 100
"""Most processes one run may be replicated in (``replicates:``, ``run --replicates``)."""
DEFAULT_CONFIG_NAME = "default.yaml"
GPU_DEFAULT_CONFIG_NAME = "default_gpu.yaml"
IsolationMode = Literal["inprocess", "process"]
SWEEP_FIELDS = (
    "batch",
    "seq_len",
    "d_model",
    "heads",
    "kv_heads",
    "head_dim",
    "causal",
    "bias",
    "mode",
    "phase",
    "tensor_parallel",
    "mask",
    "window",
    "prefix",
    "lengths",
    "layout",
    "score_mod",
    "softcap",
)
"""The scenario fields that may be lists, in the order a sweep nests them."""
PATTERN_OPTIONS = {"window": "sliding_window", "prefix": "prefix_lm"}
"""A mask's own size field, and the mask it belongs to."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TimingConfig(_Strict):
    """How long and how often to time each (case, implementation)."""

    min_run_time_s: Seconds = Field(0.2, description="minimum total timed run per row")
    max_run_time_s: Seconds = Field(3.0, description="cap on the timed run per row")
    min_samples: int = Field(10, gt=0, le=1_000_000, strict=True, description="samples wanted (within the cap)")
    warmup_runs: int = Field(
        2, ge=0, le=1_000_000, description="fewest untimed calls before timing, unless warmup_max_s runs out first"
    )
    noise_threshold: float = Field(0.1, gt=0, allow_inf_nan=False, description="IQR / median above which it is noisy")
    warmup_max_s: float = Field(
        1.0, ge=0, le=3600, allow_inf_nan=False, description="cap on the time spent warming up one implementation"
    )
    flush_l2: bool = Field(
        True,
        description="CUDA: overwrite a buffer larger than L2 before each timed call, so no call finds a warm cache",
    )
    cuda_graphs: bool = Field(
        False, description="CUDA only: capture the call once and replay it, removing kernel-launch overhead"
    )


class EnergyConfig(_Strict):
    """CUDA with nvidia-ml-py: GPU energy per call from windows of its own after each case's timing."""

    windows: int = Field(
        0,
        ge=0,
        le=100,
        strict=True,
        description="energy windows per ok row (0: off, the default: each row costs windows × window_s more)",
    )
    window_s: float = Field(
        2.0,
        ge=1.0,
        le=600,
        allow_inf_nan=False,
        description="seconds of back-to-back calls per window; one ~0.1 s NVML counter step over it is the uncertainty",
    )


class SlurmOptions(_Strict):
    """``executor: {kind: slurm}``: the Slurm job array submitit submits (docs/distributed.md)."""

    cluster: Literal["slurm", "local"] = Field(
        "slurm", description="local runs the same jobs as processes on this machine (submitit's LocalExecutor)"
    )
    partition: str | None = Field(None, description="Slurm partition (sbatch --partition); None: the cluster's default")
    account: str | None = Field(None, description="Slurm account to charge (sbatch --account)")
    gpus_per_job: int = Field(1, ge=0, le=64, strict=True, description="GPUs each job asks for (0: a CPU sweep)")
    cpus_per_job: int | None = Field(None, ge=1, le=4096, strict=True, description="CPUs each job asks for")
    time_limit_min: int = Field(60, ge=1, le=10_080, strict=True, description="wall-time limit of one job")
    cases_per_job: int = Field(
        1, ge=1, le=100_000, strict=True, description="cases one job measures in turn (a job array of cases / this)"
    )
    max_parallel_jobs: int | None = Field(
        None, ge=1, le=100_000, strict=True, description="jobs of the array Slurm runs at once (--array=…%N)"
    )


class RayOptions(_Strict):
    """``executor: {kind: ray}``: one Ray task per case (docs/distributed.md)."""

    address: str | None = Field(
        None, description="a running cluster to join (ray.init(address)); None: start a local one (--ray-address wins)"
    )
    num_cpus: int | None = Field(None, ge=1, le=4096, strict=True, description="CPUs of a local cluster; None: all")
    max_retries: int = Field(
        1, ge=0, le=100, strict=True, description="times Ray runs a case again whose worker died (a lost node)"
    )


ExecutorKind = Literal["local", "slurm", "ray"]
EXECUTORS: tuple[str, ...] = ("local", "slurm", "ray")


class ExecutorConfig(_Strict):
    """Where the cases run: this process (local), a Slurm job array, or Ray tasks."""

    kind: ExecutorKind = Field(
        "local", description="local | slurm (submitit, extra mhabench[slurm]) | ray (extra mhabench[ray])"
    )
    slurm: SlurmOptions = SlurmOptions()
    ray: RayOptions = RayOptions()

    @model_validator(mode="before")
    @classmethod
    def _kind_alone(cls, data: Any) -> Any:
        """``executor: ray`` is shorthand for ``executor: {kind: ray}``."""
        return {"kind": data} if isinstance(data, str) else data


def _as_list(value: Any) -> Any:
    """A scalar is a one-value sweep; an empty list would silently drop its scenario, so it is refused."""
    if value == []:
        raise ValueError("an empty list sweeps nothing; give at least one value")
    return value if isinstance(value, list) else [value]


class ScenarioSpec(_Strict):
    """One scenario; list-valued fields sweep."""

    name: str = "scenario"
    model: str | None = Field(
        None,
        description="a preset (mhabench models) or a Hugging Face config.json (relative to this file): fills "
        "d_model, heads, kv_heads, bias, the mask and soft-cap, and head_dim where the model sets it apart from "
        "d_model / heads; a field given here wins",
    )
    batch: list[BatchSize] = [1]
    seq_len: list[SeqLen]
    d_model: list[ModelWidth]
    head_dim: list[HeadWidth] | None = Field(
        None,
        description="width of one head; default d_model / heads. Set apart (Gemma 2, Qwen3), W_q is "
        "d_model × heads·head_dim and W_o heads·head_dim × d_model",
    )
    heads: list[HeadCount]
    kv_heads: list[HeadCount] | None = Field(None, description="key/value heads (GQA); default = heads; 1 = MQA")
    causal: list[bool] = [False]
    bias: list[bool] = [False]
    mode: list[Literal["forward", "train"]] = Field(["forward"], description="train = forward + backward")
    phase: list[Literal["prefill", "decode"]] = Field(
        ["prefill"], description="decode = one new token per sequence against a KV cache of seq_len tokens"
    )
    seed: int = Field(0, ge=-INT64_MAX - 1, le=INT64_MAX, description="weights and input are generated from it")
    tensor_parallel: list[HeadCount] = Field(
        [1],
        description="ranks that split the heads (Megatron-style): heads must divide evenly; kv_heads too, "
        "or (fewer K/V heads than ranks) each is replicated on tensor_parallel / kv_heads ranks",
    )

    mask: list[MaskName] | None = Field(
        None,
        description="none | causal | sliding_window (with window) | prefix_lm (with prefix) | document "
        "(with lengths: causal within each document); default: causal's value",
    )
    window: list[SeqLen] | None = Field(
        None, validate_default=True, description="sliding_window: keys each query sees, itself included (causal)"
    )
    prefix: list[SeqLen] | None = Field(
        None, validate_default=True, description="prefix_lm: leading tokens every query sees (bidirectional prefix)"
    )
    lengths: list[doc_lengths.LengthsSpec] | None = Field(
        None,
        validate_default=True,
        description="document lengths of the batch: a list, {distribution: uniform, min, count, seed}, or "
        "{file, count, seed}; the batch is the documents, seq_len their cap",
    )
    layout: list[Layout] = Field(
        ["padded"], validate_default=True, description="with lengths: padded (b × seq_len) or packed (one row)"
    )
    score_mod: list[ScoreModName] = Field(["none"], description="none | softcap (with softcap) | alibi")
    softcap: list[Annotated[float, Field(gt=0, le=MAX_SOFTCAP, allow_inf_nan=False)]] | None = Field(
        None, validate_default=True, description="softcap: scores become cap·tanh(score / cap)"
    )

    @field_validator(*(f for f in SWEEP_FIELDS if f != "lengths"), mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return value if value is None else _as_list(value)

    @model_validator(mode="before")
    @classmethod
    def _mask_or_causal(cls, data: Any) -> Any:
        """``causal: true`` is shorthand for ``mask: causal``; beside a mask it would be ambiguous."""
        if isinstance(data, dict) and data.get("mask") is not None and data.get("causal") not in (None, False, [False]):
            raise ValueError("give mask or causal, not both (causal: true is mask: causal)")
        return data

    @field_validator("lengths", mode="before")
    @classmethod
    def _lengths_sweep(cls, value: Any) -> Any:
        return doc_lengths.as_sweep(value)

    @field_validator("window", "prefix")
    @classmethod
    def _size_of_its_mask(cls, sizes: list[int] | None, info: ValidationInfo) -> list[int] | None:
        """A window needs a sliding_window mask and the other way round; the same for prefix and prefix_lm."""
        mask = PATTERN_OPTIONS[info.field_name or ""]
        uses = mask in (info.data.get("mask") or [])
        if uses and sizes is None:
            raise ValueError(f"mask {mask} needs {info.field_name}")
        if sizes is not None and not uses:
            raise ValueError(f"{info.field_name} applies only to mask {mask}")
        return sizes

    @field_validator("lengths")
    @classmethod
    def _documents_fit(cls, specs: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        masks = info.data.get("mask") or []
        if specs is None:
            if "document" in masks:
                raise ValueError("mask document needs lengths (the documents of the batch)")
            return None
        problems = [
            (info.data.get("batch", [1]) != [1], "with lengths the batch is the documents; leave batch out"),
            ("causal" in masks, "with lengths write mask: document (causal within each document)"),
            ("decode" in info.data.get("phase", []), "decode runs equal-length sequences; lengths need prefill"),
        ]
        problems += [
            (True, problem)
            for spec, seq_len in itertools.product(specs, info.data.get("seq_len", []))
            if (problem := doc_lengths.too_long(spec, seq_len))
        ]
        problem = next((text for failed, text in problems if failed), None)
        if problem:
            raise ValueError(problem)
        return specs

    @field_validator("layout")
    @classmethod
    def _layout_needs_lengths(cls, layouts: list[str], info: ValidationInfo) -> list[str]:
        if "packed" in layouts and info.data.get("lengths") is None:
            raise ValueError("layout packed needs lengths (the documents to pack)")
        return layouts

    @field_validator("softcap")
    @classmethod
    def _cap_of_softcap(cls, caps: list[float] | None, info: ValidationInfo) -> list[float] | None:
        uses = "softcap" in (info.data.get("score_mod") or [])
        if uses and caps is None:
            raise ValueError("score_mod softcap needs softcap (the cap)")
        if caps is not None and not uses:
            raise ValueError("softcap applies only to score_mod softcap")
        return caps

    @field_validator("kv_heads")
    @classmethod
    def _kv_heads_divide_heads(cls, kv_heads: list[int] | None, info: ValidationInfo) -> list[int] | None:
        """Each key/value head serves a whole group of query heads."""
        for heads, n_kv in itertools.product(info.data.get("heads", []), kv_heads or []):
            if heads % n_kv:
                raise ValueError(f"heads {heads} is not divisible by kv_heads {n_kv}")
        return kv_heads

    @field_validator("phase")
    @classmethod
    def _decode_is_inference(cls, phase: list[str], info: ValidationInfo) -> list[str]:
        if "decode" in phase and "train" in info.data.get("mode", []):
            raise ValueError("decode cannot be combined with mode train (decode measures inference)")
        return phase

    @field_validator("heads")
    @classmethod
    def _heads_divide_d_model(cls, heads: list[int], info: ValidationInfo) -> list[int]:
        """A field validator (not a model one) so the error's path ends in ``.heads``; with ``head_dim`` set
        the heads' width is given, so d_model need not divide."""
        widths = [] if info.data.get("head_dim") else info.data.get("d_model", [])
        for d_model, n_heads in itertools.product(widths, heads):
            if d_model % n_heads:
                raise ValueError(f"d_model {d_model} is not divisible by heads {n_heads}")
        return heads

    @field_validator("tensor_parallel")
    @classmethod
    def _heads_split_evenly(cls, sizes: list[int], info: ValidationInfo) -> list[int]:
        """Every rank holds whole query heads, and whole (or whole replicated) key/value heads."""
        all_heads, all_kv_heads = info.data.get("heads", []), info.data.get("kv_heads") or [None]
        for heads, kv_heads, size in itertools.product(all_heads, all_kv_heads, sizes):
            problem = divisibility_problem(heads, kv_heads or heads, size)
            if problem:
                raise ValueError(problem)
        return sizes


class RunConfig(_Strict):
    """A whole scenario file."""

    name: str | None = None
    device: str = "auto"
    dtype: list[Literal["auto", "float32", "float16", "bfloat16"]] = ["auto"]
    implementations: list[str] | None = None
    timing: TimingConfig = TimingConfig()
    scenarios: list[ScenarioSpec] = Field(min_length=1)
    threads: int | None = Field(None, ge=1, le=4096, strict=True, description="torch threads; None = all")
    allocator: Literal["steady", "system"] = Field(
        "steady",
        description="CPU allocator policy: steady fixes glibc's mmap/trim thresholds so buffers are reused "
        "(as a long-running server sees them); system keeps glibc's dynamic behaviour",
    )
    isolation: IsolationMode = Field(
        "inprocess", description="process runs each case in a child process, so a hang or crash loses one case"
    )
    memory_guard: bool = Field(
        True, description="skip a case whose predicted peak (or its float64 reference's) exceeds free memory"
    )
    case_timeout_s: float = Field(
        600.0, gt=0, le=604_800, allow_inf_nan=False, description="isolation process: a case is killed after this"
    )
    counters: Literal["off", "hardware"] = Field(
        "off",
        description="hardware: after each case is timed, profile one call of each ok row under Nsight Compute (CUDA; "
        "a child process per case, seconds each), for its DRAM bytes and tensor FLOPs; off by default because it "
        "needs ncu and counter permission and adds that time",
    )
    counters_replay: Literal["range", "kernel"] = Field(
        "range",
        description="counters: hardware: range replays each profiled call as one workload (fast, one figure per "
        "call, L2 flushed once per call); kernel replays every kernel on its own (per-kernel detail for "
        "kernels.csv, each kernel's passes start cold, minutes per case)",
    )
    counters_fp32: bool = Field(
        False, description="counters: hardware: also count non-tensor FP32 FLOPs (a second ncu pass on GH100)"
    )
    energy: EnergyConfig = EnergyConfig()
    max_rows: int = Field(
        DEFAULT_MAX_ROWS, ge=1, le=MAX_ROWS_LIMIT, strict=True, description="most cases × implementations a run runs"
    )
    history: str | None = Field(
        None,
        description="a history folder (docs/history.md, relative to this file) each finished run appends its rows to; "
        "--history wins",
    )
    replicates: int = Field(
        1,
        ge=1,
        le=MAX_REPLICATES,
        strict=True,
        description="independent processes the config runs in, one after another, each with its own case order; "
        "their rows share one run folder (replicate i as repeat i) and ratios get intervals across them",
    )

    executor: ExecutorConfig = Field(
        ExecutorConfig(), description="where the cases run: local (this process), slurm or ray (docs/distributed.md)"
    )

    @field_validator("dtype", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return _as_list(value)

    @field_validator("device")
    @classmethod
    def _device_syntax(cls, value: str) -> str:
        if value in ("auto", "cpu", "cuda") or re.fullmatch(r"cuda:[0-9]{1,4}", value):
            return value
        raise ValueError(f"device must be auto, cpu, cuda or cuda:N, not {quote(value)}")
