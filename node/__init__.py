"""Starling node: one standalone gRPC service holding private data and running a sampler."""
