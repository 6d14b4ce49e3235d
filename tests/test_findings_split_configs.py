"""Some findings pages run a shipped config one scenario per file (units of a few minutes under the exclusive CPU
lock): the files must hold exactly the shipped config's scenarios and settings, so a claim graded on them is a
claim about it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SPLITS = [("masks", ROOT / "docs" / "findings" / "masks"), ("models", ROOT / "docs" / "findings" / "models")]


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize(("shipped", "folder"), SPLITS)
def test_the_split_files_hold_the_shipped_scenarios_once_each(shipped: str, folder: Path) -> None:
    config = load(ROOT / "configs" / f"{shipped}.yaml")
    split_scenarios = [scenario for path in sorted(folder.glob("*.yaml")) for scenario in load(path)["scenarios"]]
    by_name = {scenario["name"]: scenario for scenario in split_scenarios}
    assert len(by_name) == len(split_scenarios)
    assert by_name == {scenario["name"]: scenario for scenario in config["scenarios"]}


@pytest.mark.parametrize(("shipped", "folder"), SPLITS)
def test_the_split_files_keep_the_shipped_settings(shipped: str, folder: Path) -> None:
    config = load(ROOT / "configs" / f"{shipped}.yaml")
    for path in sorted(folder.glob("*.yaml")):
        part = load(path)
        assert {key: value for key, value in part.items() if key not in {"name", "scenarios"}} == {
            key: value for key, value in config.items() if key not in {"name", "scenarios"}
        }, path.name
        assert part["name"] == path.stem
