"""Studies: one experiment file that expands into a grid of runs, then a table and plots.

A study reproduces a figure: ``variants`` (usually algorithms, the curves of a plot) crossed
with ``cells`` (settings such as topology or link-failure probability, the panels)::

    study: admm-fig1-n5
    base: {model: ..., data: ..., rounds: 100, chains: 100, seed: 7}
    variants:
      - {label: D-ADMMS, algorithm: d-admms, hyperparameters: {rho: 5.0}}
      - {label: D-ULA, algorithm: d-ula, hyperparameters: {...},
         per_cell: {full: {hyperparameters: {...}}}}
    cells:
      - {label: ring, topology: {kind: ring, nodes: 5}}
      - {label: full, topology: {kind: full, nodes: 5}}

Each run's fields are ``base``, then the cell, then the variant, then the variant's
``per_cell`` entry for that cell, merged mapping by mapping. The study writes every run's
results folder under ``<out>/<cell>/<variant>/``, plus ``curves.csv`` (W2 per iteration of
one agent and of the agent average), ``table.csv`` and ``table.md`` (final W2 and consensus
error), and one plot per cell when matplotlib is installed; with ``evaluation.hpd``, also
``hpd_curves.csv`` and ``hpd-<cell>.png`` (:mod:`starling.orchestrator.results.study_plots`).

Replicates and error bars (:mod:`starling.orchestrator.evaluation.replicates`): ``seeds: K``
runs every (cell, variant) K times, with the experiment's ``seed`` (and, with ``vary_data:
true``, ``data.seed`` and a held-out split's ``evaluation.test.seed``) increased by 0 … K−1;
each run's folder is then ``<cell>/<variant>/seed-<r>/``, ``seeds.csv`` holds every run's
figures and ``table.*`` their mean ± a 95 % Student-t interval. ``threshold: 0.3`` adds the
first iteration at which the agent's W2 is ≤ 0.3, summarised as a censored time (a run that
never gets there counts as "more than its iterations", never dropped: Kaplan–Meier median
and restricted mean, and how many got there); ``report_at: [10, 50]`` adds W2 at those
iterations; ``figures: {accuracy: predictive.average.accuracy}`` adds any number from each
run's ``metrics.json`` by its dotted path. Iteration k means k updates. Every variant is
compared with ``baseline`` (default the first variant) and every cell with the first cell,
paired by seed (``paired.csv``, and in ``table.md``). Without ``vary_data`` every seed
samples the same data, and intervals are conditional on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from starling.node.params import ConfigError
from starling.node.shown import shown
from starling.orchestrator.config.experiment import Experiment, parse_experiment
from starling.orchestrator.config.schema import Name, validate
from starling.orchestrator.core.validation import STRICT, Bool, Float, Str

__all__ = [
    "BASE_KEYS",
    "FIRST_BELOW",
    "Study",
    "is_study",
    "load_study",
    "reserved_column",
    "slug",
]

SUMMARIES = ("average", "agent")


def _summary(value: Any) -> str:
    if value not in SUMMARIES:
        raise ValueError(f"expected one of {', '.join(SUMMARIES)}, got {value!r}")
    return value


def _figure_names(value: dict[str, str]) -> dict[str, str]:
    """A figure may not take a column the study already writes: it would show twice, or not
    at all, in the tables (:func:`reserved_column`)."""
    for name in value:
        if reserved_column(name):
            raise ValueError(
                f"{name!r} is a column every study writes already (W2, consensus, "
                "first_below, w2_*_at_k, the run's labels); give this figure another name"
            )
    return value


def _number_as_name(value: Any) -> Any:
    """``study: 3`` names the study "3"; anything else is checked as a name."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


class _Labelled(BaseModel):
    """A cell or a variant: a label, then experiment fields merged over ``base``."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False, frozen=True)
    label: Str
    x: Float | None = None


class _Bars(BaseModel):
    """``bars``: one panel per cell, one bar per variant (mean ± interval over the seeds) of
    the first of ``figures`` the cell has; ``columns`` panels a row."""

    model_config = STRICT
    figures: Annotated[list[Str], Field(min_length=1)]
    columns: Annotated[int, Field(ge=1, strict=True)] = 3


MAX_SEEDS = 1000
"""The most seeds a (cell, variant) runs over: 10^9 was accepted, and the study then spent
hours parsing its runs before the first began."""
MAX_RUNS = 10_000
"""The most runs a study holds, cells × variants × seeds."""


class StudyFile(BaseModel):
    """A study file: the schema of its own fields (the experiment fields it merges are
    checked by the experiment schema, run by run)."""

    model_config = STRICT
    study: Annotated[Name, BeforeValidator(_number_as_name)]
    description: Str = ""
    base: dict[str, Any] = Field(default_factory=dict)
    variants: Annotated[list[_Labelled], Field(min_length=1)]
    cells: Annotated[list[_Labelled], Field(min_length=1)] = [_Labelled(label="all")]
    agent: Annotated[str, BeforeValidator(str)] = "0"
    x_label: Str = ""
    summary: Annotated[Any, AfterValidator(_summary)] = "average"
    seeds: Annotated[int, Field(ge=1, le=MAX_SEEDS, strict=True)] = 1
    vary_data: Bool = False
    threshold: Annotated[Float, Field(gt=0)] | None = None
    report_at: list[Annotated[int, Field(ge=1, strict=True)]] = Field(default_factory=list)
    figures: Annotated[dict[str, Str], AfterValidator(_figure_names)] = Field(default_factory=dict)
    baseline: Str = ""
    bars: _Bars | None = None


@dataclass(frozen=True)
class Study:
    name: str
    description: str
    base: Mapping[str, Any]
    variants: tuple[Mapping[str, Any], ...]
    cells: tuple[Mapping[str, Any], ...]
    agent: str = "0"
    """The node whose curve is reported as "agent" (the paper plots one agent)."""
    x_label: str = ""
    """When every cell has a numeric ``x`` (e.g. a failure probability), the name of that
    axis: the study then also plots and tabulates the final metrics against ``x``."""
    summary: str = "average"
    """Which W2 the table against ``x`` and ``summary.png`` show: of the network-average
    iterate (``average``) or of the ``agent`` node. Use ``agent`` to compare a
    master/worker sampler, whose samples live on one node, with a decentralised one."""
    runs: tuple[tuple[str, str, Experiment], ...] = field(default=())
    """(cell, variant, experiment) of the first seed: one per plotted curve."""
    seeds: int = 1
    """K: every (cell, variant) runs over K seeds; figures are reported as mean ± interval."""
    replicates: tuple[tuple[str, str, int, Experiment], ...] = field(default=())
    """(cell, variant, seed index r, experiment) of every run, r = 0 … K−1."""
    threshold: float | None = None
    report_at: tuple[int, ...] = ()
    figures: Mapping[str, str] = field(default_factory=dict)
    vary_data: bool = False
    """Each seed also redraws the data (``data.seed`` + r): intervals then cover the data."""
    baseline: str = ""
    """The variant every other is compared with, paired by seed (default: the first)."""
    bars: tuple[str, ...] = ()
    """Figures drawn as bars per variant in one panel per cell (``bars.png``): the first
    of them each cell has (a W2 where the posterior is exact, a Sinkhorn distance where it
    is not, a log-loss for a classifier)."""
    bars_columns: int = 3

    @property
    def summary_key(self) -> str:
        return f"w2_{self.summary}"

    @property
    def summary_text(self) -> str:
        return (
            "W2 of the agent average"
            if self.summary == "average"
            else (f"W2 of agent {self.agent}")
        )


def is_study(raw: Any) -> bool:
    return isinstance(raw, Mapping) and "study" in raw


def _merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


_FILE_SUFFIXES = (".csv", ".md", ".json", ".yaml", ".png", ".svg", ".html", ".nc")
"""The kinds of file a study writes beside its cells' folders: a cell named ``table.csv``
ran every run, then could not write the table where its folder was, and kept nothing."""


def _labelled(items: list[_Labelled], where: str) -> tuple[Mapping[str, Any], ...]:
    """The cells' or variants' fields; a label given twice is refused, and so is one whose
    folder (:func:`slug`) another label has: ``a/b`` and ``a-b`` both write to ``a-b/``,
    and the second run's files replaced the first's."""
    folders: dict[str, str] = {}
    for k, item in enumerate(items):
        if not item.label.strip():  # named nothing in the plots' legends, and warned there
            raise ConfigError(f"{where}[{k}].label: expected a label, got {item.label!r}")
        if item.label in folders.values():
            raise ConfigError(f"{where}[{k}].label: {item.label!r} appears twice")
        folder = slug(item.label)
        if folder in folders:
            raise ConfigError(
                f"{where}[{k}].label: {item.label!r} would be written to the folder "
                f"{folder!r}, as {folders[folder]!r} is; labels must differ in their "
                "letters, digits, '.', '_' or '-'"
            )
        if where == "cells" and folder.lower().endswith(_FILE_SUFFIXES):
            raise ConfigError(
                f"{where}[{k}].label: {item.label!r} would be the folder {folder!r}, beside "
                "the study's own files (table.csv, manifest.json, ...); give a label "
                f"that does not end in {', '.join(_FILE_SUFFIXES)}"
            )
        folders[folder] = item.label
    return tuple(item.model_dump(exclude_unset=True) for item in items)


def _per_cell(
    variants: tuple[Mapping[str, Any], ...], cells: tuple[Mapping[str, Any], ...]
) -> None:
    """Each variant's ``per_cell`` maps cell labels to mappings of experiment fields: an
    entry for a label no cell has (a typo) was never merged, without a word."""
    labels = [c["label"] for c in cells]
    for k, variant in enumerate(variants):
        entries = variant.get("per_cell")
        if entries is None:
            continue
        where = f"variants[{k}].per_cell"
        if not isinstance(entries, Mapping):
            raise ConfigError(
                f"{where}: expected a mapping of cell labels to fields, got {shown(entries)}"
            )
        for label, fields in entries.items():
            if label not in labels:
                raise ConfigError(
                    f"{where}.{label}: {label!r} is not a cell's label ({', '.join(labels)})"
                )
            if not isinstance(fields, Mapping):
                raise ConfigError(
                    f"{where}.{label}: expected a mapping of experiment fields, got {shown(fields)}"
                )


def _check_agent(agent: str, runs: list[tuple[str, str, Experiment]]) -> None:
    """An ``agent`` given in the file must be a node of every run: the tables said
    "agent 9" over node 0's figures when it was not."""
    for cell, variant, experiment in runs:
        if agent not in experiment.node_ids:
            nodes = experiment.node_ids
            listed = ", ".join(nodes[:5]) + (", ..." if len(nodes) > 5 else "")
            raise ConfigError(
                f"agent: {agent!r} is not a node of cell {cell!r}, variant {variant!r} "
                f"(its nodes: {listed})"
            )


def load_study(raw: Mapping[str, Any]) -> Study:
    spec = validate(StudyFile, {k: v for k, v in raw.items() if v is not None or k == "study"})
    base = spec.base
    variants = _labelled(spec.variants, "variants")
    cells = _labelled(spec.cells, "cells")
    _per_cell(variants, cells)
    total = len(cells) * len(variants) * spec.seeds
    if total > MAX_RUNS:
        raise ConfigError(
            f"seeds: {len(cells)} cells × {len(variants)} variants × {spec.seeds} seeds make "
            f"{total} runs, more than a study holds ({MAX_RUNS}); split it into studies"
        )
    name = spec.study
    summary = spec.summary
    runs: list[tuple[str, str, Experiment]] = []
    replicates: list[tuple[str, str, int, Experiment]] = []
    for cell in cells:
        for variant in variants:
            fields = _merge(base, {k: v for k, v in cell.items() if k not in ("label", "x")})
            fields = _merge(
                fields, {k: v for k, v in variant.items() if k not in ("label", "per_cell")}
            )
            fields = _merge(fields, (variant.get("per_cell") or {}).get(cell["label"], {}))
            fields["name"] = f"{name}-{slug(cell['label'])}-{slug(variant['label'])}"
            # ESS and R-hat cost ArviZ ~5 ms per coordinate and node, most of a [000] sweep's
            # evaluation, and a study's tables do not use them: they are opt-in here.
            evaluation = dict(fields.get("evaluation") or {})
            evaluation.setdefault("diagnostics", False)
            fields["evaluation"] = evaluation
            for r in range(spec.seeds):
                try:
                    experiment = parse_experiment(_seeded(fields, r, spec.vary_data))
                except ConfigError as exc:
                    raise ConfigError(
                        f"cell {cell['label']!r}, variant {variant['label']!r}: {exc}"
                    ) from None
                if r == 0:
                    runs.append((cell["label"], variant["label"], experiment))
                replicates.append((cell["label"], variant["label"], r, experiment))
    if "agent" in spec.model_fields_set:
        _check_agent(spec.agent, runs)
    return Study(
        name=name,
        description=spec.description,
        base=base,
        variants=variants,
        cells=cells,
        agent=spec.agent,
        x_label=spec.x_label,
        summary=summary,
        runs=tuple(runs),
        seeds=spec.seeds,
        replicates=tuple(replicates),
        threshold=spec.threshold,
        report_at=tuple(spec.report_at),
        figures=dict(spec.figures),
        vary_data=spec.vary_data,
        baseline=_baseline(spec.baseline, variants),
        bars=tuple(spec.bars.figures) if spec.bars else (),
        bars_columns=spec.bars.columns if spec.bars else 3,
    )


def _baseline(label: str, variants: tuple[Mapping[str, Any], ...]) -> str:
    """The baseline variant's label: ``label``, which must be a variant's, or the first."""
    labels = [v["label"] for v in variants]
    if not label:
        return labels[0]
    if label not in labels:
        raise ConfigError(f"baseline: {label!r} is not a variant's label ({', '.join(labels)})")
    return label


def _seeded(fields: Mapping[str, Any], r: int, vary_data: bool) -> dict[str, Any]:
    """Replicate ``r``'s fields: the sampler seed moved on by ``r``, and with ``vary_data``
    the data: ``data.seed`` (synthetic data, or a file's random partition) and the held-out
    split's ``evaluation.test.seed`` (which rows of a file are held out) too; replicate 0 is
    the file as written."""
    if r == 0:
        return dict(fields)
    out = {**fields, "seed": int(fields.get("seed", 0)) + r}
    if vary_data:
        data = dict(fields.get("data") or {})
        data["seed"] = int(data.get("seed", 0)) + r
        out["data"] = data
        evaluation = dict(fields.get("evaluation") or {})
        test = evaluation.get("test")
        if isinstance(test, Mapping) and test.get("split") is not None:
            evaluation["test"] = {**test, "seed": int(test.get("seed", 0)) + r}
            out["evaluation"] = evaluation
    return out


def slug(label: str) -> str:
    """A label as a folder or file name: never ``.`` or ``..`` (a variant ``..`` wrote its
    run's files into its cell's parent, a cell ``..`` outside the study's folder), nor a
    hidden one."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label).lstrip(".-").rstrip("-") or "run"


BASE_KEYS = (
    "w2_average",
    "w2_agent",
    "w2_stationary_average",
    "w2_stationary_agent",
    "w2_floor",
    "w2_floor_round",
    "w2_node_mean",
    "consensus_error",
    "lost_fraction",
)
"""Every study row's figures: the final W2s, the stationary W2s (the mean per-round W2 over
the verdict's window, the second half of the run by default), the W2 exact draws score at
the final figures' count (``w2.floor``: chains × window) and at one round's
(``w2.floor_round``: chains, the stationary W2's floor), the nodes' mean W2, consensus and
the share of messages lost."""


FIRST_BELOW = "first_below"


_LABELS = (
    "cell",
    "variant",
    "seed_index",
    "seed",
    "algorithm",
    "diverged",
    "verdict",
    "seconds",
    "data_seed",
    "iterations",
)
"""The other columns of ``seeds.csv`` (:func:`run_row`) and the summary's."""


def reserved_column(name: str) -> bool:
    """Whether ``name`` is a column a study writes whatever its ``figures``."""
    at = name.startswith(("w2_agent_at_", "w2_average_at_")) and name.rsplit("_", 1)[1].isdigit()
    return name in (*BASE_KEYS, *_LABELS) or name.startswith(FIRST_BELOW) or at
