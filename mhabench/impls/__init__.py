"""Attention implementations. Importing this package registers every built-in one, in this order."""

# isort: skip_file
import importlib
import pkgutil

from mhabench.impls import naive, per_head, fused, torch_mha  # noqa: F401  (registration)
from mhabench.impls import shared_qk, unscaled, additive, full_dim_heads  # noqa: F401  (ablations)
from mhabench.impls import sdpa, sdpa_nested, compiled, flex  # noqa: F401  (peers)
from mhabench.impls import flash_attn_peer, xformers_peer  # noqa: F401  (optional GPU peers)
from mhabench.impls import fused_fp8  # noqa: F401  (fp8 on Hopper: torch._scaled_mm + cuDNN's frontend)
from mhabench.impls import hf_attention  # noqa: F401  (optional: transformers' attention functions)
from mhabench.impls import tensor_parallel as tp  # noqa: F401  (tensor-parallel: tp_fused, tp_naive; torchrun)

from mhabench.impls.registry import (
    Capabilities,
    ImplSpec,
    available_implementations,
    build,
    core_implementations,
    get_spec,
    register,
)

# A new implementation file registers itself without an edit here: every other module of the package is imported
# too, after the built-ins above and in name order, so the built-ins keep their place in `mhabench list`.
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "Capabilities",
    "ImplSpec",
    "available_implementations",
    "build",
    "core_implementations",
    "get_spec",
    "register",
]
