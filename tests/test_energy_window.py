"""Energy windows against a fake NVML whose energy counter moves in 100 ms steps (as the H100's did), and the rule
that decides when a row's energy counts, on made-up figures and on the recorded H100 run."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from shared_runs import recorded

from mhabench.measure import energy_window
from mhabench.measure.energy_window import Window, WindowMeter, batch_calls, energy_of, measure_energy
from mhabench.results import energy as rule

COUNTERS_RUN = "20261127T074353Z-default-gpu-counters-partial"


class SteppingNvml:
    """A GPU at ``watts`` whose total-energy counter (mJ) is updated only every ``step_s`` of its own time, and
    whose clock advances only while calls run (``run_batch``) or by ``read_s`` per counter read."""

    def __init__(self, watts: float, call_s: float, step_s: float = 0.1, read_s: float = 1e-5) -> None:
        self.watts, self.call_s, self.step_s, self.read_s = watts, call_s, step_s, read_s
        self.now_s = 0.0
        self.calls = 0

    def _advance(self, seconds: float) -> None:
        self.now_s += seconds

    def run_batch(self, calls: int) -> None:
        self.calls += calls
        self._advance(calls * self.call_s)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        self._advance(self.read_s)
        updated_s = (self.now_s // self.step_s) * self.step_s  # the counter's last update
        return round(self.watts * updated_s * 1e3)

    def clock(self) -> float:
        return self.now_s


def meter_on(gpu: SteppingNvml) -> WindowMeter:
    return WindowMeter(gpu, "GPU-x", gpu.run_batch, clock=gpu.clock)


def test_a_block_of_a_few_milliseconds_reads_the_counters_steps_not_the_power() -> None:
    """What the H100's timed blocks did: two reads around 5 ms of calls at 400 W read 0 W or 8,000 W."""
    gpu = SteppingNvml(watts=400.0, call_s=0.001)
    powers = set()
    for _ in range(40):
        before = gpu.nvmlDeviceGetTotalEnergyConsumption(None)
        start = gpu.now_s
        gpu.run_batch(5)
        powers.add(round((gpu.nvmlDeviceGetTotalEnergyConsumption(None) - before) / 1e3 / (gpu.now_s - start)))
    assert 0 in powers and max(powers) > 700  # neither is 400 W


def test_windows_from_step_to_step_resolve_the_energy_per_call() -> None:
    gpu = SteppingNvml(watts=400.0, call_s=0.001)
    energy = measure_energy(meter_on(gpu), latency_ms=1.0, window_s=1.0, windows=3, source="nvml x", power_limit_w=700)
    assert energy.energy_per_call_j == pytest.approx(0.4, rel=0.01)
    assert energy.average_power_w == pytest.approx(400.0, rel=0.01)
    assert energy.energy_windows == 3 and energy.energy_window_s is not None and energy.energy_window_s >= 1.0
    assert energy.energy_uncertainty == pytest.approx(0.1 / energy.energy_window_s, rel=0.05)  # one step / window
    assert energy.energy_spread is not None and energy.energy_spread < 0.01
    assert energy.energy_source == "nvml x"


def test_a_window_starts_and_ends_on_a_counter_step() -> None:
    gpu = SteppingNvml(watts=500.0, call_s=0.003)
    window = meter_on(gpu).window(batch=1, window_s=1.0)
    assert window.step_s == pytest.approx(0.1, abs=0.004)  # the step as the GPU showed it
    assert window.seconds == pytest.approx(round(window.seconds, 1), abs=0.004)  # a whole number of steps
    assert window.energy_j == pytest.approx(500.0 * round(window.seconds, 1))
    assert window.per_call_j == pytest.approx(1.5, rel=0.01)


def test_windows_above_the_power_limit_leave_the_energy_empty_with_the_reason() -> None:
    readings = [Window(energy_j=800.0, seconds=1.0, calls=10, step_s=0.1)] * 3  # 800 W on a 700 W board
    energy = energy_of(readings, "nvml x", power_limit_w=700.0)
    assert energy.energy_per_call_j is None and energy.average_power_w is None
    assert energy.energy_source == "nvml x; energy not resolved: average power 800 W above the 700 W power limit × 1.02"
    assert energy.energy_window_s == 1.0 and energy.energy_uncertainty == pytest.approx(0.1)  # the window stays shown


def test_a_window_under_the_minimum_is_not_resolved() -> None:
    gpu = SteppingNvml(watts=400.0, call_s=0.001)
    energy = measure_energy(meter_on(gpu), latency_ms=1.0, window_s=0.3, windows=1, source="nvml x", power_limit_w=700)
    assert energy.energy_per_call_j is None
    assert energy.energy_source is not None and "under the 1 s" in energy.energy_source


def test_a_counter_that_never_moves_gives_no_energy_and_says_so() -> None:
    gpu = SteppingNvml(watts=400.0, call_s=0.001, step_s=1e9)
    energy = measure_energy(meter_on(gpu), latency_ms=1.0, window_s=1.0, windows=1, source="nvml x", power_limit_w=700)
    assert energy.energy_per_call_j is None
    assert (
        energy.energy_source
        == f"nvml x; energy not resolved: NVML's energy counter did not move for {energy_window.STEP_TIMEOUT_S:g} s"
    )


@pytest.mark.parametrize(("latency_ms", "calls"), [(0.2, 10), (1.0, 2), (25.0, 1), (0.0, 1), (1e-6, 10_000)])
def test_a_batch_is_about_two_milliseconds_of_calls(latency_ms: float, calls: int) -> None:
    assert batch_calls(latency_ms) == calls


# --- the rule, also on rows written before energy windows ------------------------------------------------------


@pytest.mark.parametrize(
    ("power_w", "window_s", "reason"),
    [
        (650.0, 2.0, ""),
        (714.0, 2.0, ""),  # within 2 % of the limit
        (715.0, 2.0, "average power 715 W above the 700 W power limit × 1.02"),
        (650.0, 0.5, "window 0.5 s, under the 1 s NVML's ~0.1 s steps need"),
        (-1.0, 2.0, "average power -1.0 W is not a power"),
        (650.0, None, "no energy window recorded"),
    ],
)
def test_the_rule_names_every_test_a_window_fails(power_w: float, window_s: float | None, reason: str) -> None:
    assert rule.unresolved_reason(power_w, window_s, 700.0) == reason


def test_a_resolved_row_is_shown_and_an_unresolved_one_says_why() -> None:
    row = {"energy_per_call_j": 0.4, "average_power_w": 650.0, "energy_window_s": 2.0, "tokens_per_joule": 1e4}
    shown = rule.reading(row, 700.0)
    assert shown.resolved and (shown.energy_per_call_j, shown.tokens_per_joule) == (0.4, 1e4)
    hot = rule.reading({**row, "average_power_w": 900.0}, 700.0)
    assert not hot.resolved and hot.unresolved.startswith("average power 900 W")
    empty = rule.reading({"energy_source": "energy windows off"}, 700.0)
    assert not empty.resolved and empty.unresolved == "energy windows off"


def test_the_power_limit_comes_from_the_manifests_nvml_settings_else_nvidia_smi() -> None:
    assert rule.power_limit_of({"nvml": {"power_limit_w": 700.0}, "power_limit_w": 650.0}) == 700.0
    assert rule.power_limit_of({"power_limit_w": "650"}) == 650.0
    assert rule.power_limit_of({}) is None


def test_the_recorded_h100_rows_energy_is_unresolved_when_read() -> None:
    """The rows issue 25 names: naive n=1024 causal at 1,328 W, fused n=4096 at 1,580 W on a 700 W H100, fused
    n=1024 causal at 0.0024 J a call: each read over timed blocks of ~50 ms, none a measurement now."""
    run_dir = recorded(COUNTERS_RUN)
    frame = pd.read_parquet(run_dir / "results.parquet")
    limit = rule.power_limit_of(pd.read_json(run_dir / "manifest.json", typ="series")["environment"])
    assert limit == 700.0
    rows = {(row["case_id"].split("/")[1], row["impl"]): row for row in frame.to_dict("records")}
    hot = rule.reading(rows[("b1-n1024-d4096-h32-bfloat16-causal", "naive")], limit)
    assert not hot.resolved and "1328 W above the 700 W power limit" in hot.unresolved
    assert "timed blocks" in hot.unresolved and hot.window_s is not None and hot.window_s < 0.06
    hotter = rule.reading(rows[("b1-n4096-d4096-h32-bfloat16", "fused")], limit)
    assert not hotter.resolved and "1580 W above" in hotter.unresolved
    tiny = rule.reading(rows[("b1-n1024-d4096-h32-bfloat16-causal", "fused")], limit)
    assert not tiny.resolved and "under the 1 s" in tiny.unresolved
    assert not any(rule.reading(row, limit).resolved for row in rows.values())


class TickingNvml:
    """NVML on a GPU drawing ``watts``, its energy counter stepping every 100 ms of a clock that each read (of the
    counter or of the clock) moves on by 5 ms: the wiring without the shared machine's scheduling in the figures
    (on the wall clock a read delayed 70 ms by a busy CPU made 300 W read 280 W)."""

    NVML_CLOCK_SM = 0
    TICK_S = 0.005

    def __init__(self, watts: float) -> None:
        self.watts, self.now_s = watts, 0.0

    def clock(self) -> float:
        self.now_s += self.TICK_S
        return self.now_s

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        self.now_s += self.TICK_S
        return round(self.watts * (self.now_s // 0.1) * 0.1 * 1e3)

    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        return 0

    def nvmlDeviceGetPowerManagementLimit(self, handle: object) -> int:
        return 700_000


def test_a_run_with_energy_windows_fills_every_ok_rows_energy_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fixed_peaks: object
) -> None:
    """The wiring, config to row, on the CPU with NVML faked (300 W, 100 ms steps): one 1 s window per ok row."""
    import contextlib
    import functools

    from mhabench.measure.nvml import RoundSampler
    from mhabench.run import case as case_runner
    from mhabench.run import runner
    from mhabench.scenario.config import RunConfig

    gpu = TickingNvml(300.0)
    sampler = RoundSampler(gpu, "GPU-x", "nvml fake")
    monkeypatch.setattr(case_runner, "open_sampler", lambda device: contextlib.nullcontext(sampler))
    monkeypatch.setattr(energy_window, "WindowMeter", functools.partial(WindowMeter, clock=gpu.clock))
    config = RunConfig.model_validate(
        {
            "name": "energy",
            "device": "cpu",
            "implementations": ["naive", "fused"],
            "energy": {"windows": 1, "window_s": 1.0},
            "timing": {"min_run_time_s": 0.01, "max_run_time_s": 0.05, "min_samples": 2, "warmup_max_s": 0.02},
            "scenarios": [{"name": "s", "seq_len": 16, "d_model": 32, "heads": 2}],
        }
    )
    rows = runner.run(config, tmp_path).rows
    assert {row.case.impl for row in rows} == {"naive", "fused"}
    for row in rows:
        energy = row.energy
        assert energy is not None and energy.energy_source == "nvml fake" and energy.energy_windows == 1
        assert energy.average_power_w == pytest.approx(300.0, rel=0.02)  # reads land within 2 ticks of a step
        assert energy.energy_window_s is not None and energy.energy_window_s >= 1.0
        assert energy.energy_per_call_j is not None and energy.tokens_per_joule is not None
        assert energy.sm_clock_median_mhz == 1980.0  # the rounds' clock columns stay
    loaded = pd.read_csv(next(tmp_path.iterdir()) / "results.csv")
    assert loaded["energy_windows"].tolist() == [1, 1] and loaded["energy_per_call_j"].notna().all()


def test_energy_windows_are_off_by_default_and_the_option_sets_them() -> None:
    from mhabench.errors import ConfigError
    from mhabench.scenario.config import RunConfig
    from mhabench.scenario.overrides import with_overrides

    config = RunConfig.model_validate({"scenarios": [{"name": "s", "seq_len": 8, "d_model": 8, "heads": 2}]})
    assert config.energy.windows == 0 and config.energy.window_s == 2.0
    assert with_overrides(config, energy_windows=3).energy.windows == 3
    with pytest.raises(ConfigError, match=r"--energy-windows: must be between 0 and 100 \(got 101\)"):
        with_overrides(config, energy_windows=101)
    with pytest.raises(ValueError, match="window_s"):
        RunConfig.model_validate({**config.model_dump(), "energy": {"windows": 1, "window_s": 0.5}})
