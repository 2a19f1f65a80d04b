"""The wire protocol: generated stubs (``starling/v1``) and conversions to plain types.

The ``.proto`` sources live in ``protos/starling/v1``; ``python protos/generate.py``
rewrites the stubs here. Everything else in the node and the orchestrator goes through
:mod:`starling.node.protocol.convert`, never through protobuf objects directly.
"""

from __future__ import annotations

__all__ = ["MAX_MESSAGE_BYTES"]

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""gRPC send/receive limit on both ends. The 4 MiB default is too small: the iterates of a
modest neural network (a million float64 parameters times a few chains) exceed it."""
