"""Matplotlib for the report: imported only here, on demand, with one readable style.

Plotting is the optional ``plots`` extra; without matplotlib the report is written with
its tables only (:func:`pyplot` returns None) and says so.
"""

from __future__ import annotations

import base64
import io
from typing import Any

__all__ = ["NODE_COLOURS", "data_uri", "pyplot"]

NODE_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
)
"""One colour per node (matplotlib's tab10, cycled), the same in every figure."""

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
}


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


def data_uri(figure: Any) -> str:
    """The figure as an embedded PNG (``data:image/png;base64,...``); the figure is closed."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def colour(index: int) -> str:
    return NODE_COLOURS[index % len(NODE_COLOURS)]
