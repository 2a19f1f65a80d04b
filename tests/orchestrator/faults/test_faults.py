"""Fault schedules: parsing, time mapping, seeded replay, and the per-round decision."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.faults import withheld_by_schedule
from starling.node.params import ConfigError
from starling.node.spec import LinkFault
from starling.orchestrator.faults.schedule import FOREVER, NodeFault, parse_faults, rounds_covering
from starling.orchestrator.topology import build_graph

NODES = [str(k) for k in range(6)]
RING = build_graph("ring", NODES, {})
ONE_WAY = build_graph("directed_ring", NODES, {})


def parse(raw, graph=RING, seed=0, rounds=100, round_seconds=None):
    return parse_faults(raw, graph, seed=seed, rounds=rounds, round_seconds=round_seconds)


def spans(schedule):
    return {(s, f.receiver): (f.start, f.stop) for s, f in schedule.links}


def pattern(schedule, graph, rounds):
    """For every directed edge, the rounds whose message the schedule withholds."""
    return {
        (a, b): tuple(
            r for r in range(rounds) if withheld_by_schedule(schedule.link_faults(a), a, b, r)
        )
        for a, b in sorted(graph.edges)
    }


# --- the forms a link fault can take ----------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        {"link": ["1", "2"], "rounds": [10, 30]},
        {"link": [1, 2], "at_round": 10, "for_rounds": 20},
        {"link": ["1", "2"], "at_round": 10, "rounds": 20},
        {"link": ["1", "2"], "at_seconds": 5, "for_seconds": 10},
    ],
)
def test_the_same_cut_in_every_form(fault):
    schedule = parse([fault], round_seconds=0.5)
    # An undirected link is cut both ways, with one shared seed.
    assert spans(schedule) == {("1", "2"): (10, 30), ("2", "1"): (10, 30)}
    (_, a), (_, b) = schedule.links
    assert a.drop == b.drop == 1.0 and a.seed == b.seed


def test_without_a_time_a_fault_lasts_the_whole_run_and_without_a_length_until_the_end():
    assert spans(parse([{"link": ["0", "1"]}]))[("0", "1")] == (0, FOREVER)
    assert spans(parse([{"link": ["0", "1"], "at_round": 7}]))[("0", "1")] == (7, FOREVER)


def test_seconds_cover_every_round_whose_nominal_span_overlaps():
    # Round r spans [r·R, (r+1)·R): with R = 2, [3 s, 6 s) touches rounds 1 and 2.
    assert rounds_covering(3.0, 3.0, 2.0) == (1, 3)
    assert rounds_covering(4.0, 2.0, 2.0) == (2, 3)
    assert rounds_covering(4.0, 0.1, 2.0) == (2, 3)
    assert rounds_covering(4.0, None, 2.0) == (2, FOREVER)
    # 0.3 / 0.1 is 2.9999999999999996 in floating point; it is still round 3.
    assert rounds_covering(0.3, 0.2, 0.1) == (3, 5)


def test_directed_topology_cuts_one_way_unless_asked():
    assert spans(parse([{"link": ["1", "2"]}], graph=ONE_WAY)) == {("1", "2"): (0, FOREVER)}
    assert len(parse([{"link": ["1", "2"], "both_ways": False}]).links) == 1


def test_link_all_puts_one_fault_on_every_sender():
    schedule = parse([{"link": "all", "drop": 0.2, "rounds": [5, 9]}])
    assert [s for s, _ in schedule.links] == NODES
    assert all(f.receiver == "*" and (f.start, f.stop) == (5, 9) for _, f in schedule.links)
    assert parse([{"drop": 0.2}]).links == parse([{"link": "all", "drop": 0.2}]).links


def test_cut_is_withheld_exactly_in_its_rounds():
    schedule = parse([{"link": ["1", "2"], "at_round": 3, "for_rounds": 2}])
    got = pattern(schedule, RING, 10)
    assert got[("1", "2")] == got[("2", "1")] == (3, 4)
    assert all(rounds == () for edge, rounds in got.items() if set(edge) != {"1", "2"})


# --- node faults ------------------------------------------------------------------------


def test_node_fault_by_rounds_and_by_seconds():
    by_rounds = parse([{"node": 3, "kill_at_round": 30, "restart_after_rounds": 10}]).nodes
    assert by_rounds == (NodeFault("3", 30, 40),)
    fault = by_rounds[0]
    assert [r for r in range(100) if fault.down(r)] == list(range(30, 40))
    assert fault.restart_after_rounds == 10
    by_seconds = parse(
        [{"node": "3", "kill_at_seconds": 6, "restart_after_seconds": 3}], round_seconds=0.2
    ).nodes
    assert by_seconds == (NodeFault("3", 30, 45, at_seconds=6.0, restart_after_seconds=3.0),)
    forever = parse([{"node": "0", "kill_at_round": 5}]).nodes[0]
    assert forever.restart_round is None and forever.down(10**6)


# --- errors name the field --------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("cut", r"^faults: expected a list"),
        ([7], r"^faults\[0\]: expected a mapping"),
        ([{"link": ["1", "9"]}], r"^faults\[0\].link: peer '9' is not a node"),
        ([{"link": ["1", "3"]}], r"^faults\[0\].link: 1→3 is not an edge of the topology"),
        ([{"link": "1-2"}], r"^faults\[0\].link: expected \[sender, receiver\] or 'all'"),
        ([{"link": ["1", "2"], "rounds": [-1, 5]}], r"^faults\[0\].rounds: start must be >= 0"),
        ([{"link": ["1", "2"], "rounds": [5, 5]}], r"^faults\[0\].rounds: stop must come after"),
        ([{"link": ["1", "2"], "rounds": [5]}], r"^faults\[0\].rounds: expected \[start, stop\]"),
        ([{"link": ["1", "2"], "rounds": 5}], r"^faults\[0\].rounds: expected \[start, stop\]"),
        ([{"link": ["1", "2"], "at_round": -3}], r"^faults\[0\].at_round: expected an integer"),
        ([{"link": ["1", "2"], "at_round": 1, "for_rounds": 0}], r"^faults\[0\].for_rounds"),
        ([{"link": ["1", "2"], "for_rounds": 4}], r"^faults\[0\].for_rounds: needs at_round"),
        ([{"link": ["1", "2"], "for_seconds": 4}], r"^faults\[0\].for_seconds: needs at_seconds"),
        ([{"link": ["1", "2"], "at_round": 200}], r"^faults\[0\].at_round: starts at round 200"),
        ([{"link": ["1", "2"], "rounds": [0, 5], "at_round": 1}], r"give only one of rounds"),
        ([{"link": ["1", "2"], "drop": 1.5}], r"^faults\[0\].drop: expected a probability"),
        ([{"link": ["1", "2"], "drop": -0.1}], r"^faults\[0\].drop: expected a probability"),
        ([{"link": ["1", "2"], "at_seconds": 1}], r"^faults\[0\].at_seconds: .*round_seconds"),
        ([{"link": ["1", "2"], "at_seconds": -1}], r"^faults\[0\].at_seconds: expected a non-neg"),
        ([{"link": ["1", "2"], "both_ways": "yes"}], r"^faults\[0\].both_ways: expected true"),
        ([{"link": ["1", "2"], "seed": -1}], r"^faults\[0\].seed: expected an integer >= 0"),
        ([{"link": ["1", "2"], "when": 3}], r"^faults\[0\].when: unknown field for a link"),
        ([{"node": "9", "kill_at_round": 3}], r"^faults\[0\].node: '9' is not a node"),
        ([{"node": "1", "link": ["1", "2"]}], r"^faults\[0\]: a fault is on a link or on a node"),
        ([{"node": "1"}], r"^faults\[0\].kill_at_round: give exactly one"),
        ([{"node": "1", "kill_at_round": -1}], r"^faults\[0\].kill_at_round: expected an int"),
        ([{"node": "1", "kill_at_round": 100}], r"^faults\[0\].kill_at_round: kills at round"),
        (
            [{"node": "1", "kill_at_round": 3, "restart_after_rounds": 0}],
            r"^faults\[0\].restart_after_rounds: expected an integer >= 1",
        ),
        (
            [{"node": "1", "kill_at_round": 3, "restart_after_seconds": 2}],
            r"^faults\[0\].restart_after_seconds: with kill_at_round",
        ),
        ([{"node": "1", "kill_at_seconds": 3}], r"^faults\[0\].kill_at_seconds: .*round_seconds"),
        ([{"node": "1", "kill_at_round": 3, "drop": 1}], r"^faults\[0\].drop: unknown field"),
        (
            [
                {"node": "1", "kill_at_round": 3, "restart_after_rounds": 10},
                {"node": "1", "kill_at_round": 8},
            ],
            r"^faults\[1\].node: node 1 is already down then \(faults\[0\]\)",
        ),
    ],
)
def test_bad_schedules_name_the_field(raw, message):
    # round_seconds is declared except where its absence is the error under test.
    round_seconds = None if "round_seconds" in message else 1.0
    with pytest.raises(ConfigError, match=message):
        parse(raw, round_seconds=round_seconds)


def test_both_ways_on_a_directed_topology_needs_the_reverse_edge():
    with pytest.raises(ConfigError, match=r"^faults\[0\].both_ways: 2→1 is not an edge"):
        parse([{"link": ["1", "2"], "both_ways": True}], graph=ONE_WAY)


# --- seeded random failures replay exactly ----------------------------------------------


def test_same_seed_same_withheld_pattern_and_another_seed_another():
    faults = [{"link": "all", "drop": 0.3}]
    a = pattern(parse(faults, seed=1), RING, 200)
    b = pattern(parse(faults, seed=1), RING, 200)
    c = pattern(parse(faults, seed=2), RING, 200)
    assert a == b
    assert a != c


def test_a_fault_of_its_own_seed_ignores_the_experiment_seed():
    faults = [{"link": "all", "drop": 0.3, "seed": 11}]
    assert pattern(parse(faults, seed=1), RING, 50) == pattern(parse(faults, seed=2), RING, 50)


def test_iid_failures_have_the_declared_rate_and_undirected_links_fail_as_a_whole():
    rounds, p = 400, 0.3
    got = pattern(parse([{"link": "all", "drop": p}], seed=5), RING, rounds)
    for a, b in RING.edges:
        assert got[(a, b)] == got[(b, a)]
    # 6 links × 400 rounds = 2400 Bernoulli(0.3) draws: the count has sd √(2400·0.21) ≈ 22;
    # 5 sd around the mean (fixed seed) cannot fail by chance in practice.
    count = sum(len(got[(a, b)]) for a, b in RING.edges if a < b)
    draws = len(RING.edges) // 2 * rounds
    assert abs(count - p * draws) < 5 * np.sqrt(draws * p * (1 - p))


def test_one_way_failures_are_independent_per_direction():
    rounds, p = 400, 0.3
    both = build_graph("ring", NODES, {})
    got = pattern(parse([{"link": "all", "drop": p, "both_ways": False}], seed=5), both, rounds)
    # Per link and round the two directions disagree with probability 2p(1−p) = 0.42 if
    # independent (0 if shared); over 2400 link-rounds, sd ≈ 24, so 5 sd is a safe margin.
    disagree = sum(len(set(got[(a, b)]) ^ set(got[(b, a)])) for a, b in both.edges if a < b)
    draws = len(both.edges) // 2 * rounds
    q = 2 * p * (1 - p)
    assert abs(disagree - q * draws) < 5 * np.sqrt(draws * q * (1 - q))


def test_random_failures_only_inside_their_rounds():
    got = pattern(parse([{"link": ["0", "1"], "drop": 0.5, "rounds": [20, 40]}]), RING, 60)
    assert got[("0", "1")] and all(20 <= r < 40 for r in got[("0", "1")])


def test_withheld_decision_basics():
    down = LinkFault("1", 2, 4)
    assert [withheld_by_schedule([down], "0", "1", r) for r in range(5)] == [
        False,
        False,
        True,
        True,
        False,
    ]
    assert not withheld_by_schedule([down], "0", "2", 3)
    never = LinkFault("*", 0, FOREVER, drop=0.0)
    assert not any(withheld_by_schedule([never], "0", "1", r) for r in range(100))
    everywhere = LinkFault("*", 0, FOREVER, drop=1.0)
    assert all(withheld_by_schedule([everywhere], "0", x, 7) for x in ("1", "2", "5"))
