"""``starling compose generate`` and ``starling certs``: files that deploy Starling beyond one
process, written for the user."""

from __future__ import annotations

import argparse
import sys

from starling.node.params import ConfigError
from starling.orchestrator.config.shipped import experiment_file
from starling.orchestrator.config.yaml_files import read_yaml_file
from starling.orchestrator.core.files import check_out_file, write_replacing
from starling.orchestrator.deploy import certs
from starling.orchestrator.deploy.compose import DEFAULT_EXPERIMENT, generate

__all__ = ["add_commands"]


def cmd_generate(args: argparse.Namespace) -> int:
    if args.experiment is not None and not args.experiment.strip():
        raise ConfigError(
            f"--experiment: expected a file or a shipped example's name, got {args.experiment!r}"
        )
    target = check_out_file(args.out, args.overwrite) if args.out is not None else None
    base = read_yaml_file(experiment_file(args.experiment or DEFAULT_EXPERIMENT))
    text = generate(args.nodes, args.topology, base, args.data_size, args.data_seed)
    if target is not None:
        write_replacing(target, lambda path: path.write_text(text, encoding="utf-8"))
    else:
        sys.stdout.write(text)
    return 0


def add_commands(sub) -> None:
    """``starling compose generate`` and ``starling certs``."""
    compose = sub.add_parser("compose", help="compose testbeds: generate one of any size")
    actions = compose.add_subparsers(metavar="ACTION")
    gen = actions.add_parser("generate", help="print a compose file for N nodes on a graph")
    gen.add_argument("--nodes", type=int, default=5, help="node containers (default 5)")
    gen.add_argument(
        "--topology",
        default="ring",
        help="topology kind: ring, full, star, path, ... (default ring)",
    )
    gen.add_argument(
        "--experiment",
        metavar="FILE",
        help="experiment YAML file, or a shipped example's name (starling examples), to run "
        f"(default: the shipped {DEFAULT_EXPERIMENT})",
    )
    gen.add_argument("--data-size", type=int, default=50, help="points per node (default 50)")
    gen.add_argument("--data-seed", type=int, default=1, help="seed of the shards (default 1)")
    gen.add_argument(
        "--out",
        metavar="FILE",
        help="write here instead of stdout, in a folder that exists; an existing FILE is "
        "refused without --overwrite",
    )
    gen.add_argument("--overwrite", action="store_true", help="--out may replace its FILE")
    gen.set_defaults(handler=cmd_generate)
    certs.add_commands(sub)
