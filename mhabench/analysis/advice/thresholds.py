"""The thresholds of advice's rules, each named once and explained here and in docs/advise.md.

A rule that calls something tied, launch-bound or far from its roof does so by one of these numbers;
changing one changes every statement that uses it, and the tests of each rule pin its boundary.
"""

from __future__ import annotations

TIE_MARGIN = 0.03
"""A lead under 3 % is a tie even when its interval excludes 1. The paired interval covers the noise
within one process; between processes this project's CPU ratios moved by 1–4 %
(docs/findings/reproducibility.md), so a smaller lead would not survive the next run."""

REPRODUCE_MARGIN = 0.10
"""A winner by less than 10 % in a run of one repeat rests on one process: between processes this
project's CPU ratios moved by up to 14 % (docs/findings/reproducibility.md), and four back-to-back
default runs named opposite winners at a 4–8 % lead (docs/findings/advise.md). Such picks get a caveat."""

HOST_US_PER_OP = {"cpu": 0.9, "cuda": 3.5}
"""A lower bound on the host time eager PyTorch spends on one dispatched aten op, µs, by device kind.
cpu: a 1-element ``torch.add`` takes 0.94 µs on this project's 2-vCPU VM (torch 2.13.0+cpu), the
cheapest op there is. cuda: the H100 GPU check's ``cuda_graphs`` figures (shared/runs), eager host
186.6 µs against graph replay 48.5 µs for a naive causal call of 39 ops, (186.6 − 48.5) / 39 = 3.5 µs.
A real op (allocation, larger shapes) costs more, so host shares computed from it are lower bounds."""

LAUNCH_BOUND_SHARE = 0.5
"""A call is launch-bound when host dispatch is at least half of it: ops_per_call × HOST_US_PER_OP ≥
half the median latency. At that point fewer ops (a fused kernel, CUDA graphs) pay more than faster ones."""

HOST_OVER_DEVICE = 1.5
"""CUDA: a call whose synchronous host time is at least 1.5× its device time is launch-bound too: in a
loop that waits for each call, the host, not the GPU, sets the pace."""

LOW_EFFICIENCY = 0.25
"""Below a quarter of the attainable throughput a row is far from both roofs: neither bandwidth nor
compute limits it, the layout (small GEMMs, extra passes) or the host does."""
