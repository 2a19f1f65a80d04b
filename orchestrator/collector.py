"""Samples gathered from the nodes over gRPC, per node, with the offset to resume from.

Collection after a restart: a node resumes from its last checkpoint and truncates its
store to the samples that checkpoint counts. If the collector already held samples past
that point (a SIGKILL between a sample and its checkpoint), :meth:`Collector.truncate`
lets them go and the node re-computes them, so the collected chain is always the node's
durable one: every round exactly once, with no gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from starling.orchestrator.client import NodeClient

__all__ = ["Collector"]


@dataclass
class Collector:
    """Samples gathered so far per node, with the offset to resume from."""

    rounds: dict[str, list[int]] = field(default_factory=dict)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def offset(self, node: str) -> int:
        return len(self.rounds.get(node, []))

    def pull(self, node: str, client: NodeClient, stored_run: tuple[str, str] | None = None) -> int:
        """Stream what ``node`` stored past our offset; returns how many samples came.
        ``stored_run`` (experiment, node id) asks an idle process for a run's stored
        samples (:meth:`NodeClient.samples`)."""
        got = 0
        for round_index, value in client.samples(self.offset(node), stored_run=stored_run):
            self.rounds.setdefault(node, []).append(round_index)
            self.values.setdefault(node, []).append(value)
            got += 1
        return got

    def truncate(self, node: str, count: int) -> int:
        """Keep the first ``count`` samples of ``node``; returns how many were let go."""
        extra = max(self.offset(node) - count, 0)
        if extra:
            del self.rounds[node][count:]
            del self.values[node][count:]
        return extra

    def arrays(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        samples = {n: np.stack(v) for n, v in self.values.items() if v}
        rounds = {n: np.asarray(self.rounds[n]) for n in samples}
        return samples, rounds
