"""After Ctrl-C, the nodes whose samples were not collected are named in the run's last
line (``not collected: ... did not answer within``), so ``starling collect`` can be pointed
at them: a node whose calls fail at once (its connection refused or given up on) as well as
one that runs out of time. A CI run once froze two nodes long enough for their calls to fail
instead of timing out, and the last line named neither."""

from __future__ import annotations

import socket

from starling.orchestrator.execution.client import NodeClient
from starling.orchestrator.execution.collector import Collector
from starling.orchestrator.execution.runner import _collect_all
from starling.orchestrator.results.account import Account


def _closed_port() -> int:
    """A local port nothing listens on (bound, read, released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_node_is_among_those_that_did_not_answer():
    account = Account(lambda _line: None)
    client = NodeClient(f"127.0.0.1:{_closed_port()}")
    try:
        unanswered = _collect_all({"b": client}, Collector(), account, within=30.0)
    finally:
        client.close()
    assert unanswered == ["b"]
    why = [line for line in account.lines if line.startswith("node b: samples could not")]
    assert len(why) == 1 and "unreachable" in why[0], account.lines
