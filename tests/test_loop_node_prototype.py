"""The event-loop prototype of the ladder (:mod:`benchmarks.loop_node`) runs Starling's
round, not a stand-in: its nodes, real processes talking ``grpc.aio``, store exactly the
samples the simulator draws for the same experiment (a synchronous program's rounds are
bit-identical between the engines, as the threaded node's are)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from benchmarks.loop_node import loop_node
from benchmarks.raw_ring import ring_stats
from benchmarks.starling_ring import ring_experiment
from starling.node.engine.simulate import simulate
from starling.node.runtime.run import SAMPLES_FILE
from starling.node.runtime.store import SampleStore
from starling.orchestrator.planning.node_specs import node_specs

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("experiment", "threaded_receive"),
    [
        ({"chains": 2, "dim": 3}, False),  # D-ADMMS, the ladder's sampler
        ({"chains": 4, "dim": 5, "algorithm": "d-sgld", "hyperparameters": {"eta": 1e-3}}, False),
        ({"chains": 2, "dim": 3}, True),  # its incoming streams on grpcio's threads
    ],
)
def test_the_prototype_stores_the_simulators_samples(tmp_path, experiment, threaded_receive):
    nodes, rounds = 3, 25
    prototype = functools.partial(
        loop_node, experiment=experiment, folder=str(tmp_path), threaded_receive=threaded_receive
    )
    ring_stats(nodes, rounds, 16, node=prototype)
    specs = node_specs(ring_experiment(nodes, rounds, **experiment))
    expected = simulate(specs)
    for spec in specs:
        node, samples = spec.node_id, expected[spec.node_id]
        store = SampleStore(tmp_path / str(spec.node_index) / SAMPLES_FILE, read_only=True)
        stored = store.read(0, rounds + 1)
        store.close()
        assert [round_index for _, round_index, _ in stored] == list(range(rounds)), node
        np.testing.assert_array_equal(np.stack([value for _, _, value in stored]), samples)
