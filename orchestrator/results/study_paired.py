"""A study's comparisons, paired by seed: ``paired.csv`` and the paired sections of
``table.md``.

Every cell and variant of a study runs on the same seeds (seed + r, and the same data seed),
so two of them are compared run by run: each variant minus the study's ``baseline`` variant
within a cell, and each cell minus the first cell for one variant (e.g. 25 agents minus 5),
as ``mean ± 95 % t interval`` of the per-seed differences
(:func:`starling.orchestrator.evaluation.replicates.paired_difference`). Two runs pair only
when their seed index, seed and data seed all agree; a cell or variant that sets a seed of
its own is compared unpaired (Welch), and the table says so. The first iteration below a
threshold is not differenced: a censored time has no per-seed difference when either run
never got there; its censored summaries (``table.md``) are what compare.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from starling.orchestrator.config.study import FIRST_BELOW, Study
from starling.orchestrator.evaluation.replicates import Difference, paired_difference
from starling.orchestrator.results.write import csv_cell

__all__ = ["paired_lines", "paired_rows", "write_paired"]


def _by_seed(rows: Sequence[Mapping], key: str) -> dict[int, tuple[tuple, float | None]]:
    """seed index -> ((seed, data seed), the figure) of ``rows``."""
    return {int(r["seed_index"]): ((r.get("seed"), r.get("data_seed")), r.get(key)) for r in rows}


def _compare(
    rows: Sequence[Mapping], keys: Sequence[str], mine: dict, theirs: dict
) -> dict[str, Difference | None]:
    """Per figure, the rows matching ``mine`` minus those matching ``theirs``."""
    a = [r for r in rows if all(r[k] == v for k, v in mine.items())]
    b = [r for r in rows if all(r[k] == v for k, v in theirs.items())]
    return {key: paired_difference(_by_seed(a, key), _by_seed(b, key)) for key in keys}


def comparisons(study: Study, rows: Sequence[Mapping], keys: Sequence[str]) -> list[dict]:
    """Every comparison: ``{"kind", "cell", "variant", "minus", "figures": {key: Difference}}``
    for each variant against the baseline in each cell, then each cell against the first
    for each variant."""
    keys = [k for k in keys if k != FIRST_BELOW]
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    out = []
    if study.baseline in variants:
        for cell in cells:
            for variant in variants:
                if variant == study.baseline:
                    continue
                found = _compare(
                    rows,
                    keys,
                    {"cell": cell, "variant": variant},
                    {"cell": cell, "variant": study.baseline},
                )
                out.append(
                    {
                        "kind": "variant",
                        "cell": cell,
                        "variant": variant,
                        "minus": study.baseline,
                        "figures": found,
                    }
                )
    if len(cells) > 1:
        first = cells[0]
        for variant in variants:
            for cell in cells[1:]:
                found = _compare(
                    rows,
                    keys,
                    {"cell": cell, "variant": variant},
                    {"cell": first, "variant": variant},
                )
                out.append(
                    {
                        "kind": "cell",
                        "cell": cell,
                        "variant": variant,
                        "minus": first,
                        "figures": found,
                    }
                )
    return out


def paired_rows(study: Study, rows: Sequence[Mapping], keys: Sequence[str]) -> list[dict]:
    """``paired.csv``'s rows: one per comparison and figure with a value."""
    out = []
    for c in comparisons(study, rows, keys):
        for key, got in c["figures"].items():
            if got is None:
                continue
            out.append(
                {
                    "kind": c["kind"],
                    "cell": c["cell"],
                    "variant": c["variant"],
                    "minus": c["minus"],
                    "figure": key,
                    "difference": got.mean,
                    "ci": got.half,
                    "pairs": got.n,
                    "paired": got.paired,
                }
            )
    return out


def write_paired(out: Path, study: Study, rows: Sequence[Mapping], keys: Sequence[str]) -> None:
    """``out/paired.csv`` (nothing written with one run per cell and variant)."""
    found = paired_rows(study, rows, keys) if study.seeds > 1 else []
    if not found:
        return
    with open(out / "paired.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(found[0]))
        writer.writeheader()
        for row in found:
            writer.writerow({k: csv_cell(v) for k, v in row.items()})


def paired_lines(
    study: Study, rows: Sequence[Mapping], keys: Sequence[str], title: Any
) -> list[str]:
    """``table.md``'s paired sections (none with one seed): a table per kind of comparison,
    the figures ``keys`` as columns (titled by ``title(key)``)."""
    if study.seeds < 2:
        return []
    keys = [k for k in keys if k != FIRST_BELOW]
    found = comparisons(study, rows, keys)
    lines: list[str] = []
    heads = {
        "variant": f"Each variant minus {study.baseline}, in the same cell and seed",
        "cell": "Each cell minus the first, for the same variant and seed",
    }
    for kind, head in heads.items():
        mine = [c for c in found if c["kind"] == kind]
        if not mine:
            continue
        unpaired = any(d is not None and not d.paired for c in mine for d in c["figures"].values())
        lines += [
            "",
            f"{head}: mean ± 95 % Student-t interval of the per-seed differences"
            + (
                " (unpaired: Welch's interval where runs do not share their seeds)"
                if unpaired
                else ""
            )
            + ".",
            "",
            "| cell | variant | minus | " + " | ".join(title(k) for k in keys) + " |",
            "|---" * (len(keys) + 3) + "|",
        ]
        for c in mine:
            cells = ["–" if c["figures"][k] is None else c["figures"][k].text() for k in keys]
            lines.append(
                f"| {c['cell']} | {c['variant']} | {c['minus']} | " + " | ".join(cells) + " |"
            )
    return lines
