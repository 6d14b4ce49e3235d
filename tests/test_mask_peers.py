"""Who runs which attention pattern (issue 19): unsupported rows with their reasons, and the optional GPU peers'
pattern arguments, checked on the CPU through fake ``flash_attn`` and ``xformers.ops`` modules.

The fakes compute what the real kernels document (flash-attn: bottom-right causal, ``window_size=(left,
right)``, soft-cap, ALiBi ``-slope·|i − j|``, ``cu_seqlens`` segments; xFormers: block-diagonal masks made
causal and local over ``window_size`` keys), so a peer that hands them the wrong layout or arguments gives a
wrong output, besides the recorded arguments being checked.
"""

from __future__ import annotations

import itertools
import math
import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
from conftest import FIXED_PEAKS, TINY_TIMING
from plain_cases import plain_case

from mhabench.impls import build
from mhabench.impls.reference import reference_attention
from mhabench.impls.registry import EVERY_PATTERN, Capabilities
from mhabench.impls.weights import AttentionWeights
from mhabench.pattern import AttentionPattern
from mhabench.run import runner
from mhabench.scenario.loading import parse_config

D_MODEL, HEADS = 32, 4
Rows = dict[tuple[str, str], dict[str, Any]]


# --- unsupported rows -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pattern_run(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    """(scenario, implementation) → the row of one tiny run over a window, a soft-cap and ALiBi."""
    base = {"seq_len": 8, "d_model": 16, "heads": 2}
    config = parse_config(
        {
            "name": "masks",
            "device": "cpu",
            "threads": 1,
            "timing": dict(TINY_TIMING),
            "implementations": ["naive", "fused", "torch_mha", "additive", "shared_qk", "flash_attn", "xformers"],
            "scenarios": [
                {"name": "window", "mask": "sliding_window", "window": 3, **base},
                {"name": "softcap", "mask": "causal", "score_mod": "softcap", "softcap": 2.0, **base},
                {"name": "alibi", "score_mod": "alibi", **base},
            ],
        },
        "masks.yaml",
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("mhabench.run.runner.device_peaks", lambda device, dtype: FIXED_PEAKS)
        result = runner.run(config, tmp_path_factory.mktemp("runs"))
    return {(row["scenario"], row["impl"]): row for row in result.frame.to_dict(orient="records")}


@pytest.mark.parametrize(
    ("scenario", "impl", "reason"),
    [
        ("window", "torch_mha", "torch_mha: no sliding_window mask"),
        ("window", "additive", "additive: no sliding_window mask"),
        ("softcap", "fused", "fused: no softcap score modifier"),
        ("softcap", "torch_mha", "torch_mha: no softcap score modifier"),
        ("alibi", "additive", "additive: no alibi score modifier"),
        ("alibi", "shared_qk", "shared_qk: no alibi score modifier"),
        ("window", "flash_attn", "flash_attn: flash_attn not installed"),
        ("alibi", "flash_attn", "flash_attn: flash_attn not installed"),
        ("window", "xformers", "xformers: xformers not installed"),
        ("softcap", "xformers", "xformers: xformers not installed"),
    ],
)
def test_a_pattern_an_implementation_cannot_run_is_an_unsupported_row(
    pattern_run: Rows, scenario: str, impl: str, reason: str
) -> None:
    row = pattern_run[(scenario, impl)]
    assert row["status"] == "unsupported"
    assert row["error"].startswith(reason), row["error"]


@pytest.mark.parametrize(
    ("scenario", "impl"),
    [("window", "naive"), ("softcap", "naive"), ("alibi", "naive"), ("window", "fused"), ("alibi", "fused")],
)
def test_the_implementations_that_declare_a_pattern_run_it_and_pass_the_check(
    pattern_run: Rows, scenario: str, impl: str
) -> None:
    row = pattern_run[(scenario, impl)]
    assert (row["status"], row["error"] or "") == ("ok", "")
    assert row["mask"] == {"window": "sliding_window", "softcap": "causal", "alibi": "none"}[scenario]
    if impl == "fused":  # which SDPA backend took the dense mask is on the row; it cannot skip masked blocks
        assert row["sdpa_backend"] and row["skips_masked_work"] is False


def test_every_row_of_the_run_has_a_status(pattern_run: Rows) -> None:
    assert len(pattern_run) == 3 * 7
    assert {row["status"] for row in pattern_run.values()} == {"ok", "unsupported"}


def test_a_window_without_a_windowed_decode_step_is_unsupported_in_decode() -> None:
    capabilities = Capabilities(decode=True, masks=frozenset({"none", "causal", "sliding_window"}))
    window = AttentionPattern(mask="sliding_window", window=4)
    prefill = plain_case("t", 1, 8, 32, 2, pattern=window).workload()
    decode = plain_case("t", 1, 8, 32, 2, pattern=window, phase="decode").workload()
    shape = {"device_type": "cpu", "dtype": "float32"}
    assert capabilities.unsupported_reason("plugin", prefill, **shape) is None
    reason = capabilities.unsupported_reason("plugin", decode, **shape)
    assert reason == "plugin: no windowed decode step"
    assert Capabilities(decode=True, **EVERY_PATTERN).unsupported_reason("every", decode, **shape) is None


# --- the peers' kernels, faked on the CPU ------------------------------------------------------------


def kernel_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    visible: torch.Tensor,
    *,
    softcap: float = 0.0,
    slopes: torch.Tensor | None = None,
) -> torch.Tensor:
    """One sequence (L, h, d) against (L, kv, d) keys, in float64, query head i on K/V head i // group."""
    heads, kv_heads, head_dim = q.shape[1], k.shape[1], q.shape[2]
    group = heads // kv_heads
    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    k64, v64 = k64.repeat_interleave(group, dim=1), v64.repeat_interleave(group, dim=1)
    scores = torch.einsum("ihd,jhd->hij", q64, k64) / math.sqrt(head_dim)
    if softcap:
        scores = softcap * torch.tanh(scores / softcap)
    if slopes is not None:
        length = q.shape[0]
        distance = (torch.arange(length)[:, None] - torch.arange(length)[None, :]).abs()
        scores = scores - slopes.to(torch.float64)[:, None, None] * distance
    scores = scores.masked_fill(~visible, -math.inf)
    return torch.einsum("hij,jhd->ihd", scores.softmax(-1), v64).to(q.dtype)


def flash_visible(length: int, causal: bool, window_size: tuple[int, int]) -> torch.Tensor:
    """flash-attn's mask for equal query and key lengths: j ≤ i when causal; i − left ≤ j ≤ i + right
    (−1: unbounded)."""
    i, j = torch.arange(length)[:, None], torch.arange(length)[None, :]
    left, right = window_size
    visible = torch.ones(length, length, dtype=torch.bool)
    if causal:
        visible &= j <= i
    if left >= 0:
        visible &= j >= i - left
    if right >= 0:
        visible &= j <= i + right
    return visible


class FakeFlashAttn:
    """A ``flash_attn`` module that records each call and computes what the kernel documents."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def module(self) -> ModuleType:
        fake = ModuleType("flash_attn")
        fake.flash_attn_qkvpacked_func = self.qkvpacked  # type: ignore[attr-defined]
        fake.flash_attn_func = self.func  # type: ignore[attr-defined]
        fake.flash_attn_varlen_func = self.varlen  # type: ignore[attr-defined]
        return fake

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, **options: Any) -> torch.Tensor:
        unknown = set(options) - {"window_size", "softcap", "alibi_slopes"}
        assert not unknown, unknown
        visible = flash_visible(q.shape[0], causal, options.get("window_size", (-1, -1)))
        return kernel_attention(
            q, k, v, visible, softcap=options.get("softcap", 0.0), slopes=options.get("alibi_slopes")
        )

    def qkvpacked(self, qkv: torch.Tensor, causal: bool = False, **options: Any) -> torch.Tensor:
        self.calls.append(("qkvpacked", {"shape": tuple(qkv.shape), "causal": causal, **options}))
        q, k, v = qkv.unbind(2)
        return torch.stack([self.attend(*row, causal, **options) for row in zip(q, k, v, strict=True)])

    def func(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, **options: Any) -> Any:
        self.calls.append(("func", {"q": tuple(q.shape), "k": tuple(k.shape), "causal": causal, **options}))
        return torch.stack([self.attend(*row, causal, **options) for row in zip(q, k, v, strict=True)])

    def varlen(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        max_seqlen_q: int,
        max_seqlen_k: int,
        causal: bool = False,
        **options: Any,
    ) -> torch.Tensor:
        assert cu_seqlens_q.dtype == torch.int32 and torch.equal(cu_seqlens_q, cu_seqlens_k)
        bounds = cu_seqlens_q.tolist()
        self.calls.append(
            ("varlen", {"cu_seqlens": bounds, "max_seqlen": (max_seqlen_q, max_seqlen_k), "causal": causal, **options})
        )
        out = torch.empty_like(q)
        for start, stop in itertools.pairwise(bounds):
            out[start:stop] = self.attend(q[start:stop], k[start:stop], v[start:stop], causal, **options)
        return out


def float32_case(heads: int = HEADS, kv_heads: int = HEADS, tokens: tuple[int, int] = (2, 8), seed: int = 0) -> Any:
    weights = AttentionWeights.random(D_MODEL, bias=True, seed=seed, kv_dim=kv_heads * D_MODEL // heads)
    x = torch.randn(*tokens, D_MODEL, generator=torch.Generator().manual_seed(seed + 1))
    return weights, x


def agrees(output: torch.Tensor, weights: AttentionWeights, x: torch.Tensor, pattern: AttentionPattern) -> bool:
    expected = reference_attention(weights, x, HEADS, pattern)
    return float((output.to(torch.float64) - expected).abs().max() / expected.abs().max()) < 1e-4


@pytest.fixture
def fake_flash(monkeypatch: pytest.MonkeyPatch) -> FakeFlashAttn:
    fake = FakeFlashAttn()
    monkeypatch.setitem(sys.modules, "flash_attn", fake.module())
    return fake


FLASH_CASES = [
    # pattern, kv_heads, input rows × tokens, the kernel called, the arguments it must get
    (AttentionPattern(mask="causal"), HEADS, (2, 8), "qkvpacked", {"causal": True}),
    (AttentionPattern(mask="sliding_window", window=3), HEADS, (2, 8), "qkvpacked", {"window_size": (2, 0)}),
    (AttentionPattern(mask="sliding_window", window=1), 2, (2, 8), "func", {"window_size": (0, 0), "causal": True}),
    (AttentionPattern(mask="causal", score_mod="softcap", softcap=0.75), HEADS, (1, 8), "qkvpacked", {"softcap": 0.75}),
    (AttentionPattern(score_mod="alibi"), 2, (2, 8), "func", {"causal": False}),
    (
        AttentionPattern(mask="document", lengths=(5, 8, 3)),
        HEADS,
        (3, 8),
        "varlen",
        {"cu_seqlens": [0, 5, 8, 16, 19, 24], "max_seqlen": (8, 8), "causal": True},
    ),
    (
        AttentionPattern(mask="document", lengths=(5, 8, 3), layout="packed"),
        2,
        (1, 16),
        "varlen",
        {"cu_seqlens": [0, 5, 13, 16], "max_seqlen": (8, 8), "causal": True},
    ),
    (
        AttentionPattern(mask="none", lengths=(2, 6), layout="packed"),
        HEADS,
        (1, 8),
        "varlen",
        {"cu_seqlens": [0, 2, 8], "max_seqlen": (6, 6), "causal": False},
    ),
    (
        AttentionPattern(mask="sliding_window", window=2, lengths=(6, 4), score_mod="alibi"),
        HEADS,
        (2, 6),
        "varlen",
        {"cu_seqlens": [0, 6, 10, 12], "window_size": (1, 0), "causal": True},
    ),
]


@pytest.mark.parametrize(("pattern", "kv_heads", "tokens", "kernel", "arguments"), FLASH_CASES)
def test_flash_attn_gets_the_pattern_as_its_own_arguments(
    fake_flash: FakeFlashAttn,
    pattern: AttentionPattern,
    kv_heads: int,
    tokens: tuple[int, int],
    kernel: str,
    arguments: dict[str, Any],
) -> None:
    weights, x = float32_case(kv_heads=kv_heads, tokens=tokens)
    output = build("flash_attn", weights, HEADS, pattern)(x)
    (call,) = fake_flash.calls
    assert call[0] == kernel
    assert call[1].items() >= arguments.items()
    if pattern.score_mod == "alibi":
        slopes = call[1]["alibi_slopes"]
        assert slopes.dtype == torch.float32 and slopes.tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]
    else:
        assert "alibi_slopes" not in call[1]
    if pattern.mask != "sliding_window":
        assert "window_size" not in call[1]
    assert output.shape == x.shape
    assert agrees(output, weights, x, pattern)


def test_the_fake_flash_kernel_can_disagree(fake_flash: FakeFlashAttn, monkeypatch: pytest.MonkeyPatch) -> None:
    """A window handed over one key too wide is caught by the output check above."""
    pattern = AttentionPattern(mask="sliding_window", window=3)
    weights, x = float32_case()
    module = build("flash_attn", weights, HEADS, pattern)
    monkeypatch.setattr(type(module), "kernel_options", lambda self, device: {"window_size": (3, 0)})
    assert not agrees(module(x), weights, x, pattern)


# --- xFormers ---------------------------------------------------------------------------------------


class FakeXformers:
    """``xformers.ops`` with the mask classes the peer builds and a memory-efficient attention that applies them."""

    def __init__(self) -> None:
        self.masks: list[Any] = []
        self.calls: list[dict[str, Any]] = []
        log = self.masks

        class LowerTriangularMask:
            pass

        class BlockDiagonalMask:
            causal = False
            window = 0

            def __init__(self, seqlens: list[int]) -> None:
                self.seqlens = list(seqlens)

            @classmethod
            def from_seqlens(cls, q_seqlen: list[int]) -> BlockDiagonalMask:
                mask = cls(q_seqlen)
                log.append(("from_seqlens", list(q_seqlen)))
                return mask

            def make_causal(self) -> BlockDiagonalCausalMask:
                log.append(("make_causal",))
                return BlockDiagonalCausalMask(self.seqlens)

        class BlockDiagonalCausalMask(BlockDiagonalMask):
            causal = True

            def make_local_attention(self, window_size: int) -> BlockDiagonalCausalMask:
                log.append(("make_local_attention", window_size))
                local = BlockDiagonalCausalMask(self.seqlens)
                local.window = window_size
                return local

        self.lower_triangular = LowerTriangularMask
        self.block_diagonal = BlockDiagonalMask

    def module(self) -> ModuleType:
        ops = ModuleType("xformers.ops")
        ops.LowerTriangularMask = self.lower_triangular  # type: ignore[attr-defined]
        ops.fmha = SimpleNamespace(attn_bias=SimpleNamespace(BlockDiagonalMask=self.block_diagonal))  # type: ignore[attr-defined]
        ops.memory_efficient_attention = self.memory_efficient_attention  # type: ignore[attr-defined]
        return ops

    def visible(self, bias: Any, tokens: int) -> torch.Tensor:
        """xFormers' mask semantics: blocks of ``seqlens``; causal j ≤ i; local: the last ``window`` keys."""
        if bias is None:
            return torch.ones(tokens, tokens, dtype=torch.bool)
        i, j = torch.arange(tokens)[:, None], torch.arange(tokens)[None, :]
        if isinstance(bias, self.lower_triangular):
            return j <= i
        block = torch.repeat_interleave(torch.arange(len(bias.seqlens)), torch.tensor(bias.seqlens))
        assert len(block) == tokens
        start = torch.tensor([0, *bias.seqlens]).cumsum(0)[block]
        position_i, position_j = (i - start[:, None]), (j - start[None, :])
        visible = block[:, None] == block[None, :]
        if bias.causal:
            visible &= position_j <= position_i
        if bias.window:
            visible &= position_j > position_i - bias.window
        return visible

    def memory_efficient_attention(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_bias: Any = None
    ) -> Any:
        self.calls.append({"q": tuple(q.shape), "k": tuple(k.shape), "bias": attn_bias})
        assert q.shape == k.shape == v.shape and q.dim() in (4, 5)
        if isinstance(attn_bias, self.block_diagonal):
            assert q.shape[0] == 1  # block-diagonal masks run over one flattened row
        flat = [t.flatten(2, 3) if t.dim() == 5 else t for t in (q, k, v)]
        visible = self.visible(attn_bias, q.shape[1])
        out = torch.stack([kernel_attention(*row, visible) for row in zip(*flat, strict=True)])
        return out.view(q.shape)


@pytest.fixture
def fake_xformers(monkeypatch: pytest.MonkeyPatch) -> FakeXformers:
    fake = FakeXformers()
    monkeypatch.setitem(sys.modules, "xformers", ModuleType("xformers"))
    monkeypatch.setitem(sys.modules, "xformers.ops", fake.module())
    return fake


XFORMERS_CASES = [
    # pattern, kv_heads, input rows × tokens, the mask calls, the q shape the kernel sees
    (AttentionPattern(mask="causal"), HEADS, (2, 8), [], (2, 8, HEADS, 8)),
    (AttentionPattern(), 2, (2, 8), [], (2, 8, 2, 2, 8)),
    (
        AttentionPattern(mask="sliding_window", window=3),
        HEADS,
        (2, 8),
        [("from_seqlens", [8, 8]), ("make_causal",), ("make_local_attention", 3)],
        (1, 16, HEADS, 8),
    ),
    (
        AttentionPattern(mask="sliding_window", window=2, lengths=(5, 8, 3)),
        2,
        (3, 8),
        [("from_seqlens", [5, 3, 8, 3, 5]), ("make_causal",), ("make_local_attention", 2)],
        (1, 24, 2, 2, 8),
    ),
    (
        AttentionPattern(mask="document", lengths=(5, 8, 3), layout="packed"),
        HEADS,
        (1, 16),
        [("from_seqlens", [5, 8, 3]), ("make_causal",)],
        (1, 16, HEADS, 8),
    ),
    (
        AttentionPattern(mask="none", lengths=(7, 2)),
        HEADS,
        (2, 8),
        [("from_seqlens", [7, 1, 2, 6])],
        (1, 16, HEADS, 8),
    ),
]


@pytest.mark.parametrize(("pattern", "kv_heads", "tokens", "mask_calls", "q_shape"), XFORMERS_CASES)
def test_xformers_gets_the_pattern_as_its_mask_objects(
    fake_xformers: FakeXformers,
    pattern: AttentionPattern,
    kv_heads: int,
    tokens: tuple[int, int],
    mask_calls: list[tuple[Any, ...]],
    q_shape: tuple[int, ...],
) -> None:
    weights, x = float32_case(kv_heads=kv_heads, tokens=tokens)
    output = build("xformers", weights, HEADS, pattern)(x)
    (call,) = fake_xformers.calls
    assert fake_xformers.masks == mask_calls
    assert call["q"] == q_shape
    if pattern.plain:
        assert (call["bias"] is None) == (not pattern.causal)
    assert output.shape == x.shape
    assert agrees(output, weights, x, pattern)


def test_a_too_wide_fake_xformers_window_disagrees(
    fake_xformers: FakeXformers, monkeypatch: pytest.MonkeyPatch
) -> None:
    pattern = AttentionPattern(mask="sliding_window", window=3)
    weights, x = float32_case()
    module = build("xformers", weights, HEADS, pattern)
    wider = AttentionPattern(mask="sliding_window", window=4)
    monkeypatch.setattr(module, "pattern", wider)
    assert not agrees(module(x), weights, x, pattern)
    assert fake_xformers.masks[-1] == ("make_local_attention", 4)
