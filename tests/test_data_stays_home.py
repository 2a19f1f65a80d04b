"""DESIGN principle 3: only iterates cross the network, never a node's data.

Two checks. Over real gRPC, a node's every outgoing Iterate is captured by a real Peer
server standing in for its neighbour, and neither those tensors nor the NodeConfig the
orchestrator sent hold any of the node's data values. And for every registered algorithm,
each message a program emits has tensors sized by chains and parameters only — never by
the number of data points (chosen prime so it cannot coincide).
"""

from __future__ import annotations

import threading
from concurrent import futures

import grpc
import numpy as np
import pytest

from starling.node.assemble import build_program, node_rng
from starling.node.data.shards import load_shard
from starling.node.models import build_model
from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import peer_pb2, peer_pb2_grpc
from starling.node.runtime.link_proof import CHALLENGE_KEY, new_challenge
from starling.node.samplers import ALGORITHMS
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs
from tests.node.test_runtime_harness import Cluster
from tests.waiting import wait_until

POINTS = 37  # prime: no tensor dimension can equal it by accident


class RecordingPeer(peer_pb2_grpc.PeerServicer):
    """A real Peer service that keeps every Iterate it is sent. It answers a stream's
    opening with a challenge, as a node does (:mod:`starling.node.runtime.link_proof`), so
    the sender goes on past its proof; the proof (a MAC, no data) is not kept."""

    def __init__(self):
        self.iterates: list[peer_pb2.Iterate] = []
        self._lock = threading.Lock()

    def Exchange(self, request_iterator, context):
        context.send_initial_metadata(((CHALLENGE_KEY, new_challenge()),))
        count = 0
        for iterate in request_iterator:
            if iterate.proof:
                continue
            with self._lock:
                self.iterates.append(iterate)
            count += 1
        return peer_pb2.ExchangeSummary(received=count)


def _experiment(algorithm: str, graph: str):
    topology = {
        "undirected": {"kind": "ring", "nodes": 3},
        "directed": {"kind": "directed_ring", "nodes": 3},
        "star": {"kind": "star", "nodes": 3},
        "none": {"kind": "none", "nodes": 1},
    }[graph]
    return parse_experiment(
        {
            "name": f"home-{algorithm}",
            "algorithm": algorithm,
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": POINTS, "seed": 4},
            "topology": topology,
            "rounds": 3,
            "chains": 4,
            "seed": 2,
        }
    )


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_messages_are_sized_by_parameters_not_data(algorithm):
    info = ALGORITHMS[algorithm]
    experiment = _experiment(algorithm, info.graph)
    specs = node_specs(experiment)
    programs = [build_program(spec, node_rng(spec)) for spec in specs]
    sent = 0
    for program in programs:
        for phase in range(program.phases):
            for message in program.outgoing(0, phase).values():
                for name, tensor in message.tensors.items():
                    sent += 1
                    assert POINTS not in np.shape(tensor), (algorithm, name, np.shape(tensor))
                    assert np.size(tensor) <= experiment.chains * (2 + 1), (algorithm, name)
    if info.graph != "none" and info.synchronous:
        assert sent > 0, f"{algorithm} sent nothing in round 0"


@pytest.mark.e2e
def test_no_data_value_leaves_a_real_node(tmp_path):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    recorder = RecordingPeer()
    peer_pb2_grpc.add_PeerServicer_to_server(recorder, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Cluster(tmp_path) as cluster:
            (proc,) = cluster.start_nodes(["0"]).values()
            experiment = parse_experiment(
                {
                    "name": "home",
                    "algorithm": "d-admms",
                    "model": {"name": "linear_regression", "params": {"dim": 2}},
                    "data": {"source": "synthetic", "size": POINTS, "seed": 4},
                    "topology": {"kind": "path", "nodes": 2},
                    "rounds": 5,
                    "chains": 4,
                    "seed": 2,
                    "round_deadline": 0.2,  # the recorder never answers: each round times out
                }
            )
            specs = node_specs(experiment, {"0": proc.address, "1": f"127.0.0.1:{port}"})
            client = proc.client()
            client.configure(specs[0])
            client.start()
            wait_until(lambda: client.status().state == "done", 30, "node 0 to finish")
            wait_until(lambda: len(recorder.iterates) == 5, 10, "the last stream message")
            model = build_model(experiment.model)
            data = load_shard(specs[0].data, model)
    finally:
        server.stop(0)

    private = set(np.concatenate([data.X.ravel(), data.y]).tolist())
    assert len(recorder.iterates) == 5
    for iterate in recorder.iterates:
        for tensor in iterate.tensors:
            values = convert.array_from_tensor(tensor)
            assert values.shape == (4, 2)
            assert private.isdisjoint(values.ravel().tolist())
    config = convert.spec_to_config(specs[0]).SerializeToString()
    for value in list(private)[:20]:
        assert np.float64(value).tobytes() not in config
