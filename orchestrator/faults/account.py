"""Accounts of a fault schedule, for the results of ``run`` and ``simulate``.

The schedule itself is parsed by :mod:`starling.orchestrator.faults.schedule`; here it is told back
as records and sentences, and (for ``simulate``, which has no wire) as the link counts the schedule
alone implies.
"""

from __future__ import annotations

from collections import deque

from starling.node.faults import withheld_by_schedule
from starling.node.spec import LinkFault
from starling.orchestrator.faults.schedule import FOREVER, NodeFault

__all__ = ["describe_link_faults", "describe_node_faults", "scheduled_link_counts"]


def _rounds_text(start: int, stop: int, rounds: int) -> str:
    """The rounds a window covers in this run; a window given to end after the run's last
    round (not "until the end") applies up to it, and says so."""
    last = min(stop, rounds) - 1
    text = f"round {start}" if last == start else f"rounds {start}..{last}"
    if rounds < stop < FOREVER:
        text += f" (given as rounds {start}..{stop - 1}: cut at the run's last round)"
    return text


def describe_link_faults(
    links: tuple[tuple[str, LinkFault], ...], rounds: int
) -> list[tuple[dict, str]]:
    """The scheduled link faults as (record, sentence), one per fault as a user wrote it.

    The two directions of a ``both_ways`` fault (same span, drop and seed) are one entry,
    and a fault on every link (``receiver="*"`` on every sender) is one entry too.
    """
    out: list[tuple[dict, str]] = []
    # Each fault's partner found through an index, not by a scan of the faults still to
    # come: a list of 10⁵ one-way faults was 10¹⁰ comparisons.
    taken = [False] * len(links)
    stars: dict[tuple, list[int]] = {}
    reverses: dict[tuple, deque[int]] = {}
    for k, (sender, fault) in enumerate(links):
        if fault.receiver == "*":
            stars.setdefault((fault.start, fault.stop, fault.drop), []).append(k)
        else:
            link = (sender, fault.receiver, fault.start, fault.stop, fault.drop, fault.seed)
            reverses.setdefault(link, deque()).append(k)
    for k, (sender, fault) in enumerate(links):
        if taken[k]:
            continue
        taken[k] = True
        key = (fault.start, fault.stop, fault.drop)
        span = [fault.start, min(fault.stop, rounds)]
        when = _rounds_text(fault.start, fault.stop, rounds)
        how = "down" if fault.drop >= 1.0 else f"fails w.p. {fault.drop:g} per round (seeded)"
        if fault.receiver == "*":
            # Directed links of ``link: all`` carry one seed per sender: still one fault.
            others = [j for j in stars[key] if not taken[j]]
            for j in others:
                taken[j] = True
            senders = [sender] + [links[j][0] for j in others]
            record = {"senders": senders, "receiver": "*", "rounds": span, "drop": fault.drop}
            text = f"every link {how}" if len(senders) > 1 else f"every link out of {sender} {how}"
            out.append((record, f"scheduled: {text}, {when}"))
            continue
        partner = reverses.get((fault.receiver, sender, *key, fault.seed), deque())
        while partner and (taken[partner[0]] or partner[0] < k):
            partner.popleft()
        reverse = partner.popleft() if partner else None
        if reverse is not None:
            taken[reverse] = True
        record = {
            "link": [sender, fault.receiver],
            "both_ways": reverse is not None,
            "rounds": span,
            "drop": fault.drop,
        }
        arrow = "<->" if reverse is not None else "->"
        out.append((record, f"scheduled: link {sender}{arrow}{fault.receiver} {how}, {when}"))
    return out


def describe_node_faults(faults: tuple[NodeFault, ...], rounds: int) -> list[tuple[dict, str]]:
    """The scheduled node kills/restarts as (record, sentence)."""
    out = []
    for fault in faults:
        record = {
            "node": fault.node,
            "kill_at_round": fault.at_round,
            "restart_at_round": fault.restart_round,
        }
        if fault.at_seconds is not None:
            record["kill_at_seconds"] = fault.at_seconds
            record["restart_after_seconds"] = fault.restart_after_seconds
        text = f"scheduled: node {fault.node} killed at round {fault.at_round}"
        if fault.at_seconds is not None:
            text += f" ({fault.at_seconds:g} s)"
        if fault.restart_round is None:
            text += ", not restarted"
        elif fault.restart_round >= rounds:
            text += f", restarted at round {fault.restart_round} (after the run's last round)"
        else:
            text += f", restarted at round {fault.restart_round}"
            if fault.restart_after_seconds is not None:
                text += f" ({fault.restart_after_seconds:g} s later)"
        out.append((record, text))
    return out


def scheduled_link_counts(specs) -> dict[str, dict[str, int]]:
    """``"A->B"`` -> what the schedule alone does to that link, as ``run`` counts it.

    For ``simulate``, which has no wire: one message per round in which B is an out-peer
    of A (exact for the one-phase samplers), ``withheld`` when a scheduled fault (link or
    node) takes it out, ``sent`` and ``delivered`` otherwise; ``dropped`` and ``late`` are
    real-network losses and are zero in-process.
    """
    counts: dict[str, dict[str, int]] = {}
    for spec in specs:
        # Every link the node's schedule has, also one that carried nothing (a node killed
        # at round 0): ``run`` lists each link its node was configured with.
        tallies: dict[str, list[int]] = {receiver: [0, 0] for receiver in spec.out_peers()}
        faults = spec.link_faults
        for round_index in range(spec.rounds):
            for receiver in spec.neighbourhood(round_index).out_peers:
                tally = tallies.setdefault(receiver, [0, 0])
                out = bool(faults) and withheld_by_schedule(
                    faults, spec.node_id, receiver, round_index
                )
                tally[out] += 1
        for receiver, (sent, withheld) in tallies.items():
            counts[f"{spec.node_id}->{receiver}"] = {
                "sent": sent,
                "delivered": sent,
                "withheld": withheld,
                "dropped": 0,
                "late": 0,
            }
    return dict(sorted(counts.items()))
