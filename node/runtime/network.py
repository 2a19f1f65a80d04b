"""The network transport: a node's outbound links and its inbox, as the round engine sees them.

:class:`NetworkTransport` implements :class:`starling.node.engine.transport.Transport` for a gRPC
node: ``send``/``withhold`` go to the receiver's outbound link (:mod:`starling.node.runtime.links`,
which never blocks the round loop), ``gather`` takes from the inbox
(:mod:`starling.node.runtime.inbox`) with real clocks. On the node's event loop the round
loop awaits the inbox's answer before it gathers (:meth:`Inbox.ready
<starling.node.runtime.inbox.Inbox.ready>`), so a gather then returns at once. The round
itself, and every decision a fault schedule makes, is the engine's
(:mod:`starling.node.engine.rounds`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from starling.node.engine.transport import Gather
from starling.node.messages import Message
from starling.node.runtime.event_loop import NodeLoop
from starling.node.runtime.feed import SharedIterate
from starling.node.runtime.inbox import Inbox
from starling.node.runtime.links import LinkState, OutboundLink, close_links
from starling.node.runtime.stats import StatsBook
from starling.node.runtime.transport import ChannelSettings
from starling.node.spec import NodeSpec

__all__ = ["Links", "NetworkTransport"]


class NetworkTransport:
    """One gRPC node's end of the network (a :class:`~starling.node.engine.transport.Transport`)."""

    def __init__(self, links: Links, inbox: Inbox):
        self.links = links
        self.inbox = inbox

    def send(self, round_index: int, phase: int, receiver: str, message: Message) -> None:
        self.links.send(round_index, phase, receiver, message)

    def withhold(self, round_index: int, phase: int, receiver: str) -> None:
        self.links.withhold(round_index, phase, receiver)

    def gather(
        self, round_index: int, phase: int, expected: Sequence[str], wait: Gather
    ) -> dict[str, Message]:
        bound = wait.max_staleness
        if not wait.synchronous and bound is None:
            return self.inbox.latest(expected, round_index)
        if wait.deadline is None:
            raise ValueError("a network gather that waits needs a deadline")
        if wait.synchronous or bound is None:
            return self.inbox.wait(round_index, phase, expected, wait.deadline)
        return self.inbox.wait_latest(expected, round_index, bound, wait.deadline)


class Links:
    """All of one node's outbound links, created at Configure, closed at shutdown.

    ``replay_before``: a process resumed from its predecessor's resume point sends the
    rounds before this again, which the predecessor began to send (its
    :class:`~starling.node.runtime.resume.SendingMark`) and may have counted; they go out
    marked ``resent`` (a receiver that has one already ignores it; one that has not takes
    it) and are counted ``resent``, not ``sent``, so the run's books, which add up every
    process's, count each such message once. Were one never sent before, the receiver's
    count says so (:func:`starling.orchestrator.results.link_books.link_summary`).
    ``mark_sending``: called with a round before its first message is handed to a link.
    ``loop``: the node's event loop, where the links run (None: one of their own, closed
    with them)."""

    def __init__(
        self,
        spec: NodeSpec,
        stats: StatsBook,
        channel: ChannelSettings | None = None,
        link_factory: Callable[..., OutboundLink] = OutboundLink,
        replay_before: int = 0,
        mark_sending: Callable[[int], None] | None = None,
        loop: NodeLoop | None = None,
    ):
        self.spec = spec
        self._own_loop = loop is None
        self._loop = loop if loop is not None else NodeLoop(f"links-{spec.node_id}")
        self.replay_before = replay_before
        self._mark_sending = mark_sending
        self._stats = stats
        self._channel = channel or ChannelSettings()
        self._factory = link_factory
        self._lock = threading.Lock()
        self._links: dict[str, OutboundLink] = {}
        self._default = LinkState()
        # The message last sent, checked and encoded once for all the links it goes to.
        self._last: SharedIterate | None = None
        for receiver in spec.out_peers():
            self._link(receiver)

    def _link(self, receiver: str) -> OutboundLink:
        with self._lock:
            link = self._links.get(receiver)
            if link is None:
                address = self.spec.peers.get(receiver, "")
                if not address:
                    raise RuntimeError(
                        f"node {self.spec.node_id!r} sends to {receiver!r}, "
                        "which has no address in peers"
                    )
                link = self._factory(
                    self.spec, receiver, address, self._stats, self._channel, loop=self._loop
                )
                link.state = LinkState(**vars(self._default))
                self._links[receiver] = link
            return link

    def send(self, round_index: int, phase: int, receiver: str, message: Message) -> None:
        """Queue ``message`` on ``receiver``'s link. The round engine sends one message to
        each receiver in turn, most often the same one (a broadcast): the links it goes to
        share its finite check and its encoding (:class:`SharedIterate`)."""
        if self._mark_sending is not None:
            self._mark_sending(round_index)
        link = self._link(receiver)
        last = self._last
        if last is None or not last.serves(message, round_index, phase):
            last = self._last = link.shared(round_index, phase, message)
        link.send(round_index, phase, message, last, round_index < self.replay_before)

    def withhold(self, round_index: int, phase: int, receiver: str) -> None:
        if self._mark_sending is not None:
            self._mark_sending(round_index)
        self._link(receiver).withhold(round_index, phase, round_index < self.replay_before)

    def set_state(
        self,
        receiver: str,
        up: bool | None = None,
        drop: float | None = None,
        delay_ms: float | None = None,
    ) -> None:
        """Change live link state; ``receiver="*"`` means every link, present and future."""
        with self._lock:
            if receiver == "*":
                targets = list(self._links.values())
                self._default = _updated(self._default, up, drop, delay_ms)
            else:
                targets = [self._links[receiver]]
        for link in targets:
            # Replace, never mutate: the round loop reads the state without a lock.
            link.state = _updated(link.state, up, drop, delay_ms)

    def states(self) -> dict[str, LinkState]:
        with self._lock:
            return {receiver: link.state for receiver, link in self._links.items()}

    def knows(self, receiver: str) -> bool:
        with self._lock:
            return receiver in self._links

    def close(self) -> None:
        """Close every link together (each may wait a little for its queue to drain)."""
        with self._lock:
            links = list(self._links.values())
        close_links(links)
        if self._own_loop:
            self._loop.close()


def _updated(
    state: LinkState, up: bool | None, drop: float | None, delay_ms: float | None
) -> LinkState:
    return LinkState(
        up=state.up if up is None else bool(up),
        drop=state.drop if drop is None else float(drop),
        delay_ms=state.delay_ms if delay_ms is None else float(delay_ms),
    )
