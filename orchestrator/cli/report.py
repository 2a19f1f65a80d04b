"""``starling report`` and ``starling export``: a results folder as a page, or as ArviZ's
InferenceData."""

from __future__ import annotations

from pathlib import Path

from starling.node.params import ConfigError

__all__ = ["add_commands"]


def cmd_export(args) -> int:
    from starling.orchestrator.report.export import FORMATS, write_netcdf

    if args.format not in FORMATS:
        raise ConfigError(f"--format: unknown format {args.format!r} (use {', '.join(FORMATS)})")
    print(write_netcdf(args.results, args.out, overwrite=args.overwrite))
    return 0


def add_commands(sub) -> None:
    """``starling report RESULTS_DIR`` and ``starling export RESULTS_DIR``."""
    report = sub.add_parser(
        "report",
        help="write report.html (figures and tables, one self-contained page) for a run's "
        "or a study's results folder",
    )
    report.add_argument("results", help="the results folder (of a run, simulation or study)")
    report.add_argument(
        "--figures",
        metavar="FOLDER",
        help="also write every figure into FOLDER (made if need be) as NAME.svg and NAME.png, "
        "one by one, for slides and papers",
    )
    report.set_defaults(handler=cmd_report)
    export = sub.add_parser(
        "export",
        help="write a results folder's samples as ArviZ InferenceData (netcdf): "
        "chains × draws × parameters, node as a coordinate",
    )
    export.add_argument("results", help="the run's results folder")
    export.add_argument("--format", default="netcdf", help="netcdf (the only one)")
    export.add_argument(
        "--out",
        metavar="FILE",
        help="the file to write, in a folder that exists (default: RESULTS/posterior.nc); "
        "never a file of the run itself (samples/, or one its manifest.json lists)",
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="replace FILE if it exists (without it, an existing file is refused)",
    )
    export.set_defaults(handler=cmd_export)


def cmd_report(args) -> int:
    from starling.orchestrator.report import write_report

    print(write_report(Path(args.results), args.figures))
    if args.figures:
        print(f"figures: {args.figures}")
    return 0
