"""The thresholds of advice's rules, each named once and explained here and in docs/advise.md."""

from __future__ import annotations

TIE_MARGIN = 0.03
"""A lead under 3 % is a tie even when its interval excludes 1."""

HOST_US_PER_OP = {"cpu": 0.9}
"""A lower bound on the host time eager PyTorch spends on one dispatched aten op, µs, by device kind."""

LAUNCH_BOUND_SHARE = 0.5
"""CPU: a call is launch-bound when host dispatch is at least half of it, ops_per_call × HOST_US_PER_OP ≥
half the median latency, and it is under LOW_EFFICIENCY of its roof."""

HOST_OVER_DEVICE = 1.5
"""CUDA: a call is launch-bound when one synchronous call's host time is at least 1.5× its device time
and it is under LOW_EFFICIENCY of its roof: the host, not the GPU, sets the pace."""

LOW_EFFICIENCY = 0.25
"""Below a quarter of the attainable throughput (compared in whole percent, as printed) a row is far from
both roofs: neither bandwidth nor compute limits it, the layout (small GEMMs, extra passes) or the host
does. At or above it a row is never called launch-bound."""
