"""The garbage collector while a run measures: what existed before the first case is set aside.

By the first case a process holds hundreds of thousands of objects from its imports (torch, numpy, pandas, the
CLI), and each full collection walks them all: tens of milliseconds a time, some of them in the tool's own work
between the timed blocks (the timed blocks run with the collector paused, :mod:`mhabench.measure.rounds`).
``gc.freeze`` moves those objects to a generation no collection visits, so a collection walks only the objects
the run made; nothing is freed differently, since the imports' objects live as long as the process, and the
collector is given them back when the run ends (``gc.unfreeze``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def earlier_objects_set_aside() -> Iterator[None]:
    """Within the block, collections skip every object that existed when it began."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
