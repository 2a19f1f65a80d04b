"""Matplotlib for the report: imported only here, on demand, with one readable style.

Plotting is the optional ``plots`` extra; without matplotlib the report is written with
its tables only (:func:`pyplot` returns None) and says so.

Colours are the Okabe–Ito palette, told apart by readers with any common colour-vision
deficiency; nodes also differ by line style (:func:`dashes`), so a page printed in grey
keeps them apart, and marks are drawn solid enough to survive a printer.

Every figure can be kept as files too: inside :func:`exporting` (``starling report DIR
--figures OUT``) :func:`data_uri` also writes ``OUT/<name>.svg`` and ``OUT/<name>.png``.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

__all__ = [
    "NODE_COLOURS",
    "OUTCOME_COLOURS",
    "colour",
    "dashes",
    "data_uri",
    "exporting",
    "pyplot",
]

NODE_COLOURS = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#000000",  # black
    "#8C6D00",  # the palette's yellow darkened: plain yellow vanishes on white paper
)
"""One colour per node (Okabe & Ito's palette, cycled), the same in every figure."""

OUTCOME_COLOURS = {
    "delivered": "#009E73",
    "late": "#E69F00",
    "withheld": "#0072B2",
    "dropped": "#D55E00",
}
"""What became of a link's messages, in the same palette (hatched too where it matters)."""

_DASHES = ("-", "--", "-.")
"""Three line styles against eight colours: no two of the first 24 nodes share both."""

_STYLE: dict[str, Any] = {
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 10,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "figure.dpi": 100,
    "svg.fonttype": "none",  # text stays text in an exported SVG
}

_EXPORT: ContextVar[Path | None] = ContextVar("figure_export", default=None)


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the Agg backend with the report's style, or None."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    settings: Any = plt.rcParams  # typed with a Literal per key; ours are plain strings
    settings.update(_STYLE)
    return plt


@contextmanager
def exporting(folder: Path | None) -> Iterator[None]:
    """Within the block, every figure drawn is also written into ``folder`` (made if
    needed) as SVG and PNG; None: not."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    token = _EXPORT.set(folder)
    try:
        yield
    finally:
        _EXPORT.reset(token)


def data_uri(figure: Any, name: str = "figure") -> str:
    """The figure as an embedded PNG (``data:image/png;base64,...``); the figure is closed.
    While :func:`exporting`, also ``<name>.svg`` and ``<name>.png`` in that folder."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    folder = _EXPORT.get()
    if folder is not None:
        stem = folder / file_name(name)
        figure.savefig(stem.with_suffix(".svg"), format="svg")
        figure.savefig(stem.with_suffix(".png"), format="png", dpi=200)
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def file_name(name: str) -> str:
    """A figure's name as a file name (letters, digits, ``-``, ``_`` and ``.``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "figure"


def colour(index: int) -> str:
    return NODE_COLOURS[index % len(NODE_COLOURS)]


def dashes(index: int) -> str:
    """A node's line style, so that nodes stay apart in grey print too."""
    return _DASHES[index % len(_DASHES)]
