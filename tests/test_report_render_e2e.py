"""The report as a person sees it: ``report.html`` rendered by headless Chromium.

Debian's ``chromium`` package (installed by ``docker/ci-setup.sh`` for CI) draws the page
offline into a PNG; the picture must hold the figures (many non-white pixels, the colours
of the plots), not a blank or broken page. Then it lays the page out at the widths of a
laptop and a projector and measures every element (a copy of the page with a script that
writes what it measured into the page, read back with ``--dump-dom``): nothing may reach
past the page's width (a table wider than the text scrolls inside its own box), and every
figure must fit. A run whose nodes hold their own data (``data: {source: node}``, like
every compose and inventory run) must show the same ±1 sd bands and 1/2/3-sd ellipses as a
local run: they are checked in the captions on the page and as elements of the exported
SVG figures. Without Chromium the tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from starling.orchestrator.cli.main import main
from tests.conftest import ROOT, run_cli
from tests.node.test_runtime_harness import Cluster

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


MEASURE = """<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const past = [];
  for (const el of document.body.querySelectorAll("*")) {
    // Inside a table's own box it may scroll; the box itself must fit.
    if (el.closest(".table-box") && !el.classList.contains("table-box")) continue;
    const r = el.getBoundingClientRect();
    if (r.width && (r.right > width + 1 || r.left < -1)) {
      past.push(`${el.tagName}.${el.className} ${Math.round(r.left)}..${Math.round(r.right)}`);
    }
  }
  const figures = [...document.querySelectorAll("figure")].map((f) => ({
    id: f.id,
    width: f.querySelector("img").getBoundingClientRect().width,
    drawn: f.querySelector("img").naturalWidth,
    caption: f.querySelector("figcaption").textContent,
  }));
  const headers = [...document.querySelectorAll("th")].map((th) => th.textContent);
  const out = {width, page: document.documentElement.scrollWidth, past, figures, headers,
               verdict: (document.getElementById("verdict") || {}).textContent || ""};
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def measure(page, tmp_path, width: int) -> dict:
    """Every element of ``page`` laid out ``width`` px wide, as the script above measured."""
    copy = tmp_path / f"measure-{width}.html"
    copy.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-measure'}",
        f"--window-size={width},3000",
        "--virtual-time-budget=10000",  # the page's images decoded before the dump
        "--dump-dom",
        copy.resolve().as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="measured">(.*?)</pre>', done.stdout, re.S)
    assert found, done.stderr[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _compose_style_run(tmp_path, home) -> Path:
    """A run of three nodes started by hand, each holding its own synthetic shard
    (``starling node serve --shard K``), driven as an inventory with ``data: {source:
    node}``: what the compose testbed runs."""
    nodes = ("a", "b", "c")
    experiment = {
        "name": "compose-style",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "node"},
        "nodes": [{"id": n} for n in nodes],
        "topology": {"kind": "ring"},
        "rounds": 80,
        "chains": 16,
        "seed": 2,
    }
    with Cluster(tmp_path) as cluster:
        procs = {
            node: cluster.launch(
                node,
                extra=["--id", node, "--shard", str(k), "--data-seed", "5", "--data-size", "20"],
            )
            for k, node in enumerate(nodes)
        }
        inventory = tmp_path / "nodes.yaml"
        inventory.write_text(
            yaml.safe_dump({"nodes": {n: cluster.ready(p).address for n, p in procs.items()}})
        )
        path = tmp_path / "compose-style.yaml"
        path.write_text(yaml.safe_dump(experiment))
        out = tmp_path / "compose-out"
        done = run_cli(
            "run", str(path), "--inventory", str(inventory), "--out", str(out), env_home=home
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_a_compose_style_report_fits_the_page_with_its_bands_and_ellipses(tmp_path, starling_home):
    out = _compose_style_run(tmp_path, starling_home)
    figures = tmp_path / "figures"
    done = run_cli("report", str(out), "--figures", str(figures), env_home=starling_home)
    assert done.returncode == 0, done.stderr
    page = out / "report.html"
    for width in (1400, 1000):
        seen = measure(page, tmp_path, width)
        print(f"at {width} px: page {seen['page']} px wide, {len(seen['figures'])} figures")
        assert seen["page"] <= seen["width"], f"the page scrolls sideways at {width} px"
        assert not seen["past"], f"past the page's edge at {width} px: {seen['past'][:10]}"
        assert all(0 < f["width"] <= seen["width"] and f["drawn"] > 0 for f in seen["figures"])
    headers = seen["headers"]
    assert not [h for h in headers if re.search(r"[a-z_]\.[a-z_]", h)], headers  # no dotted key
    assert "node" in headers and any("R-hat" in h for h in headers), headers
    assert "Verdict" in seen["verdict"] and "R-hat at its worst" in seen["verdict"]
    captions = {f["id"]: f["caption"] for f in seen["figures"]}
    assert "±1 sd" in captions["figure-convergence-w2"], captions
    assert "solid ellipse 1 sd of the exact posterior" in captions["figure-posterior"]
    assert "no exact posterior" not in " ".join(captions.values()).lower()
    window = re.search(
        r"last (\d+) rounds .* of all 16 chains: (\d+) per node", captions["figure-posterior"]
    )
    assert window and int(window.group(2)) >= 16 * 40, captions["figure-posterior"]
    # The same figures as files, one by one: the bands and ellipses are elements of them.
    names = sorted(p.name for p in figures.iterdir())
    assert {"posterior.svg", "posterior.png", "convergence-w2.svg", "network.svg"} <= set(names)
    posterior = (figures / "posterior.svg").read_text()
    assert all(f'id="sd-ellipse-{k}' in posterior for k in (1, 2, 3)), "ellipses missing"
    curves = (figures / "convergence-w2.svg").read_text()
    assert all(f'id="sd-band-node-{n}' in curves for n in "abc"), "bands missing"
