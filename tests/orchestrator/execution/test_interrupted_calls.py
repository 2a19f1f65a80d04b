"""A Ctrl-C that lands while the orchestrator's main thread is inside a gRPC call leaves the
node's channel usable: the Stop and the collection that follow an interrupt get through.

Before, a KeyboardInterrupt raised inside gRPC's code could leave a lock of the channel
taken; every later call on it waited for ever, deadline or not (CI saw a run that never
ended after its Ctrl-C: one node was never stopped). Here a real SIGINT lands at a random
instant (seeded) in one call after another to a real node process, inside
:func:`interrupts_remembered` as in a run; after each, a call from another thread must
answer within its deadline. Without the deferral the old code hung within a few trials
of 300 (both kinds of call); with it, none did.
"""

from __future__ import annotations

import random
import signal
import threading

import pytest

from starling.orchestrator.core.errors import NodeRejected, NodeUnavailable
from starling.orchestrator.core.interrupts import interrupts_remembered, raise_remembered
from starling.orchestrator.execution.backends.local import LocalBackend
from starling.orchestrator.execution.client import NodeClient

pytestmark = pytest.mark.e2e

TRIALS = 150
CALL_SECONDS = 2.0
"""Each call's deadline; a call that has not answered in twice that is hung."""


def _interrupted_calls(client: NodeClient, kind: str, chance: random.Random) -> None:
    """Calls of ``kind`` one after another until a SIGINT, sent at a random instant within
    20 ms, raises KeyboardInterrupt (it must: the trial fails if it is lost)."""
    main = threading.get_ident()
    timer = threading.Timer(chance.uniform(0.0, 0.02), signal.pthread_kill, (main, signal.SIGINT))
    # A block of its own per trial, as a run has: one raised where it landed stays
    # remembered until its block ends, and the next trial's loop would raise it again.
    try:
        with interrupts_remembered(), pytest.raises(KeyboardInterrupt):
            timer.start()
            while True:
                raise_remembered()  # one dropped in a finaliser, as the rounds' loop does
                try:
                    if kind == "status":
                        client.status()
                    else:  # a stream: the unconfigured node refuses it, after it opened
                        list(client.samples())
                except (NodeUnavailable, NodeRejected):
                    pass
    finally:
        timer.join()


def _answers_in_time(client: NodeClient) -> bool:
    answered = threading.Event()

    def ask() -> None:
        client.status(attempts=1)
        answered.set()

    threading.Thread(target=ask, daemon=True).start()
    return answered.wait(2 * CALL_SECONDS)


@pytest.mark.parametrize("kind", ["status", "samples"])
def test_a_channel_outlives_ctrl_c_landing_inside_its_calls(tmp_path, kind):
    chance = random.Random(7)
    hung_after = None
    with LocalBackend("127.0.0.1", 0, tmp_path) as backend:
        client = NodeClient(backend.start(["a"])["a"], timeout=CALL_SECONDS)
        client.wait_ready()
        for trial in range(TRIALS):
            _interrupted_calls(client, kind, chance)
            if not _answers_in_time(client):
                hung_after = trial
                break
        if hung_after is None:
            client.close()  # a hung channel's close waits for ever too: the test fails instead
    assert hung_after is None, f"the channel hung after trial {hung_after}"
