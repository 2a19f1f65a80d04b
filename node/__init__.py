"""Starling node: one standalone gRPC service holding private data and running a sampler.

BLAS runs on one thread per process unless the environment says otherwise (set here, before
anything imports numpy): a node shares the machine with its peers, and OpenBLAS's default of
a thread per core, in every node and in the orchestrator at once, oversubscribes the cores —
measured on a loaded 2-core machine, one 1000 × 1000 ``eigh`` took 7.1 s with two threads
and 1.1 s with one (docs/performance.md).
"""

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
