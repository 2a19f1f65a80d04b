"""Live commands against a running experiment: links, nodes, status.

Link commands go straight to the sending node's Control service (link state lives at the
sender's outbound link); kill and restart are carried out by the experiment's own
orchestrator, which owns the processes. The experiment is found through
:mod:`starling.orchestrator.execution.live`, so no address is ever typed.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from starling.node.params import ConfigError
from starling.orchestrator.cli import engines
from starling.orchestrator.cli.status_view import LINK_COLUMNS, LINK_LEGEND, as_of, status_report
from starling.orchestrator.config.experiment import parse_delay as experiment_delay
from starling.orchestrator.core.errors import NodeUnavailable
from starling.orchestrator.execution import live

if TYPE_CHECKING:
    from starling.orchestrator.execution.client import NodeClient

__all__ = ["add_commands", "join_option_values", "parse_delay"]

VALUE_OPTIONS = ("--delay", "--drop")
"""Options whose value may start with ``-``: argparse would take ``-3ms`` for an option."""
WATCH_WAIT_SECONDS = 60.0
"""How long ``status --watch`` waits for a run about to start, unless ``--wait`` says."""


def join_option_values(argv: list[str]) -> list[str]:
    """``--delay -3ms`` as ``--delay=-3ms``, so the value reaches its own check (a one-line
    error naming ``--delay``) instead of argparse's "expected one argument"."""
    joined: list[str] = []
    index = 0
    while index < len(argv):
        item = argv[index]
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if item in VALUE_OPTIONS and following.startswith("-") and not following.startswith("--"):
            joined.append(f"{item}={following}")
            index += 2
            continue
        joined.append(item)
        index += 1
    return joined


def parse_delay(text: str) -> float:
    """``20ms``, ``1.5s`` or a bare number of milliseconds -> milliseconds."""
    return experiment_delay(text, "--delay")


def _client_for(record: live.RunRecord, node: str) -> NodeClient:
    if node not in record.addresses:
        known = ", ".join(sorted(record.addresses))
        raise ConfigError(
            f"node {node!r} is not part of experiment {record.name!r} (nodes: {known})"
        )
    from starling.orchestrator.execution.access import access_from_section
    from starling.orchestrator.execution.client import (
        NodeClient,  # grpc only for the commands that dial
    )

    access = access_from_section(record.access, "run record")
    return NodeClient(record.addresses[node], access=access, node_id=node)


def cmd_kernel_link(args) -> int:
    """``starling links cut|set|restore A B --kernel``: carried out by the run's orchestrator
    (the docker backend's helper container sets nft/tc in A's namespace), recorded with what
    the link's counters did while it was on (``faults.kernel`` of ``metrics.json``)."""
    extra: dict = {"peer": args.receiver, "kind": args.action}
    if args.receiver == "*":
        raise ConfigError("links --kernel: name one receiving node, not '*'")
    if args.action == "set":
        if (args.drop is None) == (args.delay is None):
            raise ConfigError("links set --kernel: give either --drop or --delay")
        if args.drop is not None:
            if not 0.0 < args.drop <= 1.0:
                raise ConfigError(f"--drop: expected a probability in (0, 1], got {args.drop}")
            extra.update(kind="loss", amount=round(100.0 * args.drop, 6))
        else:
            extra.update(kind="delay", amount=parse_delay(args.delay))
            if args.jitter is not None:
                extra["jitter"] = experiment_delay(args.jitter, "--jitter")
    if args.jitter is not None and extra["kind"] != "delay":
        raise ConfigError("--jitter: only with links set --delay ... --kernel")
    record = live.find_run(args.run)
    if args.receiver not in record.addresses:
        raise ConfigError(f"node {args.receiver!r} is not part of experiment {record.name!r}")
    live.check_can_ask(record)
    result = live.post_request(record, "kernel-link", args.sender, extra=extra)
    if not result.get("ok"):
        raise ConfigError(
            f"links {args.action} --kernel {args.sender} {args.receiver}: "
            + result.get("error", "the orchestrator refused")
        )
    at_round = result.get("round")
    if args.format == "json":
        print(
            json.dumps(
                {
                    "ok": True,
                    "sender": args.sender,
                    "receiver": args.receiver,
                    "round": at_round,
                    **extra,
                }
            )
        )
    else:
        print(
            f"link {args.sender} -> {args.receiver}: kernel {extra['kind']} done"
            + (f" (node {args.sender} at round {at_round})" if at_round is not None else "")
        )
    return 0


def cmd_links(args) -> int:
    if engines.chosen(args):  # a deployment's containers, through the engine
        if not args.kernel:
            raise ConfigError(
                "links --swarm/--compose: only kernel faults go through the engine (add "
                "--kernel); Starling's own link faults go to the run: starling links ... --run"
            )
        return engines.cmd_kernel_link(args)
    if args.kernel:
        return cmd_kernel_link(args)
    if args.action == "reset" or args.jitter is not None:
        what = "links reset" if args.action == "reset" else "--jitter"
        raise ConfigError(f"{what}: a kernel fault; add --kernel (docker backend)")
    asked = _link_values(args)  # checked before any run is looked for
    record = live.find_run(args.run)
    live.check_can_ask(record)  # the change is noted in the run's journal
    if args.receiver != "*":
        _client_for(record, args.receiver).close()  # validates the name
    fixed: dict[str, dict] = {
        "cut": {"up": False},
        "restore": {"up": True, "drop": 0.0, "delay_ms": float(record.link_delay_ms)},
    }
    change = fixed.get(args.action, asked)
    at_round = _set_link(record, args.sender, args.receiver, change)
    event = {
        "kind": "link",
        "action": args.action,
        "sender": args.sender,
        "receiver": args.receiver,
        "round": at_round,
        **change,
    }
    try:
        live.log_event(record.out_dir, event)
    except OSError as exc:  # the change is made; only the run's account misses it
        print(
            f"starling: warning: could not note the change in {record.out_dir}: {exc}",
            file=sys.stderr,
        )
    if args.format == "json":
        print(json.dumps({"ok": True, **event}))
    else:
        print(
            f"link {args.sender} -> {args.receiver}: {args.action} done"
            + (f" (node {args.sender} at round {at_round})" if at_round is not None else "")
        )
    return 0


def _link_values(args) -> dict:
    """What ``links set`` asks of the link (``drop``, ``delay_ms``), checked; {} for the
    other actions."""
    if args.action != "set":
        return {}
    if args.drop is None and args.delay is None:
        raise ConfigError("links set: give --drop and/or --delay")
    asked: dict = {}
    if args.drop is not None:
        if not 0.0 <= args.drop <= 1.0:
            raise ConfigError(f"--drop: expected a probability in [0, 1], got {args.drop}")
        asked["drop"] = float(args.drop)
    if args.delay is not None:
        asked["delay_ms"] = parse_delay(args.delay)
    return asked


def _set_link(record: live.RunRecord, sender: str, receiver: str, change: dict) -> int | None:
    """Ask ``sender`` to change its link to ``receiver``; the round it was at after, if it
    still answers."""
    client = _client_for(record, sender)
    try:
        try:
            client.set_link(receiver, **change)
        except NodeUnavailable as exc:
            raise NodeUnavailable(
                f"node {sender!r} holds the link and cannot be reached ({exc}); "
                "is it down? 'starling status' shows"
            ) from None
        try:
            return client.status().round
        except NodeUnavailable:
            return None
    finally:
        client.close()


def cmd_nodes(args) -> int:
    if engines.chosen(args):
        return engines.cmd_nodes(args)
    record = live.find_run(args.run)
    live.check_can_ask(record)
    result = live.post_request(record, args.action, args.node)
    if not result.get("ok"):
        raise ConfigError(
            f"nodes {args.action} {args.node}: " + result.get("error", "the orchestrator refused")
        )
    if args.format == "json":
        print(
            json.dumps(
                {
                    "ok": True,
                    "action": args.action,
                    "node": args.node,
                    "address": result.get("address"),
                }
            )
        )
    else:
        print(f"node {args.node}: {args.action} done")
    return 0


def cmd_stop(args) -> int:
    """Stop the rounds of every node of a run: one whose orchestrator died (SIGKILL, a lost
    machine) leaves inventory nodes sampling the abandoned run to its end, refusing the
    next until then. Each node keeps serving and its store stays for ``starling collect``."""
    from starling.orchestrator.execution.access import access_from_section
    from starling.orchestrator.execution.client import NodeClient
    from starling.orchestrator.execution.halt import stop_all

    record = live.find_run(args.run)
    access = access_from_section(record.access, "run record")
    clients = {
        node: NodeClient(address, timeout=5.0, access=access, node_id=node)
        for node, address in record.addresses.items()
    }
    try:
        errors = stop_all(clients)
    finally:
        for client in clients.values():
            client.close()
    for node, error in errors.items():
        print(f"node {node}: " + ("rounds stopped" if error is None else f"not stopped ({error})"))
    return 0 if all(error is None for error in errors.values()) else 1


def cmd_status(args) -> int:
    if getattr(args, "watch", False):
        if args.format == "json":
            raise ConfigError("--watch: a live view for people; --format json gives one status")
        from starling.orchestrator.cli.watch import watch

        return watch(args.run, wait=WATCH_WAIT_SECONDS if args.wait is None else args.wait)
    if args.wait is not None:
        raise ConfigError("--wait: only with --watch (a one-off status does not wait for a run)")
    record = live.find_run(args.run)
    report = status_report(record)
    if args.format == "json":
        print(json.dumps(report, indent=2, default=str))
        return 0
    print(f"experiment {record.name}  ({record.out_dir})")
    if report["state"] == "finished":
        print(
            f"  finished: {report['finished']}"
            + (f" — {report['note']}" if report.get("note") else "")
        )
    for node, status in report["nodes"].items():
        print(f"  node {node}: {_node_line(status)}")
    if report["links"]:
        heads = "".join(f"{title:>{len(title) + 2}}" for _, title in LINK_COLUMNS)
        print(f"  {'link':<12}{heads}  {'as of':>9}  live state")
        for key, c in report["links"].items():
            cells = "".join(f"{c.get(name, 0):>{len(title) + 2}}" for name, title in LINK_COLUMNS)
            print(f"  {key:<12}{cells}  {as_of(c):>9}  {_live_state(c.get('live'))}")
        print(f"  ({LINK_LEGEND})")
    return 0


def _node_line(status: dict) -> str:
    """One node of ``starling status``, after its id."""
    if status.get("state") == "unreachable":
        return f"unreachable at {status['address']}"
    if status.get("state") == "finished":
        return f"finished, {status.get('samples_stored')} samples"
    stored = status.get("samples_stored")
    line = f"{status.get('state')}, round {status.get('round')}, {stored} samples"
    if status.get("process") == "ended":
        line += " (its process has ended)"
    if status.get("error"):
        line += f" — {status['error']}"
    return line


def _live_state(state: dict | None) -> str:
    """A link's live changes (``starling links``) in words: down, or up with its drop/delay."""
    if not state:
        return ""
    text = "down" if not state.get("up", True) else "up"
    if state.get("drop"):
        text += f", drop {state['drop']:g}"
    if state.get("delay_ms"):
        text += f", delay {state['delay_ms']:g} ms"
    return text


def add_commands(sub) -> None:
    links = sub.add_parser("links", help="cut, restore or degrade a link of a running experiment")
    links.add_argument("action", choices=["cut", "restore", "set", "reset"])
    links.add_argument("sender", help="node id sending on the link")
    links.add_argument("receiver", help="node id receiving ('*' for all of the sender's links)")
    links.add_argument("--drop", type=float, help="drop probability per message (set)")
    links.add_argument("--delay", help="added delay per message, e.g. 20ms (set)")
    links.add_argument(
        "--jitter", help="with --delay --kernel: jitter around the delay, e.g. 5ms (tc netem)"
    )
    links.add_argument(
        "--kernel",
        action="store_true",
        help="drop (cut, set --drop P), reset (reset) or delay packets in the kernel instead "
        "of in Starling (docker backend: nft in the receiver's network namespace, tc in the "
        "sender's); TCP resends what the kernel drops: delay, not lost messages",
    )
    links.add_argument("--run", help="experiment name or results folder (if several run)")
    links.add_argument("--format", choices=["text", "json"], default="text")
    engines.add_options(links)
    links.set_defaults(handler=cmd_links)

    nodes = sub.add_parser("nodes", help="kill or restart a node of a running experiment")
    nodes.add_argument(
        "action", choices=["kill", "restart", "pause", "unpause", "disconnect", "reconnect"]
    )
    nodes.add_argument("node", help="node id")
    nodes.add_argument("--run", help="experiment name or results folder (if several run)")
    nodes.add_argument("--format", choices=["text", "json"], default="text")
    engines.add_options(nodes)
    nodes.set_defaults(handler=cmd_nodes)

    stop = sub.add_parser(
        "stop", help="stop every node's rounds of a run (one whose orchestrator died)"
    )
    stop.add_argument("--run", help="experiment name or results folder (if several run)")
    stop.set_defaults(handler=cmd_stop)

    status = sub.add_parser("status", help="each node's round and each link's counts")
    status.add_argument("--format", choices=["text", "json"], default="text")
    status.add_argument("--run", help="experiment name or results folder (if several run)")
    status.add_argument(
        "--watch",
        action="store_true",
        help="a live view, redrawn every second: each node's round and state, each link's "
        "state (up, cut, lossy, delayed) and counters; Ctrl-C leaves",
    )
    status.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --watch: how long to wait for a run that is about to start (default 60)",
    )
    status.set_defaults(handler=cmd_status)
