"""Energy in the report and in advise: shown where NVML resolved it, the reason counted where it did not (the
recorded H100 run's block readings among them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
from shared_runs import recorded

from mhabench.analysis.advice.advise import advise
from mhabench.analysis.statement import ENERGY
from mhabench.results.manifest import Manifest
from mhabench.results.store import Run, load_run, typed_rows
from mhabench.views.report.blocks import Paragraph
from mhabench.views.report.energy import energy_blocks
from mhabench.views.table import TableModel
from mhabench.views.wording import sentence as text_of

COUNTERS_RUN = "20261127T074353Z-default-gpu-counters-partial"


def gpu_run(tmp_path: Path) -> Run:
    """One case, two ok rows: `fused` with energy over 2 s windows at 650 W, `naive` at 900 W on a 700 W board."""
    base = {
        "run_id": "r",
        "scenario": "s",
        "case_id": "s/c",
        "device": "cuda:0",
        "dtype": "bfloat16",
        "batch": 1,
        "seq_len": 1024,
        "d_model": 4096,
        "heads": 32,
        "head_dim": 128,
        "kv_heads": 32,
        "causal": False,
        "bias": False,
        "mode": "forward",
        "phase": "prefill",
        "mask": "none",
        "layout": "padded",
        "score_mod": "none",
        "tensor_parallel": 1,
        "repeat": 0,
        "status": "ok",
        "rounds_id": "x",
        "energy_source": "nvml 580",
        "energy_window_s": 2.0,
        "energy_windows": 3,
        "energy_uncertainty": 0.05,
    }
    rows = pd.DataFrame(
        [
            {
                **base,
                "impl": "fused",
                "latency_ms": 0.2,
                "times_ms": [0.2] * 8,
                "energy_per_call_j": 0.13,
                "average_power_w": 650.0,
                "tokens_per_joule": 7877.0,
            },
            {
                **base,
                "impl": "naive",
                "latency_ms": 0.4,
                "times_ms": [0.4] * 8,
                "energy_per_call_j": 0.36,
                "average_power_w": 900.0,
                "tokens_per_joule": 2844.0,
            },
        ]
    )
    manifest = Manifest(run_id="r", environment={"device_kind": "cuda", "nvml": {"power_limit_w": 700.0}})
    return Run(tmp_path, manifest, typed_rows(rows))


def test_the_report_shows_resolved_rows_and_counts_the_others_with_their_reason(tmp_path: Path) -> None:
    blocks = energy_blocks(gpu_run(tmp_path))
    (table,) = [block for block in blocks if isinstance(block, TableModel)]
    assert [cells[1] for cells in table.cells] == ["fused"]
    assert table.cells[0][2:5] == ["0.13", "7,877", "650"]
    (counted,) = [b for b in blocks if isinstance(b, Paragraph) and "without energy" in b.text]
    assert "1 ok row(s) without energy: 1 × average power above the power limit × 1.02." in counted.text


def test_a_cpu_run_has_no_energy_section(tmp_path: Path) -> None:
    gpu = gpu_run(tmp_path)
    rows = [dataclasses.replace(r, energy=dataclasses.replace(r.energy, energy_source="CPU device")) for r in gpu.rows]
    run = dataclasses.replace(gpu, rows=rows)
    assert energy_blocks(run) == []


def test_advise_states_the_energy_of_resolved_rows_only(tmp_path: Path) -> None:
    (statement,) = [s for s in advise([gpu_run(tmp_path)]).statements if s.kind == ENERGY]
    assert "`fused` 0.13 J (7,877 tokens/J, 650 W; ±5% over 2 s windows)" in text_of(statement)
    assert "naive" not in text_of(statement) and list(statement.figures) == ["fused"]


def test_the_recorded_h100_run_shows_no_energy_and_says_why() -> None:
    run = load_run(recorded(COUNTERS_RUN))
    blocks = energy_blocks(run)
    assert not any(isinstance(block, TableModel) for block in blocks)
    (counted,) = [b for b in blocks if isinstance(b, Paragraph) and "without energy" in b.text]
    assert counted.text.startswith("16 ok row(s) without energy: 12 × read over timed blocks: window under 1 s. 3 × ")
    # counted by the test each failed, not by each row's own figures (which made one group per row)
    assert "3 × read over timed blocks: window under 1 s; average power above the power limit × 1.02." in counted.text
    assert not [s for s in advise([run]).statements if s.kind == ENERGY]
