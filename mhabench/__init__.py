"""mhabench: an ablation and benchmarking lab for multi-head attention."""

from importlib.metadata import PackageNotFoundError, version

from mhabench import cost
from mhabench.impls import Capabilities, available_implementations, build, register
from mhabench.impls.weights import AttentionWeights

try:
    __version__ = version("mhabench")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["AttentionWeights", "Capabilities", "__version__", "available_implementations", "build", "cost", "register"]
