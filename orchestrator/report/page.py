"""The HTML page: one self-contained file, figures embedded as PNG data, no script, no
network. Shared by the run report and the study report."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass

__all__ = ["Section", "Verdict", "figure_html", "page"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1280px; padding: 1.5em 2em; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
.meta { color: #555; } .status { font-weight: bold; padding: 0.1em 0.5em; border-radius: 4px; }
.status-complete { background: #d9f2d9; } .status-partial { background: #fff1c2; }
.status-failed, .status-interrupted { background: #f8d0d0; }
.verdict { font-weight: bold; padding: 0.1em 0.5em; border-radius: 4px; }
.verdict-converged { background: #d9f2d9; } .verdict-not-converged { background: #fff1c2; }
.verdict-diverged { background: #f8d0d0; } .reasons { margin: 0.3em 0 0 0; color: #5a3c00; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.95em; max-width: 70em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.95em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; } table.numbers td { font-variant-numeric: tabular-nums; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.9em; }
.note { color: #8a5a00; }
"""


@dataclass
class Section:
    title: str
    body: str


def figure_html(made, alt: str) -> str:
    """An embedded figure (``made`` is (data URI, caption)) or nothing."""
    if made is None:
        return ""
    uri, caption = made
    return (
        f'<figure><img src="{uri}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


@dataclass
class Verdict:
    """The banner's first words: a run's verdict (or a study's count of them) and why."""

    label: str
    """``converged``, ``not converged`` or ``diverged`` (its colour), or a study's count."""
    reasons: list[str]
    css: str = ""
    """The colour's class when ``label`` is not itself a verdict."""


def _verdict_html(verdict: Verdict | None) -> tuple[str, str]:
    """The verdict's badge (first after the title) and the list of its reasons."""
    if verdict is None:
        return "", ""
    css = verdict.css or verdict.label.replace(" ", "-")
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in verdict.reasons)
    badge = f' <span class="verdict verdict-{html.escape(css)}">{html.escape(verdict.label)}</span>'
    return badge, f'<ul class="reasons">{reasons}</ul>' if reasons else ""


def page(
    title: str,
    status: str | None,
    meta: str,
    sections: list[Section],
    verdict: Verdict | None = None,
) -> str:
    """The page; ``verdict`` leads its banner, above the status badge and the title's
    details."""
    badge = (
        f' <span class="status status-{html.escape(status)}">{html.escape(status)}</span>'
        if status
        else ""
    )
    judged, reasons = _verdict_html(verdict)
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}{judged}{badge}</h1>",
        reasons,
        f'<p class="meta">{meta} · report written {made} by <code>starling report</code></p>',
    ]
    for section in sections:
        if section.body:
            parts.append(f"<h2>{html.escape(section.title)}</h2>{section.body}")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
