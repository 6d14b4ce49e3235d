"""The thresholds of advice's rules, each named once and explained here and in docs/advise.md.

A rule that calls something tied, launch-bound or far from its roof does so by one of these numbers;
changing one changes every statement that uses it, and the tests of each rule pin its boundary. Whether a
one-process lead would replicate is no fixed margin here: it is the machine's own measured between-process
spread (``mhabench calibrate``; the ``one_process`` caveat rule in ``caveats.py``).
"""

from __future__ import annotations

TIE_MARGIN = 0.03
"""A lead under 3 % is a tie even when its interval excludes 1. The paired interval covers the noise
within one process; between processes this project's CPU ratios moved by 1–4 %
(docs/findings/reproducibility.md), so a smaller lead would not survive the next run."""

HOST_US_PER_OP = {"cpu": 0.9}
"""A lower bound on the host time eager PyTorch spends on one dispatched aten op, µs, by device kind.
cpu: a 1-element ``torch.add`` takes 0.94 µs on this project's 2-vCPU VM (torch 2.13.0+cpu), the
cheapest op there is; a real op (allocation, larger shapes) costs more, so host shares computed from it
are lower bounds. No cuda entry: there launches are asynchronous and overlap device execution, so ops ×
launch cost says nothing of who sets the pace (the H100 run's fused rows would read launch-bound at 57 %
of the compute roof); ``HOST_OVER_DEVICE`` decides there."""

LAUNCH_BOUND_SHARE = 0.5
"""CPU: a call is launch-bound when host dispatch is at least half of it, ops_per_call × HOST_US_PER_OP ≥
half the median latency, and it is under LOW_EFFICIENCY of its roof. At that point fewer ops (a fused
kernel) pay more than faster ones."""

HOST_OVER_DEVICE = 1.5
"""CUDA: a call is launch-bound when one synchronous call's host time is at least 1.5× its device time
and it is under LOW_EFFICIENCY of its roof: the host, not the GPU, sets the pace. The host time alone
does not say it, since it includes a synchronisation the device time does not; a row near its roof is
limited by the device whatever the host costs."""

LOW_EFFICIENCY = 0.25
"""Below a quarter of the attainable throughput (compared in whole percent, as printed) a row is far from
both roofs: neither bandwidth nor compute limits it, the layout (small GEMMs, extra passes) or the host
does. At or above it a row is never called launch-bound."""
