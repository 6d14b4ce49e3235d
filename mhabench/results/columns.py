"""The read side of the schema: the column lists, one checked spelling of every column name that
analysis and views read, and the readers of a stored row's cells.

:mod:`mhabench.results.schema` defines what a row holds; this module is how a stored row is read
back (a run from an older format included) and how the columns are documented (docs/columns.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from mhabench.results.cells import flag, whole_of
from mhabench.results.column import ROLES, ColumnInfo
from mhabench.results.schema import FORMAT_VERSION, GROUPS, MIN_SPREAD_SAMPLES, CaseIdentity


def columns_info() -> list[ColumnInfo]:
    """Every column of the schema, in row order."""
    return [
        ColumnInfo(
            f.name,
            f.metadata["unit"],
            f.metadata["role"],
            f.metadata["description"],
            f.metadata["label"] or f.name,
            f.metadata["in_csv"],
        )
        for _, group in GROUPS
        for f in dataclasses.fields(group)
    ]


INFO: dict[str, ColumnInfo] = {info.name: info for info in columns_info()}
COLUMNS: list[str] = [info.name for info in columns_info() if info.in_csv]
"""Every CSV column, in order. The Parquet file also has ``times_ms``."""
SAMPLES_COLUMN = "times_ms"
IDENTITY_COLUMNS: list[str] = [f.name for f in dataclasses.fields(CaseIdentity)] + ["status", "error"]
CASE_KEY: list[str] = [info.name for info in columns_info() if info.role == "key"]
"""Columns that identify the same measurement across runs (compare matches on these)."""
SHAPE_FIELDS: list[str] = [name for name in CASE_KEY if name not in ("impl", "device", "dtype", "repeat")]
"""The sweep fields of a case (what plots and labels vary over)."""
KEY_DEFAULTS: dict[str, Any] = {
    "tensor_parallel": 1,
    "repeat": 0,
    "window": 0,
    "prefix": 0,
    "lengths": "none",
    "layout": "none",
    "score_mod": "none",
    "softcap": 0.0,
}
"""Key columns an older run lacks, with the value every row of such a run had (``mask`` follows ``causal``:
see :func:`with_key_defaults`)."""


def with_key_defaults(frame: Any) -> Any:
    """A results frame read from disk, with the key columns a run of an older format lacks filled in."""
    for name, value in KEY_DEFAULTS.items():
        if name not in frame.columns:
            frame[name] = value
    if "head_dim" not in frame.columns and {"d_model", "heads"} <= set(frame.columns):
        frame["head_dim"] = frame["d_model"] // frame["heads"]  # every run before head_dim was a field
    if "model" not in frame.columns:
        frame["model"] = None  # a run before models were scenarios: no model named, as in a run that names none
    if "device_id" not in frame.columns:
        frame["device_id"] = None  # a run before rows named their physical device: not known
    if "mask" not in frame.columns and "causal" in frame.columns:
        frame["mask"] = ["causal" if flag(value) else "none" for value in frame["causal"]]
    return frame


def label(name: str) -> str:
    """Short table header of a column."""
    return INFO[name].label if name in INFO else name


def _column(name: str) -> str:
    """``name``, checked against the fields above: a renamed or removed field fails here, at import, rather
    than as a column the report silently finds empty."""
    if name not in INFO:
        raise KeyError(f"{name!r} is not a result column")
    return name


# The read side (analysis, views) names the columns it reads through these: one spelling of each.
RUN_ID = _column("run_id")
SCENARIO = _column("scenario")
CASE_ID = _column("case_id")
IMPL = _column("impl")
DEVICE = _column("device")
DEVICE_NAME = _column("device_name")
TENSOR_PARALLEL = _column("tensor_parallel")
DTYPE = _column("dtype")
BATCH = _column("batch")
SEQ_LEN = _column("seq_len")
D_MODEL = _column("d_model")
HEADS = _column("heads")
KV_HEADS = _column("kv_heads")
MODE = _column("mode")
PHASE = _column("phase")
CAUSAL = _column("causal")
BIAS = _column("bias")
MASK = _column("mask")
WINDOW = _column("window")
PREFIX = _column("prefix")
LENGTHS = _column("lengths")
LAYOUT = _column("layout")
SCORE_MOD = _column("score_mod")
SOFTCAP = _column("softcap")
PADDING_SHARE = _column("padding_share")
REPEAT = _column("repeat")
STATUS = _column("status")
ERROR = _column("error")
NOTE = _column("note")
MAX_REL_ERR = _column("max_rel_err")
LATENCY_MS = _column("latency_ms")
LATENCY_P25_MS = _column("latency_p25_ms")
LATENCY_P75_MS = _column("latency_p75_ms")
SAMPLE_COUNT = _column("samples")
NOISY = _column("noisy")
CAPPED = _column("capped")
COMPILE_TIME_S = _column("compile_time_s")
ROUNDS_ID = _column("rounds_id")
PEAK_MEMORY_BYTES = _column("peak_memory_bytes")
FLOPS = _column("flops")
BYTES_MOVED = _column("bytes_moved")
ARITHMETIC_INTENSITY = _column("arithmetic_intensity")
PREDICTED_PEAK_BYTES = _column("predicted_peak_bytes")
MEASURED_FLOPS = _column("measured_flops")
MEASURED_BYTES = _column("measured_bytes")
MEASURED_INTENSITY = _column("measured_intensity")
MODEL_DISAGREEMENT = _column("model_disagreement")
MODEL_DISAGREES = _column("model_disagrees")
ACHIEVED_TFLOPS = _column("achieved_tflops")
ACHIEVED_USEFUL_TFLOPS = _column("achieved_useful_tflops")
SKIPS_MASKED_WORK = _column("skips_masked_work")
PEAK_TFLOPS = _column("peak_tflops")
PEAK_GBPS = _column("peak_gbps")
ROOFLINE_SOURCE = _column("roofline_source")
ROOF_SOURCE = _column("roof_source")
ROOFLINE_EFFICIENCY = _column("roofline_efficiency")
INTENSITY_SOURCE = _column("intensity_source")
HEAD_DIM = _column("head_dim")
SDPA_BACKEND = _column("sdpa_backend")
OPS_PER_CALL = _column("ops_per_call")
KERNELS_PER_CALL = _column("kernels_per_call")
HOST_LATENCY_MS = _column("host_latency_ms")
KV_CACHE_BYTES = _column("kv_cache_bytes")
ATTN_BYTES = _column("attn_bytes")
ROOFLINE_BOUND = _column("roofline_bound")
ATTAINABLE_TFLOPS = _column("attainable_tflops")
HARDWARE_INTENSITY = _column("hardware_intensity")
USEFUL_FLOPS = _column("useful_flops")
TENSOR_FLOPS = _column("tensor_flops")
FP32_FLOPS = _column("fp32_flops")
DRAM_READ_BYTES = _column("dram_read_bytes")
DRAM_WRITE_BYTES = _column("dram_write_bytes")


def reference_markdown() -> str:
    """docs/columns.md: every column with its unit, role and description, generated from this module."""
    lines = [
        "# Result columns",
        "",
        "Generated from `mhabench/results/schema.py` by `mhabench columns --markdown > docs/columns.md`; a test fails",
        "when this file and the schema differ. `results.csv` has every column below except `times_ms`,",
        f"which only `results.parquet` holds. Format version {FORMAT_VERSION}.",
        "",
        "Roles: " + "; ".join(f"**{role}**: {text}" for role, text in ROLES.items()) + ".",
        "",
    ]
    for attribute, group in GROUPS:
        lines += [f"## {attribute}", "", (group.__doc__ or "").strip().splitlines()[0], ""]
        lines += ["| column | unit | role | description |", "|:---|:---|:---|:---|"]
        lines += [
            f"| `{f.name}` | {f.metadata['unit'] or '–'} | {f.metadata['role']} | {f.metadata['description']} |"
            for f in dataclasses.fields(group)
        ]
        lines.append("")
    return "\n".join(lines)


def noisy(row: Mapping[str, Any]) -> bool | None:
    """The row's ``noisy`` flag where it is defined, None where it is not: below ``MIN_SPREAD_SAMPLES`` samples
    there is no IQR to judge, yet runs written before that rule set the flag anyway, so every reader of the
    flag goes through here and none trusts an old run's flag that the summary table hides."""
    count = whole_of(row.get(SAMPLE_COUNT))
    return None if count is not None and count < MIN_SPREAD_SAMPLES else flag(row.get(NOISY))
