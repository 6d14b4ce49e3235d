"""When a window the user wrote never acts: a sliding window not below the longest sequence it is swept with is
plain causal attention under a misleading name, refused with one line; a window a model preset fills is the
model's, run as causal where it covers the sequence (:func:`mhabench.scenario.cases.covered_windows`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mhabench.scenario import models


def window_problems(data: dict[str, Any], folder: Path) -> list[str]:
    """One line per scenario whose own window never acts (:func:`own_window_problem`), with its location.

    A window equal to the one the scenario's model fills is the model's, run as causal where it covers the
    sequence (:func:`mhabench.scenario.cases.covered_windows`), never refused: a resolved config written back out
    (each replicate's copy) names the preset's window explicitly and must parse again as it did."""
    scenarios = data.get("scenarios")
    if not isinstance(scenarios, list):
        return []
    found = [
        (index, own_window_problem(s))
        for index, s in enumerate(scenarios)
        if isinstance(s, dict) and not _is_models_window(s, folder)
    ]
    return [f"scenarios[{index}].window: {problem}" for index, problem in found if problem]


def _is_models_window(scenario: dict[str, Any], folder: Path) -> bool:
    """Whether the scenario's window is the one its ``model`` would fill (a bad model is reported elsewhere)."""
    if scenario.get("model") is None or "window" not in scenario:
        return False
    bare = {key: value for key, value in scenario.items() if key not in ("window", "mask", "causal")}
    try:
        filled = models.with_model(bare, folder).get("window")
    except ValueError:
        return False
    return filled is not None and _ints(filled) == _ints(scenario["window"])  # one value or a one-value sweep


def own_window_problem(scenario: dict[str, Any]) -> str | None:
    """Why a window the user wrote never acts: it is not below the longest seq_len it is swept with.

    A window of w keys lets query i see keys i − w + 1 … i; from w ≥ n on, every query sees its whole
    causal past, so the case is plain causal attention under a misleading name, and a dense window mask
    may send an implementation down a slower path than causal's. Checked on the file's own fields, before
    a model fills any: a preset's window over a short sequence is run as causal instead
    (:func:`mhabench.scenario.cases.covered_windows`). Sizes of the wrong type are left to validation.
    """
    windows, seq_lens = _ints(scenario.get("window")), _ints(scenario.get("seq_len"))
    decode_only = scenario.get("phase") in ("decode", ["decode"])  # a decode step also sees its own token
    if not windows or not seq_lens or min(windows) < max(seq_lens) + decode_only:
        return None
    longest = max(seq_lens)
    return (
        f"{min(windows)} is not below seq_len {longest}: a window that covers the whole sequence is plain causal "
        f"attention (write mask: causal, or a window below {longest})"
    )


def _ints(value: Any) -> list[int]:
    """The integers of a size field (one or a sweep); anything else is left to pydantic's checks."""
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
