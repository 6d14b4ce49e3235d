"""The HTML report in a real browser: headless Chromium loads it, screenshots it, and logs no console error."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from synthetic_runs import sweep_report

__all__ = ["sweep_report"]  # the shared fixture, imported so pytest finds it

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1280, 2000)
PLOT_BLUE = (31, 119, 180)  # matplotlib's C0, the first implementation's colour in every plot

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install chromium; .ci/run does it)"),
]


def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False)


@pytest.fixture
def page(sweep_report: Path) -> Path:
    return sweep_report / "report.html"


def png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])  # the IHDR chunk
    return width, height


def test_chromium_renders_the_report_without_console_errors(page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    done = chromium(
        tmp_path / "profile",
        "--enable-logging=stderr",
        "--v=0",
        f"--screenshot={shot}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        page.resolve().as_uri(),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for marker in ("ERROR:CONSOLE", "Uncaught", "Not allowed to load local resource"):
        assert marker not in done.stderr, done.stderr[-2000:]
    assert png_size(shot) == WINDOW
    pixels = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    blue = int((np.abs(pixels - np.array(PLOT_BLUE)).max(axis=-1) < 12).sum())
    assert blue > 500, "the plots did not paint: no pixel of the first implementation's colour"


def test_chromium_dom_has_every_image(page: Path, tmp_path: Path) -> None:
    done = chromium(tmp_path / "profile", "--dump-dom", page.resolve().as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count('<img src="data:image/png;base64,') == 5
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in done.stdout
    assert "<script>" not in done.stdout
