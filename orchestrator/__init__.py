"""Starling orchestrator: provision nodes, inject faults, collect samples, evaluate."""

import starling.node  # noqa: F401 - first, so that its BLAS thread setting precedes any numpy import
