"""The HTML page: one self-contained file, figures embedded as PNG data, no script, no
network. Shared by the run report and the study report.

Nothing on it may be wider than the page: tables sit in boxes that scroll sideways when a
table must be wider than the text (:mod:`starling.orchestrator.report.tables`), long words
and paths wrap, figures shrink to the width. ``tests/test_report_render_e2e.py`` measures
every element in a browser. At the top, under the title, a run's verdict
(:mod:`starling.orchestrator.report.verdict`).
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass

__all__ = ["Section", "figure_html", "page"]

_CSS = """
*, *::before, *::after { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1280px; padding: 1.5em 2em; color: #1a1a1a; line-height: 1.45; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; overflow-wrap: anywhere; }
h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
h3 { margin: 1.2em 0 0.3em; font-size: 1.05em; }
.meta, figcaption, p, li, code { overflow-wrap: anywhere; }
.meta { color: #555; } .status { font-weight: bold; padding: 0.1em 0.5em; border-radius: 4px; }
.status-complete { background: #d9f2d9; } .status-partial { background: #fff1c2; }
.status-failed, .status-interrupted { background: #f8d0d0; }
.verdict { border: 2px solid #555; border-radius: 6px; padding: 0.6em 1em; margin: 1em 0; }
.verdict h2 { margin-top: 0; border: none; font-size: 1.25em; }
.verdict ul { margin: 0.3em 0; padding-left: 1.3em; }
.verdict .note { color: #555; font-size: 0.9em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.verdict-converged { border-color: #3a8a3a; background: #f0faf0; }
.verdict-not-converged { border-color: #b07d00; background: #fffaea; }
.verdict-diverged { border-color: #b03030; background: #fdf0f0; }
figcaption { color: #444; font-size: 0.95em; max-width: 70em; }
.table-box { max-width: 100%; overflow-x: auto; margin: 0.6em 0 1em; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; vertical-align: bottom; min-width: 5em; max-width: 16em;
     overflow-wrap: break-word; }
table.numbers td { font-variant-numeric: tabular-nums; white-space: nowrap; }
table.keyvalue td:first-child { max-width: 30em; }
table.keyvalue td { overflow-wrap: anywhere; }
pre { background: #f7f7f7; padding: 0.8em; font-size: 0.9em; white-space: pre-wrap;
      overflow-wrap: anywhere; }
.note { color: #8a5a00; }
@media print { body { max-width: none; padding: 0; } figure { break-inside: avoid; } }
"""


@dataclass
class Section:
    title: str
    body: str


def figure_html(made, alt: str, name: str = "") -> str:
    """An embedded figure (``made`` is (data URI, caption)) or nothing; ``name``: the file
    name it is exported under (``--figures``), given as its id on the page."""
    if made is None:
        return ""
    uri, caption = made
    anchor = f' id="figure-{html.escape(name)}"' if name else ""
    return (
        f'<figure{anchor}><img src="{uri}" alt="{html.escape(alt)}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def page(
    title: str, status: str | None, meta: str, sections: list[Section], verdict: str = ""
) -> str:
    """The page; ``verdict``: the HTML of the run's verdict, shown first."""
    badge = (
        f' <span class="status status-{html.escape(status)}">{html.escape(status)}</span>'
        if status
        else ""
    )
    made = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}{badge}</h1>",
        f'<p class="meta">{meta} · report written {made} by <code>starling report</code></p>',
        verdict,
    ]
    for section in sections:
        if section.body:
            parts.append(f"<h2>{html.escape(section.title)}</h2>{section.body}")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
