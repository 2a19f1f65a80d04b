"""``starling report RESULTS_DIR``: one self-contained ``report.html`` per results folder.

For a run (``run``, ``simulate`` or ``collect``): metric against round per node and for
the network average with ±1 sd bands over chains; every node's samples against the exact
posterior (marginals, 2-D scatter with the posterior's sd ellipses); the topology with
each one-way link coloured by what became of its messages; faults on a timeline of rounds;
every figure of ``metrics.json`` as tables; the account; the experiment file as run; at
the top, the run's verdict. For a study: one page comparing all cells. ``run``, ``simulate``
and studies write it at the end. Figures are matplotlib PNGs embedded in the page (the
``plots`` extra; the node never imports this package); ``starling report DIR --figures OUT``
also writes each one as ``OUT/<name>.svg`` and ``OUT/<name>.png``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from starling.node.params import ConfigError

__all__ = ["is_study_folder", "with_report", "write_report"]


def is_study_folder(folder: Path) -> bool:
    return (Path(folder) / "study.yaml").is_file() and (Path(folder) / "table.csv").is_file()


def write_report(folder: str | Path, figures: str | Path | None = None) -> Path:
    """Write ``report.html`` into the results folder; returns its path. ``figures``: a
    folder to write every figure into as well, one SVG and one PNG each."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"report: {folder} is not a folder")
    target = _figures_folder(figures)
    from starling.orchestrator.report.plotting import exporting

    with exporting(target):
        return _write(folder)


def _figures_folder(figures: str | Path | None) -> Path | None:
    """``--figures``: a folder that is one, or can be made."""
    if figures is None:
        return None
    target = Path(figures)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"--figures: {target} is a file, not a folder")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--figures: cannot make {target} ({exc.strerror or exc})") from None
    return target


def _write(folder: Path) -> Path:
    if is_study_folder(folder):
        from starling.orchestrator.report.study_page import write_study_report

        return write_study_report(folder)
    if not (folder / "metrics.json").is_file():
        raise ConfigError(
            f"report: {folder} has no metrics.json; a run's or a study's results folder is "
            "needed (for a run whose orchestrator died: starling collect first)"
        )
    from starling.orchestrator.report.run_page import write_run_report

    return write_run_report(folder)


def with_report(
    work: Callable[[Path], object], say: Callable[[str], None], enabled: bool = True
) -> Callable[[Path], object]:
    """``work`` (a run, simulation or study writing a results folder), then that folder's
    ``report.html``. A report that cannot be written is one line saying why: the run's
    results stand without it."""

    def both(out: Path) -> object:
        result = work(out)
        if enabled:
            try:
                say(f"report: {write_report(out)}")
            except Exception as exc:  # noqa: BLE001 - never lose a run over its pictures
                say(f"report: not written ({type(exc).__name__}: {exc})")
        return result

    return both
