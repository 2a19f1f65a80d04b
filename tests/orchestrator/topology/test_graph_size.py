"""A topology too large to build is refused in one line before anything is built: a typo
such as ``nodes: 100000000000000`` used to build node ids for ever (``starling simulate``
hung), and ``kind: full`` or ``erdos_renyi`` on 5,000 nodes took minutes and gigabytes.
A grid's bad ``rows`` or ``cols`` is named as such, not as a missing ``topology.nodes``."""

from __future__ import annotations

import signal
from contextlib import contextmanager

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment


def _raw(topology, **fields):
    return {
        "algorithm": "d-sgld",
        "model": {"name": "linear_regression", "params": {"dim": 1}},
        "data": {"size": 1},
        "rounds": 1,
        "topology": topology,
        **fields,
    }


@contextmanager
def _within(seconds: int):
    """Fail, rather than hang, when the parse takes longer than ``seconds``."""

    def _late(*_):
        raise TimeoutError(f"still parsing after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        (
            {"kind": "ring", "nodes": 10**14},
            r"^topology\.nodes: 100,000,000,000,000 nodes, over the 100,000 allowed$",
        ),
        (
            {"kind": "grid", "rows": 10**6, "cols": 10**6},
            r"^topology\.rows: 1,000,000,000,000 nodes, over the 100,000 allowed$",
        ),
        (
            {"kind": "full", "nodes": 3000},
            r"^topology\.kind: full on 3,000 nodes would hold up to 8,997,000 links, over ",
        ),
        ({"kind": "erdos_renyi", "p": 0.001, "nodes": 3000}, r"^topology\.kind: erdos_renyi"),
        ({"kind": "random_regular", "k": 2000, "nodes": 3000}, r"^topology\.kind: random_regular"),
        (
            {"nodes": 3000, "schedule": [{"kind": "ring"}, {"kind": "random_digraph", "p": 0.1}]},
            r"^topology\.schedule\[1\]\.kind: random_digraph on 3,000 nodes \(with the",
        ),
        (
            {"kind": "grid", "rows": "a", "cols": 3},
            r"^topology\.rows: expected an integer >= 1, got 'a'$",
        ),
        (
            {"kind": "grid", "rows": 2, "cols": 0},
            r"^topology\.cols: expected an integer >= 1, got 0$",
        ),
    ],
)
def test_an_oversized_or_misshapen_topology_is_refused_at_once(topology, message):
    with _within(10), pytest.raises(ConfigError, match=message):
        parse_experiment(_raw(topology))


def test_a_large_sparse_topology_still_parses():
    experiment = parse_experiment(
        _raw({"kind": "ring", "nodes": 20_000}, limits={"samples_memory": "64GiB"})
    )
    assert len(experiment.nodes) == 20_000
