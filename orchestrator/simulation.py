"""``starling simulate``: the experiment's programs in one process; the same results folder.

Nothing here opens a socket or imports grpc: ``simulate`` works where the network stack is
absent, and ``tests/orchestrator/test_simulate_imports.py`` holds it to that.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from starling.orchestrator.account import Account, account_schedule
from starling.orchestrator.experiment import Experiment
from starling.orchestrator.fault_account import scheduled_link_counts
from starling.orchestrator.node_specs import node_specs
from starling.orchestrator.progress import Progress
from starling.orchestrator.results import close_run, run_status

__all__ = ["simulate_experiment"]


def simulate_experiment(
    experiment: Experiment,
    out_dir: Path,
    say: Callable[[str], None] = print,
    quiet: bool = False,
    progress: Progress | None = None,
) -> dict:
    """Run ``experiment`` in-process and write its results folder; returns the metrics.

    There is no wire, so the link counters are what the schedule alone does
    (:func:`starling.orchestrator.fault_account.scheduled_link_counts`) and node faults are their
    isolation schedule: the killed node's rounds go on without its peers, as in ``run``.
    ``progress`` shows the rounds (lockstep: every node at the same round).
    """
    from starling.node.engine.simulate import NodeFailed, simulate

    account = Account(say)
    account_schedule(account, experiment, " (in-process: as its isolation schedule)")
    specs = node_specs(experiment)
    program_metrics: dict[str, dict[str, float]] = {}
    # A diverging sampler overflows on its way out; evaluation reports where it diverged.
    node_failed = False
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        try:
            samples = simulate(specs, on_round=_shown(progress, specs, experiment.rounds),
                               metrics_out=program_metrics)  # fmt: skip
        except NodeFailed as failed:
            # As a node's failed round loop in ``run``: the account names node, round and
            # cause, and the rounds before it are kept.
            account.node(failed.node, "failed", f"failed: {failed}", echo=not quiet,
                         round=failed.round, error=str(failed))  # fmt: skip
            samples, node_failed = failed.samples, True
    if progress is not None:
        progress.finished()
    rounds = {node: np.arange(values.shape[0]) for node, values in samples.items()}
    return close_run(
        experiment, out_dir, samples, rounds, account, scheduled_link_counts(specs),
        f"simulated in-process in {account.elapsed():.2f} s",
        {
            "program_metrics": {n: m for n, m in program_metrics.items() if m},
            "backend": "simulate",
            "status": run_status(experiment.rounds, samples, failed=node_failed),
        },
        None if quiet else say,
    )  # fmt: skip


def _shown(progress: Progress | None, specs, total: int) -> Callable[[int], None] | None:
    if progress is None:
        return None
    nodes = [spec.node_id for spec in specs]
    return lambda round_index: progress.rounds(dict.fromkeys(nodes, round_index + 1), total)
