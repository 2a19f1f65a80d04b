"""The wire's plain types against their converters: every field survives to_proto -> from_proto.

The node's servicers send :class:`NodeStatus` and :class:`Configured` with ``*_to_proto`` and
the orchestrator's client reads them with ``*_from_proto``. Each sample below gives every
field of its dataclass a value other than the field's default, and the message built from it
must have every protobuf field set; so a field added to a plain type (or to the .proto) but
not carried by both converters fails here, whichever side forgot it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from google.protobuf.message import Message

from starling.node.protocol.contract import (
    Configured,
    LinkCounters,
    NodeState,
    NodeStatus,
    configured_from_proto,
    configured_to_proto,
    link_counters_from_proto,
    link_counters_to_proto,
    state_from_proto,
    state_to_proto,
    status_from_proto,
    status_to_proto,
)
from starling.node.protocol.starling.v1 import control_pb2
from starling.node.spec import DataSpec


def _counters(first: int) -> LinkCounters:
    """Counters whose every field is set, each to its own value."""
    values: dict[str, Any] = {}
    for k, field in enumerate(dataclasses.fields(LinkCounters)):
        values[field.name] = f"error {first}" if isinstance(field.default, str) else first + k
    return LinkCounters(**values)


STATUS = NodeStatus(
    node_id="node-3",
    experiment="exp-a",
    state=NodeState.RUNNING,
    round=41,
    error="peer '2' sent a NaN",
    samples_stored=40,
    outbound={"1": _counters(1), "2": _counters(100)},
    inbound={"0": _counters(1000)},
    program_metrics={"acceptance": 0.25, "stale_inputs": 3.0},
    holding=True,
    peers_down=("0", "2"),
    refused_streams=2,
    denied_peer_streams=5,
    denied_control_calls=7,
    run_id="run-42",
    refused={"health:busy": 3, "peer:idle": 1},
)

# A synthetic shard's recipe: every field the wire carries set (a node never tells a
# file's path, format or test split; see test_a_files_path_never_crosses below).
RECIPE = DataSpec(
    source="synthetic",
    shard=2,
    num_shards=5,
    seed=9,
    size=30,
    partition="random",
    sizes=(10, 20, 30, 40, 50),
    total=150,
    shards=(2, 3),
)
CONFIGURED = Configured(next_round=12, resumed=True, samples_stored=11, data=RECIPE)

CASES = {
    "NodeStatus": (STATUS, status_to_proto, status_from_proto),
    "Configured": (CONFIGURED, configured_to_proto, configured_from_proto),
    "LinkCounters": (
        _counters(7),
        lambda counters: link_counters_to_proto("peer-1", counters),
        link_counters_from_proto,
    ),
}


def _default(field: dataclasses.Field[Any]) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


@pytest.mark.parametrize("name", CASES)
def test_every_field_of_the_sample_is_set(name):
    """A field left at its default would pass the round trip even if no converter carried
    it: the sample must set every one (a new field must be added here too)."""
    sample = CASES[name][0]
    for field in dataclasses.fields(sample):
        value = getattr(sample, field.name)
        default = _default(field)
        assert value != default and (default is not None or value), (
            f"{name}.{field.name}: give the sample a value other than the default "
            f"({default!r}), so that the round trip checks it is carried"
        )


@pytest.mark.parametrize("name", CASES)
def test_every_wire_field_is_filled(name):
    """to_proto sets every field of the message: a field added to the .proto and not to
    the converter (or the plain type) is missing here."""
    sample, to_proto, _ = CASES[name]
    message: Message = to_proto(sample)
    every = {field.name for field in message.DESCRIPTOR.fields}
    assert {field.name for field, _ in message.ListFields()} == every


@pytest.mark.parametrize("name", CASES)
def test_every_field_survives_the_wire(name):
    sample, to_proto, from_proto = CASES[name]
    message = to_proto(sample)
    received = type(message).FromString(message.SerializeToString())
    assert from_proto(received) == sample


def test_a_status_reads_its_program_figures_sorted_by_name():
    """A protobuf map keeps no order; the orchestrator's tables list the figures by name."""
    status = dataclasses.replace(STATUS, program_metrics={"b": 2.0, "a": 1.0, "c": 3.0})
    read = status_from_proto(status_to_proto(status))
    assert list(read.program_metrics) == ["a", "b", "c"]


def test_a_files_path_never_crosses():
    """A node's own file is reported only as ``source="file"``: no path, format or rows."""
    own = DataSpec(source="file", shard=0, num_shards=1, path="/srv/private.csv", format="csv")
    read = configured_from_proto(configured_to_proto(dataclasses.replace(CONFIGURED, data=own)))
    assert read.data == DataSpec(source="file", shard=0, num_shards=0)


def test_a_reply_without_data_reads_as_none():
    bare = dataclasses.replace(CONFIGURED, data=None)
    assert configured_from_proto(configured_to_proto(bare)) == bare


def test_every_state_crosses_the_wire_and_every_wire_state_is_one():
    """Each lifecycle state has its own value of the .proto's NodeState and reads back as
    itself; a value added to the .proto (``stopping`` was) must be added to the contract."""
    wire = {state_to_proto(state) for state in NodeState}
    assert len(wire) == len(NodeState)
    assert all(state_from_proto(state_to_proto(state)) is state for state in NodeState)
    named = set(control_pb2.NodeState.values()) - {control_pb2.NODE_STATE_UNSPECIFIED}
    assert wire == named


def test_stopping_is_not_finished():
    """A stopping node's store may still grow: a sample stream following it, and the
    orchestrator, wait for ``stopped``."""
    assert not NodeState.STOPPING.finished and NodeState.STOPPED.finished
