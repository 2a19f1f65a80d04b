"""``starling report``: a self-contained page from a real results folder.

The folders are written by the real command line (``simulate`` in-process, no process
started); the checks read the page as a browser would get it: every image embedded, no
address to fetch, and each section there with the run's own figures in it.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re

import numpy as np
import pytest
import yaml

from starling.orchestrator.cli.main import main
from starling.orchestrator.report import write_report
from tests.conftest import ROOT

pytest.importorskip("matplotlib")

MODEL = {"name": "linear_regression", "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0}}
FAULTY = {
    "name": "faulty",
    "algorithm": "d-sgld",
    "hyperparameters": {"eta": 0.009},
    "model": MODEL,
    "data": {"source": "synthetic", "size": 50, "seed": 3},
    "topology": {"kind": "ring", "nodes": 4},
    "rounds": 30,
    "chains": 30,
    "seed": 5,
    "faults": [
        {"link": [0, 1], "rounds": [5, 15]},
        {"link": "all", "drop": 0.2, "rounds": [15, 20]},
        {"node": 2, "kill_at_round": 10, "restart_after_rounds": 5},
    ],
}
IMAGE = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')


def _simulate(tmp_path, raw: dict, *extra: str) -> tuple[int, object]:
    path = tmp_path / f"{raw.get('name', raw.get('study'))}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    return main(["simulate", str(path), "--out", str(out), *extra]), out


def _images(page: str) -> list[np.ndarray]:
    import matplotlib.image

    return [matplotlib.image.imread(io.BytesIO(base64.b64decode(b))) for b in IMAGE.findall(page)]


def _no_network(page: str) -> None:
    """Nothing the page would fetch: no src/href to an address, no script."""
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "<script" not in page and "@import" not in page


def test_simulate_writes_a_self_contained_report_with_every_section(tmp_path, starling_home):
    code, out = _simulate(tmp_path, FAULTY)
    assert code == 0
    page = (out / "report.html").read_text()
    assert "report.html" in json.loads((out / "manifest.json").read_text())["files"]
    _no_network(page)
    for heading in (
        "Convergence",
        "Samples against the posterior",
        "Network",
        "Faults over time",
        "Per node",
        "Run figures",
        "Account",
        "Experiment file as run",
    ):
        assert f"<h2>{heading}</h2>" in page, heading
    images = _images(page)
    assert len(images) == 4  # W2 curve, posterior, network, timeline
    for image in images:
        assert image.shape[0] > 200 and image.shape[1] > 500
        assert np.std(image[..., :3]) > 0.05  # drawn on, not a blank canvas
    metrics = json.loads((out / "metrics.json").read_text())
    assert f"{metrics['w2']['per_node']['0']:.4g}" in page  # the per-node table
    assert "±1 sd" in page and "bootstrap" in page  # the band is explained
    assert "1 → 2" in page  # the links table names directed links
    assert "name: faulty" in page  # the experiment file as run
    # The evaluation's verdict, in the one box that leads the page, coloured by it.
    verdict = metrics["verdict"]["run"]
    box = page.split('<section id="verdict"')[1].split("</section>")[0]
    assert f"<h2>Verdict: {verdict}</h2>" in box and f"verdict-{verdict.replace(' ', '-')}" in box
    assert all(html.escape(r) in box for r in metrics["verdict"]["reasons"])
    assert page.count('id="verdict"') == 1


def test_new_metrics_and_curves_appear_without_a_change_to_the_report(tmp_path, starling_home):
    code, out = _simulate(tmp_path, {**FAULTY, "faults": []}, "--no-report")
    assert code == 0 and not (out / "report.html").exists()
    metrics = json.loads((out / "metrics.json").read_text())
    metrics["ess_bulk"] = {node: 123.25 + k for k, node in enumerate(["0", "1", "2", "3"])}
    metrics["sinkhorn"] = {"average": 0.0421, "per_node": {"0": 0.5, "1": 0.6}}
    (out / "metrics.json").write_text(json.dumps(metrics))
    lines = ["round,average,node-0,node-1"] + [
        f"{k},{1 / (k + 1)},{2 / (k + 1)},0.5" for k in range(30)
    ]
    (out / "sinkhorn_curve.csv").write_text("\n".join(lines) + "\n")
    page = write_report(out).read_text()
    # Each shows under a header in words (never its dotted key), in a table of its own.
    assert "<th>ess bulk</th>" in page and "123.2" in page and "126.2" in page
    assert "<th>sinkhorn</th>" in page and "<td>sinkhorn · average</td>" in page
    assert "sinkhorn.per_node" not in page and "sinkhorn.average" not in page
    assert "sinkhorn_curve.csv" in page
    assert len(_images(page)) == 4  # w2 and sinkhorn curves, posterior, network (no faults)
    assert "No node or link fault" in page


def test_a_study_gets_one_page_comparing_its_cells(tmp_path, starling_home):
    study = {
        "study": "tiny",
        "description": "two variants against p",
        "base": {
            k: v
            for k, v in FAULTY.items()
            if k not in ("name", "faults", "algorithm", "hyperparameters")
        },
        "variants": [
            {"label": "D-SGLD", "algorithm": "d-sgld", "hyperparameters": {"eta": 0.009}},
            {"label": "D-ULA", "algorithm": "d-ula", "hyperparameters": {}},
        ],
        "cells": [
            {"label": f"p={p}", "x": p, "faults": [{"link": "all", "drop": p}]} for p in (0.0, 0.3)
        ],
        "x_label": "link-failure probability p",
        "seeds": 2,
    }
    code, out = _simulate(tmp_path, study)
    assert code == 0
    page = (out / "report.html").read_text()
    _no_network(page)
    assert "Starling study: tiny" in page and "two variants against p" in page
    images = _images(page)
    assert len(images) == 2  # final figures against p, curves of every cell
    assert all(np.std(i[..., :3]) > 0.05 for i in images)
    assert "p-0.3/D-ULA/seed-1" in page  # every run listed
    assert "±1 sd over the replicates (seeds)" in page  # the band over seeds is drawn
    # The banner counts the runs' verdicts; the paired differences have their own table.
    assert re.search(r'class="verdict verdict-[a-z-]+"><h2>Verdict: \d+ of 8 runs converged', page)
    assert "Paired by seed" in page and "<th>difference</th>" in page
    # The final figures' table: table.csv's numbers to 4 significant figures (the file keeps
    # 16 digits).
    final = page.split("Final figures</h2>", 1)[1].split("</table>", 1)[0]
    cells = re.findall(r"<td>([^<]*)</td>", final)
    decimals = [c for c in cells if re.fullmatch(r"-?\d*\.\d+(e[-+]?\d+)?", c)]
    digits = [c.lstrip("-").split("e")[0].replace(".", "").lstrip("0") for c in decimals]
    assert decimals and all(len(d) <= 4 for d in digits), decimals


def test_report_refuses_a_folder_without_results(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "has no metrics.json" in capsys.readouterr().err


def test_the_verdict_comes_first_read_from_the_metrics_when_they_hold_one(tmp_path, starling_home):
    code, out = _simulate(tmp_path, {**FAULTY, "faults": []}, "--no-report")
    assert code == 0
    page = write_report(out).read_text()
    verdict = page.index('<section id="verdict"')
    assert verdict < page.index("<h2>Convergence</h2>")
    metrics = json.loads((out / "metrics.json").read_text())
    # The evaluation's own verdict, with the figures it weighed under it.
    assert f"Verdict: {metrics['verdict']['run']}" in page and "R-hat at its worst" in page
    assert "not judged here" not in page
    # A folder written before verdicts existed: the figures alone, judged by nobody.
    del metrics["verdict"]
    (out / "metrics.json").write_text(json.dumps(metrics))
    page = write_report(out).read_text()
    assert "R-hat at its worst" in page and "not judged here" in page
    # A verdict in the older shape (a headline and lines) is shown as it is.
    metrics["verdict"] = {"summary": "trustworthy", "reasons": ["R-hat below 1.01 everywhere"]}
    (out / "metrics.json").write_text(json.dumps(metrics))
    page = write_report(out).read_text()
    assert "Verdict: trustworthy" in page and "R-hat below 1.01 everywhere" in page
    assert "not judged here" not in page


def test_histograms_pool_enough_draws_and_say_which(tmp_path, starling_home):
    """The evaluation's window (one round here: 30 draws) drew ragged histograms."""
    code, out = _simulate(tmp_path, {**FAULTY, "faults": [], "evaluation": {"window": 1}})
    assert code == 0
    page = (out / "report.html").read_text()
    said = re.search(
        r"Draws of the last (\d+) rounds \(rounds (\d+)–(\d+)\) of all 30 chains: (\d+)", page
    )
    assert said, page[-3000:]
    rounds, first, last, draws = (int(g) for g in said.groups())
    assert (rounds, first, last, draws) == (15, 15, 29, 450)  # the second half of 30 rounds


def test_every_header_is_words_not_a_dotted_key(tmp_path, starling_home):
    code, out = _simulate(tmp_path, {**FAULTY, "faults": []}, "--no-report")
    page = write_report(out).read_text()
    headers = re.findall(r"<th>(.*?)</th>", page)
    assert headers and not [h for h in headers if re.search(r"[a-z_]\.[a-z_]", h)], headers
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert not [c for c in cells if re.fullmatch(r"[a-z_]+(\.[a-z_0-9]+)+", c)], cells
    assert "ESS bulk, worst coordinate (draws)" in headers


def test_the_verdict_box_counts_r_hat_against_the_verdicts_own_limit():
    # A run of 20 chains is judged against R-hat 1.049 (verdict.rhat_limit), not 1.01: the
    # box under the verdict says how many nodes are within the limit that verdict used, and
    # sets W2 beside the scale sqrt(tr Σ) the verdict measures error in.
    from starling.orchestrator.report.verdict import verdict_block

    metrics = {
        "status": "complete",
        "verdict": {
            "run": "converged",
            "reasons": [],
            "criteria": {"rhat_max": 1.0488, "ess_min": 400.0},
        },
        "diagnostics": {
            "per_node": {"0": {"rhat_max": 1.03, "ess_bulk_min": 900.0}, "1": {"rhat_max": 1.02}}
        },
        "w2": {"average": 0.05, "node_mean": 0.06, "scale": 0.37},
        "posterior": {"std": [0.2, 0.3]},
    }
    box = html.unescape(verdict_block(metrics))
    assert "2 of 2 nodes at or below the verdict's limit 1.049" in box
    assert "W2 of the network-average iterate: 0.05 (the posterior's scale sqrt(tr Σ): 0.37)" in box
    # An average over the nodes that recorded every round, when one stopped earlier.
    metrics["averaged_nodes"] = ["0"]
    assert "network-average iterate of node 0 only: 0.05" in html.unescape(verdict_block(metrics))
    # Without a verdict (an older folder): Vehtari et al.'s 1.01, said beside, not judging.
    del metrics["verdict"]
    assert "0 of 2 nodes at or below 1.01" in html.unescape(verdict_block(metrics))


def test_a_run_of_one_round_draws_its_points_on_whole_rounds(tmp_path, starling_home):
    # One round: each series is a single point, which a line alone does not draw (the
    # figure came out as empty axes, its round axis at -0.04 … 0.04): each curve is marked,
    # and the round axis is labelled in whole rounds only.
    raw = {**FAULTY, "name": "one-round", "rounds": 1, "faults": []}
    code, out = _simulate(tmp_path, raw, "--no-report")
    assert code == 0
    figures = tmp_path / "figures"
    assert main(["report", str(out), "--figures", str(figures)]) == 0
    svg = (figures / "convergence-w2.svg").read_text()
    for name in ("curve-node-0", "curve-node-3", "curve-average", "curve-node-mean"):
        group = svg.split(f'<g id="{name}">')[1].split("</g>")[0]
        assert "<use" in group, name  # a marker drawn at the point
    ticks = re.findall(r'<g id="xtick_\d+">.*?<text[^>]*>([^<]+)</text>', svg, re.S)
    assert ticks and all(t.replace("−", "-").lstrip("-").isdigit() for t in ticks), ticks


def test_a_run_that_failed_before_its_evaluation_is_described_from_its_experiment(tmp_path):
    # metrics.json of a run that failed early holds its status and error, not the
    # algorithm, rounds or chains: the header takes them from the experiment file it ran
    # (it showed "? · 0 nodes · ? rounds · ? chains").
    raw = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    (tmp_path / "experiment.yaml").write_text(yaml.safe_dump(raw))
    (tmp_path / "metrics.json").write_text(
        json.dumps({"status": "failed", "experiment": raw["name"], "error": "node 1 failed"})
    )
    page = write_report(tmp_path).read_text()
    nodes = raw["topology"]["nodes"]
    meta = f"{raw['algorithm']} · {nodes} nodes · {raw['rounds']} rounds · {raw['chains']} chains"
    assert html.escape(meta) in page, re.findall(r"[^>]*chains[^<]*", page)[:3]
