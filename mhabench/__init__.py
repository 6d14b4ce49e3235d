"""mhabench: an ablation and benchmarking lab for multi-head attention."""

from mhabench import cost, pattern
from mhabench.impls import Capabilities, available_implementations, build, register
from mhabench.impls.weights import AttentionWeights
from mhabench.version import __version__

__all__ = [
    "AttentionWeights",
    "Capabilities",
    "__version__",
    "available_implementations",
    "build",
    "cost",
    "pattern",
    "register",
]
