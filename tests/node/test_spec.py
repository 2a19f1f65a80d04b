"""A spec's peers over its whole schedule: every slot counted, each peer once, sorted."""

from __future__ import annotations

from starling.node.spec import ModelSpec, Neighbourhood, NodeSpec


def _spec(*schedule: Neighbourhood) -> NodeSpec:
    return NodeSpec(
        experiment="e",
        node_id="a",
        node_index=0,
        role="node",
        algorithm="dsgld",
        hyperparameters={},
        model=ModelSpec("linear_regression"),
        data=None,
        seed=0,
        rounds=1,
        chains=1,
        num_nodes=5,
        prior_share=0.2,
        schedule=schedule,
    )


def test_peers_are_gathered_over_every_slot_sorted_and_once():
    spec = _spec(
        Neighbourhood(out_peers=("d", "b"), in_peers=("c",)),
        Neighbourhood(out_peers=("b", "c"), in_peers=("e", "c")),
    )
    assert spec.out_peers() == ("b", "c", "d")
    assert spec.in_peers() == ("c", "e")
    assert spec.all_peers() == ("b", "c", "d", "e")


def test_a_spec_without_a_schedule_has_no_peers():
    spec = _spec()
    assert spec.out_peers() == spec.in_peers() == spec.all_peers() == ()
