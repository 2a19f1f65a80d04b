"""A fault entry must say what fails: ``{}`` or ``{rounds: [2, 5]}`` used to cut every
link of the run (``link`` defaulted to ``all``) with status ``complete``, and a node fault
missing its ``node`` was called an unknown field of a link fault. Only ``{drop: p}`` stays
short for ``{link: all, drop: p}``."""

from __future__ import annotations

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.faults.schedule import parse_faults
from starling.orchestrator.topology import build_graph

RING = build_graph("ring", ["a", "b", "c"], {})


def _parse(raw):
    return parse_faults(raw, RING, seed=0, rounds=10)


@pytest.mark.parametrize(
    ("entry", "got"),
    [
        ({}, "nothing"),
        ({"rounds": [2, 5]}, "rounds"),
        ({"at_round": 2, "for_rounds": 3}, "at_round, for_rounds"),
        ({"kill_at_round": 3, "restart_after_rounds": 2}, "kill_at_round, restart_after_rounds"),
    ],
)
def test_a_fault_that_names_no_link_or_node_is_refused(entry, got):
    with pytest.raises(ConfigError) as caught:
        _parse([{"link": ["a", "b"]}, entry])
    assert str(caught.value) == (
        f"faults[1]: name what fails, link: [A, B], link: all or node: ID (got {got})"
    )


def test_drop_alone_still_means_every_link():
    assert _parse([{"drop": 0.2}]).links == _parse([{"link": "all", "drop": 0.2}]).links
