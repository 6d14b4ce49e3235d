"""Which physical device a row ran on: the GPU's UUID, or ``host:cpu`` on the CPU.

``device`` (``cuda:0``) names a device only within one machine and one ``CUDA_VISIBLE_DEVICES``: every worker of
a cluster run calls its GPU ``cuda:0``. Rows measured on different GPUs are not paired, and two GPUs of one model
differ by a few percent, so each row keeps the device that measured it.
"""

from __future__ import annotations

import functools
import socket

import torch

from mhabench.scenario.device import canonical_device


@functools.cache
def device_id(device: str) -> str:
    """``GPU-<uuid>`` for a CUDA device (``host:cuda:N`` when torch gives no UUID), ``host:cpu`` otherwise."""
    name = canonical_device(device)
    host = socket.gethostname()
    if not name.startswith("cuda"):
        return f"{host}:{name}"
    uuid = getattr(torch.cuda.get_device_properties(torch.device(name)), "uuid", None)
    return f"GPU-{uuid}" if uuid else f"{host}:{name}"
