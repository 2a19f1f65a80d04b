"""Starling orchestrator: provision nodes, inject faults, collect samples, evaluate."""
