"""Graph builders, mixing weights, schedules and their validation against algorithm needs."""

from __future__ import annotations

import numpy as np
import pytest

from starling.node.params import ConfigError
from starling.node.samplers import algorithm_info
from starling.node.samplers.dsgld import DSGLD, DSGLDParams
from starling.node.samplers.registry import AlgorithmInfo
from starling.orchestrator.topology import (
    KINDS,
    Graph,
    Topology,
    build_graph,
    check_topology,
    metropolis_weights,
    neighbourhoods,
    parse_topology,
)

# Real registry records for the graph needs no sampler in the tree may declare yet.
DIRECTED = AlgorithmInfo(
    name="toy-directed",
    summary="",
    source="",
    graph="directed",
    params=DSGLDParams,
    programs={"peer": DSGLD},
    mixing_weights=True,  # its program is D-SGLD's, which mixes with them
)
STAR = AlgorithmInfo(
    name="toy-star",
    summary="",
    source="",
    graph="star",
    params=DSGLDParams,
    programs={"master": DSGLD, "worker": DSGLD},
    hub_role="master",
)
ANYTHING = AlgorithmInfo(
    name="toy-any",
    summary="",
    source="",
    graph="none",
    params=DSGLDParams,
    programs={"peer": DSGLD},
)
UNDIRECTED = algorithm_info("d-sgld")


def ids(n: int) -> list[str]:
    return [str(k) for k in range(n)]


def degrees(graph: Graph) -> list[int]:
    return [len(graph.out_peers(n)) for n in graph.nodes]


def symmetric(graph: Graph) -> bool:
    return all((b, a) in graph.edges for a, b in graph.edges)


def connected(graph: Graph) -> bool:
    return graph.connectivity_gap() is None


def roles(n: int, role: str = "peer") -> dict[str, str]:
    return {i: role for i in ids(n)}


# --- structure of each kind -------------------------------------------------------------


def test_ring_has_degree_two_and_is_connected():
    g = build_graph("ring", ids(6), {})
    assert degrees(g) == [2] * 6
    assert symmetric(g) and connected(g)
    assert g.out_peers("0") == ("1", "5")


def test_ring_of_two_is_one_edge_not_a_double_edge():
    g = build_graph("ring", ids(2), {})
    assert g.edges == {("0", "1"), ("1", "0")}


def test_path_ends_have_degree_one():
    g = build_graph("path", ids(5), {})
    assert degrees(g) == [1, 2, 2, 2, 1]
    assert symmetric(g) and connected(g)


def test_star_hub_defaults_to_first_node_and_can_be_moved():
    g = build_graph("star", ids(5), {})
    assert degrees(g) == [4, 1, 1, 1, 1]
    moved = build_graph("star", ids(5), {"centre": 3})
    assert degrees(moved) == [1, 1, 1, 4, 1]
    with pytest.raises(ConfigError, match=r"topology.centre: '9' is not a node"):
        build_graph("star", ids(5), {"centre": "9"})


def test_grid_degrees_and_edge_count():
    g = build_graph("grid", ids(12), {"rows": 3, "cols": 4})
    d = degrees(g)
    # 4 corners of degree 2, 6 border nodes of degree 3, 2 interior nodes of degree 4.
    assert sorted(d) == [2] * 4 + [3] * 6 + [4] * 2
    assert len(g.edges) == 2 * (3 * 3 + 4 * 2)
    assert ("0", "1") in g.edges and ("0", "4") in g.edges and ("3", "4") not in g.edges
    assert symmetric(g) and connected(g)


def test_grid_size_must_match_the_node_count():
    with pytest.raises(ConfigError, match=r"topology.rows: a 2×3 grid has 6 nodes.*has 7"):
        build_graph("grid", ids(7), {"rows": 2, "cols": 3})


def test_full_and_none():
    assert degrees(build_graph("full", ids(5), {})) == [4] * 5
    assert build_graph("none", ids(5), {}).edges == frozenset()


def test_erdos_renyi_is_reproducible_and_has_about_p_of_the_pairs():
    a = build_graph("erdos_renyi", ids(60), {"p": 0.3, "seed": 4})
    b = build_graph("erdos_renyi", ids(60), {"p": 0.3, "seed": 4})
    c = build_graph("erdos_renyi", ids(60), {"p": 0.3, "seed": 5})
    assert a == b and a != c
    assert symmetric(a)
    pairs = 60 * 59 // 2
    mean, sd = 0.3 * pairs, np.sqrt(pairs * 0.3 * 0.7)
    # The edge count is Binomial(1770, 0.3); 5 standard deviations never fails by chance
    # in practice (and the seed is fixed).
    assert abs(len(a.edges) / 2 - mean) < 5 * sd
    assert build_graph("erdos_renyi", ids(6), {"p": 0.0}).edges == frozenset()
    assert degrees(build_graph("erdos_renyi", ids(6), {"p": 1.0})) == [5] * 6


def test_erdos_renyi_takes_its_seed_from_the_caller_by_default():
    assert build_graph("erdos-renyi", ids(20), {"p": 0.3}, seed=4) == build_graph(
        "erdos_renyi", ids(20), {"p": 0.3, "seed": 4}
    )


@pytest.mark.parametrize(("n", "k"), [(10, 3), (12, 5), (20, 4), (7, 6), (8, 0), (30, 7)])
def test_random_regular_is_simple_and_k_regular(n, k):
    g = build_graph("random_regular", ids(n), {"k": k, "seed": 1})
    assert degrees(g) == [k] * n
    assert symmetric(g)
    assert all(a != b for a, b in g.edges)
    assert g == build_graph("random_regular", ids(n), {"k": k, "seed": 1})


def test_random_regular_differs_across_seeds():
    graphs = {build_graph("random_regular", ids(20), {"k": 3, "seed": s}).edges for s in range(5)}
    assert len(graphs) > 1


@pytest.mark.parametrize(
    ("n", "k", "message"),
    [(5, 3, "n·k even"), (5, 5, "0 <= k < nodes"), (5, -1, "integer >= 0")],
)
def test_random_regular_rejects_impossible_degrees(n, k, message):
    with pytest.raises(ConfigError, match=rf"topology.k: .*{message}"):
        build_graph("random_regular", ids(n), {"k": k})


def test_directed_ring_is_one_way_and_strongly_connected():
    g = build_graph("directed_ring", ids(5), {})
    assert degrees(g) == [1] * 5
    assert [len(g.in_peers(n)) for n in g.nodes] == [1] * 5
    assert not symmetric(g)
    assert connected(g)
    assert g.missing_reverse() == ("0", "1")


def test_random_digraph_is_reproducible_and_p_one_is_complete():
    a = build_graph("random_digraph", ids(10), {"p": 0.4, "seed": 2})
    assert a == build_graph("random_digraph", ids(10), {"p": 0.4, "seed": 2})
    assert not symmetric(a)
    full = build_graph("random_digraph", ids(4), {"p": 1.0, "seed": 2})
    assert len(full.edges) == 12


def test_edge_list_directed_or_not():
    undirected = build_graph("edges", ids(3), {"edges": [[0, 1], [1, 2]]})
    assert undirected.edges == {("0", "1"), ("1", "0"), ("1", "2"), ("2", "1")}
    directed = build_graph("edges", ids(3), {"edges": [[0, 1], [1, 2]], "directed": True})
    assert directed.edges == {("0", "1"), ("1", "2")}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"edges": [["0", "9"]]}, r"topology.edges\[0\]: peer '9' is not a node"),
        ({"edges": [["0", "0"]]}, r"topology.edges\[0\]: a self-loop"),
        ({"edges": [[0, 1], [1, 2], [0, 1]]}, r"topology.edges\[2\]: 0→1 repeats edges\[0\]"),
        (
            {"edges": [[0, 1], [1, 0]]},
            r"topology.edges\[1\]: 1→0 repeats edges\[0\] \(an undirected link runs both ways",
        ),
        (
            {"edges": [[0, 1], [1, 0], [0, 1]], "directed": True},
            r"topology.edges\[2\]: 0→1 repeats edges\[0\]$",
        ),
        ({"edges": [["0"]]}, r"topology.edges\[0\]: expected \[sender, receiver\]"),
        ({"edges": "0-1"}, r"topology.edges: expected a list"),
        ({}, r"topology.edges: required for kind edges"),
        ({"edges": [], "directed": "yes"}, r"topology.directed: expected true or false"),
    ],
)
def test_edge_list_errors_name_the_field(params, message):
    with pytest.raises(ConfigError, match=message):
        build_graph("edges", ids(3), params)


@pytest.mark.parametrize(
    ("kind", "params", "message"),
    [
        ("moebius", {}, r"topology.kind: unknown topology 'moebius'"),
        ("ring", {"p": 0.1}, r"topology.p: unknown field for kind ring"),
        ("ring", {"seed": 1}, r"topology.seed: kind ring is not random"),
        ("erdos_renyi", {}, r"topology.p: required for kind erdos_renyi"),
        ("erdos_renyi", {"p": 1.5}, r"topology.p: expected a probability in \[0, 1\]"),
        ("random_digraph", {"p": -0.1}, r"topology.p: expected a probability"),
        ("grid", {"rows": 0, "cols": 3}, r"topology.rows: expected an integer >= 1"),
        ("erdos_renyi", {"p": 0.5, "seed": -2}, r"topology.seed: expected an integer >= 0"),
    ],
)
def test_builder_errors_name_the_field(kind, params, message):
    with pytest.raises(ConfigError, match=message):
        build_graph(kind, ids(6), params)


def test_every_kind_is_covered_by_a_test_here():
    assert set(KINDS) == {
        "ring",
        "path",
        "star",
        "grid",
        "full",
        "none",
        "erdos_renyi",
        "random_regular",
        "directed_ring",
        "random_digraph",
        "edges",
    }


# --- mixing weights ---------------------------------------------------------------------


def weight_matrix(graph: Graph, hoods=None) -> np.ndarray:
    hoods = hoods or neighbourhoods(graph)
    index = {n: k for k, n in enumerate(graph.nodes)}
    S = np.zeros((len(graph.nodes), len(graph.nodes)))
    for node, hood in hoods.items():
        for peer, w in hood.weights.items():
            S[index[node], index[peer]] = w
    return S


@pytest.mark.parametrize(
    ("kind", "n", "params"),
    [
        ("ring", 7, {}),
        ("path", 4, {}),
        ("star", 6, {}),
        ("grid", 12, {"rows": 3, "cols": 4}),
        ("full", 5, {}),
        ("erdos_renyi", 15, {"p": 0.3, "seed": 1}),
        ("random_regular", 10, {"k": 3, "seed": 2}),
        ("none", 3, {}),
    ],
)
def test_metropolis_weights_are_symmetric_and_doubly_stochastic(kind, n, params):
    graph = build_graph(kind, ids(n), params)
    S = weight_matrix(graph)
    assert np.all(S >= 0)
    np.testing.assert_allclose(S.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(S.sum(axis=0), 1.0, atol=1e-12)
    np.testing.assert_allclose(S, S.T, atol=0)
    # Only neighbours (and the node itself) carry weight.
    for i, a in enumerate(graph.nodes):
        for j, b in enumerate(graph.nodes):
            if i != j and (b, a) not in graph.edges:
                assert S[i, j] == 0


def test_metropolis_weight_formula_on_a_star():
    graph = build_graph("star", ids(4), {})
    assert metropolis_weights(graph, "1") == {"0": 0.25, "1": 0.75}
    assert metropolis_weights(graph, "0") == pytest.approx(
        {"0": 0.25, "1": 0.25, "2": 0.25, "3": 0.25}
    )


def test_directed_graphs_carry_no_weights():
    """Push-sum nodes weight by 1/d_i from their own out-degree, not from the orchestrator."""
    hoods = neighbourhoods(build_graph("directed_ring", ids(3), {}))
    assert all(h.weights == {} for h in hoods.values())
    assert hoods["0"].out_peers == ("1",) and hoods["0"].in_peers == ("2",)


def test_user_weights_are_used_as_given():
    S = [[0.75, 0.25, 0], [0.25, 0.5, 0.25], [0, 0.25, 0.75]]
    topo = parse_topology({"kind": "path", "weights": S}, ids(3))
    check_topology(topo, UNDIRECTED, roles(3))
    hoods = {n: h[0] for n, h in topo.neighbourhoods().items()}
    assert hoods["1"].weights == {"0": 0.25, "2": 0.25, "1": 0.5}
    np.testing.assert_array_equal(weight_matrix(topo.graphs[0], hoods), np.array(S))


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([[1, 0], [0, 1]], r"topology.weights: expected 'metropolis' or a 3×3 matrix"),
        ([[1, 0, 0], [0, 1, 0], [0, 1]], r"topology.weights\[2\]: expected a row of 3"),
        ([[0.5, 0, 0.5], [0, 1, 0], [0, 0, 1]], r"topology.weights\[0\]\[2\]: 2 does not send"),
        ([[0.9, 0, 0], [0, 1, 0], [0, 0, 1]], r"topology.weights\[0\]: row sums to 0.9"),
        ([[1.5, -0.5, 0], [0, 1, 0], [0, 0, 1]], r"topology.weights\[0\]\[1\]: .*non-negative"),
        ([[1, 0, 0], [0, "x", 0], [0, 0, 1]], r"topology.weights\[1\]\[1\]: expected a number"),
        ("uniform", r"topology.weights: expected 'metropolis'"),
    ],
)
def test_bad_user_weights_are_named(weights, message):
    with pytest.raises(ConfigError, match=message):
        parse_topology({"kind": "path", "weights": weights}, ids(3))


def test_undirected_algorithms_need_doubly_stochastic_user_weights():
    S = [[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0.5, 0.5]]  # rows fine, column 1 sums to 1.5
    topo = parse_topology({"kind": "path", "weights": S}, ids(3))
    with pytest.raises(ConfigError, match=r"topology.weights: d-sgld needs a doubly stochastic"):
        check_topology(topo, UNDIRECTED, roles(3))
    check_topology(topo, DIRECTED, roles(3))  # row-stochastic is all a directed need asks


@pytest.mark.parametrize("algorithm", ["push-sum", "d-ula", "d-admms"])
def test_weights_given_to_an_algorithm_that_does_not_mix_with_them_are_refused(algorithm):
    """Push-sum divides by out-degrees, D-ULA and D-ADMMS use the Laplacian: a weight
    matrix given to any of them was ignored without a word."""
    info = algorithm_info(algorithm)
    n = 3
    S = [[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]]
    kind = "full"
    topo = parse_topology({"kind": kind, "weights": S}, ids(n))
    with pytest.raises(ConfigError, match=rf"^topology.weights: {algorithm} does not average"):
        check_topology(topo, info, roles(n))
    scheduled = parse_topology(
        {"period": 1, "window": 2, "schedule": [{"kind": kind}, {"kind": kind, "weights": S}]},
        ids(n),
    )
    with pytest.raises(ConfigError, match=r"^topology.schedule\[1\].weights: "):
        check_topology(scheduled, info, roles(n))
    check_topology(parse_topology({"kind": kind}, ids(n)), info, roles(n))  # Metropolis: fine


def test_user_weights_that_cut_a_node_off_are_refused():
    """The ring is connected, but node 2 gives its neighbours, and they give it, weight 0:
    the gossip never reaches it. Accepted without a word before."""
    S = [[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1]]
    topo = parse_topology({"kind": "ring", "weights": S}, ids(3))
    with pytest.raises(
        ConfigError,
        match=r"^topology.weights: the graph is not connected by its nonzero weights: "
        r"nodes 2 unreachable from 0",
    ):
        check_topology(topo, UNDIRECTED, roles(3))
    raw = {"kind": "ring", "weights": S, "allow_disconnected": True}
    check_topology(parse_topology(raw, ids(3)), UNDIRECTED, roles(3))


def test_a_schedule_whose_weights_cut_a_node_off_in_every_window_is_refused():
    cut = [[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1]]
    raw = {"period": 1, "window": 2, "schedule": [{"kind": "ring", "weights": cut}] * 2}
    with pytest.raises(ConfigError, match=r"^topology.schedule: graphs 0, 1 together are not "):
        check_topology(parse_topology(raw, ids(3)), UNDIRECTED, roles(3))


# --- validation against what the algorithm needs ----------------------------------------


def test_disconnected_graph_is_refused_with_the_unreachable_nodes():
    topo = parse_topology({"kind": "edges", "edges": [[0, 1], [1, 2], [3, 4]]}, ids(5))
    with pytest.raises(
        ConfigError, match=r"^topology: the graph is not connected: nodes 3, 4 unreachable from 0"
    ):
        check_topology(topo, UNDIRECTED, roles(5))


def test_disconnected_graph_allowed_on_purpose_and_no_edge_baseline_by_name():
    raw = {"kind": "edges", "edges": [[0, 1]], "allow_disconnected": True}
    check_topology(parse_topology(raw, ids(3)), UNDIRECTED, roles(3))
    check_topology(parse_topology({"kind": "none"}, ids(3)), UNDIRECTED, roles(3))
    check_topology(parse_topology({"kind": "none"}, ids(3)), DIRECTED, roles(3))


def test_accidentally_empty_random_graph_is_refused_with_a_seed_hint():
    topo = parse_topology({"kind": "erdos_renyi", "p": 0.0}, ids(4))
    with pytest.raises(ConfigError, match=r"not connected.*try another topology.seed"):
        check_topology(topo, UNDIRECTED, roles(4))


def test_undirected_algorithm_refuses_one_way_edges():
    topo = parse_topology({"kind": "directed_ring"}, ids(4))
    with pytest.raises(
        ConfigError,
        match=r"topology: d-sgld needs an undirected graph, but the edge 0→1 has "
        r"no reverse 1→0",
    ):
        check_topology(topo, UNDIRECTED, roles(4))


def test_directed_algorithm_needs_strong_connectivity():
    check_topology(parse_topology({"kind": "directed_ring"}, ids(4)), DIRECTED, roles(4))
    check_topology(parse_topology({"kind": "ring"}, ids(4)), DIRECTED, roles(4))
    one_way_path = {"kind": "edges", "edges": [[0, 1], [1, 2], [2, 3]], "directed": True}
    with pytest.raises(
        ConfigError,
        match=r"topology: the graph is not strongly connected: 0 unreachable from nodes 1, 2, 3",
    ):
        check_topology(parse_topology(one_way_path, ids(4)), DIRECTED, roles(4))


def test_graph_need_none_takes_anything():
    raw = {"kind": "edges", "edges": [[0, 1]], "directed": True}
    check_topology(parse_topology(raw, ids(3)), ANYTHING, roles(3))


def test_star_algorithm_needs_its_master_at_the_hub():
    star_roles = {"0": "master", "1": "worker", "2": "worker", "3": "worker"}
    check_topology(parse_topology({"kind": "star"}, ids(4), hub="0"), STAR, star_roles)
    moved = {"0": "worker", "1": "worker", "2": "master", "3": "worker"}
    check_topology(parse_topology({"kind": "star"}, ids(4), hub="2"), STAR, moved)
    with pytest.raises(
        ConfigError, match=r"topology: toy-star needs a star around its master 2, but 2 and 1"
    ):
        check_topology(parse_topology({"kind": "star"}, ids(4)), STAR, moved)
    with pytest.raises(ConfigError, match=r"needs a star around its master 0.*0 and 2 are not"):
        check_topology(parse_topology({"kind": "ring"}, ids(4)), STAR, star_roles)
    extra = {"kind": "edges", "edges": [[0, 1], [0, 2], [0, 3], [1, 2]]}
    with pytest.raises(ConfigError, match=r"the edge 1→2 bypasses the hub"):
        check_topology(parse_topology(extra, ids(4)), STAR, star_roles)
    schedule = {"schedule": [{"kind": "star"}, {"kind": "star"}]}
    with pytest.raises(ConfigError, match=r"topology.schedule: toy-star runs on one fixed star"):
        check_topology(parse_topology(schedule, ids(4)), STAR, star_roles)


# --- time-varying schedules -------------------------------------------------------------

HALVES = [{"kind": "edges", "edges": [[0, 1], [2, 3]]}, {"kind": "edges", "edges": [[1, 2]]}]


def test_b_connected_schedule_is_accepted_when_the_window_covers_it():
    topo = parse_topology({"schedule": HALVES, "period": 3}, ids(4))
    assert topo.b == 2 and topo.period == 3
    check_topology(topo, UNDIRECTED, roles(4))
    with pytest.raises(
        ConfigError,
        match=r"topology.schedule: graph 0 is not connected \(the union of every B = 1 "
        r"consecutive graphs must be\): nodes 2, 3 unreachable from 0",
    ):
        check_topology(
            parse_topology({"schedule": HALVES, "window": 1}, ids(4)), UNDIRECTED, roles(4)
        )


def test_b_connectivity_of_a_one_way_cycle_spread_over_three_graphs():
    cycle = [
        {"kind": "edges", "edges": [[0, 1]], "directed": True},
        {"kind": "edges", "edges": [[1, 2]], "directed": True},
        {"kind": "edges", "edges": [[2, 0]], "directed": True},
    ]
    check_topology(parse_topology({"schedule": cycle}, ids(3)), DIRECTED, roles(3))
    with pytest.raises(ConfigError, match=r"graphs 0, 1 together are not strongly connected"):
        check_topology(parse_topology({"schedule": cycle, "window": 2}, ids(3)), DIRECTED, roles(3))


def test_every_sliding_window_counts_including_the_wrap_around():
    # Windows {0,1} and {2,3} are connected but {1,2} is not: sliding windows catch it.
    left = {"kind": "edges", "edges": [[0, 1], [1, 2]]}
    right = {"kind": "edges", "edges": [[2, 3]]}
    empty = {"kind": "none"}
    schedule = [left, right, empty, {"kind": "path"}]
    with pytest.raises(ConfigError, match=r"graphs 1, 2 together are not connected"):
        check_topology(
            parse_topology({"schedule": schedule, "window": 2}, ids(4)), UNDIRECTED, roles(4)
        )
    # The schedule cycles, so the window wrapping from the last graph to the first counts.
    wrap = [{"kind": "edges", "edges": [[0, 1]]}, {"kind": "path"}, right]
    with pytest.raises(ConfigError, match=r"graphs 2, 0 together are not connected"):
        check_topology(
            parse_topology({"schedule": wrap, "window": 2}, ids(4)), UNDIRECTED, roles(4)
        )
    # No graph alone is connected, but every two consecutive ones together are.
    pairs = {"kind": "edges", "edges": [[0, 1], [2, 3]]}
    ok = [left, pairs, {"kind": "edges", "edges": [[1, 2], [2, 3]]}, pairs]
    with pytest.raises(ConfigError, match=r"graph 0 is not connected"):
        check_topology(parse_topology({"schedule": ok, "window": 1}, ids(4)), UNDIRECTED, roles(4))
    check_topology(parse_topology({"schedule": ok, "window": 2}, ids(4)), UNDIRECTED, roles(4))


def test_schedule_cycles_graph_by_graph_every_period_rounds():
    topo = parse_topology({"schedule": HALVES, "period": 3}, ids(4))
    slots = [topo.graphs.index(topo.graph_at(r)) for r in range(12)]
    assert slots == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]
    hoods = topo.neighbourhoods()
    assert [h.in_peers for h in hoods["1"]] == [("0",), ("2",)]
    assert topo.union.edges == {
        ("0", "1"),
        ("1", "0"),
        ("1", "2"),
        ("2", "1"),
        ("2", "3"),
        ("3", "2"),
    }


def test_random_schedule_entries_get_distinct_reproducible_seeds():
    raw = {"schedule": [{"kind": "erdos_renyi", "p": 0.4}] * 3}
    a = parse_topology(raw, ids(12), seed=7)
    b = parse_topology(raw, ids(12), seed=7)
    c = parse_topology(raw, ids(12), seed=8)
    assert a.graphs == b.graphs
    assert len({g.edges for g in a.graphs}) == 3
    assert a.graphs != c.graphs
    pinned = parse_topology({"schedule": [{"kind": "erdos_renyi", "p": 0.4, "seed": 1}]}, ids(12))
    assert pinned.graphs[0] == build_graph("erdos_renyi", ids(12), {"p": 0.4, "seed": 1})


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"kind": "ring", "schedule": HALVES}, r"topology.kind: with a schedule, give kind inside"),
        ({"schedule": []}, r"topology.schedule: expected a non-empty list"),
        ({"schedule": ["ring"]}, r"topology.schedule\[0\]: expected a mapping"),
        ({"schedule": [{"p": 1}]}, r"topology.schedule\[0\].kind: required field is missing"),
        ({"schedule": [{"kind": "ring", "p": 1}]}, r"topology.schedule\[0\].p: unknown field"),
        ({"schedule": HALVES, "window": 3}, r"topology.window: B = 3 exceeds the schedule"),
        ({"schedule": HALVES, "window": 0}, r"topology.window: expected an integer >= 1"),
        ({"schedule": HALVES, "period": 0}, r"topology.period: expected an integer >= 1"),
        ({"kind": "ring", "window": 2}, r"topology.window: only meaningful with a schedule"),
        # A period of one graph was read and dropped: the graph never changes.
        ({"kind": "ring", "period": 5}, r"topology.period: only meaningful with a schedule"),
        ({"nodes": 4}, r"topology.kind: required field is missing"),
        ({"kind": "ring", "allow_disconnected": 1}, r"topology.allow_disconnected: expected true"),
    ],
)
def test_topology_section_errors_name_the_field(raw, message):
    with pytest.raises(ConfigError, match=message):
        parse_topology(raw, ids(4))


def test_static_topology_neighbourhoods_match_the_plain_function():
    graph = build_graph("ring", ids(5), {})
    hoods = Topology.static(graph).neighbourhoods()
    assert {n: h for n, (h,) in hoods.items()} == neighbourhoods(graph)
