"""How a run or simulation that ended before it wrote its results leaves its folder.

* Interrupted (Ctrl-C or SIGTERM) after a networked run's rounds were collected but before
  ``metrics.json`` was written — while the samples were evaluated, say — the manifest is left
  ``running`` and the last line says ``starling collect DIR`` recovers the samples: the nodes'
  stores still hold them all (a local run releases its stores only once the results read back
  equal). Before, the folder was marked ``interrupted`` with no samples in it, and ``collect``
  refused it: every sample of the run was out of reach of every command.
* A results folder that cannot be written: :mod:`starling.orchestrator.results.unwritable`.
* Anything else: ``metrics.json`` and ``summary.txt`` say how it ended (unless the run wrote
  its own), and the manifest lists the files.
"""

from __future__ import annotations

from starling.orchestrator.core import phases
from starling.orchestrator.results.folder import ResultsFolder
from starling.orchestrator.results.start_record import START
from starling.orchestrator.results.unwritable import unwritable
from starling.orchestrator.results.write import write_failure

__all__ = ["InterruptedBeforeResults", "ended_early"]


class InterruptedBeforeResults(KeyboardInterrupt):
    """Interrupted with the samples still in the nodes' stores (exit 130, one line)."""


def ended_early(folder: ResultsFolder, name: str, exc: BaseException) -> BaseException:
    """Record how the work in ``folder`` ended with ``exc``; returns what to raise."""
    if (unwritable_error := unwritable(folder.path, exc)) is not None:
        return unwritable_error  # the manifest stays running: collect recovers
    interrupted = isinstance(exc, KeyboardInterrupt)
    started = (folder.path / START).is_file()  # the nodes were handed the run
    if interrupted and started and not (folder.path / "metrics.json").exists():
        return InterruptedBeforeResults(
            f"interrupted {phases.during()}, before the results were written; `starling collect "
            f"{folder.path}` recovers every sample the nodes stored"
        )
    status = "interrupted" if interrupted else "failed"
    error = "interrupted by the user" if interrupted else str(exc) or type(exc).__name__
    write_failure(folder.path, name, status, error)
    folder.end(status)
    return exc
