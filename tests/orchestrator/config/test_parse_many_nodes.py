"""Experiments of many nodes parse in one pass over the nodes: duplicate ids and shards
are found by sets, not by scanning the list once per node (10,000 nodes took seconds).
Behaviour only: what is found and said, never how long it took."""

from __future__ import annotations

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.data_plan import data_specs
from starling.orchestrator.planning.plan import plan_run

NODES = 5000


def _raw(**fields):
    return {
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.009},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 5, "seed": 3},
        "rounds": 2,
        "limits": {"samples_memory": "64GiB"},
        **fields,
    }


def test_a_large_named_ring_gives_every_node_its_own_shard():
    nodes = [{"id": f"n{k}"} for k in range(NODES)]
    experiment = parse_experiment(_raw(nodes=nodes, topology={"kind": "ring"}))
    plan = data_specs(experiment)
    assert len(plan) == NODES
    assert sorted(d.shard for d in plan.values()) == list(range(NODES))
    assert plan["n0"].shard == 0 and plan[f"n{NODES - 1}"].shard == NODES - 1


def test_the_first_repeated_id_of_a_large_list_is_named():
    nodes = [{"id": f"n{k}"} for k in range(NODES)] + [{"id": "n7"}, {"id": "n3"}]
    with pytest.raises(ConfigError, match=r"^nodes: node id 'n7' appears twice$"):
        parse_experiment(_raw(nodes=nodes, topology={"kind": "ring"}))


def test_a_shard_claimed_twice_in_a_large_list_names_its_first_holder():
    nodes = [{"id": f"n{k}", "data": {"shard": k}} for k in range(NODES)]
    nodes[-1] = {"id": "last", "data": {"shard": 12}}
    with pytest.raises(
        ConfigError,
        match=rf"^nodes\[{NODES - 1}\]\.data\.shard: shard 12 is already node 'n12'",
    ):
        plan_run(parse_experiment(_raw(nodes=nodes, topology={"kind": "ring"})))
