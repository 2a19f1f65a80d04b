"""The experiment file's topology, nodes and faults sections, and how node_specs wires them.

The behavioural checks run the real simulator and then recover, from the recorded
iterates alone, which neighbours' messages each node's update used: every node's own
program is replayed on the recorded iterates with each candidate inbox, and exactly one
candidate reproduces the recorded next iterate bit for bit.
"""

from __future__ import annotations

import copy
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
import yaml

import starling.node.samplers
from starling.node.assemble import build_program, node_rng
from starling.node.engine import simulate
from starling.node.faults import withheld_by_schedule
from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.samplers.dsgld import DSGLD, DSGLDParams
from starling.node.samplers.registry import AlgorithmInfo
from starling.orchestrator.config.experiment import load_experiment, parse_experiment
from starling.orchestrator.faults.schedule import NodeFault
from starling.orchestrator.planning.node_specs import node_specs

ROOT = Path(__file__).resolve().parents[3]

BASE = {
    "name": "topology-test",
    "algorithm": "d-sgld",
    "hyperparameters": {"eta": 0.01},
    "model": {"name": "linear_regression", "params": {"dim": 2, "noise_std": 4.0}},
    "data": {"source": "synthetic", "size": 20, "seed": 1},
    "topology": {"kind": "ring", "nodes": 5},
    "rounds": 40,
    "chains": 3,
    "seed": 3,
}

HALVES = [{"kind": "edges", "edges": [[0, 1], [2, 3]]}, {"kind": "edges", "edges": [[1, 2]]}]


def experiment(**changes):
    return parse_experiment({**BASE, **changes})


# --- wiring ----------------------------------------------------------------------------


def test_quickstart_still_gives_a_static_ring():
    exp = load_experiment(ROOT / "examples" / "quickstart.yaml")
    specs = node_specs(exp)
    assert [len(s.schedule) for s in specs] == [1] * 5
    assert specs[0].schedule_period == 1
    assert specs[0].schedule[0].in_peers == ("1", "4")
    assert set(specs[0].peers) == {"1", "4"}


def test_time_varying_schedule_reaches_every_node_spec():
    exp = experiment(topology={"nodes": 4, "period": 3, "schedule": HALVES})
    assert exp.topology.b == 2
    assert exp.graph == exp.topology.union
    specs = {s.node_id: s for s in node_specs(exp, {"0": "h:1", "1": "h:2", "2": "h:3"})}
    for spec in specs.values():
        assert len(spec.schedule) == 2 and spec.schedule_period == 3
        for r in range(12):
            graph = exp.topology.graph_at(r)
            hood = spec.neighbourhood(r)
            assert hood.in_peers == graph.in_peers(spec.node_id)
            assert hood.out_peers == graph.out_peers(spec.node_id)
            np.testing.assert_allclose(sum(hood.weights.values()), 1.0)
    # Peers are everyone a node talks to at some point of the schedule.
    assert specs["1"].peers == {"0": "h:1", "2": "h:3"}
    assert specs["3"].peers == {"2": "h:3"}
    assert specs["1"].neighbourhood(0).in_peers == ("0",)
    assert specs["1"].neighbourhood(3).in_peers == ("2",)


def test_grid_sets_the_node_count_itself():
    exp = experiment(topology={"kind": "grid", "rows": 2, "cols": 3})
    assert exp.node_ids == ("0", "1", "2", "3", "4", "5")
    with pytest.raises(ConfigError, match=r"topology.rows: a 2×3 grid has 6 nodes"):
        experiment(topology={"kind": "grid", "rows": 2, "cols": 3, "nodes": 5})


def test_explicit_node_ids_name_the_graph():
    nodes = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    exp = experiment(topology={"kind": "edges", "edges": [["a", "b"], ["b", "c"]]}, nodes=nodes)
    assert exp.graph.edges == {("a", "b"), ("b", "a"), ("b", "c"), ("c", "b")}


def test_validation_errors_surface_from_parse_experiment():
    with pytest.raises(ConfigError, match=r"^topology: the graph is not connected: nodes"):
        experiment(topology={"kind": "erdos_renyi", "nodes": 8, "p": 0.2, "seed": 3})
    with pytest.raises(ConfigError, match=r"^topology: d-sgld needs an undirected graph"):
        experiment(topology={"kind": "directed_ring", "nodes": 4})
    assert experiment(topology={"kind": "none", "nodes": 4}).graph.edges == frozenset()


def test_random_topology_defaults_to_the_experiment_seed():
    a = experiment(topology={"kind": "random_regular", "nodes": 10, "k": 3}, seed=4)
    b = experiment(topology={"kind": "random_regular", "nodes": 10, "k": 3, "seed": 4}, seed=9)
    c = experiment(topology={"kind": "random_regular", "nodes": 10, "k": 3}, seed=5)
    assert a.graph == b.graph != c.graph


def test_faults_land_on_the_sender_and_node_faults_on_the_experiment():
    exp = experiment(
        round_seconds=0.5,
        faults=[
            {"link": ["1", "2"], "at_round": 10, "for_rounds": 20},
            {"node": "4", "kill_at_seconds": 5, "restart_after_seconds": 2.5},
        ],
    )
    specs = {s.node_id: s for s in node_specs(exp)}
    assert [(f.receiver, f.start, f.stop) for f in specs["1"].link_faults] == [("2", 10, 30)]
    assert [(f.receiver, f.start, f.stop) for f in specs["2"].link_faults] == [("1", 10, 30)]
    # The killed node is isolated while down: its peers' links to it and all of its own.
    assert [(f.receiver, f.start, f.stop) for f in specs["0"].link_faults] == [("4", 10, 15)]
    assert [(f.receiver, f.start, f.stop) for f in specs["4"].link_faults] == [("*", 10, 15)]
    assert specs["2"].link_faults[1:] == ()
    assert exp.round_seconds == 0.5
    assert exp.node_faults == (NodeFault("4", 10, 15, 5.0, 2.5),)


def test_fault_on_a_link_of_a_later_schedule_graph_is_accepted():
    exp = experiment(
        topology={"nodes": 4, "schedule": HALVES},
        faults=[{"link": ["1", "2"], "rounds": [0, 4]}],
    )
    assert len(exp.faults) == 2
    with pytest.raises(ConfigError, match=r"^faults\[0\].link: 0→2 is not an edge"):
        experiment(topology={"nodes": 4, "schedule": HALVES}, faults=[{"link": ["0", "2"]}])


@pytest.mark.parametrize("value", [0, -1, "fast", True])
def test_round_seconds_must_be_a_positive_number(value):
    with pytest.raises(ConfigError, match=r"^round_seconds: expected a positive number"):
        experiment(round_seconds=value)


# --- roles from the topology for star algorithms -----------------------------------------

STAR = AlgorithmInfo(
    name="toy-star",
    summary="a registry record shaped like DG-LMC's: a master at the hub, data on workers",
    source="",
    graph="star",
    params=DSGLDParams,
    programs={"master": DSGLD, "worker": DSGLD},
    hub_role="master",
    data_roles=("worker",),
)


@pytest.fixture
def star_algorithm(monkeypatch):
    monkeypatch.setitem(starling.node.samplers.ALGORITHMS, STAR.name, STAR)
    return STAR.name


def roles(exp):
    return {n.id: n.role for n in exp.nodes}


def test_hub_gets_the_master_role_and_others_are_workers(star_algorithm):
    exp = experiment(algorithm=star_algorithm, topology={"kind": "star", "nodes": 4})
    assert roles(exp) == {"0": "master", "1": "worker", "2": "worker", "3": "worker"}
    assert exp.data_nodes() == ("1", "2", "3")
    # A star algorithm's topology kind defaults to star.
    assert experiment(algorithm=star_algorithm, topology={"nodes": 4}).graph == exp.graph


def test_centre_moves_the_master(star_algorithm):
    exp = experiment(algorithm=star_algorithm, topology={"kind": "star", "nodes": 4, "centre": 2})
    assert roles(exp) == {"0": "worker", "1": "worker", "2": "master", "3": "worker"}
    master = next(s for s in node_specs(exp) if s.role == "master")
    assert master.schedule[0].out_peers == ("0", "1", "3")
    with pytest.raises(ConfigError, match=r"^topology.centre: '9' is not a node"):
        experiment(algorithm=star_algorithm, topology={"kind": "star", "nodes": 4, "centre": 9})


def test_explicit_master_becomes_the_centre(star_algorithm):
    nodes = [{"id": "w1"}, {"id": "m", "role": "master"}, {"id": "w2"}]
    exp = experiment(algorithm=star_algorithm, topology={"kind": "star"}, nodes=nodes)
    assert roles(exp) == {"w1": "worker", "m": "master", "w2": "worker"}
    assert exp.graph.out_peers("m") == ("w1", "w2")
    unnamed = experiment(algorithm=star_algorithm, topology={}, nodes=[{"id": "a"}, {"id": "b"}])
    assert roles(unnamed) == {"a": "master", "b": "worker"}


def test_star_algorithm_errors(star_algorithm):
    two = [{"id": "a", "role": "master"}, {"id": "b", "role": "master"}, {"id": "c"}]
    with pytest.raises(ConfigError, match=r"^nodes: toy-star needs exactly one master, got 2"):
        experiment(algorithm=star_algorithm, topology={}, nodes=two)
    with pytest.raises(ConfigError, match=r"^topology: toy-star needs a star around its master 0"):
        experiment(algorithm=star_algorithm, topology={"kind": "ring", "nodes": 4})


@pytest.mark.parametrize("algorithm", ["dg-lmc", "ec-sghmc", "async-sghmc"])
def test_a_star_of_one_node_is_refused_before_anything_runs(algorithm):
    """A hub alone has no worker, hence no data and no gradient: EC-SGHMC used to fail
    after starting (exit 1, 'no node stored a sample'), Async SGHMC to 'complete' a
    free-diffusing server with no W2, and DG-LMC to refuse only once its master was built."""
    hub = starling.node.samplers.ALGORITHMS[algorithm].hub_role
    with pytest.raises(
        ConfigError,
        match=rf"^topology: {algorithm} needs at least one worker "
        rf"besides its {hub} 0, got 1 node$",
    ):
        experiment(algorithm=algorithm, hyperparameters={}, topology={"kind": "star", "nodes": 1})
    with pytest.raises(ConfigError, match=r"needs at least one worker besides its"):
        experiment(
            algorithm=algorithm, hyperparameters={}, topology={}, nodes=[{"id": "m", "role": hub}]
        )


# --- behaviour in the simulator ---------------------------------------------------------


def delivered(specs, samples):
    """Node id -> for each round, the in-neighbours whose message the update used."""
    programs, rngs, initial = {}, {}, {}
    for spec in specs:
        rngs[spec.node_id] = node_rng(spec)
        programs[spec.node_id] = build_program(spec, rngs[spec.node_id])
        initial[spec.node_id] = programs[spec.node_id].state()["x"]

    def sent(node_id, round_index):  # what a node broadcast at the start of a round
        return initial[node_id] if round_index == 0 else samples[node_id][round_index - 1]

    heard = {spec.node_id: [] for spec in specs}
    rounds = len(next(iter(samples.values())))
    for r in range(rounds):
        for spec in specs:
            me, program = spec.node_id, programs[spec.node_id]
            candidates = spec.neighbourhood(r).in_peers
            matches = []
            for size in range(len(candidates) + 1):
                for subset in combinations(candidates, size):
                    rng = copy.deepcopy(rngs[me])
                    program.restore({"x": sent(me, r)})
                    inbox = {j: Message("x", {"x": sent(j, r)}) for j in subset}
                    program.incoming(r, 0, inbox, rng)
                    if np.array_equal(program.sample(), samples[me][r]):
                        matches.append((subset, rng))
            assert len(matches) == 1, (me, r, [m for m, _ in matches])
            heard[me].append(set(matches[0][0]))
            rngs[me] = matches[0][1]
    return heard


def test_dsgld_on_a_ring_with_one_link_cut_for_a_stretch():
    cut = experiment(faults=[{"link": ["1", "2"], "at_round": 10, "for_rounds": 20}])
    specs = node_specs(cut)
    samples = simulate(specs)
    assert all(s.shape == (40, 3, 2) and np.all(np.isfinite(s)) for s in samples.values())
    heard = delivered(specs, samples)
    for r in range(40):
        down = 10 <= r < 30
        assert heard["2"][r] == ({"3"} if down else {"1", "3"}), r
        assert heard["1"][r] == ({"0"} if down else {"0", "2"}), r
        assert heard["0"][r] == {"1", "4"} and heard["4"][r] == {"0", "3"}, r
    # The same run without the fault agrees up to the cut, and not after it.
    clean = simulate(node_specs(experiment()))
    np.testing.assert_array_equal(clean["2"][:10], samples["2"][:10])
    assert not np.array_equal(clean["2"][10], samples["2"][10])


def test_time_varying_schedule_with_random_drops_in_the_simulator():
    exp = experiment(
        topology={
            "nodes": 4,
            "period": 2,
            "schedule": [{"kind": "path"}, {"kind": "edges", "edges": [[0, 3], [1, 2]]}],
        },
        faults=[{"link": "all", "drop": 0.3, "rounds": [4, 20]}],
        rounds=24,
    )
    specs = node_specs(exp)
    heard = delivered(specs, simulate(specs))
    by_id = {s.node_id: s for s in specs}
    dropped = 0
    for r in range(24):
        graph = exp.topology.graph_at(r)
        for me in exp.node_ids:
            expected = {
                j
                for j in graph.in_peers(me)
                if not withheld_by_schedule(by_id[j].link_faults, j, me, r)
            }
            dropped += len(graph.in_peers(me)) - len(expected)
            assert heard[me][r] == expected, (me, r)
    assert dropped > 0  # the drops did happen, and exactly where the schedule says


def test_yaml_round_trip_of_the_documented_syntax(tmp_path):
    text = """
name: documented
algorithm: d-sgld
model: {name: linear_regression}
data: {size: 10}
rounds: 30
round_seconds: 0.5
topology:
  nodes: 6
  period: 5
  window: 2
  schedule:
    - {kind: ring}
    - {kind: erdos_renyi, p: 0.5}
faults:
  - {link: [0, 1], at_round: 3, for_rounds: 4}
  - {link: all, drop: 0.1, rounds: [10, 20]}
  - {link: [2, 3], at_seconds: 2, for_seconds: 1}
  - {node: 5, kill_at_round: 12, restart_after_rounds: 5}
"""
    path = tmp_path / "documented.yaml"
    path.write_text(text)
    exp = load_experiment(path)
    assert exp.topology.period == 5 and exp.topology.b == 2 and len(exp.topology.graphs) == 2
    assert exp.node_faults == (NodeFault("5", 12, 17),)
    spans = {(s, f.receiver): (f.start, f.stop) for s, f in exp.faults}
    assert spans[("0", "1")] == (3, 7) and spans[("2", "3")] == (4, 6)
    assert yaml.safe_load(text)["faults"][1]["drop"] == 0.1


@pytest.mark.parametrize("algorithm", ["ula", "sgld", "sghmc", "mala"])
@pytest.mark.parametrize("topology", [{"kind": "none", "nodes": 3}, {"kind": "ring", "nodes": 3}])
def test_a_centralised_algorithm_on_several_nodes_is_refused_before_anything_runs(
    algorithm, topology
):
    # Found by trying mala on 3 nodes: only the node refused it, so `starling run` started
    # three node processes and both engines wrote a failed results folder for what is a
    # configuration error.
    with pytest.raises(
        ConfigError,
        match=rf"^topology: {algorithm}: a centralised reference; run it on a single node",
    ):
        experiment(algorithm=algorithm, hyperparameters={}, topology=topology)
    assert experiment(
        algorithm=algorithm, hyperparameters={}, topology={"kind": "none", "nodes": 1}
    )
