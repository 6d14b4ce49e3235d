"""A roof that is not below the work: a probed roof is probed again, then raised to the row, never printed under it.

On the write side (:mod:`mhabench.run.roof`) a row above its process's probe makes the run probe again and keep the
larger figures, then raise the roof to the row; on the read side (:func:`mhabench.analysis.throughput.roofs`) a run's
rows are judged against the largest probe of their machine and dtype, raised to the fastest row where no probe
reached it. A datasheet roof is never moved.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from shared_runs import recorded
from synthetic_runs import calibrate_test_machine, rounds, row, write_run
from typer.testing import CliRunner

from mhabench.analysis.executed import EXECUTED_INTENSITY, EXECUTED_TFLOPS
from mhabench.analysis.speedup import speedup_rows
from mhabench.analysis.throughput import ROOF, USEFUL_EFFICIENCY, roofs, throughput, with_roofs
from mhabench.cli import app
from mhabench.measure.peaks import DevicePeaks, RoofSource
from mhabench.measure.roofline import with_peaks, work_points
from mhabench.results.columns import PEAK_GBPS, PEAK_TFLOPS, ROOF_SOURCE
from mhabench.results.schema import CaseIdentity, ModelledCost, Outcome, ResultRow, Roofline, RowStatus
from mhabench.results.store import load_run
from mhabench.run import runner
from mhabench.run.roof import RoofCheck
from mhabench.scenario.loading import parse_config
from mhabench.views import roofline
from mhabench.views.pooled import pooled_table
from mhabench.views.run_notes import roof_lines
from mhabench.views.table import LABELS

FINDINGS_RUNS = Path(__file__).resolve().parents[1] / "docs" / "findings" / "runs"
LOADED_RUN = "20261127T113344Z-default"
"""The loaded-VM default run of default-run.md: three processes; the second probed 0.0765 TFLOP/s while the VM was
busy (the others 0.359 and 0.340), and its `fused` at n = 2048 then ran at 145.7 % of that probe."""
H100_RUNS = ("20261126T070612Z-default-gpu", "20261127T074353Z-default-gpu-counters-partial")
PROBED = DevicePeaks(1.0, 100.0, "measured")


@pytest.fixture(scope="module")
def loaded_run(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    folder = tmp_path_factory.mktemp("loaded")
    with tarfile.open(FINDINGS_RUNS / f"{LOADED_RUN}.tar.xz") as archive:
        archive.extractall(folder, filter="data")
    return load_run(folder / LOADED_RUN).frame


# --- the roof's own arithmetic ----------------------------------------------------------------------


def test_a_later_probe_keeps_the_larger_figure_of_each_roof() -> None:
    assert PROBED.at_least(DevicePeaks(0.5, 50.0, "measured")) is PROBED
    both = PROBED.at_least(DevicePeaks(0.5, 300.0, "measured"))
    assert (both.peak_tflops, both.peak_gbps, both.roof_source) == (1.0, 300.0, RoofSource.REPROBED)
    assert both.source == "measured; re-probed"


def test_a_roof_is_raised_just_enough_that_no_point_lies_above_it() -> None:
    assert PROBED.raised_to([(0.5, 10.0)]) is PROBED  # 0.5 TFLOP/s at 10 FLOP/B needs 50 GB/s: below the roof
    compute = PROBED.raised_to([(2.0, 1000.0)])  # above the compute peak only
    assert (compute.peak_tflops, compute.peak_gbps, compute.roof_source) == (2.0, 100.0, RoofSource.RAISED)
    memory = PROBED.raised_to([(0.3, 1.0), (0.5, 100.0)])  # 0.3 TFLOP/s at 1 FLOP/B: 300 GB/s
    assert (memory.peak_tflops, memory.peak_gbps) == (1.0, pytest.approx(300.0))
    assert not memory.below([(0.3, 1.0), (0.5, 100.0)])


def test_a_placed_row_moves_to_a_new_roof_with_its_throughput_unchanged() -> None:
    point = Roofline(
        achieved_tflops=0.5, achieved_gbps=50.0, peak_tflops=0.25, peak_gbps=100.0, roofline_efficiency=2.0
    )
    moved = with_peaks(point, DevicePeaks(1.0, 200.0, "x", roof_source=RoofSource.RAISED))
    assert (moved.achieved_tflops, moved.achieved_gbps) == (0.5, 50.0)
    assert (moved.peak_tflops, moved.roof_source, moved.roofline_efficiency) == (1.0, RoofSource.RAISED, 0.5)
    assert moved.roofline_bound == "compute" and moved.attainable_tflops == 1.0  # 10 FLOP/B, ridge at 5


# --- while a run goes: probe again, then raise ------------------------------------------------------


def result_row(rate_tflops: float, peaks: DevicePeaks, dtype: str = "float32") -> ResultRow:
    """An ok row placed against ``peaks`` whose useful and executed work run at ``rate_tflops``, 10 FLOP/B."""
    identity = CaseIdentity(impl="fused", dtype=dtype, case_id="c")
    cost = ModelledCost(flops=10**9, useful_flops=10**9, bytes_moved=10**8)
    latency_s = 1e9 / (rate_tflops * 1e12)
    point = Roofline(
        achieved_tflops=rate_tflops,
        achieved_gbps=1e8 / latency_s / 1e9,
        achieved_useful_tflops=rate_tflops,
        intensity_source="modelled",
        skips_masked_work=False,
    )
    return ResultRow(identity, Outcome(RowStatus.OK, ""), cost=cost, roofline=with_peaks(point, peaks))


def test_a_row_above_a_probed_roof_is_probed_again_once_then_raised_to() -> None:
    probes: list[str] = []

    def probe(dtype: str) -> DevicePeaks:
        probes.append(dtype)
        return DevicePeaks(2.0, 200.0, "measured")

    check = RoofCheck({"float32": PROBED}, probe)
    below = check.checked(result_row(0.5, PROBED))
    assert probes == [] and below.roofline.roof_source == RoofSource.PROBED
    reprobed = check.checked(result_row(1.5, PROBED)).roofline
    assert probes == ["float32"] and (reprobed.peak_tflops, reprobed.roof_source) == (2.0, RoofSource.REPROBED)
    assert reprobed.roofline_efficiency == 0.75
    raised = check.checked(result_row(4.0, PROBED)).roofline  # measured against the first probe, in the same case
    assert probes == ["float32"], "one more probe per dtype and process, no more"
    assert (raised.peak_tflops, raised.peak_gbps, raised.roof_source) == (4.0, 400.0, RoofSource.RAISED)
    assert raised.roofline_efficiency == 1.0
    later = check.checked(result_row(1.0, PROBED)).roofline  # a later row is placed on the raised roof
    assert (later.peak_tflops, later.roof_source, later.roofline_efficiency) == (4.0, RoofSource.RAISED, 0.25)


def test_a_datasheet_roof_is_never_moved_while_a_run_goes() -> None:
    sheet = DevicePeaks(1.0, 100.0, "datasheet:H100 SXM", roof_source=RoofSource.DATASHEET)
    check = RoofCheck({"float32": sheet}, lambda dtype: pytest.fail("a datasheet roof is not probed"))
    above = result_row(3.0, sheet)
    assert check.checked(above) is above and check.peaks["float32"] is sheet


def test_a_row_without_a_roof_stays_without_one() -> None:
    """A row computing in a dtype whose rate this device has no figure for (fp8 on a probed roof) is not placed."""
    unplaced = dataclasses.replace(result_row(3.0, PROBED), roofline=Roofline(tokens_per_s=1.0, roofline_source="x"))
    check = RoofCheck({"float32": PROBED}, lambda dtype: pytest.fail("nothing to probe for"))
    assert check.checked(unplaced) is unplaced
    rows = probed_rows(("fused", 0.1, 0.5, 0)).assign(peak_tflops=None, peak_gbps=None)
    assert roofs(rows)[ROOF_SOURCE].isna().all()


def test_a_run_on_a_probe_far_below_its_rows_writes_every_row_at_or_under_its_roof(
    tiny_config_data: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe of 1 FLOP/s (a machine busy past use while it ran): every row is above it; the run probes again
    (the same low figure here) and raises the roof to the rows, and what is on disk says so."""
    low = DevicePeaks(1e-12, 1e-9, "measured")
    probes: list[str] = []
    monkeypatch.setattr(runner, "device_peaks", lambda device, dtype: probes.append(str(dtype)) or low)
    config = parse_config({**tiny_config_data, "implementations": ["fused", "naive"]}, "tiny.yaml")
    result = runner.run(config, tmp_path)
    rows = load_run(result.run_dir).frame
    assert probes == ["torch.float32", "torch.float32"], "probed at the start and once again, not per row"
    assert set(rows[ROOF_SOURCE]) == {"raised to row"}
    assert (rows["roofline_efficiency"] <= 1.0).all()
    assert (throughput(rows)[USEFUL_EFFICIENCY] <= 1.0).all()
    assert pd.concat([rows, throughput(rows)], axis=1).columns.is_unique  # as the tables join them
    assert result.manifest.roofline["float32"]["roof_source"] == "raised to row"


# --- reading a run: the largest probe of the machine, raised to the fastest row ------------------------------


def probed_rows(*specs: tuple[str, float, float, int]) -> pd.DataFrame:
    """Synthetic rows (impl, median ms, probed TFLOP/s, process) of one run, each process with its own probe."""
    return pd.DataFrame(
        [
            {**row(impl, [ms] * 5, repeat=process), "peak_tflops": tflops, "roofline_source": "measured"}
            for impl, ms, tflops, process in specs
        ]
    )


def test_a_run_is_judged_against_its_largest_probe_and_says_which_rows_were_re_probed() -> None:
    rows = probed_rows(("fused", 0.1, 0.5, 0), ("fused", 0.1, 0.05, 1))
    before = rows["achieved_tflops"] / rows["peak_tflops"]
    assert before[1] > 1.0, "the second process's probe is below its own row"
    roof = roofs(rows)
    assert list(roof[PEAK_TFLOPS]) == [0.5, 0.5]
    assert list(roof[ROOF_SOURCE]) == ["probed", "re-probed"]
    assert throughput(rows)[USEFUL_EFFICIENCY].tolist() == pytest.approx(list(rows["achieved_tflops"] / 0.5))


def test_a_row_faster_than_any_probe_raises_its_groups_roof_to_its_own_work() -> None:
    rows = probed_rows(("fused", 1e-4, 0.5, 0), ("naive", 1.0, 0.5, 0))
    needed = rows["useful_flops"][0] / 1e-7 / 1e12
    table = throughput(rows)
    assert list(table[ROOF]) == ["raised to row", "raised to row"]
    assert table[USEFUL_EFFICIENCY][0] == 1.0 and table[USEFUL_EFFICIENCY][1] < 1.0
    assert roofs(rows)[PEAK_TFLOPS][0] == pytest.approx(needed)
    assert roof_lines(rows)[0].startswith("roof corrected (2 rows raised to row); `fused` at ")
    assert "%" not in roof_lines(rows)[0]


def test_runs_and_dtypes_keep_their_own_roofs() -> None:
    rows = probed_rows(("fused", 0.1, 0.5, 0), ("fused", 0.1, 0.05, 1))
    rows.loc[1, "run_id"] = "another run"
    assert list(roofs(rows)[PEAK_TFLOPS]) == [0.5, pytest.approx(rows["achieved_tflops"][1])]
    rows.loc[1, ["run_id", "dtype"]] = ["run", "bfloat16"]
    assert roofs(rows)[ROOF_SOURCE][1] == "raised to row"


def test_a_datasheet_roof_is_read_as_stored_even_below_a_row() -> None:
    rows = probed_rows(("fused", 1e-4, 0.5, 0)).assign(roofline_source="datasheet:H100 SXM")
    assert roofs(rows)[ROOF_SOURCE].tolist() == ["datasheet"] and roofs(rows)[PEAK_TFLOPS][0] == 0.5
    assert roof_lines(rows) == []
    stored = rows.assign(roof_source="datasheet", roofline_source="anything")
    assert roofs(stored)[PEAK_TFLOPS][0] == 0.5


def test_the_loaded_run_reads_fused_against_the_runs_largest_probe(loaded_run: pd.DataFrame) -> None:
    table = throughput(loaded_run)
    fused = (loaded_run["impl"] == "fused") & (loaded_run["seq_len"] == 2048) & (loaded_run["repeat"] == 1)
    assert loaded_run.loc[fused, "roofline_efficiency"].item() == pytest.approx(1.457, abs=1e-3)  # as stored
    assert table.loc[fused, USEFUL_EFFICIENCY].item() == pytest.approx(0.111452 / 0.358613, rel=1e-4)
    assert table.loc[fused, ROOF].item() == "re-probed"
    assert (table[USEFUL_EFFICIENCY] <= 1.0).all()
    assert set(table.loc[loaded_run["repeat"] == 0, ROOF]) == {"probed"}
    assert with_roofs(with_roofs(loaded_run)).equals(with_roofs(loaded_run))
    (line,) = roof_lines(loaded_run)
    assert line.startswith("roof corrected (24 rows re-probed); `fused` at n=2048 h=8 d=512 b=1 float32 ran above ")
    assert "%" not in line


@pytest.mark.parametrize("name", H100_RUNS)
def test_the_recorded_h100_runs_keep_their_datasheet_roof(name: str) -> None:
    rows = load_run(recorded(name)).frame
    roof = roofs(rows)
    assert set(roof[ROOF_SOURCE].dropna()) == {"datasheet"}
    assert roof[ROOF_SOURCE].isna().equals(rows["roofline_source"].isna())  # a failed row has no roof
    pd.testing.assert_series_equal(roof[PEAK_TFLOPS], pd.to_numeric(rows[PEAK_TFLOPS]), check_names=False)
    pd.testing.assert_series_equal(roof[PEAK_GBPS], pd.to_numeric(rows[PEAK_GBPS]), check_names=False)
    assert roof_lines(rows) == []


def test_work_points_are_the_executed_and_the_useful_one() -> None:
    placed = result_row(0.5, PROBED)
    assert work_points(placed.roofline, placed.cost) == [(0.5, 10.0), (0.5, 10.0)]
    assert work_points(dataclasses.replace(placed.roofline, achieved_gbps=None), None) == []
    assert math.isclose(placed.roofline.roofline_efficiency, 0.5)


def test_the_loaded_runs_pooled_table_and_roofline_stand_on_the_runs_largest_probe(loaded_run: pd.DataFrame) -> None:
    """The pooled table shows one process's row per case: it is judged against every process's probe, and the
    roofline draws one roof (the run's largest probe) with no point above it."""
    table = pooled_table(speedup_rows(loaded_run), "naive")
    column = table.headers.index(LABELS[USEFUL_EFFICIENCY])
    shown = [float(cells[column].rstrip("%")) for cells in table.cells if cells[column].endswith("%")]
    assert len(shown) == 12 and max(shown) <= 100.0
    points = roofline.roofline_points(loaded_run)
    assert points[PEAK_TFLOPS].nunique() == 1 and points[PEAK_TFLOPS].iloc[0] == pytest.approx(0.358613, rel=1e-5)
    roof = np.minimum(points[PEAK_TFLOPS], points[EXECUTED_INTENSITY] * points[PEAK_GBPS] / 1e3)
    assert (points[EXECUTED_TFLOPS] <= roof).all()


def test_no_reason_advise_gives_cites_an_efficiency_above_100_percent(tmp_path: Path) -> None:
    """One process whose probe (0.005 TFLOP/s) came out below its winner's 0.0084 useful TFLOP/s: advise's why
    quotes the efficiency against the roof raised to that row, never 168 %."""
    times = rounds({"fused": 1.0, "naive": 3.0}, count=20)
    low = {"peak_tflops": 0.005, "roofline_source": "measured"}
    run_dir = write_run(tmp_path, "low-probe", [{**row(impl, times[impl]), **low} for impl in times])
    calibrate_test_machine(0.02)
    output = " ".join(CliRunner().invoke(app, ["advise", str(run_dir)]).output.split())
    cited = [float(value) for value in re.findall(r"(\d+(?:\.\d+)?)% of the attainable", output)]
    assert cited and max(cited) <= 100.0, output
