"""``starling simulate``: the experiment's programs in one process; the same results folder.

Nothing here opens a socket or imports grpc: ``simulate`` works where the network stack is
absent, and ``tests/orchestrator/test_orchestrator_layout.py`` holds it to that.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from starling.node.config import NODE_SOURCE
from starling.node.params import ConfigError
from starling.orchestrator.core.interrupts import interrupts_remembered, raise_remembered
from starling.orchestrator.core.progress import Progress
from starling.orchestrator.planning.plan import RunPlan
from starling.orchestrator.results.account import Account, account_schedule
from starling.orchestrator.results.link_books import lost
from starling.orchestrator.results.write import close_run, run_status

__all__ = ["simulate_experiment"]


def check_simulable(plan: RunPlan) -> None:
    """Refuse, before any folder is made, a run only node processes can carry out: one whose
    nodes bring their own data (``data.source: node``), which the simulator has not. The
    line was "unknown source 'node' (use synthetic or file)", of a source the file
    reference documents."""
    if plan.evaluation.data.source == NODE_SOURCE:
        raise ConfigError(
            "data.source: node leaves the data to node processes, which only starling run "
            "starts; simulate needs source synthetic or file"
        )


def simulate_experiment(
    plan: RunPlan,
    out_dir: Path,
    say: Callable[[str], None] = print,
    quiet: bool = False,
    progress: Progress | None = None,
) -> dict:
    """Run ``plan`` in-process and write its results folder; returns the metrics.

    There is no wire: the link counters are what the in-memory network carried
    (:meth:`starling.node.engine.memory.LockstepNetwork.books`; for one-phase samplers
    exactly what the schedule alone implies,
    :func:`starling.orchestrator.faults.account.scheduled_link_counts`), and node faults are
    their isolation schedule: the killed node's rounds go on without its peers, as in ``run``.
    A node killed and never restarted keeps, as in ``run``, only the rounds before its kill
    (none, killed at round 0: no samples file), and its links count no message after it.
    ``progress`` shows the rounds (lockstep: every node at the same round).

    Ctrl-C or SIGTERM ends it as ``run`` ends: the rounds every node completed until then
    are written and evaluated, with the status ``interrupted`` (and ``"interrupted": true``,
    the CLI's exit 130).
    """
    from starling.node.engine.simulate import NodeFailed, SimulationInterrupted, simulate

    account = Account(say)
    account_schedule(
        account,
        plan.link_faults,
        plan.node_faults,
        plan.rounds,
        " (in-process: as its isolation schedule)",
    )
    specs = list(plan.specs.values())
    program_metrics: dict[str, dict[str, float]] = {}
    started = time.monotonic()
    played = specs  # whose rounds the links carried: all of them, unless interrupted
    # A diverging sampler overflows on its way out; evaluation reports where it diverged.
    node_failed = interrupted = False
    networks: list = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"), interrupts_remembered():
        try:
            samples = simulate(
                specs,
                on_round=_after_round(progress, specs, plan.rounds),
                metrics_out=program_metrics,
                network_out=networks,
            )
        except SimulationInterrupted as stopped:
            interrupted = True
            account.plain(
                f"interrupted by the user after {account.elapsed():.1f} s, "
                f"{stopped.rounds} rounds done on every node"
            )
            say(f"interrupted: writing the {stopped.rounds} rounds every node completed")
            samples = stopped.samples
            played = [dataclasses.replace(s, rounds=min(s.rounds, stopped.rounds)) for s in specs]
        except NodeFailed as failed:
            # As a node's failed round loop in ``run``: the account names node, round and
            # cause, and the rounds before it are kept.
            account.node(
                failed.node,
                "failed",
                f"failed: {failed}",
                echo=not quiet,
                round=failed.round,
                error=str(failed),
            )
            samples, node_failed = failed.samples, True
    seconds = time.monotonic() - started
    if progress is not None:
        progress.finished()
    samples, played = _cut_at_kills(plan, samples, played, account)
    rounds = {node: np.arange(values.shape[0]) for node, values in samples.items()}
    return close_run(
        plan.evaluation,
        out_dir,
        samples,
        rounds,
        account,
        _carried(networks, played),
        f"simulated in-process in {account.elapsed():.2f} s",
        {
            "program_metrics": {n: m for n, m in program_metrics.items() if m},
            # What the in-memory network carried (LockstepNetwork.traffic): messages and bytes.
            "traffic": {"seconds": seconds, **(networks[0].traffic if networks else {})},
            "backend": "simulate",
            "interrupted": interrupted,
            "status": run_status(
                plan.rounds,
                samples,
                interrupted,
                failed=node_failed,
                expected=plan.sampling_nodes,
            ),
        },
        None if quiet else say,
    )


def _cut_at_kills(plan: RunPlan, samples: dict[str, np.ndarray], played, account: Account):
    """What a node killed for good left: its rounds before the kill. The in-process engine
    ran its later rounds in isolation (its programs are built for the whole run), but no
    process of ``run`` would have, so they are dropped here, with a line in the account."""
    down = {f.node: f.at_round for f in plan.node_faults if f.restart_round is None}
    if not down:
        return samples, played
    kept = {}
    for node, values in samples.items():
        if node not in down:
            kept[node] = values
            continue
        values = values[: down[node]]
        held = (
            f"{len(values)} samples (rounds 0..{len(values) - 1})" if len(values) else "no samples"
        )
        account.plain(
            f"node {node}: down at the end (killed at round {down[node]}, not "
            f"restarted); {held} kept"
        )
        if len(values):
            kept[node] = values
    played = [
        dataclasses.replace(s, rounds=min(s.rounds, down[s.node_id])) if s.node_id in down else s
        for s in played
    ]
    return kept, played


def _carried(networks: list, played) -> dict[str, dict[str, int]]:
    """The links' books as the in-memory network counted them, over the rounds each sender
    played, in the shape of ``run``'s (nothing is dropped or late in-process)."""
    if not networks:
        return {}
    books = networks[0].books({spec.node_id: spec.rounds for spec in played})
    for spec in played:  # a link that carried nothing is still a link of the run
        for receiver in spec.out_peers():
            books.setdefault(
                f"{spec.node_id}->{receiver}", {"sent": 0, "withheld": 0, "delivered": 0}
            )
    for counts in books.values():
        counts.update(dropped=0, late=0)
        counts["lost"] = lost(counts)
    return dict(sorted(books.items()))


def _after_round(progress: Progress | None, specs, total: int) -> Callable[[int], None]:
    """What the orchestrator does between simulated rounds: raise a Ctrl-C whose raise Python
    dropped (:func:`~starling.orchestrator.core.interrupts.raise_remembered`), show the
    rounds."""
    nodes = [spec.node_id for spec in specs]

    def after_round(round_index: int) -> None:
        raise_remembered()
        if progress is not None:
            progress.rounds(dict.fromkeys(nodes, round_index + 1), total)

    return after_round
