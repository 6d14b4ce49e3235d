"""The result schema: one typed row per (case, implementation), composed of value objects.

Every column is a dataclass field whose metadata says its unit, its role and what it means:

- ``key``: identifies the measurement; ``compare`` matches two runs on these.
- ``identity``: names that follow from the key (ids, device name, the model a shape came from).
- ``outcome``: status and the one-line error.
- ``measured``: observed while the implementation ran on this machine.
- ``modelled``: from the implementation's cost model, never observed.
- ``roof``: the device's peaks, measured on this machine or read from a datasheet (``roofline_source`` says which).
- ``derived``: arithmetic on measured, modelled and roof columns (achieved TFLOP/s, roofline).

``COLUMNS`` (the CSV header), ``CASE_KEY``, ``SHAPE_FIELDS``, table labels and docs/columns.md
(``mhabench columns --markdown``) are all derived from these classes in :mod:`mhabench.results.columns`,
so a new metric is one field here plus the tracker that measures it.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, Any

import numpy as np

from mhabench.errors import Word
from mhabench.results.cells import field_of
from mhabench.results.column import column
from mhabench.results.gpu_groups import Energy, HardwareCounters
from mhabench.results.stages import StageBreakdown

if TYPE_CHECKING:
    from mhabench.scenario.cases import Case

FORMAT_VERSION = 4
"""On-disk format of a run (manifest ``format_version``). 1: the unversioned format before this schema;
2: before ``tensor_parallel``, ``repeat`` and the measured-count, distributed and useful-FLOP columns
(an older run reads with ``tensor_parallel`` 1 and ``repeat`` 0, see ``KEY_DEFAULTS``); 3: before the
attention-pattern key columns (``mask`` … ``softcap``: an older run reads as no window, no documents, no
score modifier, its mask from ``causal``). A column added outside
the key (``allocations_per_call``) keeps the version: a run written before it reads with that column empty."""


@dataclasses.dataclass(frozen=True)
class CaseIdentity:
    """Which measurement this is: run, scenario, implementation, device and the full shape."""

    run_id: str = column("run folder name (UTC start time and config name)", role="identity", label="run")
    scenario: str = column("scenario name from the config", role="identity", label="scenario")
    model: str = column(
        "model preset or config.json the scenario's shape came from (empty when none)", role="identity", label="model"
    )
    case_id: str = column("scenario/shape string, unique within a run (docs/configs.md)", role="identity", label="case")
    impl: str = column("implementation name (mhabench list)", role="key", label="impl")
    device: str = column("torch device the case ran on", role="key", label="device")
    device_name: str = column("GPU or CPU model name", role="identity", label="device name")
    device_id: str = column(
        "the physical device that measured the row: GPU UUID (GPU-…), or host:cpu; rows on different devices are "
        "not paired (empty: measured before this column)",
        role="identity",
        label="device id",
    )
    dtype: str = column("element type of weights and activations", role="key", label="dtype")
    batch: int = column("sequences per call", role="key", unit="sequences", label="b")
    seq_len: int = column("tokens per sequence (decode: cached tokens)", role="key", unit="tokens", label="n")
    d_model: int = column("model width", role="key", unit="elements", label="d")
    heads: int = column("query heads", role="key", label="h")
    head_dim: int = column(
        "width of one head: d_model / heads unless the scenario sets head_dim apart",
        role="key",
        unit="elements",
        label="d_k",
    )
    kv_heads: int = column("key/value heads (< heads: grouped-query attention)", role="key", label="kv")
    mode: str = column("forward | train (forward + backward)", role="key", label="mode")
    phase: str = column("prefill | decode (one new token against a KV cache)", role="key", label="phase")
    causal: bool = column(
        "no query sees a later key of its document (causal, sliding_window, document)", role="key", label="causal"
    )
    mask: str = column(
        "none | causal | sliding_window | prefix_lm | document (docs/masks.md)", role="key", label="mask"
    )
    window: int = column("sliding_window: keys each query sees (0: no window)", role="key", unit="tokens", label="w")
    prefix: int = column("prefix_lm: bidirectional prefix (0: none)", role="key", unit="tokens", label="prefix")
    lengths: str = column(
        "document lengths of the batch (none: every row full length; the label of a list or a draw)",
        role="key",
        label="lengths",
    )
    layout: str = column("padded | packed with lengths; none without", role="key", label="layout")
    score_mod: str = column("none | softcap | alibi", role="key", label="score mod")
    softcap: float = column("softcap: scores become cap·tanh(s / cap) (0: none)", role="key", label="cap")
    bias: bool = column("projections have biases", role="key", label="bias")
    tensor_parallel: int = column("ranks the heads are split across (1: one device)", role="key", label="tp")
    repeat: int = column("repetition of `run --repeat N` this row belongs to (0-based)", role="key", label="rep")

    @classmethod
    def of(
        cls,
        case: Case,
        *,
        impl: str,
        run_id: str = "",
        device: str = "",
        device_name: str = "",
        device_id: str = "",
        repeat: int = 0,
    ) -> CaseIdentity:
        """The identity of ``case`` run by ``impl``: the one place a case's shape and pattern become key columns.

        The pattern is stored as the columns older runs hold (no window, prefix or cap: 0; no documents: layout
        ``none``), so compare and resume match rows of any version.
        """
        pattern = case.pattern
        return cls(
            run_id=run_id,
            scenario=case.scenario,
            model=case.model,
            case_id=case.case_id,
            impl=impl,
            device=device,
            device_name=device_name,
            device_id=device_id,
            dtype=case.dtype,
            batch=case.batch,
            seq_len=case.seq_len,
            d_model=case.d_model,
            heads=case.heads,
            head_dim=case.head_dim,
            kv_heads=case.kv_heads,
            mode=case.mode,
            phase=case.phase,
            causal=case.causal,
            mask=pattern.mask,
            window=pattern.window or 0,
            prefix=pattern.prefix or 0,
            lengths=case.lengths,
            layout=pattern.layout if pattern.lengths is not None else "none",
            score_mod=pattern.score_mod,
            softcap=pattern.softcap or 0.0,
            bias=case.bias,
            tensor_parallel=case.tensor_parallel,
            repeat=repeat,
        )


class RowStatus(Word):
    """What became of a row: ``ok`` (measured), or why it has no measurements.

    str-valued, so a status equals its text (``RowStatus.OK == "ok"``) and files and JSON hold the same words as
    before. A row read from a file gets the member of its word; a word this version does not know (a newer
    mhabench's) stays the text it was, so reading a folder never fails on it."""

    OK = "ok"
    MISMATCH = "mismatch"
    UNSUPPORTED = "unsupported"
    SKIPPED = "skipped"
    OOM = "oom"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    PLANNED = "planned"
    """A ``--dry-run`` row: listed with its modelled cost, never measured."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """``ok``, or why there are no measurements: mismatch, unsupported, oom, error."""

    status: RowStatus = column(
        "ok | mismatch | unsupported | skipped | oom | error | timeout | crashed", role="outcome", label="status"
    )
    error: str = column("one-line reason when status is not ok", role="outcome", label="error")
    note: str = column(
        "what torch said while the row was checked that we expected (nested SDPA's kernel choice, a prototype "
        "warning), each message once, instead of on the terminal",
        role="outcome",
        label="note",
    )

    reason_code: str = column(
        "unsupported: why, as a code checks match (not_installed, device, dtype, grouped_kv, decode, backward, "
        "head_dim, head_dim_too_wide, mask, documents, score_mod, decode_window, pattern, not_tensor_parallel, "
        "sdpa_no_kernel, no_kernel, no_capture, version, platform, implementation); error holds the sentence",
        role="outcome",
        label="reason",
    )

    def __post_init__(self) -> None:
        known = {status.value for status in RowStatus}
        if isinstance(self.status, str) and not isinstance(self.status, RowStatus) and self.status in known:
            object.__setattr__(self, "status", RowStatus(self.status))


@dataclasses.dataclass(frozen=True)
class Correctness:
    """Agreement with the float64 reference, measured on the checked call."""

    max_abs_err: float = column("max |out − reference|", role="measured", label="max abs err")
    max_rel_err: float = column("max |out − reference| / max |reference|", role="measured", label="rel err")


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """What the checked call dispatched."""

    sdpa_backend: str = column("SDPA backend(s) seen in the dispatched ops", role="measured", label="sdpa")
    ops_per_call: int = column(
        "aten ops dispatched by one call (host overhead: the per-head loop's cost)", role="measured", label="ops/call"
    )
    kernels_per_call: int = column(
        "CUDA: device kernels launched by one call (profiler); empty on the CPU", role="measured", label="kernels/call"
    )
    allocations_per_call: int = column(
        "tensor storages one call allocates: the intermediates and outputs its dispatched ops materialize (views "
        "and in-place writes allocate none)",
        role="measured",
        label="allocs/call",
    )


@dataclasses.dataclass(frozen=True)
class Counted:
    """FLOPs and bytes counted from the ops the checked call dispatched.

    docs/cost-model.md ("Counted versus modelled") says what the counter cannot see: fusion inside
    one kernel, cache reuse between kernels.
    """

    measured_flops: int = column(
        "FLOPs of the dispatched ops (matmuls, SDPA from shapes)", role="measured", unit="FLOP", label="counted FLOPs"
    )
    measured_bytes: int = column(
        "bytes the dispatched ops read and write (views move nothing)",
        role="measured",
        unit="bytes",
        label="counted bytes",
    )
    measured_intensity: float = column(
        "measured_flops / measured_bytes", role="measured", unit="FLOP/byte", label="counted FLOP/B"
    )
    model_disagreement: float = column(
        "largest relative gap between counted and modelled FLOPs or bytes",
        role="derived",
        unit="ratio",
        label="model gap",
    )
    model_disagrees: bool = column(
        "model_disagreement above 25 %: the cost model does not describe what ran",
        role="derived",
        label="model disagrees",
    )
    uncounted_ops: str = column(
        "ops whose work no formula counts (a custom kernel, a nested tensor's ops): where not empty, the counted "
        "FLOPs and bytes are a lower bound and model_disagreement is left empty",
        role="measured",
        label="uncounted ops",
    )


@dataclasses.dataclass(frozen=True)
class Distributed:
    """Tensor-parallel rows (``torchrun``): how the latency splits into compute and communication."""

    world_size: int = column("processes in the torch.distributed group", role="identity", label="world")
    backend: str = column("torch.distributed backend (gloo on the CPU, nccl on CUDA)", role="identity", label="backend")
    comm_ms: float = column("median time of the output all-reduce alone", role="measured", unit="ms", label="comm ms")
    comm_share: float = column("comm_ms / latency_ms", role="derived", unit="ratio", label="comm share")
    allreduce_bytes: int = column(
        "bytes each rank all-reduces per call", role="measured", unit="bytes", label="all-reduce bytes"
    )
    bus_bandwidth_gbps: float = column(
        "all-reduce bus bandwidth: bytes × 2(t−1)/t / comm time", role="derived", unit="GB/s", label="bus GB/s"
    )
    rank_peak_memory_bytes: float = column(
        "largest peak memory over the ranks", role="measured", unit="bytes", label="rank peak mem"
    )


MIN_SPREAD_SAMPLES = 5
"""Fewest samples with a ``noisy`` flag. The quartiles are linear interpolations at rank 0.25·(n − 1) and
0.75·(n − 1): from 5 samples on they are the 2nd-lowest and 2nd-highest samples or lie between them, so one
outlier at either end cannot move the IQR; with 4 or fewer they lean on the minimum and maximum, and one sample
has an IQR of 0 by construction (a flag that could only ever read "steady")."""


@dataclasses.dataclass(frozen=True)
class LatencyStats:
    """Per-call latency: medians over adaptive repetitions after warm-up, with their spread."""

    latency_ms: float = column("median per-call latency", role="measured", unit="ms", label="median ms")
    latency_p25_ms: float = column("25th percentile of the samples", role="measured", unit="ms", label="p25 ms")
    latency_p75_ms: float = column("75th percentile of the samples", role="measured", unit="ms", label="p75 ms")
    latency_mean_ms: float = column("mean of the samples", role="measured", unit="ms", label="mean ms")
    samples: int = column(
        "timed samples, one per round the implementation took part in (each from one block of calls)",
        role="measured",
        label="samples",
    )
    calls_per_sample: int = column("calls per timed block", role="measured", label="calls/sample")
    noisy: bool | None = column(
        f"IQR / median above the config's noise_threshold; empty below {MIN_SPREAD_SAMPLES} samples (no IQR to "
        "judge by: docs/measurement.md)",
        role="derived",
        label="noisy",
    )
    capped: bool = column(
        "the implementation spent max_run_time_s before it had min_samples samples and min_run_time_s of timed "
        "time, so it left the rounds with fewer (empty: timed before this column)",
        role="measured",
        label="capped",
    )
    host_latency_ms: float = column(
        "CUDA: median wall time of one synchronous call (device time + launch overhead); empty on the CPU",
        role="measured",
        unit="ms",
        label="host ms",
    )
    compile_time_s: float = column(
        "first-call time of a compiling implementation", role="measured", unit="s", label="compile s"
    )
    rounds_id: str = column(
        "the timing rounds the samples come from: rows with the same id were timed in the same rounds, sample "
        "i of each in round i (a row that left the rounds early holds their first ones), so their speedups pair "
        "the rounds both took part in (empty: timed alone)",
        role="identity",
        label="rounds",
    )
    times_ms: tuple[float, ...] = column(
        "the samples, round i at index i: per-call time of one block (CPU: its mean; CUDA: its median per call); "
        "Parquet only",
        role="measured",
        unit="ms",
        label="samples ms",
        in_csv=False,
    )

    @classmethod
    def from_samples(
        cls,
        times_ms: tuple[float, ...],
        calls_per_sample: int,
        noise_threshold: float,
        compile_time_s: float,
        capped: bool = False,
    ) -> LatencyStats:
        """Summary statistics of ``times_ms`` (medians and quartiles: latency is skewed); ``noisy`` only from
        ``MIN_SPREAD_SAMPLES`` samples on. ``capped``: the timer stopped at ``max_run_time_s`` before it had what
        it asked for (a timer without a cap, such as the tensor-parallel lockstep, leaves it False)."""
        median = float(np.median(times_ms))
        p25, p75 = (float(v) for v in np.percentile(times_ms, [25, 75]))
        return cls(
            latency_ms=median,
            latency_p25_ms=p25,
            latency_p75_ms=p75,
            latency_mean_ms=float(np.mean(times_ms)),
            samples=len(times_ms),
            calls_per_sample=calls_per_sample,
            capped=capped,
            noisy=(p75 - p25) / median > noise_threshold if len(times_ms) >= MIN_SPREAD_SAMPLES else None,
            compile_time_s=compile_time_s,
            times_ms=tuple(times_ms),
        )


@dataclasses.dataclass(frozen=True)
class Memory:
    """Memory of one call and of the module, measured."""

    peak_memory_bytes: float = column(
        "peak bytes allocated during one call, above the inputs", role="measured", unit="bytes", label="peak mem"
    )
    memory_method: str = column("how peak_memory_bytes was measured", role="measured", label="memory method")
    params: int = column("scalars in the module's weights", role="measured", unit="elements", label="params")
    kv_cache_bytes: float = column("decode KV cache size", role="measured", unit="bytes", label="KV cache")


@dataclasses.dataclass(frozen=True)
class ModelledCost:
    """The implementation's cost model for this workload (docs/cost-model.md)."""

    flops: int = column(
        "executed FLOPs per call (projections + attention)", role="modelled", unit="FLOP", label="FLOPs"
    )
    useful_flops: int = column(
        "FLOPs on real tokens and the (query, key) pairs the mask allows only",
        role="modelled",
        unit="FLOP",
        label="useful FLOPs",
    )
    padding_share: float = column(
        "share of flops spent on padding tokens (padded layout; 0 without padding)", role="modelled", label="padding"
    )
    softmax_flops: int = column(
        "softmax work, 5 per score (not in flops)", role="modelled", unit="FLOP", label="softmax FLOPs"
    )
    proj_flops: int = column("the four projection GEMMs", role="modelled", unit="FLOP", label="proj FLOPs")
    attn_flops: int = column("QKᵀ and P·V", role="modelled", unit="FLOP", label="attn FLOPs")
    backward_flops: int = column(
        "backward share of flops (train)", role="modelled", unit="FLOP", label="backward FLOPs"
    )
    bytes_moved: int = column("minimum main-memory traffic per call", role="modelled", unit="bytes", label="bytes")
    proj_bytes: int = column("traffic of the projections", role="modelled", unit="bytes", label="proj bytes")
    attn_bytes: int = column("traffic of attention", role="modelled", unit="bytes", label="attn bytes")
    arithmetic_intensity: float = column("flops / bytes_moved", role="modelled", unit="FLOP/byte", label="FLOP/B")
    proj_intensity: float = column("proj_flops / proj_bytes", role="modelled", unit="FLOP/byte", label="proj FLOP/B")
    attn_intensity: float = column("attn_flops / attn_bytes", role="modelled", unit="FLOP/byte", label="attn FLOP/B")
    predicted_peak_bytes: int = column(
        "predicted peak memory of one call", role="modelled", unit="bytes", label="predicted mem"
    )

    @classmethod
    def from_cost(cls, cost: Any) -> ModelledCost:
        """Every field of this class read off a :class:`mhabench.cost.Cost` (properties included)."""
        return cls(**{f.name: getattr(cost, f.name) for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class Roofline:
    """Throughput from the measured latency and the modelled cost, placed on the device's roofline."""

    tokens_per_s: float = column(
        "real (non-padding) query tokens per second", role="derived", unit="tokens/s", label="tokens/s"
    )
    achieved_tflops: float = column(
        "flops / latency (counted FLOPs where measured; with skips_masked_work above the executed rate: "
        "see achieved_useful_tflops)",
        role="derived",
        unit="TFLOP/s",
        label="TFLOP/s",
    )
    achieved_gbps: float = column("bytes_moved / latency", role="derived", unit="GB/s", label="GB/s")
    peak_tflops: float = column("compute roof for this dtype", role="roof", unit="TFLOP/s", label="peak TFLOP/s")
    peak_gbps: float = column("memory-bandwidth roof", role="roof", unit="GB/s", label="peak GB/s")
    roofline_source: str = column(
        "datasheet or measured (how the roofs were obtained)", role="identity", label="roofline source"
    )
    roof_source: str = column(
        "datasheet; probed (measured once, at the process's start); re-probed (measured again after a row ran above "
        "it, the larger figures kept); raised to row (raised to the fastest row's throughput, which no probe reached). "
        "Empty in a run written before this column: read as datasheet or probed",
        role="identity",
        label="roof",
    )
    roofline_bound: str = column("compute or memory: which roof limits this intensity", role="derived", label="bound")
    attainable_tflops: float = column(
        "min(peak, intensity × bandwidth)", role="derived", unit="TFLOP/s", label="attainable TFLOP/s"
    )
    roofline_efficiency: float = column(
        "achieved / attainable (useful FLOPs where the kernel skips masked work)",
        role="derived",
        unit="ratio",
        label="roofline eff.",
    )
    intensity_source: str = column(
        "hardware (ncu DRAM bytes and FLOPs), measured (counted ops) or modelled: what achieved_gbps and the "
        "roofline use",
        role="identity",
        label="intensity from",
    )
    achieved_useful_tflops: float = column(
        "useful_flops / latency (masked pairs not counted)", role="derived", unit="TFLOP/s", label="useful TFLOP/s"
    )
    skips_masked_work: bool = column(
        "the kernel skips fully masked blocks (flash, cuDNN, flex with causal)", role="identity", label="skips masked"
    )


GROUPS: tuple[tuple[str, type], ...] = (
    ("case", CaseIdentity),
    ("outcome", Outcome),
    ("correctness", Correctness),
    ("dispatch", Dispatch),
    ("latency", LatencyStats),
    ("memory", Memory),
    ("cost", ModelledCost),
    ("counted", Counted),
    ("distributed", Distributed),
    ("roofline", Roofline),
    ("hardware", HardwareCounters),
    ("energy", Energy),
    ("stages", StageBreakdown),
)

GROUP_FIELDS: tuple[tuple[str, type, tuple[tuple[str, bool], ...]], ...] = tuple(
    (attribute, group, tuple((field.name, field.type == "int") for field in dataclasses.fields(group)))
    for attribute, group in GROUPS
)
"""Each group's attribute, class, and its fields' names, each with whether it is a count: what :meth:`ResultRow.record`
and :meth:`ResultRow.from_record` walk for every row read or written, read from the classes once."""


@dataclasses.dataclass(frozen=True)
class ResultRow:
    """One (case, implementation): identity and outcome always; the rest only where it was obtained.

    A failure row is identity + outcome. A ``mismatch`` also carries the correctness that proved it
    and the modelled cost; an ``ok`` row carries every group it measured.
    """

    case: CaseIdentity
    outcome: Outcome
    correctness: Correctness | None = None
    dispatch: Dispatch | None = None
    latency: LatencyStats | None = None
    memory: Memory | None = None
    cost: ModelledCost | None = None
    counted: Counted | None = None
    distributed: Distributed | None = None
    roofline: Roofline | None = None
    hardware: HardwareCounters | None = None
    energy: Energy | None = None
    stages: StageBreakdown | None = None

    def record(self) -> dict[str, Any]:
        """Flat ``{column: value}`` over every column (None where a group is missing)."""
        flat: dict[str, Any] = {}
        for attribute, _, fields in GROUP_FIELDS:
            value = getattr(self, attribute)
            for name, _ in fields:
                cell = None if value is None else getattr(value, name)
                flat[name] = cell.value if isinstance(cell, enum.Enum) else cell  # files hold the word
        return flat

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ResultRow:
        """The inverse of :meth:`record`; a group whose columns are all empty is None."""
        groups: dict[str, Any] = {}
        for attribute, group, fields in GROUP_FIELDS:
            values = {name: field_of(record.get(name), integer) for name, integer in fields}
            present = any(v is not None for v in values.values())
            groups[attribute] = group(**values) if present or attribute in ("case", "outcome") else None
        return cls(**groups)

    @property
    def status(self) -> RowStatus:
        return self.outcome.status

    def with_groups(self, *values: Any) -> ResultRow:
        """This row with each value object merged into its group, found by its class; a field the value leaves
        empty keeps the row's.

        Trackers and timers return partial groups (the dispatch tracker's ``Memory`` holds the peak, the
        step's the parameter count): this is how they become one row without anyone restating the fields.
        """
        row = self
        for value in values:
            attribute = GROUP_ATTRIBUTES[type(value)]
            current = getattr(row, attribute)
            row = dataclasses.replace(row, **{attribute: value if current is None else _merged(current, value)})
        return row


GROUP_ATTRIBUTES: dict[type, str] = {group: attribute for attribute, group in GROUPS}
"""The :class:`ResultRow` attribute that holds each group class."""


def _merged(current: Any, update: Any) -> Any:
    """``current`` with every field ``update`` fills."""
    filled = {f.name: value for f in dataclasses.fields(update) if (value := getattr(update, f.name)) is not None}
    return dataclasses.replace(current, **filled)
