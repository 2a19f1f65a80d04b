"""Helpers of the operating tests: scraping an endpoint, promtool, a reflection client.

Not a test module. The reflection client is deliberately not the project's stubs: it
learns the services from the node over gRPC reflection (grpcio-reflection's
``ProtoReflectionDescriptorDatabase`` behind a fresh ``DescriptorPool``) and builds its
request and reply classes from what it learnt, as grpcurl does.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import urllib.request

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from prometheus_client.parser import text_string_to_metric_families

IN_CI = os.environ.get("CI") == "true"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(address: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as reply:
        assert reply.status == 200
        return reply.read().decode()


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """(sample name, its labels) -> value, for every sample of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(table: dict, name: str, **labels: str) -> float:
    """The one sample ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in table.items() if n == name and set(labels.items()) <= ls]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


def need(tool: str) -> str:
    """The path of a Debian tool the test needs: skipped without it, failed under CI."""
    path = shutil.which(tool)
    if path is None:
        reason = f"{tool} is not installed (Debian package prometheus; docker/ci-setup.sh)"
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def promtool_check(text: str) -> None:
    """``promtool check metrics`` passes on ``text`` (no lint problem at all)."""
    done = subprocess.run(
        [need("promtool"), "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


class Reflector:
    """A gRPC client that knows nothing of Starling but what the server reflects."""

    def __init__(self, address: str, channel: grpc.Channel | None = None):
        """``channel``: one that carries credentials (a node with TLS or a token answers
        reflection to the orchestrator only)."""
        self.channel = channel or grpc.insecure_channel(address)
        self.database = ProtoReflectionDescriptorDatabase(self.channel)
        self.pool = DescriptorPool(self.database)

    def services(self) -> list[str]:
        return sorted(self.database.get_services())

    def call(self, full_method: str, **fields):
        """Call ``package.Service/Method`` (unary) with a request built from ``fields``."""
        service_name, method_name = full_method.split("/")
        method = self.pool.FindServiceByName(service_name).FindMethodByName(method_name)
        request_class = message_factory.GetMessageClass(method.input_type)
        reply_class = message_factory.GetMessageClass(method.output_type)
        stub = self.channel.unary_unary(
            f"/{full_method}",
            request_serializer=request_class.SerializeToString,
            response_deserializer=reply_class.FromString,
        )
        return stub(request_class(**fields), timeout=10)

    def health(self, service: str = "") -> str:
        """The health status of ``service`` by name, e.g. ``"SERVING"``."""
        reply = self.call("grpc.health.v1.Health/Check", service=service)
        enum = reply.DESCRIPTOR.fields_by_name["status"].enum_type
        return enum.values_by_number[reply.status].name

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> Reflector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
