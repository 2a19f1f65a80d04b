"""Communication graphs, time-varying schedules of them, and the mixing weights nodes get.

A :class:`Graph` is a set of directed edges ``sender → receiver`` over named nodes; an
undirected graph holds both directions of every edge. A :class:`Topology` is a cyclic
schedule of graphs, each in force for ``period`` rounds (one graph: a static topology).

Experiment-file syntax (the ``topology`` section)::

    topology:
      kind: ring            # see KINDS below
      nodes: 8              # or give a top-level ``nodes`` list
      seed: 3               # random kinds; default: the experiment seed
      weights: metropolis   # or an N×N row-stochastic matrix S (row i: node i's weights)
      allow_disconnected: false

    topology:               # time-varying: each graph in force for ``period`` rounds, cycling
      nodes: 6
      period: 5
      window: 2             # B: every B consecutive graphs together must be connected
      schedule:
        - {kind: directed_ring}
        - {kind: random_digraph, p: 0.3}

Kinds and their own fields (node ``k`` is the k-th node id in experiment order):

    ring, path, full, none                   undirected; ``none`` has no edges at all
    star            centre (default: the hub-role node, else the first node)
    grid            rows, cols               rows × cols lattice, no wrap; sets the node count
    erdos_renyi     p, seed                  each pair linked with probability p
    random_regular  k, seed                  simple k-regular graph (n·k even, k < n)
    directed_ring                            one-way cycle 0 → 1 → … → n−1 → 0
    random_digraph  p, seed                  each ordered pair i → j with probability p
    edges           edges, directed          explicit [[a, b], …]; undirected unless directed

Validation follows what the algorithm declares (``AlgorithmInfo.graph``): ``undirected``
needs every graph symmetric and connected; ``directed`` needs it strongly connected; over a
schedule the union of every ``window`` consecutive graphs must be (strongly) connected
(B-strong connectivity, [002] §2.1); ``star`` needs one fixed star with the hub role at the
centre; ``none`` takes anything. ``kind: none`` (no edges, [000]'s "no-edge" baseline) is
always accepted because it is asked for by name; any other disconnected graph is rejected
unless ``allow_disconnected: true`` says it is meant.
"""

from starling.orchestrator.topology.check import check_topology, hub_role
from starling.orchestrator.topology.graph import Graph
from starling.orchestrator.topology.kinds import KINDS, TOPOLOGIES, build_graph
from starling.orchestrator.topology.schedule import Topology, node_count, parse_topology
from starling.orchestrator.topology.weights import metropolis_weights, neighbourhoods

__all__ = [
    "KINDS",
    "TOPOLOGIES",
    "Graph",
    "Topology",
    "build_graph",
    "check_topology",
    "hub_role",
    "metropolis_weights",
    "neighbourhoods",
    "node_count",
    "parse_topology",
]
