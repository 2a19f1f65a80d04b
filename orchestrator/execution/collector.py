"""Samples gathered from the nodes over gRPC, per node, with the offset to resume from.

Collection after a restart: a node resumes from its last checkpoint and truncates its
store to the samples that checkpoint counts. If the collector already held samples past
that point (a SIGKILL between a sample and its checkpoint), :meth:`Collector.truncate`
lets them go and the node re-computes them, so the collected chain is always the node's
durable one: every round exactly once, with no gap.

Every sample a node streams is held to what its run's samples are
(:class:`SampleRule`): an array (chains, d) with the run's chains and the d of the node's
earlier samples, for a round after the last one held and before the run's last. A node that
breaks it (a bug, or a node that is not what it claims) raises :class:`MalformedSamples`
naming it and the sample; what came before is kept. Before, one sample of another shape
made the evaluation fail with a traceback after the run, and a node could stream samples
without end into the orchestrator's memory.

At the end of a run every node is collected at once, a thread each (:func:`pull_all`): one
slow or unreachable node no longer holds up the others, one after another, and a run that
was interrupted gives the collection one overall deadline. Each thread streams into a buffer
of its own (:class:`Pull`); the buffers are handed to the collector, in node order, by the
thread that waits for them, so a thread given up on never touches the collector afterwards
and what it had streamed before the deadline is kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from starling.orchestrator.core.errors import MalformedSamples
from starling.orchestrator.execution.client import NodeClient

__all__ = ["Collector", "Outcome", "Pull", "SampleRule", "StoredRun", "pull_all"]


@dataclass(frozen=True)
class SampleRule:
    """What the next samples of one node must be (see module): ``chains`` and ``dim``
    (None: not known yet, any), a round after ``after`` and before ``rounds`` (None: no
    bound)."""

    chains: int | None = None
    dim: int | None = None
    after: int = -1
    rounds: int | None = None

    def check(self, round_index: int, value: np.ndarray, address: str, index: int) -> None:
        """MalformedSamples naming the node at ``address`` and its sample ``index`` unless
        (``round_index``, ``value``) is such a sample."""
        where = f"node at {address}: sample {index} (round {round_index})"
        shape = tuple(value.shape)
        if value.ndim != 2:
            raise MalformedSamples(f"{where} has shape {shape}, not (chains, d)")
        if self.chains is not None and shape[0] != self.chains:
            raise MalformedSamples(f"{where} holds {shape[0]} chains, the run {self.chains}")
        if self.dim is not None and shape[1] != self.dim:
            raise MalformedSamples(f"{where} has d = {shape[1]}, its earlier samples {self.dim}")
        if round_index <= self.after:
            raise MalformedSamples(f"{where} comes after round {self.after}: rounds go forward")
        if self.rounds is not None and round_index >= self.rounds:
            raise MalformedSamples(f"{where} is past the run's {self.rounds} rounds")

    def after_sample(self, round_index: int, value: np.ndarray) -> SampleRule:
        """The rule for the sample after this one."""
        return SampleRule(self.chains, int(value.shape[1]), round_index, self.rounds)


@dataclass
class Collector:
    """Samples gathered so far per node, with the offset to resume from."""

    rounds: dict[str, list[int]] = field(default_factory=dict)
    values: dict[str, list[np.ndarray]] = field(default_factory=dict)
    chains: int | None = None
    """Chains every sample holds (None: not checked)."""
    run_rounds: int | None = None
    """The run's rounds: a sample's round is below it (None: not checked)."""

    def offset(self, node: str) -> int:
        return len(self.rounds.get(node, []))

    def new_pull(self, node: str) -> Pull:
        """A buffer for ``node``'s samples past those held, with the rule they must keep."""
        held, values = self.rounds.get(node), self.values.get(node)
        rule = SampleRule(
            self.chains,
            int(values[-1].shape[-1]) if values else None,
            held[-1] if held else -1,
            self.run_rounds,
        )
        return Pull(self.offset(node), rule=rule)

    def pull(self, node: str, client: NodeClient, stored_run: tuple[str, str] | None = None) -> int:
        """Stream what ``node`` stored past our offset; returns how many samples came.
        ``stored_run`` (experiment, node id) asks an idle process for a run's stored
        samples (:meth:`NodeClient.samples`)."""
        pull = self.new_pull(node)
        try:
            return pull.take(client, stored_run)
        finally:  # what came before a broken stream is kept, as a prefix of the store
            self.adopt(node, pull)

    def adopt(self, node: str, pull: Pull) -> int:
        """Append what ``pull`` streamed for ``node`` (from this collector's offset) and
        close it to further samples; returns how many it held."""
        with pull.lock:
            pull.dropped = True
            self.rounds.setdefault(node, []).extend(pull.rounds)
            self.values.setdefault(node, []).extend(pull.values)
            return len(pull.rounds)

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


@dataclass
class Pull:
    """One node's samples streamed by a thread of its own, from ``offset`` on, into this
    buffer; :func:`pull_all` hands the buffer to the collector. Once ``dropped`` (the
    buffer was handed over), nothing more is kept."""

    offset: int
    rounds: list[int] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    dropped: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    rule: SampleRule = field(default_factory=SampleRule)
    """What the next sample must be (:class:`SampleRule`)."""

    def take(self, client: NodeClient, stored_run: tuple[str, str] | None = None) -> int:
        """Stream what the node stored past what this pull holds (as :meth:`Collector.pull`);
        returns how many samples came. MalformedSamples at the first sample that breaks the
        rule, those before it kept."""
        got = 0
        for round_index, value in client.samples(
            self.offset + len(self.rounds), stored_run=stored_run
        ):
            self.rule.check(round_index, value, client.address, self.offset + len(self.rounds))
            with self.lock:
                if self.dropped:
                    break
                self.rounds.append(round_index)
                self.values.append(value)
                self.rule = self.rule.after_sample(round_index, value)
            got += 1
        return got


@dataclass
class Outcome:
    """How one node's part of :func:`pull_all` ended: its work's ``result`` or ``error``,
    or ``late`` (still at work when the deadline came); ``got`` samples were handed over."""

    got: int = 0
    result: object = None
    error: BaseException | None = None
    late: bool = False


def pull_all(
    collector: Collector,
    work: Mapping[str, Callable[[Pull], object]],
    within: float | None = None,
) -> dict[str, Outcome]:
    """Run ``work[node](pull)`` for every node at once, a daemon thread each, and wait for
    all of them, or ``within`` seconds at most; then hand every node's buffer to
    ``collector`` (also what a late node streamed so far: a prefix of its store, which it
    still holds). Node -> its :class:`Outcome`. A late thread is left to end on its own
    (closing its client ends its call); it no longer keeps anything."""
    pulls = {node: collector.new_pull(node) for node in work}
    ended: dict[str, Outcome] = {}

    def one(node: str) -> None:
        try:
            ended[node] = Outcome(result=work[node](pulls[node]))
        except BaseException as exc:  # noqa: BLE001 - the caller accounts for it
            ended[node] = Outcome(error=exc)

    threads = [
        threading.Thread(target=one, args=(node,), name=f"collect-{node}", daemon=True)
        for node in work
    ]
    for thread in threads:
        thread.start()
    outcomes: dict[str, Outcome] = {}
    try:
        deadline = None if within is None else time.monotonic() + within
        for thread in threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
    finally:  # a second Ctrl-C while waiting keeps what came too
        for node, pull in pulls.items():
            got = collector.adopt(node, pull)  # closed first: the thread keeps nothing more
            outcome = ended.get(node) or Outcome(late=True)
            outcome.got = got
            outcomes[node] = outcome
    return outcomes


@dataclass
class StoredRun:
    """A down node's stored run, streamed at the end from index ``before`` on."""

    node: str
    before: int

    def line(self, collector: Collector, got: int) -> str:
        last = collector.rounds.get(self.node, [])
        held = f"{len(last)} samples (rounds {last[0]}..{last[-1]})" if last else "no samples"
        return (
            f"node {self.node}: down at the end; {held} collected, {got} of them (from "
            f"index {self.before}) streamed by its process started again idle on its state "
            "dir"
        )
