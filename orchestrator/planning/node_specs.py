"""What each node is told: one :class:`NodeSpec` per node of an :class:`Experiment`.

The experiment's topology schedule becomes each node's neighbourhoods, its data shard and
hyperparameter overrides are filled in, and the fault schedule becomes the link faults the
node's round engine applies (a killed node's rounds included, so ``simulate`` and ``run``
agree on what every node heard).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from starling.node.samplers import algorithm_info
from starling.node.spec import DataSpec, LinkFault, Neighbourhood, NodeSpec, in_peers_of, peers_of
from starling.orchestrator.config.experiment import Experiment
from starling.orchestrator.faults.schedule import FOREVER, NodeFault
from starling.orchestrator.planning.data_plan import data_specs
from starling.orchestrator.topology import Topology

__all__ = ["addressed", "isolation_faults", "node_specs", "outage_faults"]


def isolation_faults(
    node_faults: Iterable[NodeFault], node: str, peers: Iterable[str]
) -> tuple[LinkFault, ...]:
    """A killed node's rounds as link faults: what it would have sent or heard is lost.

    A node killed at round a and restarted at round r resumes from its checkpoint at a and
    catches up through rounds a..r-1 alone: its peers have moved past them, so its messages
    are late and theirs were sent while it was down. Both the simulator and the network
    runtime (on top of the real kill) apply this schedule, so they agree on what the node
    heard. A node that is never restarted is isolated to the end.
    """
    faults: list[LinkFault] = []
    for fault in node_faults:
        stop = fault.restart_round if fault.restart_round is not None else FOREVER
        if fault.node == node:
            faults.append(LinkFault("*", fault.at_round, stop, 1.0, 0))
        elif fault.node in peers:
            faults.append(LinkFault(fault.node, fault.at_round, stop, 1.0, 0))
    return tuple(faults)


def node_specs(
    experiment: Experiment,
    addresses: Mapping[str, str] | None = None,
    data: Mapping[str, DataSpec] | None = None,
) -> list[NodeSpec]:
    """One NodeSpec per node; ``addresses`` (id -> host:port) is filled in for real runs;
    ``data``: the experiment's data plan when already at hand (else it is made here)."""
    addresses = addresses or {}
    info = algorithm_info(experiment.algorithm)
    data_nodes = experiment.data_nodes()
    plan = data if data is not None else data_specs(experiment)
    topology = experiment.topology or Topology.static(experiment.graph)
    hoods = topology.neighbourhoods()
    specs = []
    for index, entry in enumerate(experiment.nodes):
        schedule: tuple[Neighbourhood, ...] = hoods[entry.id]
        held = plan.get(entry.id)
        # A node connects to everyone it will ever talk to over the whole schedule.
        peers = peers_of(schedule)
        specs.append(
            NodeSpec(
                experiment=experiment.name,
                node_id=entry.id,
                node_index=index,
                role=entry.role,
                algorithm=info.name,
                hyperparameters={**experiment.hyperparameters, **entry.hyperparameters},
                model=experiment.model,
                data=held,
                seed=experiment.seed,
                rounds=experiment.rounds,
                chains=experiment.chains,
                num_nodes=len(data_nodes),
                prior_share=1.0 / max(len(data_nodes), 1),
                schedule=schedule,
                schedule_period=topology.period,
                peers={p: addresses.get(p, "") for p in peers},
                round_deadline=experiment.round_deadline,
                link_faults=(
                    tuple(f for sender, f in experiment.faults if sender == entry.id)
                    + isolation_faults(experiment.node_faults, entry.id, peers)
                ),
                checkpoint_every=experiment.checkpoint_every,
                inbound_faults=outage_faults(experiment.node_faults, entry.id, schedule),
            )
        )
    return specs


def addressed(specs: Mapping[str, NodeSpec], addresses: Mapping[str, str]) -> dict[str, NodeSpec]:
    """The specs with every peer's address filled in from ``addresses`` (node id ->
    host:port, as the backend started them)."""
    return {
        node: dataclasses.replace(spec, peers={p: addresses.get(p, "") for p in spec.peers})
        for node, spec in specs.items()
    }


def outage_faults(
    node_faults: Iterable[NodeFault], node: str, schedule: Iterable[Neighbourhood]
) -> tuple[tuple[str, LinkFault], ...]:
    """The rounds each in-peer of ``node`` is scheduled dead, as faults on its link to
    ``node`` (see ``NodeSpec.inbound_faults``)."""
    senders = in_peers_of(schedule)
    return tuple(
        (fault.node, LinkFault(node, fault.at_round, fault.restart_round or FOREVER))
        for fault in node_faults
        if fault.node in senders
    )
