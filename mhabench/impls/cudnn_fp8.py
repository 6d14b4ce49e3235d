"""cuDNN's fp8 attention through NVIDIA's Python frontend (``nvidia-cudnn-frontend``, imported as ``cudnn``).

One graph per attention shape, built once and cached, as a model would hold it: Q, K and V are e4m3
views of the packed Q/K/V tensor (row stride q_dim + 2·kv_dim, so no copy splits them), the output O
is e4m3 token-major (b, n, h·d_k), ready for the W_o GEMM. The graph's scalars are the scales of
:mod:`mhabench.impls.fp8`: one descale for Q, K and V (they share the packed tensor's scale), P's
fixed scale, and O's scale = V's. ``Amax_O`` and ``Amax_S`` are declared outputs, as in the frontend's
own fp8 tests: on Hopper cuDNN's backend engines run either way (frontend 1.32 notes that declaring
``Amax_S`` keeps its Blackwell engines off).

The frontend API used (checked against NVIDIA/cudnn-frontend's ``test/python/sdpa/fp8.py`` and the
1.32.0 wheel's ``_pygraph.py``): ``cudnn.pygraph(io_data_type=, intermediate_data_type=,
compute_data_type=, handle=)``, ``graph.tensor(uid=, dim=, stride=, data_type=)``,
``graph.sdpa_fp8(q, k, v, descale_q, descale_k, descale_v, descale_s, scale_s, scale_o,
is_inference=, attn_scale=, use_causal_mask=)`` → ``[O, Stats, Amax_S, Amax_O]``, then
``validate``, ``build_operation_graph``, ``create_execution_plans``, ``check_support``,
``build_plans``, ``get_workspace_size`` and ``execute(variant_pack, workspace, handle=)``.
Grouped K/V heads are K and V with fewer heads than Q, which the graph takes as they are.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import math
import weakref
from types import ModuleType
from typing import Any

import torch

from mhabench.errors import ReasonCode, Refusal, UnsupportedError
from mhabench.impls.fp8 import PROBABILITY_SCALE, Fp8Tensor

MIN_CUDNN_VERSION = 90100
"""cuDNN 9.1: the first with the fp8 attention forward on Hopper."""
MIN_CAPABILITY = (9, 0)


class Uid(enum.IntEnum):
    """The graph's tensors, named in the variant pack by these ids."""

    Q = 1
    K = 2
    V = 3
    O = 4  # noqa: E741  (the attention output's conventional name)
    DESCALE_Q = 5
    DESCALE_K = 6
    DESCALE_V = 7
    DESCALE_S = 8
    SCALE_S = 9
    SCALE_O = 10
    AMAX_S = 11
    AMAX_O = 12


@dataclasses.dataclass(frozen=True)
class GraphKey:
    """What a built graph is specific to: the shape, the mask and the device. Equal keys share a graph."""

    batch: int
    seq_len: int
    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    device_index: int

    @property
    def qkv_width(self) -> int:
        """Elements per token of the packed Q/K/V tensor: the row stride of the Q, K and V views."""
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    def qkv_dims(self, heads: int) -> tuple[int, int, int, int]:
        return (self.batch, heads, self.seq_len, self.head_dim)

    def qkv_strides(self) -> tuple[int, int, int, int]:
        """(b, h, n, d) strides of a view into the packed (b, n, width) tensor."""
        width = self.qkv_width
        return (self.seq_len * width, self.head_dim, width, 1)

    def output_strides(self) -> tuple[int, int, int, int]:
        """(b, h, n, d) strides of O laid out token-major, (b, n, h·d): the W_o GEMM reads it as it is."""
        return (self.seq_len * self.heads * self.head_dim, self.head_dim, self.heads * self.head_dim, 1)


def frontend_unsupported_reason(frontend: ModuleType | None, device: torch.device) -> Refusal | None:
    """Why the fp8 attention cannot run on ``device`` (None: it can): the device, its architecture, the frontend,
    the cuDNN version."""
    if device.type != "cuda":
        return Refusal(f"needs a CUDA GPU of sm90 (Hopper) or newer, not {device.type}", ReasonCode.DEVICE)
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < MIN_CAPABILITY:
        name = torch.cuda.get_device_name(device)
        return Refusal(
            f"needs sm90 (Hopper) or newer for fp8 tensor cores and cuDNN's fp8 attention; {name} is sm{major}{minor}",
            ReasonCode.DEVICE,
        )
    if frontend is None:
        return Refusal(
            "nvidia-cudnn-frontend not installed (the `cudnn` Python package: `make wheels`, docs/gpu.md)",
            ReasonCode.NOT_INSTALLED,
        )
    version = int(frontend.backend_version())
    if version < MIN_CUDNN_VERSION:
        return Refusal(f"cuDNN {version} < {MIN_CUDNN_VERSION} has no fp8 attention forward", ReasonCode.VERSION)
    return None


def _scalar(graph: Any, frontend: ModuleType, uid: Uid) -> Any:
    return graph.tensor(uid=int(uid), dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=frontend.data_type.FLOAT)


def declare_graph(frontend: ModuleType, key: GraphKey, handle: Any) -> Any:
    """The fp8 attention graph of ``key``, declared (not yet built)."""
    fp8, fp32 = frontend.data_type.FP8_E4M3, frontend.data_type.FLOAT
    graph = frontend.pygraph(io_data_type=fp8, intermediate_data_type=fp32, compute_data_type=fp32, handle=handle)
    strides = key.qkv_strides()
    q = graph.tensor(uid=int(Uid.Q), dim=key.qkv_dims(key.heads), stride=strides, data_type=fp8)
    k = graph.tensor(uid=int(Uid.K), dim=key.qkv_dims(key.kv_heads), stride=strides, data_type=fp8)
    v = graph.tensor(uid=int(Uid.V), dim=key.qkv_dims(key.kv_heads), stride=strides, data_type=fp8)
    scalars = {uid: _scalar(graph, frontend, uid) for uid in (Uid.DESCALE_Q, Uid.DESCALE_K, Uid.DESCALE_V)}
    scalars |= {uid: _scalar(graph, frontend, uid) for uid in (Uid.DESCALE_S, Uid.SCALE_S, Uid.SCALE_O)}
    o, _stats, amax_s, amax_o = graph.sdpa_fp8(
        q=q,
        k=k,
        v=v,
        descale_q=scalars[Uid.DESCALE_Q],
        descale_k=scalars[Uid.DESCALE_K],
        descale_v=scalars[Uid.DESCALE_V],
        descale_s=scalars[Uid.DESCALE_S],
        scale_s=scalars[Uid.SCALE_S],
        scale_o=scalars[Uid.SCALE_O],
        is_inference=True,
        attn_scale=1 / math.sqrt(key.head_dim),
        use_causal_mask=key.causal,
    )
    o.set_uid(int(Uid.O)).set_output(True).set_dim(list(key.qkv_dims(key.heads))).set_stride(
        list(key.output_strides())
    ).set_data_type(fp8)
    for uid, amax in ((Uid.AMAX_S, amax_s), (Uid.AMAX_O, amax_o)):
        amax.set_uid(int(uid)).set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(fp32)
    return graph


@dataclasses.dataclass
class BuiltGraph:
    """A graph with its plans built, its workspace, and the constant scalars of P."""

    graph: Any
    workspace: torch.Tensor
    probability_scale: torch.Tensor
    probability_descale: torch.Tensor
    amax_s: torch.Tensor
    amax_o: torch.Tensor


def build_graph(frontend: ModuleType, key: GraphKey, handle: Any, device: torch.device) -> BuiltGraph:
    """Declare, validate and build ``key``'s graph; no plan for it is an :class:`UnsupportedError` saying so."""
    graph = declare_graph(frontend, key, handle)
    try:
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([frontend.heur_mode.A, frontend.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
    except frontend.cudnnGraphNotSupportedError as exc:
        raise UnsupportedError(f"cuDNN has no fp8 attention plan for {key}: {exc}", ReasonCode.NO_KERNEL) from None

    def scalar(value: float) -> torch.Tensor:
        return torch.full((1, 1, 1, 1), value, dtype=torch.float32, device=device)

    return BuiltGraph(
        graph,
        torch.empty(graph.get_workspace_size(), dtype=torch.uint8, device=device),
        scalar(PROBABILITY_SCALE),
        scalar(1 / PROBABILITY_SCALE),
        scalar(math.nan),
        scalar(math.nan),
    )


class GraphCache:
    """Built graphs by :class:`GraphKey`, and the one cuDNN handle they run with (created on first use).

    A cache runs its graphs through the custom op ``mhabench::cudnn_fp8_attention`` (:meth:`attend`), so
    the dispatcher sees the attention: the counted-ops tracker names it among the ops no formula counts
    (``uncounted_ops``) instead of missing it, and the row is placed by the cost model.
    """

    def __init__(self, frontend: ModuleType, device: torch.device) -> None:
        self.frontend = frontend
        self.device = device
        self.graphs: dict[GraphKey, BuiltGraph] = {}
        self._handle: Any = None
        self.cache_id = next(_CACHE_IDS)
        _CACHES[self.cache_id] = self

    @property
    def handle(self) -> Any:
        if self._handle is None:
            self._handle = self.frontend.create_handle()
        return self._handle

    def get(self, key: GraphKey) -> BuiltGraph:
        """``key``'s graph, built on the first request only."""
        if key not in self.graphs:
            self.graphs[key] = build_graph(self.frontend, key, self.handle, self.device)
        return self.graphs[key]

    def attend(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qkv: Fp8Tensor, out: torch.Tensor, causal: bool
    ) -> None:
        """cuDNN's fp8 attention on the e4m3 views ``q``, ``k``, ``v`` of ``qkv`` (its scale is theirs) into ``out``."""
        torch.ops.mhabench.cudnn_fp8_attention(q, k, v, qkv.scale, qkv.descale, out, self.cache_id, causal)

    def execute(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        scale: torch.Tensor,
        descale: torch.Tensor,
        out: torch.Tensor,
        causal: bool,
    ) -> None:
        """Run the graph of these tensors' shape: O takes V's scale (|O| ≤ amax V). The handle follows torch's
        current stream, so the call is ordered with the GEMMs around it and captured with them in a CUDA graph."""
        key = GraphKey(q.shape[0], q.shape[2], q.shape[1], k.shape[1], q.shape[3], causal, _index(q.device))
        built = self.get(key)
        self.frontend.set_stream(self.handle, _current_stream(self.device))
        descale = descale.reshape(1, 1, 1, 1)
        pack = {
            int(Uid.Q): q,
            int(Uid.K): k,
            int(Uid.V): v,
            int(Uid.O): out,
            int(Uid.DESCALE_Q): descale,
            int(Uid.DESCALE_K): descale,
            int(Uid.DESCALE_V): descale,
            int(Uid.DESCALE_S): built.probability_descale,
            int(Uid.SCALE_S): built.probability_scale,
            int(Uid.SCALE_O): scale.reshape(1, 1, 1, 1),
            int(Uid.AMAX_S): built.amax_s,
            int(Uid.AMAX_O): built.amax_o,
        }
        built.graph.execute(pack, built.workspace, handle=self.handle)


_CACHE_IDS = itertools.count()
_CACHES: weakref.WeakValueDictionary[int, GraphCache] = weakref.WeakValueDictionary()
"""Live caches by id: the custom op takes an int, not the cache, and a cache dies with its layer."""


@torch.library.custom_op(
    "mhabench::cudnn_fp8_attention",
    mutates_args=("out",),
    # spelled out, not inferred from the (postponed, string) annotations
    schema="(Tensor q, Tensor k, Tensor v, Tensor scale, Tensor descale, Tensor(a!) out, int cache_id, bool causal)"
    " -> ()",
)
def cudnn_fp8_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: torch.Tensor,
    descale: torch.Tensor,
    out: torch.Tensor,
    cache_id: int,
    causal: bool,
) -> None:
    """The fp8 attention of cache ``cache_id`` as a torch op (what the dispatch-mode trackers see)."""
    _CACHES[cache_id].execute(q, k, v, scale, descale, out, causal)


def _index(device: torch.device) -> int:
    return device.index if device.index is not None else 0


def _current_stream(device: torch.device) -> int:
    """torch's current CUDA stream on ``device`` as the raw handle cuDNN takes (0, the default stream, elsewhere)."""
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
