"""A fake of NVIDIA's cuDNN Python frontend (``cudnn``) for the fp8 layer's CPU tests.

It records every call the graph-building code makes and checks the variant pack against what the graph
declared (uids, shapes, strides, dtypes), then computes the attention itself in float32 from the e4m3
inputs, rounding P and O to e4m3 under the given scales as the fp8 kernel does. It proves the wiring
only: that the layer declares, builds and feeds a graph the way the frontend's API asks, and that its
scales and descales are applied consistently. It says nothing about cuDNN's kernel, its speed or its
exact numerics: those need the GPU (``make gpu-check``, docs/gpu.md).
"""

from __future__ import annotations

import enum
import math
from types import SimpleNamespace
from typing import Any

import torch


class DataType(enum.Enum):
    FP8_E4M3 = torch.float8_e4m3fn
    FLOAT = torch.float32


class HeurMode(enum.Enum):
    A = "a"
    FALLBACK = "fallback"


class GraphNotSupportedError(Exception):
    """Stands for ``cudnn.cudnnGraphNotSupportedError``."""


class FakeTensor:
    """A graph tensor: its declared attributes, settable the frontend's chained way."""

    def __init__(self, **attributes: Any) -> None:
        self.attributes = dict(attributes)

    def _set(self, name: str, value: Any) -> FakeTensor:
        self.attributes[name] = value
        return self

    def set_uid(self, uid: int) -> FakeTensor:
        return self._set("uid", uid)

    def set_output(self, value: bool) -> FakeTensor:
        return self._set("output", value)

    def set_dim(self, dim: list[int]) -> FakeTensor:
        return self._set("dim", tuple(dim))

    def set_stride(self, stride: list[int]) -> FakeTensor:
        return self._set("stride", tuple(stride))

    def set_data_type(self, data_type: DataType) -> FakeTensor:
        return self._set("data_type", data_type)


class FakeGraph:
    """``cudnn.pygraph``: records the calls; ``execute`` checks the pack and computes the fp8 attention."""

    def __init__(self, frontend: FakeFrontend, **options: Any) -> None:
        self.frontend = frontend
        self.options = options
        self.calls: list[str] = []
        self.tensors: list[FakeTensor] = []
        self.sdpa: dict[str, Any] = {}
        self.executions = 0

    def tensor(self, **attributes: Any) -> FakeTensor:
        self.calls.append("tensor")
        made = FakeTensor(**{**attributes, "dim": tuple(attributes["dim"]), "stride": tuple(attributes["stride"])})
        self.tensors.append(made)
        return made

    def sdpa_fp8(self, **kwargs: Any) -> list[FakeTensor | None]:
        self.calls.append("sdpa_fp8")
        self.sdpa = kwargs
        outputs = [FakeTensor(), None, FakeTensor(), FakeTensor()]
        self.tensors += [t for t in outputs if t is not None]
        return outputs

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if name == self.frontend.refuse_at:
            raise GraphNotSupportedError(f"no engine ({name})")

    def validate(self) -> None:
        self._step("validate")

    def build_operation_graph(self) -> None:
        self._step("build_operation_graph")

    def create_execution_plans(self, modes: list[HeurMode]) -> None:
        self.plan_modes = modes
        self._step("create_execution_plans")

    def check_support(self) -> None:
        self._step("check_support")

    def build_plans(self) -> None:
        self._step("build_plans")

    def get_workspace_size(self) -> int:
        return 16

    def by_uid(self) -> dict[int, FakeTensor]:
        return {t.attributes["uid"]: t for t in self.tensors if "uid" in t.attributes}

    def execute(self, pack: dict[int, torch.Tensor], workspace: torch.Tensor, handle: Any = None) -> None:
        """Check each buffer against its declaration, then O = e4m3(softmax(QKᵀ·scale) rounded to e4m3 · V)."""
        assert handle is self.frontend.handle and workspace.numel() == self.get_workspace_size()
        declared = self.by_uid()
        assert set(pack) == set(declared), f"variant pack uids {sorted(pack)} != declared {sorted(declared)}"
        for uid, buffer in pack.items():
            spec = declared[uid].attributes
            assert tuple(buffer.shape) == spec["dim"], f"uid {uid}: shape {tuple(buffer.shape)} != {spec['dim']}"
            assert tuple(buffer.stride()) == spec["stride"], f"uid {uid}: stride {buffer.stride()} != {spec['stride']}"
            assert buffer.dtype == spec["data_type"].value, f"uid {uid}: {buffer.dtype} != {spec['data_type']}"
        self.executions += 1
        uids = {name: declared_uid(self, name) for name in ("q", "k", "v", "descale_q", "descale_k", "descale_v")}
        uids |= {name: declared_uid(self, name) for name in ("descale_s", "scale_s", "scale_o")}
        value = {name: pack[uid] for name, uid in uids.items()}
        q = value["q"].float() * value["descale_q"].item()
        k = value["k"].float() * value["descale_k"].item()
        v = value["v"].float() * value["descale_v"].item()
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        scores = q @ k.transpose(-2, -1) * self.sdpa["attn_scale"]
        if self.sdpa["use_causal_mask"]:
            n = scores.shape[-1]
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
        p = (scores.softmax(dim=-1) * value["scale_s"].item()).to(torch.float8_e4m3fn)
        o = (p.float() * value["descale_s"].item()) @ v
        o_uid = self.sdpa_output_uid()
        pack[o_uid].copy_((o * value["scale_o"].item()).to(torch.float8_e4m3fn))

    def sdpa_output_uid(self) -> int:
        outputs = [t for t in self.tensors if t.attributes.get("output") and t.attributes.get("dim") != (1, 1, 1, 1)]
        (o,) = outputs
        return int(o.attributes["uid"])


def declared_uid(graph: FakeGraph, argument: str) -> int:
    """The uid of the tensor passed to ``sdpa_fp8`` as ``argument``."""
    return int(graph.sdpa[argument].attributes["uid"])


class FakeFrontend(SimpleNamespace):
    """The ``cudnn`` module's surface the layer uses; ``refuse_at`` names a build step that raises not-supported."""

    def __init__(self, version: int = 91900, refuse_at: str = "") -> None:
        super().__init__(
            data_type=DataType,
            heur_mode=HeurMode,
            cudnnGraphNotSupportedError=GraphNotSupportedError,
        )
        self.version = version
        self.refuse_at = refuse_at
        self.graphs: list[FakeGraph] = []
        self.handle = object()
        self.handles_created = 0
        self.streams: list[int] = []

    def backend_version(self) -> int:
        return self.version

    def create_handle(self) -> object:
        self.handles_created += 1
        return self.handle

    def set_stream(self, handle: object, stream: int) -> None:
        assert handle is self.handle
        self.streams.append(stream)

    def pygraph(self, **options: Any) -> FakeGraph:
        graph = FakeGraph(self, **options)
        self.graphs.append(graph)
        return graph
