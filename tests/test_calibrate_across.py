"""``calibrate --from A --from B``: several one-process runs of one config on one machine read as its processes,
checked on synthetic runs and on the two recorded H100 runs of the GPU default sweep (the figure
docs/findings/replication.md quotes for the GPU default replicate count)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_runs import recorded
from synthetic_runs import rounds, row, write_replicated_run, write_run
from typer.testing import CliRunner

from mhabench.analysis.calibration import calibrate_across
from mhabench.cli import app
from mhabench.errors import InputError
from mhabench.results.store import load_run

FINDINGS = Path(__file__).resolve().parent.parent / "docs" / "findings" / "replication.md"
GPU_RUNS = ("20261126T070612Z-default-gpu", "20261127T074353Z-default-gpu-counters-partial")


def one_process(
    root: Path, name: str, fused_speedup: float, seq_lens: tuple[int, ...] = (128, 512), **env: str
) -> Path:
    """A one-process run in which ``fused`` runs ``fused_speedup`` times faster than ``naive`` at every length."""
    records = []
    for seq_len in seq_lens:
        times = rounds({"naive": 2.0, "fused": 2.0 / fused_speedup}, noise=0.001, seed=seq_len)
        records += [row(impl, times[impl], seq_len=seq_len) for impl in ("naive", "fused")]
    return write_run(root, name, records, **env)


def test_one_process_runs_are_read_as_processes_over_the_pairs_they_share(tmp_path: Path) -> None:
    runs = [
        one_process(tmp_path, "a", 2.0),
        one_process(tmp_path, "b", 2.2, seq_lens=(128, 512, 2048)),  # n = 2048 is in one run only: left out
        one_process(tmp_path, "c", 1.8),
    ]
    found, path = calibrate_across([load_run(run) for run in runs])
    assert found.processes == 3 and len(found.ratios) == 2 and path.is_file()
    assert found.between_process_spread == pytest.approx(2.2 / 1.8 - 1, rel=0.02)
    assert found.run_id == "a b c"


def test_runs_that_cannot_be_read_as_processes_of_one_machine_are_refused_in_one_line(tmp_path: Path) -> None:
    a, other_machine = one_process(tmp_path, "a", 2.0), one_process(tmp_path, "x", 2.0, cpu_model="Another CPU")
    replicated = write_replicated_run(tmp_path, "r", [{"naive": 2.0, "fused": 1.0}] * 2)
    apart = one_process(tmp_path, "apart", 2.0, seq_lens=(4096,))
    for runs, said in (
        ([a, other_machine], "different machines"),
        ([a, replicated], "several processes or repeats"),
        ([a, apart], "share no"),
    ):
        with pytest.raises(InputError, match=f"--from: .*{said}"):
            calibrate_across([load_run(run) for run in runs])


def test_calibrate_from_several_runs_on_the_command_line(tmp_path: Path) -> None:
    runs = [str(one_process(tmp_path, name, speedup)) for name, speedup in (("a", 2.0), ("b", 2.1))]
    result = CliRunner().invoke(app, ["calibrate", "--from", runs[0], "--from", runs[1]])
    assert result.exit_code == 0, result.output
    assert "across 2 processes" in result.output and "run a b" in result.output


def test_the_gpu_spread_quoted_is_that_of_the_two_recorded_h100_runs() -> None:
    found, _ = calibrate_across([load_run(recorded(name)) for name in GPU_RUNS])
    assert (found.processes, len(found.ratios)) == (2, 12)
    assert f"{found.between_process_spread:.1%}" == "7.9%"
    fused = {entry["case_id"]: entry["range"] for entry in found.ratios if entry["impl"] == "fused"}
    by_length = {case_id.split("/")[1]: spread for case_id, spread in fused.items()}
    # n = 1024 (both processes timed 5 or more rounds): the fused lead moved by 0.3 % at most
    assert by_length["b1-n1024-d4096-h32-bfloat16"] < 0.003 and by_length["b1-n1024-d4096-h32-bfloat16-causal"] < 0.004
    text = FINDINGS.read_text(encoding="utf-8")
    assert "7.9 %" in text and all(name.split("-default")[0] in text for name in GPU_RUNS)
