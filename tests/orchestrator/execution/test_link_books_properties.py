"""Link books that add up, in-process: random fault schedules through ``starling simulate``.

Hypothesis draws fault sequences — links cut for a stretch, links failing at random, nodes
killed and restarted or killed for good — for a small ring, runs the experiment on the
in-memory network, and holds the books of ``metrics.json`` to what any books must satisfy:
for every directed link, ``sent <= rounds x messages per round`` (one message per round
for the one-phase samplers used here), ``delivered <= sent``, and the account's ``lost``
equal to ``withheld + dropped + sent - delivered``, never negative. The network counts as it
carries (``LockstepNetwork.books``); the schedule alone must give the same numbers
(``scheduled_link_counts``), a second, independent count. The same invariants are held
on real node processes in ``tests/test_link_books_e2e.py``.
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.execution.simulation import simulate_experiment
from starling.orchestrator.faults.account import scheduled_link_counts
from starling.orchestrator.planning.plan import plan_run

NODES = ["0", "1", "2", "3"]
ROUNDS = 24
RING = [("0", "1"), ("1", "2"), ("2", "3"), ("3", "0")]


def _link_fault(draw) -> dict:
    a, b = draw(st.sampled_from(RING))
    if draw(st.booleans()):
        a, b = b, a
    start = draw(st.integers(0, ROUNDS - 1))
    fault: dict = {"link": [a, b], "at_round": start}
    if draw(st.booleans()):
        fault["for_rounds"] = draw(st.integers(1, ROUNDS))
    if draw(st.booleans()):
        fault["drop"] = draw(st.sampled_from([0.2, 0.5, 0.9]))
    return fault


def _node_fault(draw, node: str) -> dict:
    fault: dict = {"node": node, "kill_at_round": draw(st.integers(1, ROUNDS - 2))}
    if draw(st.booleans()):
        fault["restart_after_rounds"] = draw(st.integers(1, ROUNDS))
    return fault


@st.composite
def fault_sequences(draw) -> list[dict]:
    faults = [_link_fault(draw) for _ in range(draw(st.integers(0, 4)))]
    killed = draw(st.lists(st.sampled_from(NODES), max_size=2, unique=True))
    return faults + [_node_fault(draw, node) for node in killed]


def _experiment(faults: list[dict]):
    raw = {
        "name": "books",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 16, "seed": 3},
        "topology": {"kind": "ring", "nodes": len(NODES)},
        "rounds": ROUNDS,
        "chains": 1,
        "seed": 5,
        "faults": faults,
    }
    return parse_experiment(raw, default_name="books")


def check_books(links: dict, bound: dict[str, int]) -> None:
    """The invariants of any run's link books; ``bound``: link -> rounds x messages."""
    assert links, "no link books"
    for key, c in links.items():
        assert 0 <= c["sent"] <= bound[key], (key, c, bound[key])
        assert c["sent"] + c["withheld"] + c["dropped"] <= bound[key], (key, c)
        assert c["delivered"] <= c["sent"], (key, c)
        assert c["lost"] == c["withheld"] + c["dropped"] + c["sent"] - c["delivered"], (key, c)
        assert c["lost"] >= 0, (key, c)


@settings(
    max_examples=30,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(faults=fault_sequences())
def test_simulated_books_add_up_under_any_fault_schedule(faults, tmp_path_factory):
    plan = plan_run(_experiment(faults))
    out = tmp_path_factory.mktemp("sim")
    simulate_experiment(plan, out, say=lambda _: None, quiet=True)
    metrics = json.loads((out / "metrics.json").read_text())
    links = metrics["links"]
    bound = {
        f"{spec.node_id}->{peer}": sum(
            peer in spec.neighbourhood(r).out_peers for r in range(spec.rounds)
        )
        for spec in plan.specs.values()
        for peer in spec.out_peers()
    }
    check_books(links, bound)
    # Counted by the network, and derived from the schedule alone: the same books.
    down = {
        f["node"]: f["kill_at_round"]
        for f in faults
        if "node" in f and "restart_after_rounds" not in f
    }
    played = [
        dataclasses.replace(spec, rounds=min(spec.rounds, down[spec.node_id]))
        if spec.node_id in down
        else spec
        for spec in plan.specs.values()
    ]
    derived = scheduled_link_counts(played)
    for key, counts in derived.items():
        for name in ("sent", "withheld", "delivered"):
            assert links[key][name] == counts[name], (key, name, links[key], counts)
    # Nothing is lost in-process but what a fault withheld.
    for key, c in links.items():
        assert c["lost"] == c["withheld"], (key, c)
