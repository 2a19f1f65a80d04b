from google.protobuf import struct_pb2 as _struct_pb2
from starling.node.protocol.starling.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NODE_STATE_UNSPECIFIED: _ClassVar[NodeState]
    NODE_STATE_IDLE: _ClassVar[NodeState]
    NODE_STATE_CONFIGURED: _ClassVar[NodeState]
    NODE_STATE_RUNNING: _ClassVar[NodeState]
    NODE_STATE_DONE: _ClassVar[NodeState]
    NODE_STATE_FAILED: _ClassVar[NodeState]
    NODE_STATE_STOPPED: _ClassVar[NodeState]
    NODE_STATE_STOPPING: _ClassVar[NodeState]
NODE_STATE_UNSPECIFIED: NodeState
NODE_STATE_IDLE: NodeState
NODE_STATE_CONFIGURED: NodeState
NODE_STATE_RUNNING: NodeState
NODE_STATE_DONE: NodeState
NODE_STATE_FAILED: NodeState
NODE_STATE_STOPPED: NodeState
NODE_STATE_STOPPING: NodeState

class NodeConfig(_message.Message):
    __slots__ = ("experiment", "node_id", "node_index", "role", "algorithm", "hyperparameters", "model", "data", "seed", "rounds", "chains", "num_nodes", "prior_share", "schedule", "schedule_period", "peers", "round_deadline", "link_faults", "checkpoint_every", "inbound_faults", "fresh", "peer_secret", "send_secrets", "accept_secrets", "run_id")
    class SendSecretsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AcceptSecretsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    HYPERPARAMETERS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    CHAINS_FIELD_NUMBER: _ClassVar[int]
    NUM_NODES_FIELD_NUMBER: _ClassVar[int]
    PRIOR_SHARE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_PERIOD_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    ROUND_DEADLINE_FIELD_NUMBER: _ClassVar[int]
    LINK_FAULTS_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_EVERY_FIELD_NUMBER: _ClassVar[int]
    INBOUND_FAULTS_FIELD_NUMBER: _ClassVar[int]
    FRESH_FIELD_NUMBER: _ClassVar[int]
    PEER_SECRET_FIELD_NUMBER: _ClassVar[int]
    SEND_SECRETS_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_SECRETS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    experiment: str
    node_id: str
    node_index: int
    role: str
    algorithm: str
    hyperparameters: _struct_pb2.Struct
    model: ModelConfig
    data: DataConfig
    seed: int
    rounds: int
    chains: int
    num_nodes: int
    prior_share: float
    schedule: _containers.RepeatedCompositeFieldContainer[Neighbourhood]
    schedule_period: int
    peers: _containers.RepeatedCompositeFieldContainer[PeerAddress]
    round_deadline: float
    link_faults: _containers.RepeatedCompositeFieldContainer[LinkFault]
    checkpoint_every: int
    inbound_faults: _containers.RepeatedCompositeFieldContainer[InboundFault]
    fresh: bool
    peer_secret: str
    send_secrets: _containers.ScalarMap[str, str]
    accept_secrets: _containers.ScalarMap[str, str]
    run_id: str
    def __init__(self, experiment: _Optional[str] = ..., node_id: _Optional[str] = ..., node_index: _Optional[int] = ..., role: _Optional[str] = ..., algorithm: _Optional[str] = ..., hyperparameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., model: _Optional[_Union[ModelConfig, _Mapping]] = ..., data: _Optional[_Union[DataConfig, _Mapping]] = ..., seed: _Optional[int] = ..., rounds: _Optional[int] = ..., chains: _Optional[int] = ..., num_nodes: _Optional[int] = ..., prior_share: _Optional[float] = ..., schedule: _Optional[_Iterable[_Union[Neighbourhood, _Mapping]]] = ..., schedule_period: _Optional[int] = ..., peers: _Optional[_Iterable[_Union[PeerAddress, _Mapping]]] = ..., round_deadline: _Optional[float] = ..., link_faults: _Optional[_Iterable[_Union[LinkFault, _Mapping]]] = ..., checkpoint_every: _Optional[int] = ..., inbound_faults: _Optional[_Iterable[_Union[InboundFault, _Mapping]]] = ..., fresh: _Optional[bool] = ..., peer_secret: _Optional[str] = ..., send_secrets: _Optional[_Mapping[str, str]] = ..., accept_secrets: _Optional[_Mapping[str, str]] = ..., run_id: _Optional[str] = ...) -> None: ...

class InboundFault(_message.Message):
    __slots__ = ("sender", "fault")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    FAULT_FIELD_NUMBER: _ClassVar[int]
    sender: str
    fault: LinkFault
    def __init__(self, sender: _Optional[str] = ..., fault: _Optional[_Union[LinkFault, _Mapping]] = ...) -> None: ...

class ModelConfig(_message.Message):
    __slots__ = ("name", "params")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    params: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DataConfig(_message.Message):
    __slots__ = ("source", "shard", "num_shards", "seed", "size", "path", "format", "partition", "sizes", "shards", "total", "test_fraction", "test_seed")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SIZES_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TEST_FRACTION_FIELD_NUMBER: _ClassVar[int]
    TEST_SEED_FIELD_NUMBER: _ClassVar[int]
    source: str
    shard: int
    num_shards: int
    seed: int
    size: int
    path: str
    format: str
    partition: str
    sizes: _containers.RepeatedScalarFieldContainer[int]
    shards: _containers.RepeatedScalarFieldContainer[int]
    total: int
    test_fraction: float
    test_seed: int
    def __init__(self, source: _Optional[str] = ..., shard: _Optional[int] = ..., num_shards: _Optional[int] = ..., seed: _Optional[int] = ..., size: _Optional[int] = ..., path: _Optional[str] = ..., format: _Optional[str] = ..., partition: _Optional[str] = ..., sizes: _Optional[_Iterable[int]] = ..., shards: _Optional[_Iterable[int]] = ..., total: _Optional[int] = ..., test_fraction: _Optional[float] = ..., test_seed: _Optional[int] = ...) -> None: ...

class Weight(_message.Message):
    __slots__ = ("peer", "weight")
    PEER_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    peer: str
    weight: float
    def __init__(self, peer: _Optional[str] = ..., weight: _Optional[float] = ...) -> None: ...

class Neighbourhood(_message.Message):
    __slots__ = ("out_peers", "in_peers", "weights")
    OUT_PEERS_FIELD_NUMBER: _ClassVar[int]
    IN_PEERS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    out_peers: _containers.RepeatedScalarFieldContainer[str]
    in_peers: _containers.RepeatedScalarFieldContainer[str]
    weights: _containers.RepeatedCompositeFieldContainer[Weight]
    def __init__(self, out_peers: _Optional[_Iterable[str]] = ..., in_peers: _Optional[_Iterable[str]] = ..., weights: _Optional[_Iterable[_Union[Weight, _Mapping]]] = ...) -> None: ...

class PeerAddress(_message.Message):
    __slots__ = ("id", "address")
    ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    id: str
    address: str
    def __init__(self, id: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class LinkFault(_message.Message):
    __slots__ = ("receiver", "start", "stop", "drop", "seed")
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    receiver: str
    start: int
    stop: int
    drop: float
    seed: int
    def __init__(self, receiver: _Optional[str] = ..., start: _Optional[int] = ..., stop: _Optional[int] = ..., drop: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class ConfigureReply(_message.Message):
    __slots__ = ("next_round", "resumed", "samples_stored", "data")
    NEXT_ROUND_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_STORED_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    next_round: int
    resumed: bool
    samples_stored: int
    data: DataConfig
    def __init__(self, next_round: _Optional[int] = ..., resumed: _Optional[bool] = ..., samples_stored: _Optional[int] = ..., data: _Optional[_Union[DataConfig, _Mapping]] = ...) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class StopRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LinkStats(_message.Message):
    __slots__ = ("peer", "sent", "received", "withheld", "dropped", "send_errors", "late", "rejected", "last_error", "max_staleness", "overruns", "bytes", "pending_received", "pending_withheld", "pending_bytes", "screened", "resent")
    PEER_FIELD_NUMBER: _ClassVar[int]
    SENT_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SEND_ERRORS_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    MAX_STALENESS_FIELD_NUMBER: _ClassVar[int]
    OVERRUNS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    PENDING_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    PENDING_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    PENDING_BYTES_FIELD_NUMBER: _ClassVar[int]
    SCREENED_FIELD_NUMBER: _ClassVar[int]
    RESENT_FIELD_NUMBER: _ClassVar[int]
    peer: str
    sent: int
    received: int
    withheld: int
    dropped: int
    send_errors: int
    late: int
    rejected: int
    last_error: str
    max_staleness: int
    overruns: int
    bytes: int
    pending_received: int
    pending_withheld: int
    pending_bytes: int
    screened: int
    resent: int
    def __init__(self, peer: _Optional[str] = ..., sent: _Optional[int] = ..., received: _Optional[int] = ..., withheld: _Optional[int] = ..., dropped: _Optional[int] = ..., send_errors: _Optional[int] = ..., late: _Optional[int] = ..., rejected: _Optional[int] = ..., last_error: _Optional[str] = ..., max_staleness: _Optional[int] = ..., overruns: _Optional[int] = ..., bytes: _Optional[int] = ..., pending_received: _Optional[int] = ..., pending_withheld: _Optional[int] = ..., pending_bytes: _Optional[int] = ..., screened: _Optional[int] = ..., resent: _Optional[int] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ("node_id", "experiment", "state", "round", "error", "samples_stored", "outbound", "inbound", "program_metrics", "holding", "peers_down", "refused_streams", "denied_peer_streams", "denied_control_calls", "run_id", "refused")
    class ProgramMetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class RefusedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_STORED_FIELD_NUMBER: _ClassVar[int]
    OUTBOUND_FIELD_NUMBER: _ClassVar[int]
    INBOUND_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_METRICS_FIELD_NUMBER: _ClassVar[int]
    HOLDING_FIELD_NUMBER: _ClassVar[int]
    PEERS_DOWN_FIELD_NUMBER: _ClassVar[int]
    REFUSED_STREAMS_FIELD_NUMBER: _ClassVar[int]
    DENIED_PEER_STREAMS_FIELD_NUMBER: _ClassVar[int]
    DENIED_CONTROL_CALLS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    experiment: str
    state: NodeState
    round: int
    error: str
    samples_stored: int
    outbound: _containers.RepeatedCompositeFieldContainer[LinkStats]
    inbound: _containers.RepeatedCompositeFieldContainer[LinkStats]
    program_metrics: _containers.ScalarMap[str, float]
    holding: bool
    peers_down: _containers.RepeatedScalarFieldContainer[str]
    refused_streams: int
    denied_peer_streams: int
    denied_control_calls: int
    run_id: str
    refused: _containers.ScalarMap[str, int]
    def __init__(self, node_id: _Optional[str] = ..., experiment: _Optional[str] = ..., state: _Optional[_Union[NodeState, str]] = ..., round: _Optional[int] = ..., error: _Optional[str] = ..., samples_stored: _Optional[int] = ..., outbound: _Optional[_Iterable[_Union[LinkStats, _Mapping]]] = ..., inbound: _Optional[_Iterable[_Union[LinkStats, _Mapping]]] = ..., program_metrics: _Optional[_Mapping[str, float]] = ..., holding: _Optional[bool] = ..., peers_down: _Optional[_Iterable[str]] = ..., refused_streams: _Optional[int] = ..., denied_peer_streams: _Optional[int] = ..., denied_control_calls: _Optional[int] = ..., run_id: _Optional[str] = ..., refused: _Optional[_Mapping[str, int]] = ...) -> None: ...

class SamplesRequest(_message.Message):
    __slots__ = ("offset", "follow", "experiment", "node_id", "run_id")
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    offset: int
    follow: bool
    experiment: str
    node_id: str
    run_id: str
    def __init__(self, offset: _Optional[int] = ..., follow: _Optional[bool] = ..., experiment: _Optional[str] = ..., node_id: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class Sample(_message.Message):
    __slots__ = ("index", "round", "value")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    index: int
    round: int
    value: _tensor_pb2.Tensor
    def __init__(self, index: _Optional[int] = ..., round: _Optional[int] = ..., value: _Optional[_Union[_tensor_pb2.Tensor, _Mapping]] = ...) -> None: ...

class SampleBatch(_message.Message):
    __slots__ = ("samples",)
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    samples: _containers.RepeatedCompositeFieldContainer[Sample]
    def __init__(self, samples: _Optional[_Iterable[_Union[Sample, _Mapping]]] = ...) -> None: ...

class SetLinkRequest(_message.Message):
    __slots__ = ("receiver", "up", "drop", "delay_ms", "run_id")
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    UP_FIELD_NUMBER: _ClassVar[int]
    DROP_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    receiver: str
    up: bool
    drop: float
    delay_ms: float
    run_id: str
    def __init__(self, receiver: _Optional[str] = ..., up: _Optional[bool] = ..., drop: _Optional[float] = ..., delay_ms: _Optional[float] = ..., run_id: _Optional[str] = ...) -> None: ...

class HoldRequest(_message.Message):
    __slots__ = ("round", "run_id")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    round: int
    run_id: str
    def __init__(self, round: _Optional[int] = ..., run_id: _Optional[str] = ...) -> None: ...

class PeerDownRequest(_message.Message):
    __slots__ = ("peer", "down", "run_id")
    PEER_FIELD_NUMBER: _ClassVar[int]
    DOWN_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    peer: str
    down: bool
    run_id: str
    def __init__(self, peer: _Optional[str] = ..., down: _Optional[bool] = ..., run_id: _Optional[str] = ...) -> None: ...

class CheckpointRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CheckpointReply(_message.Message):
    __slots__ = ("next_round",)
    NEXT_ROUND_FIELD_NUMBER: _ClassVar[int]
    next_round: int
    def __init__(self, next_round: _Optional[int] = ...) -> None: ...
