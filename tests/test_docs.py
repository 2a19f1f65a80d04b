"""The documentation against the code: the algorithm tables against the registry, and the
README's relative links against the files they point at.

The README and the samplers' page each carry a table of every algorithm with its source,
roles and graph; ``starling algorithms`` prints the same from the registry
(``starling.node.samplers.ALGORITHMS``), which is the truth. A sampler added, renamed or
re-sourced without its row, or a row left behind, fails here. Links inside docs/ are checked
by ``mkdocs build --strict`` in ``make lint``; the README is not part of the site, so its
links are checked here (they must also work on GitHub, from the repository's root).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from starling.node.samplers import ALGORITHMS

ROOT = Path(__file__).resolve().parent.parent
TABLE_PAGES = ("README.md", "docs/samplers/index.md")


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells, split on pipes that are not escaped."""
    inner = line.strip().removeprefix("|").removesuffix("|")
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def algorithm_rows(text: str) -> list[dict[str, str]]:
    """Every row of every table whose header starts ``| algorithm | source | roles | graph``,
    as header -> cell."""
    rows: list[dict[str, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|") or i + 1 >= len(lines):
            continue
        header = _cells(line)
        if header[:4] != ["algorithm", "source", "roles", "graph"]:
            continue
        if not re.fullmatch(r"\|?(\s*:?-+:?\s*\|)+\s*:?-*:?\s*\|?", lines[i + 1].strip()):
            continue
        for row in lines[i + 2 :]:
            if not row.startswith("|"):
                break
            rows.append(dict(zip(header, _cells(row), strict=False)))
    return rows


@pytest.mark.parametrize("page", TABLE_PAGES)
def test_algorithm_table_lists_exactly_the_registry(page: str) -> None:
    rows = algorithm_rows((ROOT / page).read_text(encoding="utf-8"))
    assert rows, f"{page}: no table with the header | algorithm | source | roles | graph |"
    names = [row["algorithm"].strip("`") for row in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"{page}: algorithms listed twice: {duplicates}"
    missing = sorted(set(ALGORITHMS) - set(names))
    extra = sorted(set(names) - set(ALGORITHMS))
    assert not missing, f"{page}: registered algorithms without a row: {missing}"
    assert not extra, f"{page}: rows for algorithms the registry does not have: {extra}"


@pytest.mark.parametrize("page", TABLE_PAGES)
def test_algorithm_table_rows_match_the_registry(page: str) -> None:
    wrong = []
    for row in algorithm_rows((ROOT / page).read_text(encoding="utf-8")):
        info = ALGORITHMS[row["algorithm"].strip("`")]
        stated = (row["source"], tuple(r.strip() for r in row["roles"].split(",")), row["graph"])
        actual = (info.source, info.roles, info.graph)
        if stated != actual:
            wrong.append(f"{info.name}: the table says {stated}, the registry {actual}")
    assert not wrong, f"{page}:\n" + "\n".join(wrong)


def test_algorithm_rows_are_read_from_a_table() -> None:
    """The parser finds rows, so the checks above cannot pass on a page it misreads."""
    text = (
        "| algorithm | source | roles | graph |\n|---|---|---|---|\n"
        "| `x` | [9] eq. 1 | a, b | star |\n| `y` | s | peer | none |\n\nafter\n"
    )
    assert algorithm_rows(text) == [
        {"algorithm": "`x`", "source": "[9] eq. 1", "roles": "a, b", "graph": "star"},
        {"algorithm": "`y`", "source": "s", "roles": "peer", "graph": "none"},
    ]


def relative_links(text: str) -> list[str]:
    """The targets of the Markdown links and images in ``text`` that name a file of the
    repository: no URL scheme, not a bare ``#anchor``; the anchor part is dropped."""
    targets = []
    for target in re.findall(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)", text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_readme_relative_links_point_at_files() -> None:
    links = relative_links((ROOT / "README.md").read_text(encoding="utf-8"))
    assert links, "README.md: no relative link found (the parser is broken?)"
    broken = sorted({link for link in links if not (ROOT / link).exists()})
    assert not broken, f"README.md links to files that do not exist: {broken}"


def test_relative_links_are_found() -> None:
    text = (
        "[a](docs/a.md) [b](docs/b.md#part) [[000] c](docs/c.md) ![i](img.png) "
        '[t](docs/t.md "title") [w](https://example.org/x.md) [s](#section) [m](mailto:x@y)'
    )
    assert relative_links(text) == ["docs/a.md", "docs/b.md", "docs/c.md", "img.png", "docs/t.md"]


def test_the_two_commands_are_on_the_first_screen() -> None:
    """The README is a front page: `make run` and `make test` within its first 15 lines."""
    head = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:15]
    for command in ("make run", "make test"):
        assert any(line.strip().startswith(command) for line in head), command
