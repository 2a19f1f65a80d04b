"""The node service: gRPC servicers, the lifecycle, outbound links, the sample store.

Modules, each with one job:

* :mod:`~node.runtime.transport` — every gRPC option (sizes, keepalive, credentials);
* :mod:`~node.runtime.server` — the server: Control, Peer and health, one shutdown path;
* :mod:`~node.runtime.servicers` — protobuf ↔ runtime calls, errors ↔ status codes;
* :mod:`~node.runtime.runtime` — the lifecycle (:mod:`~node.runtime.state`), running rounds
  with the round engine (:mod:`node.engine`), checkpoints;
* :mod:`~node.runtime.run` — one configured run: program, store, links, inbox, counters;
* :mod:`~node.runtime.network` — the network transport of the round engine: links + inbox;
* :mod:`~node.runtime.inbox` — buffering arrivals and waiting for them with a deadline;
* :mod:`~node.runtime.links` — one persistent stream per outbound link, live link state;
* :mod:`~node.runtime.checks` — validating the spec and what peers send;
* :mod:`~node.runtime.store`, :mod:`~node.runtime.checkpoint` — what survives a crash;
* :mod:`~node.runtime.streaming` — samples out of the store, in batches, following a run.
"""
