"""masks.md's sittings run configs/masks.yaml one scenario per file (units of a few minutes): the three files must
hold exactly the shipped config's scenarios and settings, so a claim graded on them is a claim about it."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SPLIT = ROOT / "docs" / "findings" / "masks"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def test_the_split_files_hold_the_shipped_scenarios_once_each() -> None:
    shipped = load(ROOT / "configs" / "masks.yaml")
    parts = [load(path) for path in sorted(SPLIT.glob("masks-*.yaml"))]
    split_scenarios = [scenario for part in parts for scenario in part["scenarios"]]
    by_name = {scenario["name"]: scenario for scenario in split_scenarios}
    assert len(by_name) == len(split_scenarios)
    assert by_name == {scenario["name"]: scenario for scenario in shipped["scenarios"]}


def test_the_split_files_keep_the_shipped_settings() -> None:
    shipped = load(ROOT / "configs" / "masks.yaml")
    for path in sorted(SPLIT.glob("masks-*.yaml")):
        part = load(path)
        assert {key: value for key, value in part.items() if key not in {"name", "scenarios"}} == {
            key: value for key, value in shipped.items() if key not in {"name", "scenarios"}
        }, path.name
        assert part["name"] == path.stem
