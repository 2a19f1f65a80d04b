"""``--swarm STACK`` and ``--compose PROJECT`` of ``starling nodes`` and ``starling links
--kernel``: the fault is carried out through the container engine on the deployment's node
containers (:mod:`starling.orchestrator.execution.engines`), not by a run's orchestrator.
On Kubernetes the same faults are a pod deletion and a NetworkPolicy change
(``starling deploy policies --cut``; docs/deployment/kubernetes.md)."""

from __future__ import annotations

import argparse
import json

from starling.node.params import ConfigError

__all__ = ["add_options", "chosen", "cmd_kernel_link", "cmd_nodes"]


def add_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--swarm",
        metavar="STACK",
        help="act through this engine on the nodes of swarm stack STACK (docker stack deploy)",
    )
    where.add_argument(
        "--compose",
        metavar="PROJECT",
        help="act through this engine on the nodes of compose project PROJECT",
    )


def chosen(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "swarm", None) or getattr(args, "compose", None))


def _nodes(args: argparse.Namespace):
    from starling.orchestrator.deploy.testbed import NETWORK, service_name
    from starling.orchestrator.execution.engines import Deployment, EngineNodes

    engine, name = ("swarm", args.swarm) if args.swarm else ("compose", args.compose)
    return EngineNodes(Deployment(engine, name, service_name, NETWORK))


def _say(args: argparse.Namespace, text: str, **fields: object) -> None:
    if args.format == "json":
        print(json.dumps({"ok": True, **fields}))
    else:
        print(text)


def cmd_nodes(args: argparse.Namespace) -> int:
    nodes = _nodes(args)
    action, node = args.action, args.node
    if action in ("kill", "restart"):
        outcome = nodes.kill(node) if action == "kill" else nodes.restart(node)
    else:
        getattr(nodes, action)(node)  # pause, unpause, disconnect, reconnect
        outcome = f"{action} done"
    _say(args, f"node {node}: {outcome}", action=action, node=node)
    return 0


def cmd_kernel_link(args: argparse.Namespace) -> int:
    if args.receiver == "*":
        raise ConfigError("links --kernel: name one receiving node, not '*'")
    nodes = _nodes(args)
    if args.action == "cut":
        nodes.drop_link(args.sender, args.receiver)
        what = "cut"
    elif args.action == "restore":
        nodes.restore_link(args.sender, args.receiver)
        what = "restored"
    else:
        if args.delay is not None or args.drop is None:
            raise ConfigError(
                "links set --kernel --swarm/--compose: give --drop P (a delay needs tc netem "
                "on the sender's interface, which the run's own kernel faults set)"
            )
        if not 0.0 < args.drop <= 1.0:
            raise ConfigError(f"--drop: expected a probability in (0, 1], got {args.drop}")
        nodes.drop_link(args.sender, args.receiver, 100.0 * args.drop)
        what = f"losing {100.0 * args.drop:g} % of its packets"
    _say(
        args,
        f"link {args.sender} -> {args.receiver}: kernel {what}",
        sender=args.sender,
        receiver=args.receiver,
        kind=args.action,
    )
    return 0
