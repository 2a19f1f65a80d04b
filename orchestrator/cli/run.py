"""``starling run``, ``simulate`` and ``collect``: an experiment or a study from its file to its
results folder, and the exit code the run earns.

Each stage is entered once, in order: the file is loaded and checked
(:func:`starling.orchestrator.config.load.load`), planned
(:func:`starling.orchestrator.planning.plan.plan`), carried out on nodes or in-process
(:mod:`starling.orchestrator.execution`), which writes its results folder
(:mod:`starling.orchestrator.results`), and reported (:mod:`starling.orchestrator.report`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from starling.orchestrator.core.phases import PHASES

__all__ = [
    "EXIT_DIVERGED",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NODE_DOWN",
    "EXIT_NOT_CONVERGED",
    "EXIT_USAGE",
    "add_commands",
    "exit_code",
]

EXIT_FAILED = 1
"""A node failed: its round loop raised (the account names node, round and cause)."""
EXIT_USAGE = 2
"""A usage or configuration error, reported in one line before anything ran."""
EXIT_DIVERGED = 3
"""A node's samples diverged: not finite, or beyond 1e150 (named in the account)."""
EXIT_NOT_CONVERGED = 4
"""With ``--strict`` only: the run's verdict is ``not converged``
(:mod:`starling.orchestrator.evaluation.verdict`; its reasons are in summary.txt)."""
EXIT_NODE_DOWN = 5
"""The rounds ended with a node down that the schedule did not take down (a container
killed and never started again, a crash, a node given up on): the others finished without
it, the results are written (``partial``), and ``down_at_end`` of ``metrics.json`` names it."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM: what was collected is written, marked interrupted."""


def exit_code(metrics: dict, strict: bool = False) -> int:
    """The exit code a finished run or simulation earns, from its metrics: interrupted
    before failed before diverged before a node down before (with ``strict``) not
    converged before 0. A node down outranks the verdict: it is a fact about the run's
    infrastructure that ``--strict`` must not hide behind a judgement of its samples."""
    if metrics.get("interrupted"):
        during = PHASES.get(metrics.get("interrupted_during") or "")
        missing = (metrics.get("not_collected") or {}).get("line")
        print(
            f"starling: interrupted by the user{f' {during}' if during else ''}; what was "
            f"collected is written{f', but {missing}' if missing else ''}; "
            f"exit {EXIT_INTERRUPTED}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    events = (metrics.get("faults") or {}).get("nodes") or []
    failed = [e for e in events if e.get("event") == "failed"]
    if failed:
        first = failed[0]
        print(
            f"starling: node {first['node']} failed ({first.get('error', '')}); exit {EXIT_FAILED}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if metrics.get("status") == "failed":
        print(
            f"starling: the run failed: no node stored a sample; exit {EXIT_FAILED}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    diverged = metrics.get("diverged") or {}
    if diverged:
        node, first_round = next(iter(diverged.items()))
        print(
            f"starling: node {node} diverged at round {first_round}"
            + (f" (and {len(diverged) - 1} more)" if len(diverged) > 1 else "")
            + f"; exit {EXIT_DIVERGED}",
            file=sys.stderr,
        )
        return EXIT_DIVERGED
    down = metrics.get("down_at_end") or {}
    if down.get("nodes"):
        print(
            f"starling: {down.get('line', 'a node was down at the end')}; exit {EXIT_NODE_DOWN}",
            file=sys.stderr,
        )
        return EXIT_NODE_DOWN
    verdict = metrics.get("verdict") or {}
    if strict and verdict.get("run", "converged") != "converged":
        reasons = verdict.get("reasons") or []
        print(
            f"starling: the run did not converge ({reasons[0] if reasons else 'no reason given'})"
            f"; exit {EXIT_NOT_CONVERGED} (--strict)",
            file=sys.stderr,
        )
        return EXIT_NOT_CONVERGED
    return 0


def study_exit_code(rows: Sequence[dict], strict: bool) -> int:
    """A study's exit code once every cell is written: 0, or with ``strict``
    :data:`EXIT_NOT_CONVERGED` if any run's verdict is not ``converged``."""
    failing = [r for r in rows if r.get("verdict") not in (None, "converged")]
    if not strict or not failing:
        return 0
    first = failing[0]
    print(
        f"starling: {len(failing)} of {len(rows)} runs did not converge (first: cell "
        f"{first.get('cell')}, variant {first.get('variant')}, seed {first.get('seed')}: "
        f"{first.get('verdict')}); exit {EXIT_NOT_CONVERGED} (--strict)",
        file=sys.stderr,
    )
    return EXIT_NOT_CONVERGED


def _load(args):
    """The plan of the file named on the command line (a study's, or one run's)."""
    from starling.orchestrator.config.load import load
    from starling.orchestrator.planning.plan import plan

    return plan(load(args.experiment, getattr(args, "inventory", None)))


def _into_folder(
    args, name: str, work: Callable[[Path], object], then: Sequence[Callable[[], None]] = ()
) -> dict:
    """Run ``work`` in the results folder the policy gives
    (:mod:`starling.orchestrator.results.folder`); a run that ends without results still says so in
    ``metrics.json`` and ``summary.txt``.
    ``then``: steps that need the final manifest written first (a complete local run's
    stores are released only then: a manifest that cannot be written points at ``starling
    collect``, which streams from those stores); the manifest is written again after them."""
    from starling.orchestrator.results.early_end import ended_early
    from starling.orchestrator.results.folder import prepare
    from starling.orchestrator.results.unwritable import unwritable

    folder = prepare(args.out, name, args.overwrite)
    folder.begin()
    try:
        result = work(folder.path)
        metrics = result if isinstance(result, dict) else {}
    except BaseException as exc:
        try:
            ending = ended_early(folder, name, exc)
        except OSError as failed:  # recording how it ended failed too: one line, no chain
            ending = unwritable(folder.path, failed) or failed
        if isinstance(ending, KeyboardInterrupt) and not str(ending):  # a bare Ctrl-C
            from starling.orchestrator.core.phases import during

            ending = KeyboardInterrupt(
                f"interrupted by the user {during()}; {folder.path} records it (status interrupted)"
            )
        raise ending from None
    try:
        # Nodes not collected after an interrupt: the manifest lets `collect` at them.
        left = (metrics.get("not_collected") or {}).get("nodes") or []
        folder.end(metrics.get("status", "complete"), not_collected=left)
    except OSError as exc:  # the final manifest: one line like any other results file
        raise unwritable(folder.path, exc) or exc from None
    if then:
        for step in then:
            step()
        with suppress(OSError):  # without the files the steps removed; it stands as it was
            folder.end(metrics.get("status", "complete"), not_collected=left)
    return metrics


def _reported(args, work: Callable[[Path], object]) -> Callable[[Path], object]:
    from starling.orchestrator.report import with_report

    return with_report(work, _say, enabled=not getattr(args, "no_report", False))


def _progress(args):
    from starling.orchestrator.core.progress import make_progress

    json_logs = getattr(args, "log_format", None) == "json"
    return make_progress(quiet=getattr(args, "quiet", False), emit=_say, plain=json_logs)


def cmd_run(args) -> int:
    """``starling run``: the experiment (or study) on real nodes."""
    return _execute(args, "run")


def cmd_simulate(args) -> int:
    """``starling simulate``: the same, in this process, the network simulated."""
    return _execute(args, "simulate")


def _execute(args, mode: str) -> int:
    """Load, run by ``mode`` (``run`` on nodes, ``simulate`` in process), write the results
    folder; the run's exit code (a study's once every cell is written, see
    :func:`study_exit_code`)."""
    from starling.orchestrator.execution.study import run_study
    from starling.orchestrator.planning.plan import StudyPlan

    loaded = _load(args)
    _experiment_context(loaded.name)
    _operating(args)
    if mode == "simulate":
        from starling.orchestrator.execution.simulation import check_simulable

        for plan in [r[3] for r in loaded.runs] if isinstance(loaded, StudyPlan) else [loaded]:
            check_simulable(plan)
    with _progress(args) as shown:
        if isinstance(loaded, StudyPlan):
            rows: list[dict] = []
            study = _reported(
                args,
                lambda out: rows.extend(run_study(loaded, out, mode, say=_say, progress=shown)),
            )
            _into_folder(args, loaded.name, study)
            return study_exit_code(rows, args.strict)
        later: list[Callable[[], None]] = []  # the release of a complete local run's stores
        if mode == "run":
            from starling.orchestrator.execution.runner import run_experiment  # grpc: run only

            work = _reported(
                args,
                lambda out: run_experiment(
                    loaded, out, say=_say, progress=shown, after_manifest=later.append
                ),
            )
        else:
            from starling.orchestrator.execution.simulation import simulate_experiment

            work = _reported(
                args, lambda out: simulate_experiment(loaded, out, say=_say, progress=shown)
            )
        metrics = _into_folder(args, loaded.name, work, then=later)
    return exit_code(metrics, args.strict)


def cmd_collect(args) -> int:
    from starling.orchestrator.execution.recovery import collect_run

    _operating(args)
    collect_run(Path(args.results), say=_say)
    return 0


def _say(message: str, **fields: Any) -> None:
    from starling.orchestrator.core.output import say

    say(message, **fields)


_say.takes_fields = True  # type: ignore[attr-defined]  # see starling.orchestrator.core.output


def _operating(args) -> None:
    """``--log-format`` and (for run) ``--metrics``, before anything runs."""
    fmt = getattr(args, "log_format", None)
    if fmt:
        from starling.orchestrator.core.output import use_format

        use_format(fmt)
    if getattr(args, "metrics", None):
        from starling.orchestrator.execution.exporter import start_run_metrics

        server = start_run_metrics(args.metrics).server
        if server is not None:
            _say(f"metrics on {server.url}", event="metrics_serving")


def _experiment_context(name: str) -> None:
    from starling.node.logs import set_context

    set_context(experiment=name)


def _out_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        help="results folder, absent or empty (default: a new "
        "results/<experiment name>/<UTC time>, linked from results/<experiment name>/latest)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="--out may hold an earlier run: its files (listed in its manifest.json) are "
        "replaced, nothing else is touched",
    )
    parser.add_argument(
        "--no-report",
        action="store_true",
        help="do not write report.html at the end (starling report DIR writes it later)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="no progress display (on a terminal a live one, in a log a line every few seconds)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_NOT_CONVERGED} when the run's verdict is 'not converged' (a study: "
        "when any run's is); the verdict and its reasons lead summary.txt either way",
    )


def _log_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=None,
        help="progress and log lines: text (default) or json, one object per line on stdout",
    )


def add_commands(sub) -> None:
    """``starling run``, ``simulate`` and ``collect``."""
    run = sub.add_parser("run", help="run an experiment on real node processes over gRPC")
    run.add_argument(
        "experiment", help="experiment YAML file, or a shipped example's name (starling examples)"
    )
    _out_options(run)
    run.add_argument(
        "--inventory",
        metavar="FILE",
        help="drive nodes that already run: a YAML file mapping node ids to host:port "
        "(nodes: {a: host:port, ...}), in place of the experiment's backend",
    )
    run.add_argument(
        "--metrics",
        metavar="ADDR",
        help="serve the orchestrator's Prometheus metrics on HOST:PORT (a bare PORT: on "
        "loopback) while the run lasts (docs/guides/operating-nodes.md)",
    )
    _log_format_option(run)
    run.set_defaults(handler=cmd_run)

    simulate = sub.add_parser("simulate", help="run the same experiment in-process")
    simulate.add_argument(
        "experiment", help="experiment YAML file, or a shipped example's name (starling examples)"
    )
    _out_options(simulate)
    _log_format_option(simulate)
    simulate.set_defaults(handler=cmd_simulate)

    collect = sub.add_parser(
        "collect",
        help="write the results of a run whose orchestrator died, from what its nodes stored",
    )
    collect.add_argument("results", help="the run's results folder")
    _log_format_option(collect)
    collect.set_defaults(handler=cmd_collect)
