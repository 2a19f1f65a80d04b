"""The round engine over its in-memory lockstep transport: the semantics it documents.

:mod:`starling.node.engine.rounds` states what a synchronous and an asynchronous receiver get in
each round; these tests drive two small real programs through :func:`round_steps` and the
:class:`LockstepNetwork` the simulator uses, and check exactly that — including what a
scheduled link fault (decided once, by :class:`starling.node.faults.ScheduledFaults`) takes out.
The network transport is held to the same round by the run ≡ simulate tests
(``tests/node/test_runtime.py``, ``tests/test_faults_e2e.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from starling.node.engine import LockstepNetwork, PhaseGather, round_steps
from starling.node.faults import ScheduledFaults
from starling.node.messages import Message
from starling.node.samplers.base import NodeProgram
from starling.node.spec import LinkFault


class Stamp(NodeProgram):
    """Sends its round to one peer; remembers, per round, the stamp of what it got."""

    def __init__(self, peer: str, synchronous: bool):
        self.peer = peer
        self.synchronous = synchronous
        self.seen: list[int | None] = []

    def outgoing(self, round_index, phase):
        return {self.peer: Message("x", {"x": np.full((1, 1), float(round_index))})}

    def expected_senders(self, round_index, phase):
        return (self.peer,)

    def incoming(self, round_index, phase, inbox, rng):
        message = inbox.get(self.peer)
        self.seen.append(None if message is None else message.round)
        if message is not None:  # the payload is the sender's round of that message
            assert message["x"][0, 0] == message.round

    def state(self):
        return {"seen": np.array([-1 if r is None else r for r in self.seen])}

    def restore(self, state):
        self.seen = [None if r < 0 else int(r) for r in state["seen"]]


def _run(programs: dict[str, Stamp], rounds: int, faults: dict[str, ScheduledFaults]) -> None:
    network = LockstepNetwork({node: p.synchronous for node, p in programs.items()})
    rng = np.random.default_rng(0)
    for round_index in range(rounds):
        steps = [
            round_steps(p, round_index, network.endpoint(node), rng, faults[node])
            for node, p in programs.items()
        ]
        while steps:
            live = []
            for step in steps:
                try:
                    next(step)
                    live.append(step)
                except StopIteration:
                    pass
            steps = live
        network.end_round()


def _no_faults(*nodes: str) -> dict[str, ScheduledFaults]:
    return {node: ScheduledFaults(node) for node in nodes}


def test_synchronous_receivers_get_this_rounds_message():
    programs = {"a": Stamp("b", True), "b": Stamp("a", True)}
    _run(programs, 4, _no_faults("a", "b"))
    assert programs["a"].seen == programs["b"].seen == [0, 1, 2, 3]


def test_asynchronous_receivers_use_a_message_from_the_next_round_on():
    programs = {"a": Stamp("b", True), "b": Stamp("a", False)}
    _run(programs, 4, _no_faults("a", "b"))
    assert programs["b"].seen == [None, 0, 1, 2]  # one round in flight
    assert programs["a"].seen == [0, 1, 2, 3]  # a synchronous receiver is unaffected


def test_a_scheduled_fault_withholds_and_the_async_receiver_keeps_the_older_message():
    down = ScheduledFaults("a", outbound=(LinkFault("b", start=2, stop=5),))
    for synchronous, expected in (
        (True, [0, 1, None, None, None, 5, 6]),
        (False, [None, 0, 1, 1, 1, 1, 5]),
    ):
        programs = {"a": Stamp("b", True), "b": Stamp("a", synchronous)}
        _run(programs, 7, {"a": down, "b": ScheduledFaults("b")})
        assert programs["b"].seen == expected, synchronous
        assert programs["a"].seen == [0, 1, 2, 3, 4, 5, 6]


def test_a_message_to_an_unknown_peer_names_both_nodes():
    """The first phase's sends raise before the round's first pause."""
    network = LockstepNetwork({"a": True})
    rng = np.random.default_rng(0)
    steps = round_steps(Stamp("b", True), 0, network.endpoint("a"), rng, ScheduledFaults("a"))
    with pytest.raises(ValueError, match="node 'a' sent to unknown peer 'b'"):
        next(steps)


class _Asked:
    """A transport that delivers nothing and keeps what each gather was asked for."""

    def __init__(self):
        self.gathers: list[PhaseGather] = []

    def send(self, round_index, phase, receiver, message):
        pass

    def withhold(self, round_index, phase, receiver):
        pass

    def gather(self, round_index, phase, expected, wait):
        self.gathers.append(PhaseGather(phase, tuple(expected), wait))
        return {}


def test_each_pause_yields_the_gather_the_round_then_makes():
    """A driver awaits the inbox with what :func:`round_steps` yields at a pause, so the
    round must then gather with exactly that: here with a synchronous receiver's sender
    silenced by the schedule in round 1 (an asynchronous receiver still takes its latest)."""
    silenced = ScheduledFaults("b", inbound=(("a", LinkFault("b", start=1, stop=2)),))
    rng = np.random.default_rng(0)
    for synchronous, expected in ((True, [("a",), (), ("a",)]), (False, [("a",)] * 3)):
        transport = _Asked()
        yielded = []
        for round_index in range(3):
            yielded += round_steps(
                Stamp("a", synchronous), round_index, transport, rng, silenced, 5.0
            )
        assert yielded == transport.gathers, synchronous
        assert [gather.expected for gather in yielded] == expected, synchronous
        assert all(gather.wait.synchronous is synchronous for gather in yielded)


def _imported_by(module: str) -> list[str]:
    """The grpc and orchestrator modules a fresh interpreter holds after importing ``module``."""
    code = (
        f"import sys, json, {module}; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('grpc', 'grpc_health') or m.startswith("
        "('google.protobuf', 'starling.orchestrator')))))"
    )
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


@pytest.mark.e2e
def test_the_simulator_imports_neither_grpc_nor_the_orchestrator():
    """The round engine and its simulator load no wire library and nothing of the
    orchestrator; the check itself sees both where they are loaded."""
    assert _imported_by("starling.node.engine") == []
    # Before, the prefix was 'orchestrator', a name no module has had since starling.*.
    assert "grpc" in _imported_by("starling.node.runtime.network")
    assert "starling.orchestrator" in _imported_by("starling.orchestrator")


def _recount(events, rounds):
    """The books counted the plain way: every (link, round) on its own."""
    books: dict[str, dict[str, int]] = {}
    for what, sender, receiver, round_index in events:
        entry = books.setdefault(
            f"{sender}->{receiver}", {"sent": 0, "withheld": 0, "delivered": 0}
        )
        if rounds is None or round_index < rounds.get(sender, round_index + 1):
            entry[what] += 1
    return dict(sorted(books.items()))


@pytest.mark.parametrize("seed", range(20))
def test_the_books_equal_a_count_of_every_link_and_round(seed):
    """Random traffic on three nodes (one asynchronous receiver): messages sent, withheld,
    gathered or not, rounds with no traffic, an unfinished last round. The network keeps
    runs of rounds with equal counts (``LockstepNetwork.books``); they must add up to what
    counting each (link, round) gives, under cuts of each sender's rounds."""
    rng = np.random.default_rng(seed)
    network = LockstepNetwork({"a": True, "b": True, "c": False})
    ends = {node: network.endpoint(node) for node in "abc"}
    events = []
    rounds = int(rng.integers(1, 40))
    for round_index in range(rounds):
        busy = rng.random() < 0.8  # some rounds carry nothing on some links
        for sender in "abc":
            for receiver in "abc":
                if sender == receiver or not busy or rng.random() < 0.2:
                    continue
                if rng.random() < 0.3:
                    ends[sender].withhold(round_index, 0, receiver)
                    events.append(("withheld", sender, receiver, round_index))
                    continue
                for _ in range(int(rng.integers(1, 3))):  # one or two phases' messages
                    ends[sender].send(round_index, 0, receiver, Message("x", {"x": np.zeros(2)}))
                    events.append(("sent", sender, receiver, round_index))
                    if receiver == "c" and round_index < rounds - 1:  # lands at its end
                        events.append(("delivered", sender, receiver, round_index))
        for receiver in "ab":
            if rng.random() < 0.7:  # gathered this round, or left to be late
                got = ends[receiver].gather(round_index, 0, list("abc"), None)
                events += [("delivered", sender, receiver, round_index) for sender in got]
        if round_index < rounds - 1:  # the last round is still in progress
            network.end_round()
    cuts = [None, {"a": 0}, {"b": int(rng.integers(0, rounds + 1))}, {"a": 3, "c": rounds}]
    for cut in cuts:
        assert network.books(cut) == _recount(events, cut), cut


def test_a_steady_links_books_do_not_grow_with_its_rounds():
    """A link that carries the same every round is one run, however long the simulation."""
    network = LockstepNetwork({"a": True, "b": True})
    a, b = network.endpoint("a"), network.endpoint("b")
    for round_index in range(5000):
        a.send(round_index, 0, "b", Message("x", {"x": np.zeros(1)}))
        b.gather(round_index, 0, ["a"], None)
        network.end_round()
    assert network.books() == {"a->b": {"sent": 5000, "withheld": 0, "delivered": 5000}}
    assert network.books({"a": 1200}) == {"a->b": {"sent": 1200, "withheld": 0, "delivered": 1200}}
    assert sum(len(runs) for runs in network._runs.values()) == 1
