"""Property tests: whatever the YAML or the command line, the answer is exit 0, or exit 2 with one line.

Documents are random structures (scalars including huge ints, non-finite floats, markup-like and
very long strings; nested lists and mappings; real field names and typos), near-valid configs with
random damage, raw text, and alias bombs. Nothing is measured: the CLI runs with ``--dry-run``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from mhabench.cli import app
from mhabench.errors import MAX_LISTED_ERRORS, InputError, UnknownImplementationError
from mhabench.measure.environment import environment
from mhabench.results.columns import COLUMNS
from mhabench.results.schema import FORMAT_VERSION
from mhabench.run.resume import NothingToResumeError, prepare_resume
from mhabench.scenario.cases import count_cases, expand_cases
from mhabench.scenario.config import RunConfig, ScenarioSpec, TimingConfig
from mhabench.scenario.loading import load_config, parse_config

INT64 = (-(2**63), 2**63 - 1)
MESSAGE_LIMIT = 1000  # the longest legitimate line lists every registered implementation
MAX_DRY_RUN_CASES = 64  # keep the CLI examples fast: a dry run renders a table row per (case, implementation)
FIELD_NAMES = sorted({*RunConfig.model_fields, *ScenarioSpec.model_fields, *TimingConfig.model_fields})
KEYS = st.sampled_from([*FIELD_NAMES, "hedas", "sead", "seq-len", "Heads", ""]) | st.text(max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2, 8, 16, -1, 2**63, 2**64, 10**30, 1_048_577, 65_537, 1025]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(
        ["auto", "cpu", "cuda", "cuda:0", "float32", "naive", "fused", "train", "decode", "[/b]", "x.py:C"]
    ),
    st.just("x" * 5000),
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4), max_leaves=20
)
VALID_YAML = "device: cpu\nimplementations: [naive, fused]\nscenarios:\n  - {seq_len: [8, 16], d_model: 16, heads: 2}\n"
YAML_PIECES = st.sampled_from([*":-[]{}&*!|>'\"#,? \n\t%@`", "\n  ", "  - ", "&a ", "*a", "0x", "1e9", "seq_len: "])
_names = itertools.count()


def one_line_input_error(error: InputError) -> None:
    """One line per problem, each short and complete, and never more than a screenful of them."""
    lines = str(error).split("\n")
    assert all(lines) and len(lines) <= MAX_LISTED_ERRORS + 1, str(error)[:400]
    assert all(len(line) < MESSAGE_LIMIT for line in lines), str(error)[:200]


def check_parsed(config: RunConfig) -> None:
    """A config that validates must expand to cases whose every integer fits a Parquet int64 column."""
    device = torch.device("cpu")
    if count_cases(config, device) <= MAX_DRY_RUN_CASES:
        for case in expand_cases(config, device):
            for value in (case.batch, case.seq_len, case.d_model, case.heads, case.kv_heads, case.seed):
                assert INT64[0] <= value <= INT64[1]


def parse_or_input_error(data: Any) -> None:
    try:
        config = parse_config(data, "fuzz.yaml")
    except InputError as error:
        one_line_input_error(error)
    else:
        check_parsed(config)


def load_or_raise(text: str, folder: Path) -> RunConfig:
    path = folder / f"doc{next(_names)}.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))  # a lone surrogate becomes invalid UTF-8: also input
    return load_config(path)


def load_or_input_error(text: str, folder: Path) -> None:
    try:
        load_or_raise(text, folder)
    except InputError as error:
        one_line_input_error(error)


@st.composite
def near_valid(draw: st.DrawFn) -> dict[str, Any]:
    """A valid config, then a few fields (top level, timing or scenario) replaced by random values."""
    spec: dict[str, Any] = {"seq_len": draw(st.sampled_from([8, [8, 16]])), "d_model": 16, "heads": [1, 2]}
    timing: dict[str, Any] = {"min_run_time_s": 0.01}
    doc: dict[str, Any] = {"device": "cpu", "timing": timing, "scenarios": [spec]}
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from([doc, timing, spec]))
        target[draw(KEYS)] = draw(VALUES)
    return doc


@st.composite
def alias_bombs(draw: st.DrawFn) -> str:
    """``width``^``depth`` values behind a few lines of aliases, placed under a field or an unknown key."""
    width, depth = draw(st.integers(2, 12)), draw(st.integers(2, 10))
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    field = draw(st.sampled_from(["scenarios", "name", "implementations", "dtype", "surprise"]))
    return "\n".join([*lines, f"{field}: *l{depth - 1}", "device: cpu"]) + "\n"


@st.composite
def damaged_text(draw: st.DrawFn) -> str:
    """The valid document with random YAML punctuation inserted and characters deleted."""
    text = VALID_YAML
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        if draw(st.booleans()):
            text = text[:at] + draw(YAML_PIECES) + text[at:]
        else:
            text = text[:at] + text[at + draw(st.integers(1, 5)) :]
    return text


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@contextlib.contextmanager
def inside(path: Path) -> Iterator[None]:
    """Run in ``path`` so nothing a command might write lands in the repository."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def assert_clean_exit(result: Result) -> None:
    """Exit 0, or exit 2 with ``error:`` lines on stderr (one per problem, a screenful at most); never a traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stdout + result.stderr
    assert result.exit_code in (0, 2), (result.exit_code, result.stderr[-500:])
    if result.exit_code == 2:
        lines = result.stderr.strip().splitlines()
        assert 1 <= len(lines) <= MAX_LISTED_ERRORS + 1, result.stderr[-500:]
        assert all(line.startswith("error: ") and len(line) < MESSAGE_LIMIT for line in lines), result.stderr[-500:]


@settings(max_examples=1000, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6) | near_valid() | VALUES)
@example({"scenarios": [{"seq_len": 8, "d_model": 16, "hedas": 8}]})
@example({"scenarios": [{"seq_len": 10**30, "d_model": 16, "heads": 2}]})
def test_any_document_validates_or_gives_one_line(data: Any) -> None:
    parse_or_input_error(data)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damaged_text() | st.lists(YAML_PIECES | st.characters(), max_size=60).map("".join))
@example("scenarios: [" * 3000)
@example("seq_len: 1" + "0" * 5000 + "\n")
def test_any_text_loads_or_gives_one_line(folder: Path, text: str) -> None:
    load_or_input_error(text, folder)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(alias_bombs())
def test_alias_bombs_end_quickly_in_one_line(folder: Path, text: str) -> None:
    start = time.perf_counter()
    load_or_input_error(text, folder)
    assert time.perf_counter() - start < 2.0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(near_valid() | st.dictionaries(KEYS, VALUES, max_size=4) | alias_bombs() | damaged_text())
@example({"scenarios": [{"seq_len": "[/b]", "d_model": 16, "heads": 2}]})
def test_run_dry_run_on_any_document_exits_cleanly(folder: Path, document: Any) -> None:
    text = document if isinstance(document, str) else yaml.safe_dump(document, allow_unicode=True)
    path = folder / f"cli{next(_names)}.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    with contextlib.suppress(InputError):  # the property under test is the CLI's answer, below
        config = load_config(path)
        if count_cases(config, torch.device("cpu")) > MAX_DRY_RUN_CASES:
            return
    with inside(folder):
        assert_clean_exit(CliRunner().invoke(app, ["run", str(path), "--dry-run"]))


TOKENS = st.sampled_from(
    [
        "--dry-run",
        "--device",
        "cpu",
        "gpu",
        "cuda",
        "cuda:7",
        "auto",
        "--impl",
        "naive",
        "fused",
        "nope",
        "--out",
        "out",
        "--plugin",
        "missing.py",
        "--baseline",
        "--threshold",
        "5%",
        "-1%",
        "abc",
        "--format",
        "html",
        "pdf",
        "--force",
        "--fail-on-regression",
        "--output",
        "x.csv",
        "x.txt",
        "latest",
        "--max-rows",
        "0",
        "10",
        "[/x].yaml",
        "",
        "-",
        "--",
        "--help",
        "--bogus",
        "missing.yaml",
        "--resume",
        "--isolation",
        "process",
        "inprocess",
        "--repeat",
        "--shard",
        "1/2",
        "3/2",
        "x/y",
        "--no-memory-guard",
        "run.json",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(["run", "list", "compare", "report", "--version", "nope"]), st.lists(TOKENS, max_size=5))
@example("run", ["--bogus"])
@example("run", ["--device", "tpu"])  # no config: the default scenario is chosen by device
def test_any_command_line_exits_cleanly(folder: Path, command: str, tokens: list[str]) -> None:
    """``run`` always gets ``--dry-run`` first (before any ``--``), so nothing is ever measured; the folder
    holds no run, so ``--resume`` always has nothing it could measure."""
    prefix = {
        "run": ["--dry-run"],
        "compare": ["--results-root", str(folder)],
        "report": ["--results-root", str(folder)],
    }
    with inside(folder):
        assert_clean_exit(CliRunner().invoke(app, [command, *prefix.get(command, []), *tokens]))


# --- hostile documents, by hand: the cases issue 10 names ----------------------------------------


def error_line(data: Any, error: type[InputError] = InputError) -> str:
    with pytest.raises(error) as caught:
        parse_config(data, "x.yaml")
    one_line_input_error(caught.value)
    return str(caught.value)


def spec(**fields: Any) -> dict[str, Any]:
    return {"scenarios": [{"seq_len": 8, "d_model": 16, "heads": 2, **fields}]}


def test_quoted_values_are_cut_to_a_readable_length() -> None:
    message = error_line(spec(seq_len="x" * 100_000))
    assert "…" in message and len(message) < 250
    assert len(error_line(spec(causal=[[list(range(1000))] * 1000]))) < 250
    message = error_line({**spec(), "implementations": ["n" * 10_000]}, UnknownImplementationError)
    assert "…" in message and len(message) < MESSAGE_LIMIT


def test_odd_keys_stay_on_one_line() -> None:
    assert "unknown field" in error_line(spec(**{"bad\nkey" * 50: 1}))
    assert error_line({**spec(), 7: 1}) == "x.yaml: (top level): key 7 is not a field name"


@pytest.mark.parametrize("value", [10**30, -(10**30), 2**63])
def test_values_beyond_int64_are_one_line_errors(value: int) -> None:
    assert "scenarios[0].seq_len: Input should be" in error_line(spec(seq_len=value))
    assert "scenarios[0].seed: Input should be" in error_line(spec(seed=value))


def test_an_integer_too_long_to_print_is_described_not_printed(folder: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_or_raise("scenarios:\n  - {seq_len: 0x" + "f" * 5000 + ", d_model: 16, heads: 2}\n", folder)
    assert "(got an integer of 20000 bits)" in str(caught.value)
    with pytest.raises(InputError, match=r"invalid YAML: .*4300 digits"):
        load_or_raise("scenarios:\n  - {seq_len: 1" + "0" * 5000 + ", d_model: 16, heads: 2}\n", folder)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e400", "7200"])
def test_timing_values_must_be_finite_and_sane(folder: Path, value: str) -> None:
    text = f"timing: {{max_run_time_s: {value}}}\nscenarios: [{{seq_len: 8, d_model: 16, heads: 2}}]\n"
    with pytest.raises(InputError, match=r"timing\.max_run_time_s: "):
        load_or_raise(text, folder)


def test_billion_laughs_gives_a_short_error_quickly(folder: Path) -> None:
    laughs = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
    start = time.perf_counter()
    with pytest.raises(InputError, match="expands to more than 100,000 values") as caught:
        load_or_raise("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + laughs + "scenarios: *i\n", folder)
    assert time.perf_counter() - start < 2.0
    assert len(str(caught.value)) < 300


def test_deeply_nested_yaml_is_one_line(folder: Path) -> None:
    with pytest.raises(InputError, match="nested too deeply"):
        load_or_raise("scenarios: " + "[" * 20_000 + "]" * 20_000 + "\n", folder)


# --- run --resume on a hostile run folder ---------------------------------------------------------

MANIFEST_KEYS = st.sampled_from(
    [
        "run_id",
        "format_version",
        "config",
        "environment",
        "status",
        "pid",
        "host",
        "pid_started",
        "heartbeat",
        "repeats",
        "plugins",
        "shard",
        "config",
        "config",
    ]
)


@pytest.fixture(scope="module")
def valid_manifest() -> dict[str, Any]:
    """A manifest ``--resume`` accepts: an interrupted run of a small valid config, on this machine."""
    config = parse_config(yaml.safe_load(VALID_YAML), "valid.yaml")
    return {
        "run_id": "r",
        "format_version": FORMAT_VERSION,
        "config": config.model_dump(mode="json"),
        "environment": environment(torch.device("cpu")),
        "repeats": 1,
        "status": "interrupted",
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.dictionaries(MANIFEST_KEYS | KEYS, VALUES, max_size=4),
    st.dictionaries(KEYS, VALUES, max_size=3),
    st.booleans(),
    st.binary(max_size=200),
)
def test_any_manifest_resumes_or_gives_one_line(
    folder: Path,
    valid_manifest: dict[str, Any],
    changes: dict[str, Any],
    config_changes: dict[str, Any],
    force: bool,
    csv_tail: bytes,
) -> None:
    """A damaged manifest (any field, the config's fields), a damaged CSV: a plan, "nothing to resume", or one line."""
    run_dir = folder / f"resume{next(_names)}"
    run_dir.mkdir()
    manifest = {**valid_manifest, "config": {**valid_manifest["config"], **config_changes}, **changes}
    (run_dir / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (run_dir / "results.csv").write_bytes(",".join(COLUMNS).encode() + b"\r\n" + csv_tail)
    with inside(folder):
        try:
            prepare_resume(str(run_dir), folder, force)
        except NothingToResumeError:
            pass
        except InputError as error:
            one_line_input_error(error)
