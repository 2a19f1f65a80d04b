from starling.node.protocol.starling.v1 import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Iterate(_message.Message):
    __slots__ = ("experiment", "sender", "receiver", "round", "phase", "kind", "tensors", "withheld", "resent", "chunk", "more", "proof")
    EXPERIMENT_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECEIVER_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    WITHHELD_FIELD_NUMBER: _ClassVar[int]
    RESENT_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    experiment: str
    sender: str
    receiver: str
    round: int
    phase: int
    kind: str
    tensors: _containers.RepeatedCompositeFieldContainer[_tensor_pb2.Tensor]
    withheld: bool
    resent: bool
    chunk: bytes
    more: bool
    proof: str
    def __init__(self, experiment: _Optional[str] = ..., sender: _Optional[str] = ..., receiver: _Optional[str] = ..., round: _Optional[int] = ..., phase: _Optional[int] = ..., kind: _Optional[str] = ..., tensors: _Optional[_Iterable[_Union[_tensor_pb2.Tensor, _Mapping]]] = ..., withheld: _Optional[bool] = ..., resent: _Optional[bool] = ..., chunk: _Optional[bytes] = ..., more: _Optional[bool] = ..., proof: _Optional[str] = ...) -> None: ...

class ExchangeSummary(_message.Message):
    __slots__ = ("received", "rejected")
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    received: int
    rejected: int
    def __init__(self, received: _Optional[int] = ..., rejected: _Optional[int] = ...) -> None: ...
