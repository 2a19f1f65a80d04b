"""What a run's effective samples cost: ESS per second, per message and per byte sent.

``metrics.json``'s ``efficiency`` puts a run's effective sample size (ESS) beside what it
spent. The ESS is the median over the nodes that record samples of each node's worst bulk
ESS over its diagnosed coordinates (the figure the verdict checks:
:mod:`starling.orchestrator.evaluation.verdict`, ArviZ's rank-normalised bulk ESS over the
draws after burn-in). What was spent comes from the run (``traffic``):

* ``seconds``: wall seconds of sampling — ``simulate``: the in-process rounds of every node
  (one process, so the nodes' compute adds up); ``run``: the run's wall time, start-up
  included, with the nodes working in parallel. Figures from the two engines do not compare.
* ``messages``: messages handed to the links (every node's outbound ``sent``; a message a
  fault withheld is not among them);
* ``bytes``: those messages' tensor payload, as the links count it (``LinkCounters.bytes``;
  framing and TLS not included).

A sampler whose nodes exchange nothing (``kind: none``) has no figure per message or byte.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["efficiency_section"]


def efficiency_section(verdict: Mapping | None, traffic: Mapping | None) -> dict | None:
    """``metrics.json``'s ``efficiency``; None without an ESS (no node was judged) or
    without ``traffic`` (``{"seconds", "messages", "bytes"}``)."""
    if not verdict or not traffic:
        return None
    known = [
        float(node["ess_bulk"])
        for node in (verdict.get("per_node") or {}).values()
        if node.get("ess_bulk") is not None
    ]
    if not known:
        return None
    ess = float(np.median(known))
    seconds = float(traffic.get("seconds") or 0.0)
    messages = int(traffic.get("messages") or 0)
    sent = int(traffic.get("bytes") or 0)
    return {
        "ess_bulk": ess,
        "seconds": seconds,
        "messages": messages,
        "bytes": sent,
        "ess_per_second": ess / seconds if seconds > 0 else None,
        "ess_per_message": ess / messages if messages else None,
        "ess_per_kilobyte": 1000.0 * ess / sent if sent else None,
    }
