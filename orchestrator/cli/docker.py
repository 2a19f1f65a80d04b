"""``starling docker cleanup``: remove what crashed docker-backend runs left behind.

Every container, network and volume the docker backend creates is labelled
``starling.run=<run id>`` (:mod:`starling.orchestrator.execution.backends.docker`); a run that ends
in any normal way removes its own. An orchestrator killed outright cannot, so this removes them by
label: all runs' leftovers, or one run's with ``--run ID``.
"""

from __future__ import annotations

import json

__all__ = ["add_commands", "cmd_cleanup"]


def cmd_cleanup(args) -> int:
    from starling.orchestrator.execution.backends.docker import cleanup, docker_client

    removed = cleanup(docker_client(), args.run)
    if args.format == "json":
        print(json.dumps(removed, indent=2))
        return 0
    total = sum(len(names) for names in removed.values())
    if not total:
        print("nothing to remove: no labelled container, network or volume")
    for kind, names in removed.items():
        for name in names:
            print(f"removed {kind[:-1]} {name}")
    return 0


def add_commands(sub) -> None:
    docker = sub.add_parser("docker", help="docker backend housekeeping (starling docker cleanup)")
    action = docker.add_subparsers(metavar="ACTION")
    clean = action.add_parser(
        "cleanup", help="remove containers, networks and volumes of crashed docker-backend runs"
    )
    clean.add_argument("--run", help="only this run's (its id, the starling.run label)")
    clean.add_argument("--format", choices=["text", "json"], default="text")
    clean.set_defaults(handler=cmd_cleanup)
