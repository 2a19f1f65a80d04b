"""Protobuf <-> plain Python: NodeSpec <-> NodeConfig, numpy <-> Tensor, Message <-> Iterate.

Servicers and the client call only these functions, so protobuf types stop at the edge.
``config_to_spec(spec_to_config(s)) == s`` for every spec the orchestrator builds; the one
lossy step is ``google.protobuf.Struct`` (hyperparameters, model params), which carries
every number as a double — :mod:`starling.node.params` accepts whole doubles where an int is
declared, and an int too large for a double to hold exactly is refused here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf import struct_pb2

from starling.node.messages import Message
from starling.node.params import ConfigError
from starling.node.protocol.starling.v1 import control_pb2, peer_pb2, tensor_pb2
from starling.node.spec import DataSpec, LinkFault, ModelSpec, Neighbourhood, NodeSpec

__all__ = [
    "DTYPES",
    "MAX_DIMENSIONS",
    "TensorError",
    "array_from_tensor",
    "data_from_proto",
    "public_data",
    "config_to_spec",
    "iterate_to_message",
    "mapping_from_struct",
    "message_to_iterate",
    "spec_to_config",
    "struct_from_mapping",
    "tensor_from_array",
    "wire_array",
    "withheld_iterate",
]

DTYPES = {
    name: np.dtype(name).newbyteorder("<") for name in ("float64", "float32", "int64", "int32")
}
"""The dtypes allowed on the wire, each in its little-endian form."""

MAX_DIMENSIONS = 32
"""The most dimensions a tensor may have on the wire (numpy's own limit is 64; iterates
have two)."""

_NATIVE_NAMES = {np.dtype(name): name for name in DTYPES}
"""The wire's dtypes in this machine's byte order, by dtype (a fast lookup)."""

_EXACT_INT = 2**53  # beyond this a double cannot hold every integer


class TensorError(ValueError):
    """A Tensor whose dtype, shape or byte count does not add up."""


# --------------------------------------------------------------------------- tensors


def tensor_from_array(array: np.ndarray, name: str = "") -> tensor_pb2.Tensor:
    """Raw little-endian C-order bytes of ``array`` (float64 stays bit-exact)."""
    tensor = tensor_pb2.Tensor()
    _fill_tensor(tensor, array, name)
    return tensor


def wire_array(array: np.ndarray, name: str = "") -> tuple[str, np.ndarray]:
    """The wire's dtype name for ``array`` and its data as sent: little-endian, C order
    (a copy only when it is not already). Note that numpy makes a 0-d array 1-d here: the
    shape to send is ``array``'s own."""
    value = np.asarray(array)
    # ``dtype.name`` is computed in Python (microseconds, on every message): a native dtype
    # is looked up by the dtype itself, anything else takes the slow path once.
    wire_name = _NATIVE_NAMES.get(value.dtype)
    if wire_name is None:
        wire_name = value.dtype.name
        if wire_name not in DTYPES:
            raise TensorError(f"tensor {name!r}: dtype {value.dtype} cannot be sent")
    return wire_name, np.ascontiguousarray(value, dtype=DTYPES[wire_name])


def _fill_tensor(tensor: tensor_pb2.Tensor, array: np.ndarray, name: str) -> None:
    """Write ``array`` into ``tensor`` in place: a tensor added to its message directly is
    not copied into it again (one copy of an 8 MB iterate fewer per link)."""
    wire_name, wire = wire_array(array, name)
    tensor.name, tensor.dtype = name, wire_name
    tensor.shape.extend(np.shape(array))
    tensor.data = wire.tobytes()


def array_from_tensor(
    tensor: tensor_pb2.Tensor, writable: bool = True, payload: memoryview | None = None
) -> np.ndarray:
    """A native-order array of the tensor; raises TensorError if the bytes do not fit.

    Writable (a fresh copy) by default; with ``writable=False`` a read-only view of the bytes
    read out of the message when they are already in native order, one copy of the payload
    fewer (what a received iterate gets: samplers never write into their inputs).
    ``payload``: the tensor's bytes when they were read out of the received message by hand
    (:func:`~starling.node.protocol.wire.stripped_iterate`; ``tensor.data`` is then empty),
    viewed without a copy when they are aligned for the dtype, as a Starling sender places
    them (:data:`~starling.node.protocol.wire.PAYLOAD_ALIGNMENT`), copied once when not.
    """
    dtype = DTYPES.get(tensor.dtype)
    if dtype is None:
        raise TensorError(
            f"tensor {tensor.name!r}: unsupported dtype {tensor.dtype!r} "
            f"(allowed: {', '.join(DTYPES)})"
        )
    if len(tensor.shape) > MAX_DIMENSIONS:
        raise TensorError(
            f"tensor {tensor.name!r}: {len(tensor.shape)} dimensions (at most {MAX_DIMENSIONS})"
        )
    shape = tuple(tensor.shape)  # Python ints already (repeated int64)
    if shape and min(shape) < 0:
        raise TensorError(f"tensor {tensor.name!r}: negative dimension in shape {shape}")
    expected = math.prod(shape) * dtype.itemsize
    # Each access to tensor.data copies the field out of protobuf: read it once.
    data = tensor.data if payload is None else payload
    if len(data) != expected:
        raise TensorError(
            f"tensor {tensor.name!r}: {len(data)} bytes for shape {shape} "
            f"of {tensor.dtype} (expected {expected})"
        )
    try:
        array = np.frombuffer(data, dtype=dtype).reshape(shape)
    except ValueError as exc:  # an empty tensor of an impossible shape, (0, 2**62, 2**62)
        raise TensorError(f"tensor {tensor.name!r}: shape {shape}: {exc}") from None
    if writable or not dtype.isnative:
        return array.astype(dtype.newbyteorder("="))
    if not array.flags.aligned:  # a payload read in place from a sender that did not align it
        array = array.copy()
        array.flags.writeable = False
    return array


# --------------------------------------------------------------------------- messages


def message_to_iterate(
    message: Message, *, experiment: str, sender: str, receiver: str, round: int, phase: int
) -> peer_pb2.Iterate:
    iterate = peer_pb2.Iterate(
        experiment=experiment,
        sender=sender,
        receiver=receiver,
        round=round,
        phase=phase,
        kind=message.kind,
    )
    for name, value in message.tensors.items():
        _fill_tensor(iterate.tensors.add(), value, name)
    return iterate


def withheld_iterate(
    *, experiment: str, sender: str, receiver: str, round: int, phase: int, kind: str = ""
) -> peer_pb2.Iterate:
    """The notice sent in place of a message an emulated fault took out (no tensors)."""
    return peer_pb2.Iterate(
        experiment=experiment,
        sender=sender,
        receiver=receiver,
        round=round,
        phase=phase,
        kind=kind,
        withheld=True,
    )


def iterate_to_message(
    iterate: peer_pb2.Iterate, payloads: Sequence[memoryview] | None = None
) -> Message:
    """The sampler-level message (read-only arrays), stamped with the round it was sent in;
    ``payloads``: its tensors' bytes, in order, when they were read out of the received
    message by hand (:class:`~starling.node.protocol.wire.Arrived`)."""
    if payloads is not None and len(payloads) != len(iterate.tensors):
        raise TensorError(f"{len(payloads)} payloads for {len(iterate.tensors)} tensors")
    tensors: dict[str, np.ndarray] = {}
    for index, tensor in enumerate(iterate.tensors):
        if tensor.name in tensors:
            raise TensorError(f"tensor {tensor.name!r} appears twice")
        payload = None if payloads is None else payloads[index]
        tensors[tensor.name] = array_from_tensor(tensor, writable=False, payload=payload)
    return Message(kind=iterate.kind, tensors=tensors, round=int(iterate.round))


# --------------------------------------------------------------------------- Struct


def _plain(value: Any, where: str) -> Any:
    """``value`` as JSON-like Python that Struct can carry, or ConfigError naming ``where``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        if abs(int(value)) > _EXACT_INT:
            raise ConfigError(f"{where}: integer {value} is too large to send exactly")
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"{where}: keys must be strings, got {key!r}")
            out[key] = _plain(item, f"{where}.{key}")
        return out
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(item, f"{where}[{k}]") for k, item in enumerate(list(value))]
    raise ConfigError(f"{where}: cannot send a value of type {type(value).__name__}")


def struct_from_mapping(values: Mapping[str, Any], where: str = "value") -> struct_pb2.Struct:
    struct = struct_pb2.Struct()
    struct.update(_plain(dict(values), where))
    return struct


def _from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "null_value" or kind is None:
        return None
    if kind == "struct_value":
        return mapping_from_struct(value.struct_value)
    if kind == "list_value":
        return [_from_value(item) for item in value.list_value.values]
    return getattr(value, kind)


def mapping_from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    return {key: _from_value(struct.fields[key]) for key in sorted(struct.fields)}


# --------------------------------------------------------------------------- NodeSpec


def spec_to_config(spec: NodeSpec) -> control_pb2.NodeConfig:
    config = control_pb2.NodeConfig(
        experiment=spec.experiment,
        node_id=spec.node_id,
        node_index=spec.node_index,
        role=spec.role,
        algorithm=spec.algorithm,
        hyperparameters=struct_from_mapping(spec.hyperparameters, "hyperparameters"),
        model=control_pb2.ModelConfig(
            name=spec.model.name, params=struct_from_mapping(spec.model.params, "model.params")
        ),
        seed=spec.seed,
        rounds=spec.rounds,
        chains=spec.chains,
        num_nodes=spec.num_nodes,
        prior_share=spec.prior_share,
        schedule=[
            control_pb2.Neighbourhood(
                out_peers=list(hood.out_peers),
                in_peers=list(hood.in_peers),
                weights=[control_pb2.Weight(peer=p, weight=w) for p, w in hood.weights.items()],
            )
            for hood in spec.schedule
        ],
        schedule_period=spec.schedule_period,
        peers=[control_pb2.PeerAddress(id=p, address=a) for p, a in spec.peers.items()],
        round_deadline=spec.round_deadline,
        link_faults=[_fault_to_proto(f) for f in spec.link_faults],
        checkpoint_every=spec.checkpoint_every,
        inbound_faults=[
            control_pb2.InboundFault(sender=sender, fault=_fault_to_proto(f))
            for sender, f in spec.inbound_faults
        ],
    )
    if spec.data is not None:
        d = spec.data
        config.data.CopyFrom(
            control_pb2.DataConfig(
                source=d.source,
                shard=d.shard,
                num_shards=d.num_shards,
                seed=d.seed,
                size=d.size,
                path=d.path,
                format=d.format,
                partition=d.partition,
                sizes=list(d.sizes),
                shards=list(d.shards),
                total=d.total,
                test_fraction=d.test_fraction,
                test_seed=d.test_seed,
            )
        )
    return config


def public_data(data: DataSpec) -> control_pb2.DataConfig:
    """What a node may tell about its own data: a synthetic shard's recipe (it holds no
    data value), or for a file only that it is one — never its path or rows."""
    if data.source == "synthetic":
        return control_pb2.DataConfig(
            source=data.source,
            shard=data.shard,
            num_shards=data.num_shards,
            seed=data.seed,
            size=data.size,
            sizes=list(data.sizes),
            shards=list(data.shards),
            total=data.total,
            partition=data.partition,
        )
    return control_pb2.DataConfig(source=data.source)


def data_from_proto(d: control_pb2.DataConfig) -> DataSpec:
    return DataSpec(
        source=d.source,
        shard=int(d.shard),
        num_shards=int(d.num_shards),
        seed=int(d.seed),
        size=int(d.size),
        path=d.path,
        format=d.format,
        partition=d.partition or "interleaved",
        sizes=tuple(int(s) for s in d.sizes),
        shards=tuple(int(s) for s in d.shards),
        total=int(d.total),
        test_fraction=float(d.test_fraction),
        test_seed=int(d.test_seed),
    )


def config_to_spec(config: control_pb2.NodeConfig) -> NodeSpec:
    data = data_from_proto(config.data) if config.HasField("data") else None
    return NodeSpec(
        experiment=config.experiment,
        node_id=config.node_id,
        node_index=int(config.node_index),
        role=config.role,
        algorithm=config.algorithm,
        hyperparameters=mapping_from_struct(config.hyperparameters),
        model=ModelSpec(name=config.model.name, params=mapping_from_struct(config.model.params)),
        data=data,
        seed=int(config.seed),
        rounds=int(config.rounds),
        chains=int(config.chains),
        num_nodes=int(config.num_nodes),
        prior_share=float(config.prior_share),
        schedule=tuple(
            Neighbourhood(
                out_peers=tuple(hood.out_peers),
                in_peers=tuple(hood.in_peers),
                weights={w.peer: float(w.weight) for w in hood.weights},
            )
            for hood in config.schedule
        ),
        schedule_period=int(config.schedule_period),
        peers={p.id: p.address for p in config.peers},
        round_deadline=float(config.round_deadline),
        link_faults=tuple(_fault_from_proto(f) for f in config.link_faults),
        checkpoint_every=int(config.checkpoint_every),
        inbound_faults=tuple((f.sender, _fault_from_proto(f.fault)) for f in config.inbound_faults),
    )


def _fault_to_proto(fault: LinkFault) -> control_pb2.LinkFault:
    return control_pb2.LinkFault(
        receiver=fault.receiver,
        start=fault.start,
        stop=fault.stop,
        drop=fault.drop,
        seed=fault.seed,
    )


def _fault_from_proto(fault: control_pb2.LinkFault) -> LinkFault:
    return LinkFault(
        receiver=fault.receiver,
        start=int(fault.start),
        stop=int(fault.stop),
        drop=float(fault.drop),
        seed=int(fault.seed),
    )
