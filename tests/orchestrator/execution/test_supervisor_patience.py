"""The supervisor's patience with a node that stopped answering (``limits.down_grace``): it
is given up on once that long has passed since it went down, not a moment before, and its
neighbours are to be told not to wait for it. The nodes are addresses nobody listens on
(real gRPC, refused at once); the supervisor's clock and the clients' pauses between
retries are a clock of the test's own, so the grace is checked to the instant.
tests/test_dead_node_e2e.py checks the same on real nodes, in real time."""

from __future__ import annotations

import os
import socket

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.execution import live
from starling.orchestrator.execution.backends.local import LocalBackend
from starling.orchestrator.execution.client import NodeClient
from starling.orchestrator.execution.collector import Collector
from starling.orchestrator.execution.node_faults import NodeFaultPlan
from starling.orchestrator.execution.supervisor import Supervisor
from starling.orchestrator.planning.node_specs import addressed
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.results.account import Account
from tests.fake_clock import FakeClock


def _experiment(**extra):
    return parse_experiment(
        {
            "name": "patience",
            "algorithm": "d-sgld",
            "hyperparameters": {"eta": 0.01},
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "topology": {"kind": "ring", "nodes": 3},
            "rounds": 10,
            **extra,
        }
    )


def _nowhere() -> str:
    with socket.socket() as spare:
        spare.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{spare.getsockname()[1]}"


def _supervisor(tmp_path, experiment, clock: FakeClock, said: list[str]) -> Supervisor:
    plan = plan_run(experiment)
    addresses = {node: _nowhere() for node in plan.node_ids}
    specs = addressed(plan.specs, addresses)
    clients = {node: NodeClient(a, timeout=5.0, sleep=clock.sleep) for node, a in addresses.items()}
    record = live.RunRecord(
        name=experiment.name,
        out_dir=str(tmp_path),
        orchestrator_pid=os.getpid(),
        addresses=addresses,
        pids=dict.fromkeys(addresses),
    )
    return Supervisor(
        plan,
        specs,
        clients,
        LocalBackend("127.0.0.1", 7000, tmp_path / "nodes"),  # starts nothing here
        Collector(),
        record,
        Account(said.append),
        NodeFaultPlan(plan.node_faults),
        clock=clock,
    )


def test_a_silent_node_is_given_up_once_the_grace_has_passed_and_not_before(tmp_path):
    clock, said = FakeClock(), []
    supervisor = _supervisor(tmp_path, _experiment(limits={"down_grace": 2.0}), clock, said)
    assert supervisor.patience == 2.0
    supervisor.poll(["2"], pull=False)  # one attempt: refused, so down from now
    assert supervisor.down() == ["2"]
    # (The local backend started no process, so it says the process is not alive.)
    assert said == ["node 2: went down unasked (its process exited)"]
    clock.advance(2.0)
    supervisor.give_up_on_silent()  # down exactly the grace: not yet
    state = supervisor.nodes["2"]
    assert not state.given_up and not state.finished and "2" not in supervisor.notices.declared
    clock.advance(0.25)
    supervisor.give_up_on_silent()
    assert state.given_up and state.finished
    assert said[1] == "node 2: unreachable for 2 s, given up; the others finish without it"
    # Its out-peers on the ring (0 and 1) do not answer either: they are told when they do.
    assert supervisor.notices.declared == {"2": "unreachable for 2 s"}
    assert said[2] == (
        "node 2: declared down (unreachable for 2 s); nobody waits for it; "
        "0, 1 will be told when they answer"
    )
    for client in supervisor.clients.values():
        client.close()


def test_without_a_down_grace_the_patience_is_ten_deadlines_and_at_least_30_s(tmp_path):
    clock = FakeClock()
    for deadline, patience in ((0.5, 30.0), (5.0, 50.0)):
        supervisor = _supervisor(tmp_path, _experiment(round_deadline=deadline), clock, [])
        assert supervisor.patience == patience
        for client in supervisor.clients.values():
            client.close()
