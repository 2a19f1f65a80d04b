"""The ``starling`` command: one function per subcommand, errors as one readable line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError
from starling.orchestrator.cli.exit_codes import (
    EXIT_DIVERGED,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    exit_code,
)

__all__ = ["EXIT_DIVERGED", "EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "exit_code", "main"]


def _load(args):
    """The plan of the file named on the command line (a study's, or one run's)."""
    from starling.orchestrator.planning.load import load

    return load(args.experiment, getattr(args, "inventory", None))


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
    from starling.orchestrator.execution.runner import run_experiment
    from starling.orchestrator.execution.study import run_study
    from starling.orchestrator.planning.load import StudyPlan

    loaded = _load(args)
    _experiment_context(loaded.name)
    _operating(args)
    with _progress(args) as shown:
        if isinstance(loaded, StudyPlan):
            study = _reported(
                args, lambda out: run_study(loaded, out, "run", say=_say, progress=shown) and None
            )
            _into_folder(args, loaded.name, study)
            return 0
        later: list[Callable[[], None]] = []  # the release of a complete local run's stores
        run = _reported(
            args,
            lambda out: run_experiment(
                loaded, out, say=_say, progress=shown, after_manifest=later.append
            ),
        )
        metrics = _into_folder(args, loaded.name, run, then=later)
    return exit_code(metrics)


def cmd_simulate(args) -> int:
    from starling.orchestrator.execution.simulation import simulate_experiment
    from starling.orchestrator.execution.study import run_study
    from starling.orchestrator.planning.load import StudyPlan

    loaded = _load(args)
    _experiment_context(loaded.name)
    _operating(args)
    with _progress(args) as shown:
        if isinstance(loaded, StudyPlan):
            study = _reported(
                args,
                lambda out: run_study(loaded, out, "simulate", say=_say, progress=shown) and None,
            )
            _into_folder(args, loaded.name, study)
            return 0
        work = _reported(
            args, lambda out: simulate_experiment(loaded, out, say=_say, progress=shown)
        )
        metrics = _into_folder(args, loaded.name, work)
    return exit_code(metrics)


def cmd_collect(args) -> int:
    from starling.orchestrator.execution.recovery import collect_run

    _operating(args)
    collect_run(Path(args.results), say=_say)
    return 0


def cmd_algorithms(args) -> int:
    from starling.node.params import describe_params
    from starling.node.samplers import ALGORITHMS

    catalogue: list[dict[str, Any]] = [
        {
            "name": info.name,
            "summary": info.summary,
            "source": info.source,
            "roles": list(info.roles),
            "graph": info.graph,
            "synchronous": info.synchronous,
            "hyperparameters": describe_params(info.params),
        }
        for info in ALGORITHMS.values()
    ]
    if args.format == "json":
        print(json.dumps(catalogue, indent=2))
        return 0
    for entry in catalogue:
        print(f"{entry['name']}  ({entry['source']}) — {entry['summary']}")
        print(f"    roles: {', '.join(entry['roles'])}; graph: {entry['graph']}")
        params = ", ".join(f"{k}={v['default']!r}" for k, v in entry["hyperparameters"].items())
        print(f"    hyperparameters: {params or 'none'}")
    return 0


def cmd_examples(args) -> int:
    from starling.orchestrator.config.shipped import copy_examples, examples_folder, list_examples

    if args.copy is not None:  # --copy '' is a mistake, not "no --copy"
        if not args.copy.strip():
            raise ConfigError(f"--copy: expected a folder, got {args.copy!r}")
        for path in copy_examples(Path(args.copy)):
            print(path)
        return 0
    print(f"shipped examples ({examples_folder()}); run one with `starling run NAME`:")
    for name, summary in list_examples():
        print(f"  {name:<28} {summary}")
    return 0


def cmd_node(rest: list[str]) -> int:
    """``starling node serve|health ...`` is ``python -m starling.node serve|health ...``."""
    from starling.node.cli import main as node_main

    return node_main(rest, prog="starling node")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] != ["node", "serve"]:
        # gRPC's core logs each failed TLS handshake of a client at INFO on stderr, around
        # the one line that says which node and why (starling.node.unreachable). A node
        # keeps them: they are its trace of a client of another CA. Set before grpc loads.
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    if argv[:1] == ["node"] and argv[1:2] in (["serve"], ["health"]):
        # Before anything of the orchestrator's is imported: a device's node (the systemd
        # unit runs `starling node serve`) pays only for the node (12 MB and 0.5 s less).
        return _guard(lambda: cmd_node(argv[1:]))
    from starling.orchestrator.cli import live as live_cli

    parser = _parser()
    args = parser.parse_args(live_cli.join_option_values(argv))
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    return _guard(lambda: args.handler(args))


def _guard(action: Callable[[], int]) -> int:
    from starling.node.shown import shorten
    from starling.orchestrator.core.errors import BackendError, NodeUnavailable
    from starling.orchestrator.results.unwritable import ResultsUnwritable

    try:
        return action()
    except ResultsUnwritable as exc:
        print(f"starling: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (ConfigError, NodeUnavailable, BackendError) as exc:
        print(f"starling: {shorten(str(exc))}", file=sys.stderr)  # long values cut
        return EXIT_USAGE
    except KeyboardInterrupt as exc:
        print(f"starling: {exc or 'interrupted'}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`starling status | head -3`): nothing more to say to it.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        exporter = sys.modules.get("starling.orchestrator.execution.exporter")
        if exporter is not None:  # a --metrics endpoint was served: stop it with the command
            exporter.stop_run_metrics()


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


def _log_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=None,
        help="progress and log lines: text (default) or json, one object per line on stdout",
    )


def _parser() -> argparse.ArgumentParser:
    from starling.orchestrator.cli import docker as docker_cli
    from starling.orchestrator.cli import live as live_cli
    from starling.orchestrator.deploy import certs, compose
    from starling.orchestrator.report import export

    parser = argparse.ArgumentParser(
        prog="starling", description="Decentralised Bayesian sampling on real edge networks."
    )
    sub = parser.add_subparsers(metavar="COMMAND")

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

    from starling.orchestrator.report import add_command

    add_command(sub)

    algorithms = sub.add_parser("algorithms", help="list algorithms, roles and hyperparameters")
    algorithms.add_argument("--format", choices=["text", "json"], default="text")
    algorithms.set_defaults(handler=cmd_algorithms)

    examples = sub.add_parser(
        "examples",
        help="list the shipped example experiments (starling run quickstart), or "
        "copy them into a folder to edit",
    )
    examples.add_argument("--copy", metavar="FOLDER", help="copy every example into FOLDER")
    examples.set_defaults(handler=cmd_examples)

    node = sub.add_parser(
        "node",
        help="run one node (starling node serve --config node.yaml) or check one "
        "(starling node health HOST:PORT)",
    )
    node.add_argument("action", choices=["serve", "health"])

    live_cli.add_commands(sub)
    compose.add_commands(sub)
    docker_cli.add_commands(sub)
    certs.add_commands(sub)
    export.add_commands(sub)
    return parser
