"""The ``starling`` command: one function per subcommand, errors as one readable line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from node.params import ConfigError

__all__ = ["main"]


def _out_dir(args, name: str) -> Path:
    return Path(args.out) if args.out else Path("results") / name


def _load(args):
    """The file named on the command line, read once: a Study or an Experiment."""
    from orchestrator.experiment import parse_experiment, read_yaml_file
    from orchestrator.study import is_study, load_study

    raw = read_yaml_file(args.experiment)
    inventory = getattr(args, "inventory", None)
    if is_study(raw):
        if inventory:
            raise ConfigError("--inventory: drives one experiment, not a study")
        return load_study(raw)
    if inventory:  # the experiment's backend becomes the file's nodes
        from orchestrator.backends.inventory import load_inventory, with_inventory

        raw = with_inventory(raw, load_inventory(inventory))
    return parse_experiment(raw, default_name=Path(args.experiment).stem)


def cmd_run(args) -> int:
    from orchestrator.runner import run_experiment
    from orchestrator.study import Study, run_study

    loaded = _load(args)
    if isinstance(loaded, Study):
        run_study(loaded, _out_dir(args, loaded.name), "run", say=_say)
        return 0
    metrics = run_experiment(loaded, _out_dir(args, loaded.name), say=_say)
    return 130 if metrics.get("interrupted") else 0


def cmd_simulate(args) -> int:
    from orchestrator.simulation import simulate_experiment
    from orchestrator.study import Study, run_study

    loaded = _load(args)
    if isinstance(loaded, Study):
        run_study(loaded, _out_dir(args, loaded.name), "simulate", say=_say)
        return 0
    simulate_experiment(loaded, _out_dir(args, loaded.name), say=_say)
    return 0


def cmd_algorithms(args) -> int:
    from node.params import describe_params
    from node.samplers import ALGORITHMS

    catalogue = [
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


def cmd_node(rest: list[str]) -> int:
    """``starling node serve|health ...`` is ``python -m node serve|health ...``."""
    from node.cli import main as node_main

    return node_main(rest)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["node"] and argv[1:2] in (["serve"], ["health"]):
        return _guard(lambda: cmd_node(argv[1:]))
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    return _guard(lambda: args.handler(args))


def _guard(action: Callable[[], int]) -> int:
    from orchestrator.backends.base import BackendError
    from orchestrator.errors import NodeUnavailable

    try:
        return action()
    except (ConfigError, NodeUnavailable, BackendError) as exc:
        print(f"starling: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("starling: interrupted", file=sys.stderr)
        return 130


def _say(message: str) -> None:
    print(message, flush=True)


def _parser() -> argparse.ArgumentParser:
    from orchestrator import compose, live_cli

    parser = argparse.ArgumentParser(
        prog="starling", description="Decentralised Bayesian sampling on real edge networks."
    )
    sub = parser.add_subparsers(metavar="COMMAND")

    run = sub.add_parser("run", help="run an experiment on real node processes over gRPC")
    run.add_argument("experiment", help="experiment YAML file")
    run.add_argument("--out", help="results folder (default: results/<experiment name>)")
    run.add_argument(
        "--inventory", metavar="FILE",
        help="drive nodes that already run: a YAML file mapping node ids to host:port "
        "(nodes: {a: host:port, ...}), in place of the experiment's backend",
    )  # fmt: skip
    run.set_defaults(handler=cmd_run)

    simulate = sub.add_parser("simulate", help="run the same experiment in-process")
    simulate.add_argument("experiment", help="experiment YAML file")
    simulate.add_argument("--out", help="results folder (default: results/<experiment name>)")
    simulate.set_defaults(handler=cmd_simulate)

    algorithms = sub.add_parser("algorithms", help="list algorithms, roles and hyperparameters")
    algorithms.add_argument("--format", choices=["text", "json"], default="text")
    algorithms.set_defaults(handler=cmd_algorithms)

    node = sub.add_parser(
        "node", help="run one node (starling node serve --config node.yaml) or check one "
        "(starling node health HOST:PORT)",
    )  # fmt: skip
    node.add_argument("action", choices=["serve", "health"])

    live_cli.add_commands(sub)
    compose.add_commands(sub)
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
