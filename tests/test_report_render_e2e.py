"""The report as a person sees it: ``report.html`` rendered by headless Chromium.

Debian's ``chromium`` package (installed by ``docker/ci-setup.sh`` for CI) draws the page
offline into a PNG; the picture must hold the figures (many non-white pixels, the colours
of the plots), not a blank or broken page. Without Chromium the test skips locally and
fails under ``CI=true``.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest
import yaml

from starling.orchestrator.cli.main import main
from tests.conftest import ROOT

pytestmark = pytest.mark.e2e
pytest.importorskip("matplotlib")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: docker/ci-setup.sh installs Debian's package")
        pytest.skip("no chromium here (apt-get install chromium); CI installs it")
    return CHROMIUM


def render(page, png, tmp_path, height: int = 5000) -> np.ndarray:
    """The page drawn at 1300 px wide into ``png``; returns its pixels (h, w, channels)."""
    import matplotlib.image

    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--hide-scrollbars",
        f"--window-size=1300,{height}",
        f"--screenshot={png}",
        page.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0 and png.is_file(), done.stderr[-2000:]
    return matplotlib.image.imread(png)


def _drawn(pixels: np.ndarray) -> tuple[float, int]:
    """Fraction of pixels that are not near-white, and how many distinct colours."""
    rgb = (pixels[..., :3] * 255).astype(np.uint8)
    inked = float(np.mean(rgb.min(axis=-1) < 235))
    colours = len(np.unique((rgb // 32).reshape(-1, 3), axis=0))
    return inked, colours


def test_the_quickstart_report_renders_with_its_figures(tmp_path, starling_home):
    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    path = tmp_path / "quickstart.yaml"
    path.write_text(yaml.safe_dump({**raw, "rounds": 40}))
    out = tmp_path / "out"
    assert main(["simulate", str(path), "--out", str(out)]) == 0
    pixels = render(out / "report.html", tmp_path / "report.png", tmp_path)
    inked, colours = _drawn(pixels)
    print(
        f"rendered {pixels.shape[1]}x{pixels.shape[0]}: {100 * inked:.1f} % inked, "
        f"{colours} colour bins"
    )
    assert pixels.shape[1] >= 1300
    assert inked > 0.03, "the page rendered (nearly) blank"
    assert colours > 40, "the page has too few colours to hold the plots"
    # The upper part holds the convergence figure: drawn there, not only text further down.
    top_inked, _ = _drawn(pixels[: pixels.shape[0] // 4])
    assert top_inked > 0.05
