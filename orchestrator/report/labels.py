"""What a figure of ``metrics.json`` is called on the page: a header a person reads, with its
unit, instead of its dotted key (``diagnostics.per_node.ess_bulk_min`` -> "ESS bulk, worst
coordinate (draws)").

:data:`NAMES` names the figures the evaluation writes; any other key (a sampler's program
metric, a figure added later) is spelled out word by word from its key, each part of the
path once, so no header is ever a raw dotted key.
"""

from __future__ import annotations

__all__ = ["SECTIONS", "label", "section_title"]

NAMES = {
    "w2": "W2 to the exact posterior (parameter units)",
    "w2.average": "W2 of the network-average iterate (parameter units)",
    "w2.node_mean": "W2, mean over nodes (parameter units)",
    "w2.window": "W2 scored over the last (rounds)",
    "consensus_error": "consensus error E|x_i − x̄|² (parameter units²)",
    "samples_per_node": "samples stored (rounds)",
    "diagnostics.ess_bulk_min": "ESS bulk, worst coordinate (draws)",
    "diagnostics.ess_tail_min": "ESS tail, worst coordinate (draws)",
    "diagnostics.rhat_max": "R-hat, worst coordinate",
    "diagnostics.ess_bulk": "ESS bulk per coordinate (draws)",
    "diagnostics.ess_tail": "ESS tail per coordinate (draws)",
    "diagnostics.rhat": "R-hat per coordinate",
    "diagnostics.burn_in": "diagnostics: rounds left out as burn-in",
    "diagnostics.draws_from": "diagnostics: draws from round",
    "diagnostics.rounds": "diagnostics: rounds in the run",
    "diagnostics.params": "diagnostics: coordinates",
    "predictive.predictive_accuracy": "posterior-predictive accuracy (held-out, 0–1)",
    "predictive.predictive_log_loss": "posterior-predictive log-loss (nats)",
    "predictive.predictive_auc": "posterior-predictive AUC (0–1)",
    "predictive.sample_accuracy": "accuracy of one sample (0–1)",
    "predictive.sample_accuracy_std": "accuracy of one sample, sd",
    "predictive.sample_log_loss": "log-loss of one sample (nats)",
    "predictive.sample_auc": "AUC of one sample (0–1)",
    "predictive.window": "predictive metrics over the last (rounds)",
    "distances.sinkhorn": "Sinkhorn distance to the reference (parameter units)",
    "distances.sliced_w2": "sliced W2 to the reference (parameter units)",
    "distances.window": "distances over the last (rounds)",
    "distances.reg": "Sinkhorn regularisation",
    "posterior.mean": "exact posterior mean",
    "posterior.std": "exact posterior sd per coordinate",
    "rounds": "rounds",
    "chains": "chains per node",
    "nodes": "nodes",
    "status": "status",
    "experiment": "experiment",
    "algorithm": "algorithm",
    "backend": "backend",
    "interrupted": "interrupted",
    "interrupted_during": "interrupted during",
    "recovered": "recovered by starling collect",
}
"""Dotted key (without the node id) -> header."""

SECTIONS = {
    "w2": "W2 to the exact posterior",
    "samples_per_node": "Samples",
    "diagnostics": "ESS and R-hat (rank-normalised, Vehtari et al. 2021)",
    "predictive": "Held-out prediction",
    "distances": "Distances to reference samples",
    "program_metrics": "The sampler's own figures",
    "refused": "Calls and connections refused, by door and reason",
    "hpd": "Highest posterior density",
}
"""Top-level key -> the title of its per-node table."""

_DROP = {"per_node"}
"""Path parts that say how a figure is stored, not what it is."""


def label(path: str) -> str:
    """The header of the figure at dotted ``path`` (a node id already taken out)."""
    if path in NAMES:
        return NAMES[path]
    parts = [p for p in path.split(".") if p not in _DROP]
    short = ".".join(parts)
    if short in NAMES:
        return NAMES[short]
    if len(parts) > 1 and parts[0] in SECTIONS:
        parts = parts[1:]  # the table's title says the section
    return " · ".join(_words(p) for p in parts) or path


def section_title(key: str) -> str:
    return SECTIONS.get(key, _words(key).capitalize())


def _words(key: str) -> str:
    """``ess_bulk_min`` -> "ess bulk min"; ``isolated_rounds_held`` -> "isolated rounds held"."""
    return key.replace("_", " ").strip()
