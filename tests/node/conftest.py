"""Fixtures shared by the tests of tests/node."""

from __future__ import annotations

import pytest

from tests.node.test_runtime_harness import Cluster


@pytest.fixture
def node(tmp_path):
    """One real node process ("0"), serving and answering: ``(NodeProc, NodeClient)``."""
    with Cluster(tmp_path) as cluster:
        (proc,) = cluster.start_nodes(["0"]).values()
        client = proc.client()
        client.wait_ready()
        yield proc, client
