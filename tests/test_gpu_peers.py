"""The GPU peers without a GPU: flash_attn and xformers wrappers against fake packages that follow their
documented layouts (b, n, heads, d_k), the CUDA no-kernel text of the forced SDPA backends, and which
kernels skip masked work."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.nn.functional as F
from plain_cases import plain_case

from mhabench.errors import UnsupportedError
from mhabench.impls import build, flash_attn_peer, get_spec, xformers_peer  # noqa: F401  (registers the peers)
from mhabench.impls.reference import reference_attention
from mhabench.impls.sdpa import kernel_skips_masked_work
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import CAUSAL, PLAIN


def sdpa_bnhd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Attention on (b, n, heads, d) inputs with K/V heads broadcast to query head i // group."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)


@pytest.fixture
def fake_flash_attn(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def flash_attn_func(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False) -> torch.Tensor:
        calls.append(f"func {tuple(q.shape)} {tuple(k.shape)}")
        return sdpa_bnhd(q, k, v, causal)

    def flash_attn_qkvpacked_func(qkv: torch.Tensor, causal: bool = False) -> torch.Tensor:
        calls.append(f"packed {tuple(qkv.shape)}")
        assert qkv._base is not None  # a view of the packed GEMM's output, not a copy
        return sdpa_bnhd(*qkv.unbind(2), causal)

    module = types.SimpleNamespace(flash_attn_func=flash_attn_func, flash_attn_qkvpacked_func=flash_attn_qkvpacked_func)
    monkeypatch.setitem(sys.modules, "flash_attn", module)
    return calls


@pytest.fixture
def fake_xformers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    class LowerTriangularMask:
        pass

    def memory_efficient_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_bias: object = None):
        calls.append(f"{q.dim()}-D {tuple(q.shape)}")
        flat = [t.flatten(2, 3) if t.dim() == 5 else t for t in (q, k, v)]  # BMGHK → BM(G·H)K, K/V expanded
        return sdpa_bnhd(*flat, isinstance(attn_bias, LowerTriangularMask)).view(q.shape)

    ops = types.SimpleNamespace(
        memory_efficient_attention=memory_efficient_attention, LowerTriangularMask=LowerTriangularMask
    )
    monkeypatch.setitem(sys.modules, "xformers", types.SimpleNamespace(ops=ops))
    monkeypatch.setitem(sys.modules, "xformers.ops", ops)
    return calls


CASES = [(8, 8, True, True), (8, 2, True, False), (4, 1, False, True), (4, 4, False, False)]


def check(name: str, heads: int, kv_heads: int, causal: bool, bias: bool) -> None:
    weights = AttentionWeights.random(64, bias=bias, seed=5, kv_dim=kv_heads * 64 // heads)
    x = torch.randn(2, 11, 64, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        out = build(name, weights, heads, CAUSAL if causal else PLAIN)(x)
    torch.testing.assert_close(
        out.double(), reference_attention(weights, x, heads, CAUSAL if causal else PLAIN), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize(("heads", "kv_heads", "causal", "bias"), CASES)
def test_flash_attn_wrapper_layout(
    fake_flash_attn: list[str], heads: int, kv_heads: int, causal: bool, bias: bool
) -> None:
    check("flash_attn", heads, kv_heads, causal, bias)
    head_dim = 64 // heads
    if kv_heads == heads:
        assert fake_flash_attn == [f"packed (2, 11, 3, {heads}, {head_dim})"]
    else:
        assert fake_flash_attn == [f"func (2, 11, {heads}, {head_dim}) (2, 11, {kv_heads}, {head_dim})"]


@pytest.mark.parametrize(("heads", "kv_heads", "causal", "bias"), CASES)
def test_xformers_wrapper_layout(fake_xformers: list[str], heads: int, kv_heads: int, causal: bool, bias: bool) -> None:
    check("xformers", heads, kv_heads, causal, bias)
    group, head_dim = heads // kv_heads, 64 // heads
    shape = (2, 11, heads, head_dim) if group == 1 else (2, 11, kv_heads, group, head_dim)
    assert fake_xformers == [f"{len(shape)}-D {shape}"]


def test_flash_attn_head_dim_above_256_is_unsupported(fake_flash_attn: list[str]) -> None:
    weights = AttentionWeights.random(512, seed=1)
    with pytest.raises(UnsupportedError, match="head_dim 512 > 256"):
        build("flash_attn", weights, 1, PLAIN)(torch.randn(1, 4, 512))


@pytest.mark.parametrize(("name", "package"), [("flash_attn", "flash_attn"), ("xformers", "xformers.ops")])
def test_missing_package_is_unsupported(monkeypatch: pytest.MonkeyPatch, name: str, package: str) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import raises ImportError
    with pytest.raises(UnsupportedError, match=f"^{name}: not installed"):
        build(name, AttentionWeights.random(32, seed=1), 4, PLAIN)(torch.randn(1, 4, 32))


@pytest.mark.parametrize("name", ["flash_attn", "xformers"])
def test_peers_declare_cuda_and_their_package(name: str) -> None:
    capabilities = get_spec(name).capabilities
    assert capabilities.devices == frozenset({"cuda"}) and capabilities.requires[0] == name.split(".")[0]
    assert not capabilities.decode and capabilities.train and capabilities.grouped_kv
    reason = capabilities.unsupported_reason(
        name, plain_case("t", 1, 8, 128, 8).workload(), dtype="bfloat16", device_type="cpu"
    )
    assert reason is not None and reason.startswith(f"{name}: ")


def test_cuda_no_kernel_text_becomes_unsupported(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_kernel(*args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError("No available kernel.  Aborting execution.")

    monkeypatch.setattr(F, "scaled_dot_product_attention", no_kernel)
    with pytest.raises(UnsupportedError, match=r"has no FLASH_ATTENTION SDPA kernel for cpu/float32 with head_dim 8"):
        build("sdpa_flash", AttentionWeights.random(32, seed=1), 4, PLAIN)(torch.randn(1, 4, 32))


def test_other_runtime_errors_are_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(F, "scaled_dot_product_attention", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        build("sdpa_flash", AttentionWeights.random(32, seed=1), 4, PLAIN)(torch.randn(1, 4, 32))


@pytest.mark.parametrize(
    ("backend", "impl", "skips"),
    [
        ("flash", "fused", True),
        ("cudnn", "sdpa_cudnn", True),
        ("efficient", "fused", True),
        ("math", "fused", False),
        ("", "naive", False),
        ("", "flex", True),
        ("", "flash_attn", True),
        ("", "xformers", True),
        ("efficient,math", "fused", False),
        ("", "compiled", False),
    ],
)
def test_which_kernels_skip_masked_work(backend: str, impl: str, skips: bool) -> None:
    assert kernel_skips_masked_work(backend, impl) is skips


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_forced_flash_without_a_kernel_is_unsupported_on_cuda(dtype: torch.dtype) -> None:
    """fp32 has no flash kernel at all; fp16 with head_dim 512 is beyond flash's 256."""
    heads = 8 if dtype == torch.float32 else 2
    weights = AttentionWeights.random(1024, dtype=dtype, device="cuda")
    with pytest.raises(UnsupportedError, match="has no FLASH_ATTENTION SDPA kernel"), torch.no_grad():
        build("sdpa_flash", weights, heads, PLAIN)(torch.randn(1, 64, 1024, device="cuda", dtype=dtype))
