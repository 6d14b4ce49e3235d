"""Interleaved rounds and warm-up by time, on the CPU with a fake clock that the fake calls advance.

Every call below moves a fake clock by a chosen number of milliseconds, so sample values, block
sizes, round counts and the order of calls are exact. One test compares our medians with
``torch.utils.benchmark.Timer``'s on recorded per-call times, both timers reading the same fake clock.
"""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch
from torch.utils import benchmark

from mhabench.measure.rounds import (
    HOST_ROUNDS,
    WARMUP_TOLERANCE,
    Block,
    CpuTimer,
    block_calls_for,
    interleaved_medians_ms,
    round_order,
    run_rounds,
    time_in_rounds,
    warm_up,
)
from mhabench.scenario.config import TimingConfig

CPU = torch.device("cpu")
# Blocks of min_run_time_s / min_samples = 10 ms; a round ends after 4 samples and 40 ms of each.
TIMING = TimingConfig(min_run_time_s=0.04, max_run_time_s=1.0, min_samples=4, warmup_runs=1, warmup_max_s=0.5)


class FakeClock:
    """Seconds that only the fake calls advance; ``log`` keeps which call ran, in order."""

    def __init__(self) -> None:
        self.now_s = 0.0
        self.log: list[str] = []

    def __call__(self) -> float:
        return self.now_s

    def call(self, name: str, durations_ms: Callable[[int], float]) -> Callable[[], None]:
        """A call that takes ``durations_ms(i)`` ms on its i-th run."""
        counter = itertools.count()

        def run() -> None:
            self.log.append(name)
            self.now_s += durations_ms(next(counter)) / 1e3

        return run

    def steady(self, name: str, duration_ms: float) -> Callable[[], None]:
        return self.call(name, lambda i: duration_ms)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def rounds_of(
    log: list[str], names: set[str], warmup_calls: int, calls_per_sample: dict[str, int]
) -> Iterator[list[str]]:
    """The order of each round, read back from the call log after warm-up (one entry per block)."""
    blocks = []
    position = warmup_calls
    while position < len(log):
        name = log[position]
        blocks.append(name)
        position += calls_per_sample[name]
    for start in range(0, len(blocks), len(names)):
        yield blocks[start : start + len(names)]


def test_every_implementation_gets_the_same_rounds(clock: FakeClock) -> None:
    calls = {"fast": clock.steady("fast", 1.0), "mid": clock.steady("mid", 2.5), "slow": clock.steady("slow", 25.0)}
    timed = time_in_rounds(calls, CPU, TIMING, seed=7, clock=clock)
    samples = {name: result.latency.times_ms for name, result in timed.items()}
    expected = {"fast": (1.0,) * 4, "mid": (2.5,) * 4, "slow": (25.0,) * 4}  # a sample is the mean per call
    assert samples == {name: pytest.approx(values) for name, values in expected.items()}
    per_sample = {name: result.latency.calls_per_sample for name, result in timed.items()}
    assert per_sample == {"fast": 10, "mid": 4, "slow": 1}  # blocks of about 10 ms, at least one call
    warmup_calls = sum(result.warmup.calls for result in timed.values())
    orders = list(rounds_of(clock.log, set(calls), warmup_calls, per_sample))
    assert len(orders) == 4 and all(sorted(order) == sorted(calls) for order in orders)  # each round: one of each
    assert orders == [round_order(list(calls), 7, r) for r in range(4)]
    assert len({tuple(order) for order in orders}) > 1  # the order changes between rounds


def test_round_orders_are_seeded_permutations() -> None:
    names = ["a", "b", "c", "d", "e"]
    first = [round_order(names, 3, r) for r in range(10)]
    assert first == [round_order(names, 3, r) for r in range(10)]  # reproducible
    assert first != [round_order(names, 4, r) for r in range(10)]
    assert first[2] == [names[i] for i in np.random.default_rng(3 + 2).permutation(5)]
    assert sorted(round_order(names, -5, 0)) == names  # a negative scenario seed works


def test_rounds_continue_until_the_minimum_time(clock: FakeClock) -> None:
    """4.5 ms calls in 10 ms blocks round to 2 calls (9 ms): 4 samples make only 36 ms, so a fifth round runs."""
    result = time_in_rounds({"x": clock.steady("x", 4.5)}, CPU, TIMING, 0, clock=clock)["x"]
    assert result.latency.calls_per_sample == 2 and result.latency.samples == 5


def test_each_implementation_spends_its_own_cap(clock: FakeClock) -> None:
    """100 samples fit in 45 ms for neither: a's 10 ms blocks stop at 5, b's 1 ms blocks at 45 (the old rule
    ended both at a's 5th round), and both say they were capped."""
    capped = TimingConfig(**{**TIMING.model_dump(), "min_samples": 100, "max_run_time_s": 0.045})
    calls = {"a": clock.steady("a", 10.0), "b": clock.steady("b", 1.0)}
    timed = time_in_rounds(calls, CPU, capped, seed=0, clock=clock)
    assert {name: result.latency.samples for name, result in timed.items()} == {"a": 5, "b": 45}
    assert all(result.latency.capped for result in timed.values())


# 0.5 s cap; min_run_time_s below 4 blocks' 36–40 ms, so the fake clock's rounding at 0.8 s cannot miss it.
SLOW_CAP = TimingConfig(**{**TIMING.model_dump(), "max_run_time_s": 0.5, "min_run_time_s": 0.035})


def test_a_slow_implementation_does_not_starve_the_fast_ones(clock: FakeClock) -> None:
    """A 400 ms call spends the 0.5 s cap in two rounds and leaves; the others still get their 4 samples.

    Under the old rule (the rounds end when any implementation reaches the cap) all three had two samples.
    """
    timing = SLOW_CAP
    calls = {"fast": clock.steady("fast", 1.0), "slow": clock.steady("slow", 400.0), "mid": clock.steady("mid", 2.5)}
    timed = time_in_rounds(calls, CPU, timing, seed=7, clock=clock)
    assert {name: result.latency.samples for name, result in timed.items()} == {"fast": 4, "slow": 2, "mid": 4}
    assert {name: result.latency.capped for name, result in timed.items()} == {
        "fast": False,
        "slow": True,
        "mid": False,
    }
    assert len({result.latency.rounds_id for result in timed.values()}) == 1  # still one set of rounds


def test_an_implementation_that_left_keeps_the_first_rounds(clock: FakeClock) -> None:
    """Round r visits round_order's permutation of every name, less those that left: the slow one takes rounds
    0 and 1 and never comes back, so its sample i is round i like everyone else's."""
    timing = SLOW_CAP
    calls = {"fast": clock.steady("fast", 1.0), "slow": clock.steady("slow", 400.0), "mid": clock.steady("mid", 2.5)}
    timed = time_in_rounds(calls, CPU, timing, seed=7, clock=clock)
    per_sample = {name: result.latency.calls_per_sample for name, result in timed.items()}
    warmup_calls = sum(result.warmup.calls for result in timed.values())
    blocks = [block for order in rounds_of(clock.log, set(calls), warmup_calls, per_sample) for block in order]
    expected = [name for r in range(4) for name in round_order(list(calls), 7, r) if r < 2 or name != "slow"]
    assert blocks == expected


class CountingTimer:
    """A BlockTimer of 10 ms blocks that counts which rounds asked for a host-timed call."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def block(self, calls: int) -> Block:
        self.kinds.append("block")
        return Block(10.0, 0.01)

    def sample(self, calls: int) -> Block:
        self.kinds.append("sample")
        return Block(10.0, 0.01, host_ms=11.0)


def test_only_the_first_rounds_take_a_host_timed_call() -> None:
    """A slow call's block is that one call: a host call in each of its rounds would double its timing."""
    timer = CountingTimer()
    run_rounds({"x": timer}, {"x": 1}, TimingConfig(min_run_time_s=0.01, min_samples=8), seed=0)
    assert timer.kinds == ["sample"] * HOST_ROUNDS + ["block"] * (8 - HOST_ROUNDS)


def test_warm_up_stops_when_block_times_settle(clock: FakeClock) -> None:
    """3 ms for three calls, then 1 ms: only two successive full blocks (≥ half of 10 ms) that agree end it."""
    timer = CpuTimer(clock.call("x", lambda i: 3.0 if i < 3 else 1.0), clock)
    warmup = warm_up(timer, target_block_s=0.01, min_calls=1, max_s=10.0, max_calls=10**6, clock=clock)
    assert warmup.settled and warmup.per_call_ms == pytest.approx(1.0) and warmup.block_calls == 10
    # 1 call (short), 2 calls at 3 ms (full), 3 at 1 ms (short: not compared), 6 (full), 10 (full, agrees)
    assert warmup.calls == 1 + 2 + 3 + 6 + 10
    assert warmup.seconds == pytest.approx(clock.now_s)


def test_warm_up_makes_at_least_warmup_runs_calls(clock: FakeClock) -> None:
    timer = CpuTimer(clock.steady("x", 1.0), clock)
    warmup = warm_up(timer, target_block_s=0.004, min_calls=100, max_s=10.0, max_calls=10**6, clock=clock)
    assert warmup.settled and warmup.calls >= 100 and warmup.block_calls == 4


def test_warm_up_respects_its_cap(clock: FakeClock) -> None:
    """Times that never settle (alternately 1 and 2 ms per call) stop at warmup_max_s, not later than one block."""
    timer = CpuTimer(clock.call("x", lambda i: 1.0 + i % 2), clock)
    warmup = warm_up(timer, target_block_s=0.001, min_calls=1, max_s=0.2, max_calls=10**6, clock=clock)
    assert not warmup.settled and 0.2 <= warmup.seconds <= 0.2 + 0.002
    assert abs(1.0 - 2.0) / 2.0 > WARMUP_TOLERANCE  # the two block times really disagree


def test_block_size_is_fixed_after_warm_up(clock: FakeClock) -> None:
    """The call becomes 4× slower once timed: blocks keep the warm-up's 10 calls, never re-estimated."""
    warm_calls = 1 + 2 + 4 + 8 + 10  # doubling until a block is full (8 ms ≥ 5 ms), then one 10 ms block agrees
    timed = time_in_rounds(
        {"x": clock.call("x", lambda i: 1.0 if i < warm_calls else 4.0)}, CPU, TIMING, 0, clock=clock
    )
    result = timed["x"]
    assert result.warmup.calls == warm_calls and result.latency.calls_per_sample == 10
    assert result.latency.times_ms == pytest.approx((4.0,) * 4) and len(clock.log) == warm_calls + 4 * 10


def test_block_calls_bounds() -> None:
    assert block_calls_for(1.0, 0.01, 100) == 10
    assert block_calls_for(50.0, 0.01, 100) == 1  # never zero calls
    assert block_calls_for(1e-6, 0.01, 100) == 100 and block_calls_for(0.0, 0.01, 100) == 100  # never unbounded


def test_garbage_collection_is_paused_inside_a_block() -> None:
    seen: list[bool] = []
    CpuTimer(lambda: seen.append(gc.isenabled())).block(3)
    assert seen == [False] * 3 and gc.isenabled()


def test_compile_time_and_names_come_through(clock: FakeClock) -> None:
    calls = {"a": clock.steady("a", 1.0), "b": clock.steady("b", 1.0)}
    timed = time_in_rounds(calls, CPU, TIMING, 0, compile_time_s={"a": 2.5}, clock=clock)
    assert timed["a"].latency.compile_time_s == 2.5 and np.isnan(timed["b"].latency.compile_time_s)
    assert timed["a"].latency.host_latency_ms is None  # no host figure on the CPU


def test_interleaving_spreads_drift_over_both_arms() -> None:
    """A machine that slows 1 % per measurement: two identical arms in shuffled rounds get nearly equal medians."""
    slowdown = itertools.count()

    def sampler() -> float:
        return 1.0 + 0.01 * next(slowdown)

    medians = interleaved_medians_ms({"ours": sampler, "theirs": sampler}, rounds=20)
    assert abs(medians["ours"] - medians["theirs"]) <= 0.02  # one after the other, they would differ by 0.20


RECORDED_MATMUL_MS = (0.21, 0.19, 0.2, 0.23, 0.18, 0.2, 0.22, 0.19)
"""Per-call times of a 128×128 float32 matmul, one thread, as a busy 2-core machine gave them: the calls both
timers time, on one fake clock, so the comparison does not depend on how fast or loaded this machine is."""


def test_medians_agree_with_torch_utils_benchmark_timer(clock: FakeClock) -> None:
    """The same calls, our rounds against ``blocked_autorange`` reading the same fake clock: both count calls
    per block alike (a block counted twice or half would read 0.5× or 2× the other)."""
    fn = clock.call("fn", lambda i: RECORDED_MATMUL_MS[i % len(RECORDED_MATMUL_MS)])
    timing = TimingConfig(min_run_time_s=0.05, max_run_time_s=0.5, min_samples=5, warmup_max_s=0.1)
    ours = time_in_rounds({"fn": fn}, CPU, timing, 0, clock=clock)["fn"].latency.latency_ms
    theirs = benchmark.Timer("fn()", globals={"fn": fn}, timer=clock).blocked_autorange(min_run_time=0.05).median * 1e3
    mean_ms = sum(RECORDED_MATMUL_MS) / len(RECORDED_MATMUL_MS)
    assert ours == pytest.approx(mean_ms, rel=0.02) and theirs == pytest.approx(mean_ms, rel=0.02)
    assert ours == pytest.approx(theirs, rel=0.03)
