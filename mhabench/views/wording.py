"""Every sentence advise and explain say, from templates keyed by reason code: the analysis gives a code and its
numbers (:class:`mhabench.analysis.statement.Statement`, :class:`mhabench.analysis.explain.explain.Explanation`),
and only this module turns them into English, with the one spelling of names and figures every view uses
(:mod:`mhabench.views.spelling`). The terminal, Markdown, HTML and the report render the same sentence, so they
cannot say different things.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mhabench.analysis.advice.pick import ablations
from mhabench.analysis.advice.thresholds import LOW_EFFICIENCY, TIE_MARGIN
from mhabench.analysis.answer import CaseAnswer, Standing, Verdict
from mhabench.analysis.estimate import ACROSS, MIN_PAIRED_ROUNDS, PAIRED, Estimate
from mhabench.analysis.explain import explain
from mhabench.analysis.statement import ENERGY, PICK, WHY, Statement
from mhabench.analysis.throughput import EXECUTED_OVER_USEFUL, USEFUL_EFFICIENCY, USEFUL_INTENSITY, USEFUL_TFLOPS
from mhabench.results.columns import DTYPE, HEADS, KV_HEADS
from mhabench.results.schema import RowStatus
from mhabench.stage_cost import STAGE_LABELS
from mhabench.views.spelling import (
    AXIS_NAMES,
    field,
    impl,
    impls,
    milliseconds,
    more,
    percent,
    place,
    plural,
    ratio,
    size,
    values,
)
from mhabench.views.table import as_in_table as table

Figures = Mapping[str, Any]

# --- answers ----------------------------------------------------------------------------------------------------------


def phrase(answer: Figures) -> str:
    """An answer (a verdict and its implementations) in a few words: ```fused` wins``, ```a` and `b` tied``."""
    verdict, names = answer["verdict"], answer["impls"]
    if verdict == "winner":
        return f"{impl(names[0])} wins"
    if verdict == "tied":
        return f"{impls(sorted(names))} tied"
    if verdict == "only":
        return f"only {impl(names[0])} ran"
    return str(verdict)


def segment_phrase(segment: Figures) -> str:
    """A segment's answer: ``ties among …`` where a tie's members shift, and at a gap the rounds it rests on."""
    if segment.get("members"):
        return f"ties among {impls(segment['members'])}"
    if segment["verdict"] == "cannot tell" and segment.get("rounds"):
        low, high = segment["rounds"]
        counted = f"{low}–{high}" if low != high else f"{low}"
        return f"cannot tell ({counted} round{'s' if high != 1 else ''})"
    return phrase(segment)


def segments_text(axis: str, segments: Sequence[Figures]) -> str:
    """``n = 128 … 512: `naive` and `fused` tied; n = 2048: `fused` wins; n = 4096: cannot tell (1–5 rounds)``."""
    return "; ".join(f"{values(axis, one['values'])}: {segment_phrase(one)}" for one in segments)


NAMED_CASES = 3
"""An answer held by at most this many cases names them; a larger share is only counted."""


def counts_text(counts: Sequence[Figures], cases: int) -> str:
    """```fused` wins in 20 of 24 cases; cannot tell in 4 (…)``, the commonest answer first."""
    parts = []
    for index, one in enumerate(counts):
        labels = one["labels"]
        named = f" ({', '.join(labels)})" if len(labels) <= NAMED_CASES and index else ""
        parts.append(f"{phrase(one)} in {len(labels)}{f' of {cases} cases' if not index else ''}{named}")
    return "; ".join(parts)


def machine(device: str, torch: str | None) -> str:
    """``NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130)``: what a reader calls the machine."""
    return f"{device or 'an unknown device'} (torch {torch or '?'})"


UNPAIRED = {"no_raw_samples": "no raw samples stored", "not_same_rounds": "not timed in the same rounds"}
"""Why a lead is a ratio of medians, by :func:`mhabench.analysis.estimate.row_ratio`'s code."""


def method(lead: Estimate) -> str:
    """How a lead was estimated: ``paired over 8 rounds``, ``across 3 replicates …``, ``ratio of medians: …``."""
    rounds = lead.rounds
    if lead.method == PAIRED:
        return f"paired over {rounds} rounds"
    if lead.method == ACROSS:
        return f"across {rounds} replicates, each paired over its rounds"
    if lead.unpaired == "too_few_shared_rounds":
        shared = plural(rounds, "shared round")
        return f"ratio of medians: only {shared}, fewer than the {MIN_PAIRED_ROUNDS} pairing needs"
    return f"ratio of medians: {UNPAIRED.get(lead.unpaired, lead.unpaired)}"


def reason(code: str, figures: Figures, fastest: str) -> str:
    """Why a case is "cannot tell", by its reason code."""
    if code == "no_raw_samples":
        return "the run stored no raw samples, only medians: no interval"
    if code == "too_few_rounds":
        rounds = plural(figures["rounds"], "timed round")
        return f"{impl(figures['impl'])} has {rounds}: no interval (it needs {figures['needs']})"
    if code == "too_few_processes":
        return f"{figures['impl']} ran ok in fewer than {figures['needs']} of the replicates {fastest} ran in"
    if code == "repeats_disagree":
        said = "; ".join(f"repeat {index}: {phrase(one)}" for index, one in enumerate(figures["repeats"]))
        return f"its {len(figures['repeats'])} repeats disagree ({said})"
    if code == "rounds_disagree":
        return (
            f"rounds disagree: {impl(figures['fastest'])} was {figures['ahead_ratio']:.3g}× faster than "
            f"{impl(figures['other'])} in {figures['ahead']} of {figures['rounds']} rounds and slower in "
            f"{figures['behind']}, so the case is unstable, not a tie: time it again (another run, or --repeat)"
        )
    return code


def picked(case: CaseAnswer) -> tuple[str, ...]:
    """The implementations a case's answer names: the winner, the tied set, the only row, or the fastest."""
    return case.tied or ((case.fastest,) if case.fastest else ())


def pick(case: CaseAnswer) -> str:
    """A case's pick, the lead it rests on and why, then the notes on the rows it names."""
    return _pick(case) + _pick_notes(case)


def _pick(case: CaseAnswer) -> str:
    names, verdict, lead = picked(case), case.verdict, case.lead
    if verdict is Verdict.NOTHING_RAN:
        return "nothing ran ok, so there is nothing to pick."
    if verdict is Verdict.ONLY:
        return f"only {impl(names[0])} ran ok; there is nothing to compare it with."
    assert lead is not None
    over = f"{ratio(lead.ratio, lead.ci_low, lead.ci_high)} over {impl(case.runner_up or '')} ({method(lead)})"
    code, numbers = (case.reason.code, case.reason.numbers) if case.reason else ("", {})
    if verdict is Verdict.CANNOT_TELL and code == "rounds_disagree":
        return f"{reason(code, numbers, names[0])} ({impl(names[0])} {over})."
    if verdict is Verdict.CANNOT_TELL:
        return f"cannot tell: {impl(names[0])} had the lowest median, {over}, but {reason(code, numbers, names[0])}."
    if verdict is Verdict.WINNER and code == "dominance":
        return f"{impl(names[0])} wins, {over}; {_dominance(names[0], numbers)}."
    if verdict is Verdict.WINNER:
        return f"{impl(names[0])} wins, {over}."
    tie = "the interval includes 1" if lead.ci_low <= 1 else f"the lead is under {percent(TIE_MARGIN)}"
    slower = [one.impl for one in case.impls if one.standing is not Standing.NOT_OK and one.impl not in names]
    rest = f"; {impls(slower)} clearly slower" if slower else ""
    return f"no clear winner: {impls(names)} are tied ({impl(names[0])} {over}: {tie}){rest}."


def _dominance(winner: str, figures: Figures) -> str:
    """The exception said where it applies: no interval, yet every round of the slower rows is clearly slower."""
    slower = figures["slower"]
    rounds = sorted({found["rounds"] for found in slower.values()})
    counted = "–".join(str(count) for count in (rounds[0], rounds[-1]) if count) if len(rounds) > 1 else str(rounds[0])
    return (
        f"no interval (fewer than {figures['min_interval_samples']} rounds), but by the dominance exception to "
        f"that rule: each of the {counted} rounds of {impls(slower)} was at least {percent(figures['margin'])} "
        f"slower than {impl(winner)}'s slowest of {figures['winner_rounds']} (docs/advise.md)"
    )


def _pick_notes(case: CaseAnswer) -> str:
    """Rows that failed their check, ablations and lower-precision implementations among the pick, said after it."""
    notes = ""
    excluded = [one.impl for one in case.impls if one.status == RowStatus.MISMATCH]
    if excluded:
        verb = "is" if len(excluded) == 1 else "are"
        notes += f" {impls(excluded)} failed the correctness check and {verb} not considered."
    shown = picked(case) if case.verdict in (Verdict.WINNER, Verdict.TIE, Verdict.ONLY) else ()
    different = ablations(shown)
    if different:
        verb = "computes" if len(different) == 1 else "compute"
        notes += (
            f" {impls(different)} {verb} a different function (an ablation, checked against its own float64 "
            "reference): faster is no reason to switch to it, it changes the model."
        )
    lower = [one for name in shown if (one := case.impl(name)) is not None and one.compute_dtype is not None]
    if lower:
        ok = [one for one in case.impls if one.standing is not Standing.NOT_OK and one.max_rel_err is not None]
        quoted = "; ".join(f"{impl(one.impl)} {one.max_rel_err:.2g}" for one in ok)
        verb = "computes" if len(lower) == 1 else "compute"
        dtypes = ", ".join(sorted({str(one.compute_dtype) for one in lower}))
        notes += (
            f" {impls(one.impl for one in lower)} {verb} in {dtypes}, with a larger error"
            f"{f' (max_rel_err {quoted})' if quoted else ''}: its speed is traded for that error."
        )
    return notes


# --- where the answer changes -----------------------------------------------------------------------------------------


def _along(f: Figures) -> str:
    return " ".join(part for part in (AXIS_NAMES.get(f["axis"], f["axis"]), place(f["fixed"])) if part)


def _crossover(f: Figures) -> str:
    axis = f["axis"]
    brackets = "; ".join(f"{field(axis, low)} and {field(axis, high)}" for low, high in f["changes_between"])
    return (
        f"along {_along(f)}: {segments_text(axis, f['segments'])}. The answer changes between the measured "
        f"{brackets}; nothing in between was measured."
    )


def _no_crossover(f: Figures) -> str:
    axis = AXIS_NAMES.get(f["axis"], f["axis"])
    answers = sorted({phrase(one) for one in f["answers"]})
    where = "in each of its lines" if f["lines"] > 1 else "on its line"
    told = " where the data can tell" if f["cannot_tell"] else ""
    unknown = f"; cannot tell at {', '.join(f['cannot_tell'])}" if f["cannot_tell"] else ""
    crossover = "no crossover; " if f["ordered"] else ""
    return (
        f"along {axis}: {crossover}{where} the answer is the same at every measured {axis}{told} "
        f"({'; '.join(answers) or 'none'}){unknown}."
    )


# --- why --------------------------------------------------------------------------------------------------------------

INTENSITY_WORDS = {
    "hardware": "FLOPs and DRAM bytes from the hardware counters",
    "counted": "bytes counted from the ops that ran",
    "model": "bytes from the cost model",
}
"""How a sentence names each ``intensity_source``: a hardware-counter figure is not the cost model's."""


def _roofline(f: Figures) -> tuple[str, str]:
    name, bound = impl(f["impl"]), f["bound"]
    where = (
        f"its useful work at the model's minimal traffic, {table(f['intensity_flop_per_byte'], USEFUL_INTENSITY)} "
        f"FLOP/B, lies {'below' if bound == 'memory' else 'above'} the ridge at {f['ridge_flop_per_byte']:.3g} FLOP/B"
    )
    useful = table(f["useful_tflops"], USEFUL_TFLOPS)
    if f["roof_below_work"]:
        head = f"{name} is {bound}-bound by its intensity"
        tail = (
            f"{where}; its {useful} useful TFLOP/s are above the attainable {f['attainable_tflops']:.3g} TFLOP/s "
            "recorded for it, a roof below the work, so no efficiency is quoted"
        )
    else:
        reached = (
            f"{table(f['efficiency'], USEFUL_EFFICIENCY)} of the attainable {f['attainable_tflops']:.3g} TFLOP/s "
            f"({useful} useful TFLOP/s)"
        )
        if f["far_from_roof"]:
            head = f"{name} is far from both roofs"
            tail = (
                f"{where}, but it reaches only {reached}, under {percent(LOW_EFFICIENCY)}: the layout (small GEMMs, "
                f"extra passes) or the host sets its time, not {'bandwidth' if bound == 'memory' else 'compute'}"
            )
        else:
            head, tail = f"{name} is {bound}-bound", f"{where}, and it reaches {reached}"
    backend = f"; it ran SDPA's {f['sdpa_backend']} backend." if f["sdpa_backend"] else "."
    return head, tail + _executed(f) + backend


def _executed(f: Figures) -> str:
    """``; it executed 5.67× the useful FLOPs, at 12.7 FLOP/B (all FLOPs executed; …)``, named by its source."""
    if f["executed_over_useful"] is None or f["executed_intensity_flop_per_byte"] is None:
        return ""
    flops = "useful FLOPs, masked blocks skipped" if f["skips_masked_work"] else "all FLOPs executed"
    return (
        f"; it executed {table(f['executed_over_useful'], EXECUTED_OVER_USEFUL)}× the useful FLOPs, at "
        f"{f['executed_intensity_flop_per_byte']:.3g} FLOP/B ({flops}; {INTENSITY_WORDS[f['bytes_source']]})"
    )


def _scores(f: Figures) -> tuple[str, str]:
    matrix, l2 = f["score_bytes"], f["l2_cache_bytes"]
    if l2 is None:
        cache = "against a cache of unknown size (the manifest records none for this device)"
    elif matrix > l2:
        cache = f"{matrix / l2:.3g}× the {size(l2)} L2, so it goes through device memory"
    else:
        cache = f"within the {size(l2)} L2"
    tail = f"{size(matrix)} written and read back per call (b·h·n·L elements, cost model), {cache}."
    return f"{impl(f['impl'])} materializes the attention scores", tail


def _launch(f: Figures) -> tuple[str, str]:
    latency = milliseconds(f["latency_ms"])
    if f["pace"] == "host_over_device":
        why = (
            f"one synchronous call takes {milliseconds(f['host_latency_ms'] or 0)} on the host against {latency} on "
            f"the device ({f['host_over_device']:.2g}×)"
        )
    else:
        launched = f" launching {f['kernels_per_call']:.0f} kernels" if f["kernels_per_call"] else ""
        why = (
            f"its {f['ops_per_call']:.0f} dispatched ops{launched}, at ≥ {f['host_us_per_op']:g} µs of host time "
            f"each, are at least {percent(min(f['host_share'], 1.0))} of its {latency}"
        )
    far = (
        f", and it reaches {table(f['efficiency'], USEFUL_EFFICIENCY)} of its roof"
        if f["efficiency"] is not None
        else ""
    )
    return f"{impl(f['impl'])} is launch-bound", f"{why}{far}. Fewer, larger ops would pay more than faster kernels."


def _memory(f: Figures) -> tuple[str, str]:
    ours, theirs = f["peak_memory_bytes"], f["runner_up_peak_memory_bytes"]
    relation = f"{theirs / ours:.3g}× less" if theirs >= ours else f"{ours / theirs:.3g}× more"
    head = f"{impl(f['impl'])} peaks at {size(ours)} per call against {impl(f['runner_up'])}'s {size(theirs)}"
    return head, f"{relation}."


def _did_not_fit(f: Figures) -> tuple[str, str]:
    said = "; ".join(f"{impl(one['impl'])} {one['status']} ({one['error'] or 'no reason'})" for one in f["failed"])
    return "did not fit in memory", f"{said}."


def _energy(f: Figures) -> tuple[str, str]:
    parts = []
    for name, one in f.items():
        tokens = f"{one['tokens_per_joule']:,.0f} tokens/J, " if one["tokens_per_joule"] is not None else ""
        error = f"±{one['energy_uncertainty']:.0%} " if one["energy_uncertainty"] is not None else ""
        window = f"{error}over {one['energy_window_s']:.2g} s windows" if one["energy_window_s"] is not None else ""
        parts.append(
            f"{impl(name)} {one['energy_per_call_j']:.3g} J ({tokens}{one['average_power_w']:.0f} W; {window})"
        )
    return "energy per call (NVML windows, back-to-back calls)", "; ".join(parts) + "."


def _explained(f: Figures) -> tuple[str, str]:
    by_median = " by its median (no interval)" if f["standing"] == explain.CANNOT_TELL else ""
    command = f"mhabench explain {f['run_id']} --impl {f['impl']}"
    stage = stage_clause(f["stage"], f["time_share"], f["flops_ratio"], f["bytes_ratio"])
    return f"{impl(f['impl'])} is {f['slower_by']:.3g}× slower{by_median}", f"{stage} (`{command}`)."


def stage_clause(stage: str, time_share: float, flops_ratio: float | None, bytes_ratio: float | None) -> str:
    """``70 % of its time in the QKV projection, which executed 8.0× the model's FLOPs and moved 485× its bytes``."""
    share = percent(time_share) if not math.isnan(time_share) else "an unknown share"
    parts = []
    if flops_ratio is not None:
        parts.append(f"executed {flops_ratio:.1f}× the model's FLOPs")
    if bytes_ratio is not None:
        parts.append(
            f"moved {bytes_ratio:,.0f}× its bytes" if bytes_ratio >= 100 else f"moved {bytes_ratio:.3g}× its bytes"
        )
    return f"{share} of its time in the {STAGE_LABELS[stage]}" + (", which " + " and ".join(parts) if parts else "")


EVIDENCE: dict[str, Callable[[Figures], tuple[str, str]]] = {
    "roofline": _roofline,
    "scores": _scores,
    "launch": _launch,
    "memory": _memory,
    "did_not_fit": _did_not_fit,
    "energy per call": _energy,
    explain.EXPLAINED: _explained,
}
"""The statements said under their case, as (reason, figures): a view that said a reason once may give it alone."""

# --- what to change ---------------------------------------------------------------------------------------------------

STANDING_WORDS = {
    "clearly slower": "slower",
    "tied": "slower by its median only (tied)",
    "cannot tell": "slower by its median only (no interval: cannot tell)",
}
MODEL_CHANGE = {HEADS: "head count (so head size)", KV_HEADS: "key/value head count"}


def _point(axis: str, point: Figures) -> str:
    """``h=2 (d_k=256)``, ``kv=2 (KV cache 128 KiB)``: the value and what it means for the layer."""
    value = field(axis, point["value"])
    if axis == HEADS and point["head_dim"]:
        return f"{value} (d_k={point['head_dim']:.0f})"
    return f"{value} (KV cache {size(point['kv_cache_bytes'])})" if point["kv_cache_bytes"] else value


def _change(f: Figures) -> str:
    axis = f["axis"]
    top = next(point for point in f["points"] if point["standing"] == "fastest")
    compared = ", ".join(
        f"{_point(axis, point)} with {impl(point['impl'])} "
        f"{ratio(point['slower_by'], point['ci_low'], point['ci_high'])} {STANDING_WORDS[point['standing']]}"
        for point in f["points"]
        if point is not top
    )
    head = f"{_point(axis, top)} with {impl(top['impl'])} is the fastest"
    verdict = f"{head}: {compared}" if f["clear"] else f"no clear difference: {head} by its median, but {compared}"
    decode = " (decode: the KV cache each reads)" if axis == KV_HEADS and f["decode"] else ""
    sentence = (
        f"{place(f['fixed'])}{decode}, {verdict}. Different cases, so the intervals are unpaired (ratio of medians). "
        f"Another {MODEL_CHANGE[axis]} is another model: what it does to quality is not measured here."
    )
    return sentence[0].upper() + sentence[1:]


# --- what a run cannot tell -------------------------------------------------------------------------------------------


def _rows(f: Figures) -> str:
    return "; ".join(f"{impl(one['impl'])} at {one['case']}" for one in f["named"]) + more(f["named"], f["rows"])


def _picks(f: Figures) -> str:
    named = "; ".join(
        f"{one['case']} ({phrase(one)}, {ratio(one['ratio'], one['ci_low'], one['ci_high'])})" for one in f["named"]
    )
    return named + more(f["named"], f["picks"])


def _noisy(f: Figures) -> str:
    return (
        f"{f['rows']} ok row(s) are noisy (IQR above the run's noise threshold of the median): their medians may "
        f"move between runs: {_rows(f)}."
    )


def _capped(f: Figures) -> str:
    return (
        f"{f['rows']} ok row(s) spent max_run_time_s before their samples were complete (capped): fewer rounds, "
        f"wider intervals: {_rows(f)}."
    )


def _drift(f: Figures) -> str:
    return (
        f"the reference workload ({f['workload'] or 'a fixed matmul'}) moved by {percent(f['drift'])} during the "
        "run, more than the noise threshold: cases timed far apart are not comparable, and the comparisons across "
        "cases (what to change) rest on that."
    )


def _mixed_devices(f: Figures) -> str:
    split = f"; {len(f['split_cases'])} case(s) were split between devices" if f["split_cases"] else ""
    return (
        f"the cases were measured on {len(f['devices'])} devices ({', '.join(f['devices'])}): each case's "
        "implementations shared one, but a crossover or trend across cases also holds the spread between devices, "
        f"a few percent (mhabench calibrate --devices measures it){split}."
    )


def _other_device(f: Figures) -> str:
    return (
        f"asked about {f['asked']}, but this run was measured on {f['measured_on'] or 'an unknown device'} "
        f"({f['device_name'] or '?'}): it cannot tell what a {f['asked']} device would pick; run mhabench there."
    )


def _not_measured(f: Figures) -> str:
    one = len(f["missing"]) == 1
    return (
        f"{impls(f['missing'])} {'was' if one else 'were'} not measured in this run (it has {impls(f['present'])}): "
        f"nothing here says how {'it' if one else 'they'} would compare; run again with --impl."
    )


def _no_interval(f: Figures) -> str:
    named = "; ".join(
        f"{one['case']} ({reason(one['reason_code'], one['reason_figures'], one['fastest'])})" for one in f["named"]
    )
    return f"{f['cases']} of {f['of']} cases cannot be told apart: {named}{more(f['named'], f['cases'])}."


def _did_not_run(f: Figures) -> str:
    return f"{impl(f['impl'])} is {f['status']} in {f['rows']} case(s), e.g. {f['case']}: {f['error'] or 'no message'}."


def _uncalibrated(f: Figures) -> str:
    command = f"mhabench calibrate --device {f['device_kind']}" if f["device_kind"] else "mhabench calibrate"
    return (
        f"{f['picks']} pick(s) rest on one process, and no between-process spread of this machine "
        f"({f['fingerprint']}) was recorded with the run or given (--calibration), so nothing here says whether "
        f"they replicate (the closest leads first: {_picks(f)}): `{command}` measures it once for this machine "
        "(runs after it record it), or run with --replicates 3 to read the picks across processes."
    )


def _may_not_replicate(f: Figures) -> str:
    return (
        f"{f['picks']} pick(s) may not replicate: the lead is within this machine's between-process spread "
        f"({percent(f['between_process_spread'])}, `mhabench calibrate` run {f['calibration_run']}): {_picks(f)}. "
        "Run with --replicates 3 to read them across processes."
    )


# --- across runs ------------------------------------------------------------------------------------------------------


def _matched_on(fields: Sequence[str]) -> str:
    return "the shape fields and dtype" if DTYPE in fields else "the shape fields alone: each run has one dtype"


def _differences(f: Figures, scope: str) -> str:
    named = [f"{name} {base} → {candidate}" for name, (base, candidate) in f["fields"].items() if name != "timing"]
    named += ["timing settings"] if "timing" in f["fields"] else []
    return f"{scope} against {f['against']}: they differ in {'; '.join(named) or 'nothing in their manifests'}."


def _run_answer(f: Figures, scope: str) -> str:
    return f"{scope} on {machine(f['device'], f['torch'])}: {counts_text(f['counts'], f['cases'])}."


def _lead(answer: Figures) -> str:
    if answer["lead"] is None or answer["runner_up"] is None:
        return phrase(answer)
    lead = ratio(answer["lead"], answer["ci_low"], answer["ci_high"])
    return f"{phrase(answer)}, {lead} over {impl(answer['runner_up'])}"


def _pick_differs(f: Figures, scope: str) -> str:
    kinds = f" ({', '.join(f['dtypes'])})" if len(f["dtypes"]) > 1 else ""
    said = "; ".join(f"{_lead(one)} in {one['run_id']}" for one in f["answers"])
    return f"{scope}{kinds}: the pick differs between runs: {said}."


def _flips(f: Figures) -> str:
    named = "; ".join(f"{one['case']} ({', '.join(phrase(a) for a in one['answers'])})" for one in f["named"])
    said = f": {named}{more(f['named'], f['flipped'])}." if f["flipped"] else "."
    return (
        f"{f['flipped']} of the {f['cases']} cases all {f['runs']} runs measured flip (a winner in one run is "
        f"clearly slower in another): flip rate {percent(f['flip_rate'])}{said}"
    )


TEMPLATES: dict[str, Callable[[Figures], str]] = {
    "pick": lambda f: pick(f["case"]),
    "group": lambda f: (
        f"{segments_text(f['axis'], f['segments']) if 'segments' in f else counts_text(f['counts'], f['cases'])}."
    ),
    "crossover": _crossover,
    "by_setting": lambda f: f"by {_along(f)}: {segments_text(f['axis'], f['segments'])}.",
    "no_crossover": _no_crossover,
    "heads_change": _change,
    "kv_heads_change": _change,
    "noisy": _noisy,
    "capped": _capped,
    "drift": _drift,
    "mixed_devices": _mixed_devices,
    "unfinished": lambda f: (
        f"the run is {f['status']}: cases it did not reach are not answered here (finish it with run --resume)."
    ),
    "other_device": _other_device,
    "not_measured": _not_measured,
    "no_interval": _no_interval,
    "did_not_run": _did_not_run,
    "uncalibrated": _uncalibrated,
    "may_not_replicate": _may_not_replicate,
    "no_common_case": lambda f: (
        f"the runs share no case (matched on {_matched_on(f['matched_on'])}): only their answers above compare."
    ),
    "same_pick": lambda f: (
        f"{f['same']} of the {f['matched']} cases every run measured (matched on {_matched_on(f['matched_on'])}) "
        f"have the same answer in every run: {', '.join(f['cases'])}."
    ),
    "flips": _flips,
}
"""The sentence of each reason code, from its figures alone."""
SCOPED: dict[str, Callable[[Figures, str], str]] = {
    "differences": _differences,
    "run_answer": _run_answer,
    "pick_differs": _pick_differs,
}
"""Codes whose sentence opens with what they are about (a run, a case)."""


def said(statement: Statement) -> str:
    """The statement without its case or group (the heading a view puts it under says that once)."""
    if statement.rule in EVIDENCE:
        head, tail = EVIDENCE[statement.rule](statement.figures)
        return f"{head}: {tail}"
    if statement.rule in SCOPED:
        return SCOPED[statement.rule](statement.figures, statement.scope)
    return TEMPLATES[statement.rule](statement.figures)


def sentence(statement: Statement) -> str:
    """The whole sentence: a case's or a group's statement opens with its label."""
    text = said(statement)
    return f"{statement.scope}: {text}" if statement.kind in (PICK, WHY, ENERGY) else text


def reason_of(statement: Statement) -> str:
    """The reason alone of a statement said under its case (``fused is memory-bound``), its whole text otherwise."""
    return EVIDENCE[statement.rule](statement.figures)[0] if statement.rule in EVIDENCE else said(statement)
