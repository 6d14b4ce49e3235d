"""The registered implementations as the README lists them: what each is and what it can run."""

from __future__ import annotations

from mhabench.impls import ImplSpec, get_spec
from mhabench.impls.registry import available_implementations
from mhabench.impls.tensor_parallel import is_tensor_parallel

DTYPE_SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def _supports(spec: ImplSpec) -> str:
    """What ``spec`` can run, read off its registered capabilities: the same facts the runner checks before it
    builds a case, so the README's table cannot promise what a run would then report as ``unsupported``."""
    caps = spec.capabilities
    dtypes = ", ".join(short for dtype, short in DTYPE_SHORT.items() if dtype in caps.dtypes)
    features = [name for name, on in (("GQA", caps.grouped_kv), ("decode", caps.decode), ("train", caps.train)) if on]
    parts = [", ".join(sorted(caps.devices)), dtypes, ", ".join(features) or "forward prefill only"]
    if not caps.own_head_dim:
        parts.append("heads d_model / h wide only")
    if caps.max_head_dim is not None:
        parts.append(f"head_dim ≤ {caps.max_head_dim}")
    if caps.requires:
        parts.append("needs " + ", ".join(f"`{package}`" for package in caps.requires))
    if spec.compute_dtype is not None:
        parts.append(f"computes in {spec.compute_dtype}")
    if spec.compiles:
        parts.append("compiles on first call")
    if is_tensor_parallel(spec):
        parts.append("heads split over torchrun ranks")
    return "; ".join(parts)


def implementations_markdown() -> str:
    """Every registered implementation as a Markdown table (the README's block is this output, kept in sync by a
    test), in registration order, so the manual lists exactly what ``--impl`` accepts."""
    lines = [
        "| implementation | set | cost model | runs on; dtypes; supports | what it is |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in available_implementations():
        spec = get_spec(name)
        cells = (
            f"`{name}`",
            "core" if spec.core else "opt-in",
            f"`{spec.cost.name}`" if spec.cost else "none",
            _supports(spec),
            spec.description.replace("|", "\\|"),
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def patterns_markdown() -> str:
    """Which masks, document layouts and score modifiers each implementation runs, read off its capabilities
    (docs/masks.md holds this output, kept in sync by a test): anything else is an ``unsupported`` row."""
    lines = [
        "| implementation | masks | documents | score mods | windowed decode |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in available_implementations():
        caps = get_spec(name).capabilities
        cells = (
            f"`{name}`",
            ", ".join(sorted(caps.masks)),
            ", ".join(sorted(caps.layouts)) or "—",
            ", ".join(sorted(caps.score_mods - {"none"})) or "—",
            "yes" if caps.decode and caps.decode_window else "—",
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
