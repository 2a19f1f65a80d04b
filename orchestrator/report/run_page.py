"""The report of one run or simulation: ``report.html`` in its results folder."""

from __future__ import annotations

import html
from pathlib import Path

from starling.orchestrator.report.convergence import curve_figure
from starling.orchestrator.report.loading import load_run, truth_of
from starling.orchestrator.report.network import network_figure
from starling.orchestrator.report.page import Section, figure_html, page
from starling.orchestrator.report.plotting import pyplot
from starling.orchestrator.report.posterior import posterior_figure
from starling.orchestrator.report.samples import summarise
from starling.orchestrator.report.tables import account_block, links_table, node_table, run_table
from starling.orchestrator.report.timeline import down_nodes, timeline_figure
from starling.orchestrator.report.verdict import verdict_block

__all__ = ["write_run_report"]

NO_PLOTS = (
    '<p class="note">Figures need matplotlib, which is not installed here: '
    '<code>pip install "starling-mcmc[plots]"</code>, then <code>starling report</code> '
    "again.</p>"
)


def write_run_report(folder: Path) -> Path:
    data = load_run(folder)
    m = data.metrics
    plots = pyplot() is not None
    truth = truth_of(data) if plots and data.sample_files else None
    summary = summarise(data, truth) if plots and data.sample_files else None
    figures = [
        figure_html(curve_figure(c, summary, truth), c.name, f"convergence-{c.name}")
        for c in data.curves
    ]
    convergence = "".join(figures) or "<p>No metric per round was recorded.</p>"
    posterior = (
        figure_html(posterior_figure(summary, truth, data.nodes), "posterior", "posterior")
        if summary
        else ""
    )
    faults = m.get("faults") or {}
    network = (
        figure_html(network_figure(data, down_nodes(faults)), "topology", "network")
        if plots
        else ""
    )
    timeline = figure_html(timeline_figure(m), "timeline", "timeline") if plots else ""
    if plots and not timeline:
        timeline = "<p>No node or link fault was scheduled or observed.</p>"
    error = f'<p class="note">{html.escape(str(m["error"]))}</p>' if m.get("error") else ""
    sections = [
        Section("Convergence", (NO_PLOTS if not plots else "") + error + convergence),
        Section("Samples against the posterior", posterior),
        Section("Network", network + links_table(m.get("links") or {})),
        Section("Faults over time", timeline),
        Section("Per node", node_table(m, data.nodes)),
        Section("Run figures", run_table(m, data.nodes)),
        Section("Account", account_block(m.get("account") or [])),
        Section(
            "Experiment file as run",
            f"<pre>{html.escape(data.experiment_text)}</pre>" if data.experiment_text else "",
        ),
    ]
    name = m.get("experiment") or data.experiment.get("name") or Path(folder).name
    # A run that failed before it was evaluated has no such figures in its metrics; the
    # experiment file it ran says them.
    planned = data.experiment

    def said(key: str) -> object:
        return m.get(key, planned.get(key, "?"))

    topology = planned.get("topology")
    sized = topology.get("nodes") if isinstance(topology, dict) else None
    nodes = m.get("nodes", len(data.nodes) or (sized if isinstance(sized, int) else "?"))
    meta = html.escape(
        f"{said('algorithm')} · {nodes} nodes · "
        f"{said('rounds')} rounds · {said('chains')} chains · "
        f"{m.get('backend', '')} · {Path(folder).resolve()}"
    )
    out = Path(folder) / "report.html"
    # The evaluation's verdict goes first (metrics.json's `verdict`); a folder written
    # before verdicts existed gets the convergence figures a verdict would weigh.
    verdict = verdict_block(m)
    out.write_text(page(f"Starling report: {name}", m.get("status"), meta, sections, verdict))
    return out
