"""Live commands against a running experiment: links, nodes, status.

Link commands go straight to the sending node's Control service (link state lives at the
sender's outbound link); kill and restart are carried out by the experiment's own
orchestrator, which owns the processes. The experiment is found through
:mod:`orchestrator.live`, so no address is ever typed.
"""

from __future__ import annotations

import dataclasses
import json
import re

from node.params import ConfigError
from orchestrator import live
from orchestrator.client import NodeClient, NodeUnavailable

__all__ = ["add_commands", "parse_delay"]


def parse_delay(text: str) -> float:
    """``20ms``, ``1.5s`` or a bare number of milliseconds -> milliseconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s)?\s*", text)
    if not match:
        raise ConfigError(f"--delay: expected a duration like 20ms or 0.5s, got {text!r}")
    value = float(match.group(1))
    return value * 1000.0 if match.group(2) == "s" else value


def _client_for(record: live.RunRecord, node: str) -> NodeClient:
    if node not in record.addresses:
        known = ", ".join(sorted(record.addresses))
        raise ConfigError(
            f"node {node!r} is not part of experiment {record.name!r} (nodes: {known})"
        )
    return NodeClient(record.addresses[node])


def cmd_links(args) -> int:
    record = live.find_run(args.run)
    if args.receiver != "*":
        _client_for(record, args.receiver).close()  # validates the name
    client = _client_for(record, args.sender)
    try:
        if args.action == "cut":
            client.set_link(args.receiver, up=False)
        elif args.action == "restore":
            client.set_link(args.receiver, up=True, drop=0.0, delay_ms=0.0)
        else:
            if args.drop is None and args.delay is None:
                raise ConfigError("links set: give --drop and/or --delay")
            if args.drop is not None and not 0.0 <= args.drop <= 1.0:
                raise ConfigError(f"--drop: expected a probability in [0, 1], got {args.drop}")
            delay = parse_delay(args.delay) if args.delay is not None else None
            client.set_link(args.receiver, drop=args.drop, delay_ms=delay)
    finally:
        client.close()
    print(f"link {args.sender} -> {args.receiver}: {args.action} done")
    return 0


def cmd_nodes(args) -> int:
    record = live.find_run(args.run)
    result = live.post_request(record, args.action, args.node)
    if not result.get("ok"):
        raise ConfigError(result.get("error", "the orchestrator refused"))
    print(f"node {args.node}: {args.action} done")
    return 0


def cmd_status(args) -> int:
    record = live.find_run(args.run)
    report = {"experiment": record.name, "out_dir": record.out_dir, "nodes": {}}
    for node, address in record.addresses.items():
        client = NodeClient(address, timeout=3.0)
        try:
            status = client.status()
            report["nodes"][node] = dataclasses.asdict(status)
        except NodeUnavailable as exc:
            report["nodes"][node] = {"state": "unreachable", "error": str(exc)}
        finally:
            client.close()
    if args.format == "json":
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"experiment {record.name}  ({record.out_dir})")
    for node, status in report["nodes"].items():
        print(
            f"node {node}: {status.get('state')} round {status.get('round', '-')}"
            f" samples {status.get('samples_stored', '-')}"
        )
        for direction in ("outbound", "inbound"):
            for peer, stats in (status.get(direction) or {}).items():
                arrow = "->" if direction == "outbound" else "<-"
                counts = " ".join(f"{k}={v}" for k, v in stats.items())
                print(f"    {arrow} {peer}: {counts}")
    return 0


def add_commands(sub) -> None:
    links = sub.add_parser("links", help="cut, restore or degrade a link of a running experiment")
    links.add_argument("action", choices=["cut", "restore", "set"])
    links.add_argument("sender", help="node id sending on the link")
    links.add_argument("receiver", help="node id receiving ('*' for all of the sender's links)")
    links.add_argument("--drop", type=float, help="drop probability per message (set)")
    links.add_argument("--delay", help="added delay per message, e.g. 20ms (set)")
    links.add_argument("--run", help="experiment name or results folder (if several run)")
    links.set_defaults(handler=cmd_links)

    nodes = sub.add_parser("nodes", help="kill or restart a node of a running experiment")
    nodes.add_argument("action", choices=["kill", "restart"])
    nodes.add_argument("node", help="node id")
    nodes.add_argument("--run", help="experiment name or results folder (if several run)")
    nodes.set_defaults(handler=cmd_nodes)

    status = sub.add_parser("status", help="each node's round and each link's counts")
    status.add_argument("--format", choices=["text", "json"], default="text")
    status.add_argument("--run", help="experiment name or results folder (if several run)")
    status.set_defaults(handler=cmd_status)
