"""``starling algorithms`` and ``starling examples``: what Starling can run, and the
experiments it ships."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError

__all__ = ["add_commands"]


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


def add_commands(sub) -> None:
    """``starling algorithms`` and ``starling examples``."""
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
