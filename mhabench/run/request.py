"""``RunRequest``: what one ``mhabench run`` asks beyond its config, as one value.

The CLI builds it once (repeats, a shard's selection, a resume, the manifest's extra entries, the command line)
and hands the same value to :func:`mhabench.run.runner.run` or, under torchrun, to
:func:`mhabench.distributed.run.run_distributed`: the two launch paths cannot drift apart in their keyword lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mhabench.measure.peaks import DevicePeaks
from mhabench.scenario.cases import Case

Selector = Callable[[Case, str, int], bool]
"""Keeps a (case, implementation, repeat) triple: a shard's share of a sweep."""


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """One run's request. The defaults are a plain ``mhabench run CONFIG``."""

    argv: tuple[str, ...] = ()
    """The command line, recorded in the manifest."""
    repeats: int = 1
    """``--repeat N``: passes over the sweep (a resumed run keeps its own)."""
    select: Selector | None = None
    """A shard's selection of triples; None: all of them."""
    resume_dir: Path | None = None
    """``--resume``: the folder whose missing triples run; None: a new run folder."""
    resume_differences: tuple[str, ...] = ()
    """What ``--resume --force`` overrode, recorded in the manifest."""
    manifest_extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Entries the manifest gets beside the fields every writer records (the shard, the code versions)."""
    config_path: str = "CONFIG"
    """The config file as the user named it, for the commands error messages suggest."""
    case_order_seed: int = 0
    """A replicate's case order: 0 the config's, above 0 a seeded permutation (:mod:`mhabench.run.replicates`)."""
    roofline: Mapping[str, DevicePeaks] = dataclasses.field(default_factory=dict)
    """Roofs per dtype an earlier process of the same run measured (a replicate after the first): not measured
    again; a dtype missing here is measured as usual."""
