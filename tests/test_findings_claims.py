"""The findings pages' timed claims stand on their stored check reports: each report is what grading its stored
runs gives again, each claim sentence is rendered from its block and report, no published claim is one a run
contradicted, the runs behind the claims come from clean committed trees the page cites, and the README's
table is the reports'. Also ``mhabench claims check`` end to end on stored runs."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_findings_runs import FINDINGS, RUN_ID, RUNS, unpack
from typer.testing import CliRunner

from mhabench.cli import app
from mhabench.errors import MhabenchError
from mhabench.findings.check import README, rendered_page, rendered_readme, stored_reports
from mhabench.findings.claims import Claim, parse_page
from mhabench.findings.grade import Level
from mhabench.findings.report import Report, build_report, load, report_path
from mhabench.results.store import load_run

CLAIM_PAGES = sorted(
    page.name for page in FINDINGS.glob("*.md") if page.name != README and parse_page(page.read_text())
)


def stored_report(page: str) -> Report:
    path = report_path(FINDINGS / page)
    assert path.exists(), f"{page} has claim blocks but no {path.name}: run `mhabench claims check {page}`"
    return load(path)


def test_there_are_pages_with_claims() -> None:
    assert {"decode.md", "heads-sweep.md", "scaling.md"} <= set(CLAIM_PAGES)


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_each_claim_sentence_is_rendered_from_its_block_and_the_stored_report(page: str) -> None:
    text = (FINDINGS / page).read_text()
    assert rendered_page(text, stored_report(page), page) == text, f"{page}: run `mhabench claims check` to re-render"
    ids = [block.claim.id for block in parse_page(text)]
    assert ids == [record.claim.id for record in stored_report(page).claims], f"{page}: claims and report differ"


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_the_stored_report_is_what_its_stored_runs_grade_to(page: str, tmp_path: Path) -> None:
    stored = stored_report(page)
    run_ids = [run.run_id for run in stored.runs]
    missing = [run_id for run_id in run_ids if not (RUNS / f"{run_id}.tar.xz").exists()]
    assert not missing, f"{page}: its report rests on runs not stored under docs/findings/runs: {missing}"
    runs = [load_run(path) for path in unpack(run_ids, tmp_path)]
    claims = [record.claim for record in stored.claims]
    again = build_report(page, claims, runs, dt.datetime.fromisoformat(stored.checked_at))
    assert again.runs == stored.runs
    for fresh, kept in zip(again.claims, stored.claims, strict=True):
        assert (fresh.claim.id, fresh.level) == (kept.claim.id, kept.level)
        for one, other in zip(fresh.grades, kept.grades, strict=True):
            assert (one.run_id, one.grade, one.pair, one.picked) == (
                other.run_id,
                other.grade,
                other.pair,
                other.picked,
            )
            for name in ("ratio", "ci_low", "ci_high"):
                assert getattr(one, name) == pytest.approx(getattr(other, name), rel=1e-9), (fresh.claim.id, name)


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_no_published_claim_is_one_a_run_contradicted(page: str) -> None:
    failed = [record.claim.id for record in stored_report(page).claims if record.level == Level.DID_NOT_HOLD]
    assert not failed, f"{page}: re-state or drop the claims its runs contradicted: {failed}"


@pytest.mark.parametrize("page", CLAIM_PAGES)
def test_the_runs_behind_the_claims_are_clean_commits_the_page_cites(page: str) -> None:
    lines = (FINDINGS / page).read_text().splitlines()
    for run in stored_report(page).runs:
        assert run.commit is not None and run.dirty is False, f"{page}: {run.run_id} ran a dirty or unknown tree"
        citing = [line for line in lines if run.run_id in line]
        assert citing, f"{page} does not cite {run.run_id}"
        assert any(re.search(rf"`{run.commit[:7]}", line) for line in citing), (
            f"{page}: the line citing {run.run_id} must name its commit `{run.commit[:7]}` (from its manifest)"
        )


def test_the_readme_table_is_rendered_from_the_stored_reports() -> None:
    text = (FINDINGS / README).read_text()
    assert rendered_readme(text, stored_reports(FINDINGS)) == text, "run `mhabench claims check` to re-render"


CITED_CLAIM = re.compile(
    r"\[`(?P<id>[a-z0-9][a-z0-9-]*)`\]\((?P<page>[a-z0-9-]+\.md)#timed-claims[a-z0-9-]*\): "
    r"(?P<level>held|seen once|did not hold)"
)
"""A page citing another page's graded claim by id, with the level it says the claim stands at."""


def cited_claims(text: str) -> list[tuple[str, str, str]]:
    """Each (page, claim id, level) a page's text cites as ``[`id`](page.md#timed-claims…): level``."""
    return [(found["page"], found["id"], found["level"]) for found in CITED_CLAIM.finditer(text)]


def test_a_cited_claim_is_read_with_its_page_id_and_level() -> None:
    text = "tied ([`h2-tie`](heads-sweep.md#timed-claims): held; [`mha-b1-winner`](decode.md#timed-claims): seen once)"
    assert cited_claims(text) == [("heads-sweep.md", "h2-tie", "held"), ("decode.md", "mha-b1-winner", "seen once")]


@pytest.mark.parametrize("page", sorted(page.name for page in FINDINGS.glob("*.md")))
def test_a_claim_another_page_cites_is_at_the_level_its_report_grades(page: str) -> None:
    for cited_page, claim_id, level in cited_claims((FINDINGS / page).read_text()):
        record = stored_report(cited_page).claim(claim_id)
        assert record is not None, f"{page} cites claim {claim_id!r}, which {cited_page} does not have"
        said = f"{page} says {cited_page}'s {claim_id} is {level}"
        assert str(record.level) == level, f"{said}; its report grades it {record.level}"


DECODE_RUN = "20261127T105733Z-decode-batch-sweep"
PAGE = """# scratch

<!-- claim
id: gqa-b256
config: configs/decode_batch_sweep.yaml
case: {kv_heads: 2, batch: 256}
kind: ratio
impls: [fused, naive]
figure: [2.4, 2.9]
-->
typed
<!-- /claim -->
"""


def scratch_findings(tmp_path: Path, page: str) -> Path:
    findings = tmp_path / "findings"
    findings.mkdir()
    shutil.copy(FINDINGS / README, findings / README)
    (findings / "decode.md").write_text(page)
    return findings


def test_claims_check_grades_given_runs_stores_the_report_and_re_renders(tmp_path: Path) -> None:
    (run_dir,) = unpack([DECODE_RUN], tmp_path)
    findings = scratch_findings(tmp_path, PAGE)
    result = CliRunner().invoke(app, ["claims", "check", "decode", "--from", str(run_dir), "--findings", str(findings)])
    assert result.exit_code == 0, result.output
    assert "2.63× [2.41–2.86]" in result.output
    report = load(findings / "decode.claims.json")
    assert report.claims[0].level == Level.SEEN_ONCE
    page = (findings / "decode.md").read_text()
    assert "typed" not in page and "**Seen once**" in page and "`fused` 2.63× [2.41–2.86] over `naive`" in page
    assert "| [decode.md](decode.md) | 1 |" in (findings / README).read_text()


def test_claims_check_exits_1_when_a_claim_does_not_hold(tmp_path: Path) -> None:
    (run_dir,) = unpack([DECODE_RUN], tmp_path)
    findings = scratch_findings(tmp_path, PAGE.replace("figure: [2.4, 2.9]", "figure: [3.0, 4.0]"))
    args = ["claims", "check", "decode", "--from", str(run_dir), "--findings", str(findings), "--no-write"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "does not hold: gqa-b256" in result.output
    assert not (findings / "decode.claims.json").exists()


@pytest.mark.parametrize(
    ("page", "args", "fragment"),
    [
        (PAGE, ["nope"], "PAGE: 'nope' is not a findings page"),
        (PAGE.replace("kind: ratio", "kind: fastest"), ["decode"], "claim block"),
        ("# no claims\n", ["all"], "no page under"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, page: str, args: list[str], fragment: str) -> None:
    findings = scratch_findings(tmp_path, page)
    result = CliRunner().invoke(app, ["claims", "check", *args, "--findings", str(findings), "--from", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output


def test_a_sitting_runs_each_config_once_in_a_fresh_process_and_reads_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mhabench.findings import check as checking

    (stored,) = unpack([DECODE_RUN], tmp_path / "stored")
    commands: list[list[str]] = []

    def fake_run(command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        out = Path(command[command.index("--out") + 1])
        shutil.copytree(stored, out / f"{DECODE_RUN}-{len(commands)}")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(checking.subprocess, "run", fake_run)
    claims = [block.claim for block in parse_page(PAGE + PAGE.replace("gqa-b256", "other"))]
    runs = checking.sittings(claims, 2, tmp_path / "out")
    assert len(runs) == 2 and len(commands) == 2
    assert commands[0][1:] == [
        "-m",
        "mhabench",
        "run",
        "configs/decode_batch_sweep.yaml",
        "--replicates",
        "3",
        "--out",
        str(tmp_path / "out"),
    ]

    def failing(command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(checking.subprocess, "run", failing)
    with pytest.raises(MhabenchError, match="exit 1, 0 run folders made"):
        checking.launch("default", 3, tmp_path / "out")


TREE = re.compile(r"tree `([0-9a-f]{7})`")


def cited_trees(page: Path) -> Iterator[tuple[int, str, str, str]]:
    """(line number, run id, the tree cited for it, the text around it) for each stored run a page cites with a
    tree: on the run's own line, or on the ``| command |`` row just above its ``| run |`` row."""
    lines = page.read_text().splitlines()
    for index, line in enumerate(lines):
        runs = [run_id for run_id in RUN_ID.findall(line) if (RUNS / f"{run_id}.tar.xz").exists()]
        where = line
        if (
            not TREE.search(line)
            and line.startswith("| run |")
            and index
            and lines[index - 1].startswith("| command |")
        ):
            where = lines[index - 1]
        found = TREE.search(where)
        if found and len(runs) == 1:
            yield index + 1, runs[0], found.group(1), where


def recorded_commit(run_id: str) -> tuple[str | None, bool]:
    """The commit a stored run's manifest records for its code, and whether that tree was dirty."""
    with tarfile.open(RUNS / f"{run_id}.tar.xz") as archive:
        member = next(one for one in archive.getmembers() if one.name.endswith("manifest.json"))
        opened = archive.extractfile(member)
        assert opened is not None
        manifest = json.load(opened)
    code = [version for version in manifest.get("code", {}).values() if version.get("commit")]
    commit = code[0]["commit"] if code else manifest.get("environment", {}).get("git_commit")
    return commit, any(version.get("dirty") for version in code)


@pytest.mark.parametrize("page", sorted(page.name for page in FINDINGS.glob("*.md")))
def test_the_tree_a_page_cites_for_a_run_is_the_one_its_manifest_records(page: str) -> None:
    for line, run_id, tree, where in cited_trees(FINDINGS / page):
        commit, dirty = recorded_commit(run_id)
        if commit is None:
            continue  # a run whose manifest records no commit (run outside a repository) cannot be checked
        assert commit.startswith(tree), f"{page}:{line}: cites tree {tree} for {run_id}; its manifest says {commit[:7]}"
        assert not dirty or "dirty" in where or "uncommitted" in where, (
            f"{page}:{line}: {run_id} ran a tree with uncommitted changes; the page must say so"
        )


def test_a_run_with_library_implementations_records_the_commit_of_its_own_code(tmp_path: Path) -> None:
    from mhabench.findings.report import run_record

    (run_dir,) = unpack(["20261127T104517Z-hf-attention"], tmp_path)  # hf_* rows: transformers' code, no repo
    record = run_record(load_run(run_dir))
    assert (record.commit, record.dirty) == ("e48d81880887f1e60a58cc3971bd5de5321bd664", False)
    assert record.config == "hf_attention.yaml" and record.processes == 3


def test_a_claim_that_fixes_threads_or_allocator_is_graded_only_on_runs_made_so(tmp_path: Path) -> None:
    from mhabench.findings.report import runs_as_claimed

    runs = [load_run(path) for path in unpack(["20261127T113344Z-default", "20261127T115721Z-default"], tmp_path)]
    spec = {"id": "c", "config": "default", "case": {"seq_len": 2048}, "kind": "winner", "impls": ["fused"]}
    system = Claim.model_validate(spec | {"allocator": "system"})
    steady_two = Claim.model_validate(spec | {"allocator": "steady", "threads": 2})
    one_thread = Claim.model_validate(spec | {"threads": 1})
    assert [runs_as_claimed(system, run) for run in runs] == [False, True]
    assert [runs_as_claimed(steady_two, run) for run in runs] == [True, False]
    assert [runs_as_claimed(one_thread, run) for run in runs] == [False, False]
    assert [runs_as_claimed(Claim.model_validate(spec), run) for run in runs] == [True, True]
    report = build_report("x.md", [system], runs, dt.datetime(2026, 11, 29, tzinfo=dt.UTC))
    assert [one.run_id for one in report.claims[0].grades] == ["20261127T115721Z-default"]


def test_a_sitting_launches_a_claim_with_its_threads_and_allocator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mhabench.findings import check as checking

    (stored,) = unpack(["20261127T120024Z-default"], tmp_path / "stored")
    commands: list[list[str]] = []

    def fake_run(command: list[str], check: bool) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        shutil.copytree(stored, Path(command[command.index("--out") + 1]) / f"run-{len(commands)}")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(checking.subprocess, "run", fake_run)
    spec = {"id": "c", "config": "default", "case": {"seq_len": 512}, "kind": "winner", "impls": ["fused"]}
    claims = [Claim.model_validate(spec | {"threads": 1}), Claim.model_validate(spec | {"id": "d"})]
    checking.sittings(claims, 1, tmp_path / "out")
    assert [command[3:] for command in commands] == [
        ["run", "--threads", "1", "--replicates", "3", "--out", str(tmp_path / "out")],
        ["run", "--replicates", "3", "--out", str(tmp_path / "out")],
    ]
