"""A node that streams samples its run cannot have: the orchestrator keeps what came before,
names the node and the sample, and goes on.

The node here is a real gRPC server that answers ``StreamSamples`` with what a broken or
hostile node would send. Before, one sample of another shape made ``np.stack`` fail with a
traceback when the run was evaluated, and a stream that never ended filled the
orchestrator's memory.
"""

from __future__ import annotations

import itertools
from concurrent import futures

import grpc
import numpy as np
import pytest

from starling.node.protocol import convert
from starling.node.protocol.starling.v1 import control_pb2, control_pb2_grpc
from starling.orchestrator.core.errors import MalformedSamples
from starling.orchestrator.execution.client import NodeClient
from starling.orchestrator.execution.collector import Collector, pull_all


class _Hostile(control_pb2_grpc.ControlServicer):
    """Streams ``samples`` (round, array) from the offset asked for, one per batch."""

    def __init__(self, samples):
        self.samples = samples

    def StreamSamples(self, request, context):
        for index, (round_index, value) in enumerate(self.samples):
            if index < request.offset:
                continue
            sample = control_pb2.Sample(
                index=index, round=round_index, value=convert.tensor_from_array(value, "value")
            )
            yield control_pb2.SampleBatch(samples=[sample])


@pytest.fixture
def hostile():
    servers = []

    def serve(samples) -> NodeClient:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        control_pb2_grpc.add_ControlServicer_to_server(_Hostile(samples), server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return NodeClient(f"127.0.0.1:{port}", timeout=10)

    yield serve
    for server in servers:
        server.stop(0)


def _good(rounds, chains=3, dim=2):
    return [(r, np.full((chains, dim), float(r))) for r in rounds]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ((3, np.zeros((3, 5))), r"sample 3 \(round 3\) has d = 5, its earlier samples 2"),
        ((3, np.zeros((4, 2))), r"sample 3 \(round 3\) holds 4 chains, the run 3"),
        ((3, np.zeros(6)), r"sample 3 \(round 3\) has shape \(6,\), not \(chains, d\)"),
        ((2, np.zeros((3, 2))), r"sample 3 \(round 2\) comes after round 2: rounds go forward"),
        ((10, np.zeros((3, 2))), r"sample 3 \(round 10\) is past the run's 10 rounds"),
    ],
)
def test_a_sample_that_breaks_the_run_is_refused_and_those_before_kept(hostile, bad, reason):
    client = hostile([*_good(range(3)), bad, *_good(range(4, 6))])
    collector = Collector(chains=3, run_rounds=10)
    with pytest.raises(MalformedSamples, match=rf"^node at {client.address}: {reason}"):
        collector.pull("0", client)
    samples, rounds = collector.arrays()  # what came before: three rounds, evaluable
    assert samples["0"].shape == (3, 3, 2) and rounds["0"].tolist() == [0, 1, 2]
    client.close()


def test_a_later_pull_holds_the_node_to_what_was_collected_before(hostile):
    """The rule carries across pulls: d and the last round come from the samples held."""
    client = hostile([*_good(range(3)), (3, np.zeros((3, 7)))])
    collector = Collector()
    collector.rounds["0"] = [0, 1]
    collector.values["0"] = [np.zeros((3, 2)), np.zeros((3, 2))]
    with pytest.raises(MalformedSamples, match="sample 3 .* has d = 7, its earlier samples 2"):
        collector.pull("0", client)
    assert collector.rounds["0"] == [0, 1, 2]
    client.close()


def test_a_stream_without_end_stops_at_the_runs_rounds(hostile):
    endless = ((r, np.zeros((3, 2))) for r in itertools.count())
    client = hostile(endless)
    collector = Collector(chains=3, run_rounds=50)
    outcome = pull_all(collector, {"0": lambda pull: pull.take(client)}, within=30)["0"]
    assert isinstance(outcome.error, MalformedSamples)
    assert "sample 50 (round 50) is past the run's 50 rounds" in str(outcome.error)
    assert collector.offset("0") == 50
    client.close()
