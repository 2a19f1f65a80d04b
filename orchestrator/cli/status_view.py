"""What ``starling status`` shows of a run: every node's state and every link's counters
from one consistent look while it runs, and how it ended once it is over. Shared by the
one-off ``status`` (:mod:`starling.orchestrator.cli.live`) and ``status --watch``
(:mod:`starling.orchestrator.cli.watch`)."""

from __future__ import annotations

from pathlib import Path

from starling.node.params import ConfigError
from starling.orchestrator.execution import live

__all__ = ["LINK_COLUMNS", "LINK_LEGEND", "as_of", "finished_report", "status_report"]


LINK_COLUMNS = (
    ("sent", "sent"),
    ("delivered", "delivered"),
    ("late", "late"),
    ("withheld", "dropped (fault)"),
    ("dropped", "receiver down"),
)
"""Counter -> its column: what happened to a link's messages, in words (a live ``--drop``
is counted ``withheld`` by the node, and shown as what it is, dropped by a fault)."""
LINK_LEGEND = (
    "dropped (fault): taken out by a cut, a drop or a scheduled fault; receiver down: not "
    "sent, the receiver did not answer; as of: the rounds of the sender's / receiver's books"
)


def as_of(link: dict) -> str:
    """The rounds a link's counters were read at: one number, or sender's / receiver's."""
    rounds = link.get("as_of") or {}
    sender, receiver = rounds.get("sender_round"), rounds.get("receiver_round")
    if sender == receiver:
        return "–" if sender is None else str(sender)
    return f"{'–' if sender is None else sender} / {'–' if receiver is None else receiver}"


def finished_report(record: live.RunRecord) -> dict | None:
    """How the run ended, once its orchestrator is gone (None while it runs): ``finished``
    is ``complete``, ``partial``, ``failed`` or ``interrupted``, from the results it wrote;
    the links' counters are its final account's. Every node *unreachable* with frozen
    counters looked like a crash."""
    if live._pid_alive(record.orchestrator_pid):
        return None
    from starling.orchestrator.report.loading import read_metrics

    try:
        metrics = read_metrics(Path(record.out_dir))
    except ConfigError:
        metrics = {}
    status = str(metrics.get("status") or "interrupted")
    report: dict = {
        "experiment": record.name,
        "out_dir": record.out_dir,
        "state": "finished",
        "finished": status,
        "nodes": {},
        "links": {},
    }
    if not metrics:
        report["note"] = (
            "its orchestrator stopped before writing results; "
            f"`starling collect {record.out_dir}` recovers what the nodes stored"
        )
    counts = metrics.get("samples_per_node") or {}
    for node, address in record.addresses.items():
        report["nodes"][node] = {
            "address": address,
            "state": "finished",
            "round": None,
            "samples_stored": counts.get(node),
        }
    final = metrics.get("rounds")
    for key, counters in (metrics.get("links") or {}).items():
        report["links"][key] = {
            **counters,
            "as_of": {"sender_round": final, "receiver_round": final},
        }
    return report


def status_report(record: live.RunRecord) -> dict:
    """Every node's status and every link's counters from one consistent look
    (:class:`~starling.orchestrator.execution.snapshot.Poller`), counted over the whole run
    (a restarted node's earlier processes included); once the run is over, how it ended."""
    ended = finished_report(record)
    if ended is not None:
        return ended
    from starling.orchestrator.execution.snapshot import Poller  # grpc only here

    events, _ = live.read_events(record.out_dir)
    poller = Poller(record)
    try:
        look = poller.look(events)
    finally:
        poller.close()
    links = look.links
    for key, state in live.link_states(events).items():
        if key in links:
            links[key]["live"] = state
    return {
        "experiment": record.name,
        "out_dir": record.out_dir,
        "state": "running",
        "nodes": look.nodes,
        "links": links,
    }
