"""Ctrl-C or SIGTERM during ``starling run``: every node's round loop is stopped first
(``Control.Stop``), all at once, and only then is what it stored collected.

Collected the other way round, a node went on sampling while the orchestrator streamed
its store: the samples it stored in between were never collected (a local run's results
held tens of rounds fewer than its nodes' stores), and a node of an inventory, which the
orchestrator does not stop afterwards, ran the abandoned experiment to its last round and
refused the next run's configuration until then. A stopped node keeps serving: its store
(synced by the stop), its status and its counters are all still read afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from starling.orchestrator.execution.client import NodeClient
from starling.orchestrator.results.account import Account

__all__ = ["halt_rounds", "stop_all"]


def stop_all(clients: Mapping[str, NodeClient]) -> dict[str, BaseException | None]:
    """Stop the round loop of every node in ``clients``, concurrently (one unreachable node
    costs its retries once, not once per node); node -> the error, or None once stopped.
    Also ``starling stop``: the nodes of a run whose orchestrator died sample on."""
    if not clients:
        return {}
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        stops = {node: pool.submit(client.stop) for node, client in clients.items()}
    return {node: stop.exception() for node, stop in stops.items()}


def halt_rounds(clients: Mapping[str, NodeClient], account: Account) -> None:
    """Stop every node's rounds (:func:`stop_all`); a node that cannot be stopped is named
    in the account and collected as it is."""
    for node, error in stop_all(clients).items():
        if error is not None:
            account.plain(f"node {node}: its rounds could not be stopped ({error})")
