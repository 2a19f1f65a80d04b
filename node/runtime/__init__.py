"""The node service: gRPC servicers, the lifecycle, outbound links, the sample store.

Modules, each with one job:

* :mod:`~starling.node.runtime.transport` — every gRPC option (sizes, keepalive, credentials);
* :mod:`~starling.node.runtime.server` — the server: Control, Peer and health, one shutdown path;
* :mod:`~starling.node.runtime.doors` — every service's own threads, limits and refusals;
* :mod:`~starling.node.runtime.gate` — who may call Control and open a Peer stream;
* :mod:`~starling.node.runtime.link_proof` — a Peer stream's proof of its link's secret;
* :mod:`~starling.node.runtime.servicers` — protobuf ↔ runtime calls, errors ↔ status codes;
* :mod:`~starling.node.runtime.runtime` — the lifecycle (``NodeState`` of
  :mod:`~starling.node.protocol.contract`), running rounds with the round engine
  (:mod:`starling.node.engine`), checkpoints;
* :mod:`~starling.node.runtime.run` — one configured run: program, store, links, inbox, counters;
* :mod:`~starling.node.runtime.network` — the network transport of the round engine: links + inbox;
* :mod:`~starling.node.runtime.inbox` — buffering arrivals and waiting for them with a deadline;
* :mod:`~starling.node.runtime.links` — one persistent stream per outbound link, live link state;
* :mod:`~starling.node.runtime.clock` — the clock deadlines are read and waited on (a test's own);
* :mod:`~starling.node.runtime.checks` — validating the spec and what peers send;
* :mod:`~starling.node.runtime.screening` — the bound the values peers send are held to;
* :mod:`~starling.node.runtime.store`, :mod:`~starling.node.runtime.checkpoint` — what survives a
  crash;
* :mod:`~starling.node.runtime.streaming` — samples out of the store, in batches, following a run.
"""
