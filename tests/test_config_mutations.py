"""Careless experiment files, by the dozen: every shipped experiment, mutated at random.

Two kinds of mutation, once or twice per file, anywhere in it (top-level keys, model
parameters, topology, faults, hyperparameters, list items):

* **wrong**: a field deleted, or set to a value of the wrong kind or out of range (None,
  NaN, 1e308, a negative, zero, a huge integer, a string, a list, a mapping);
* **odd**: a number scaled by 10 or by a tenth — often still valid (a step ten times too
  large, a tenth of the data, ten times the nodes), so the run goes deep into the samplers.

Whatever the mutation, ``starling simulate`` must end as a command does — a run (exit 0,
or 3 diverged, 4 not converged) or a one-line refusal naming what it refused (exit 2) —
never with a traceback. The mutations are seeded: a failure's test id names the file and
the mutation, and reruns exactly.
"""

from __future__ import annotations

import copy
import math
import random

import pytest
import yaml

from starling.orchestrator.cli.main import main
from tests.conftest import ROOT


def _simulated(path) -> bool:
    """An experiment ``simulate`` runs: not a study (cells), not a backend inventory (no
    algorithm), not one whose nodes bring their own data (only ``run`` has them)."""
    document = yaml.safe_load(path.read_text()) or {}
    return "algorithm" in document and (document.get("data") or {}).get("source") != "node"


EXPERIMENTS = sorted(path for path in (ROOT / "examples").glob("*.yaml") if _simulated(path))
WRONG = [None, -1, 0, 1e308, math.nan, "abc", "", [], [1, 2], {}, {"x": 1}, True, 10**12, 2.5]
DELETED = object()
MUTATIONS = {"wrong": 100, "odd": 60}
ROUNDS = 6
"""Every mutated run is cut to this many rounds (and at most 8 chains): the test is about
what the command does with the file, not about sampling."""


def _shorten(document) -> None:
    """:data:`ROUNDS` rounds of at most 8 chains, the evaluation's window and burn-in cut to
    fit them (the mutations may then undo any of it)."""
    document["rounds"] = ROUNDS
    document["chains"] = min(document.get("chains", 1), 8)
    evaluation = document.get("evaluation") or {}
    if evaluation.get("window", 1) > ROUNDS:
        evaluation["window"] = ROUNDS // 2
    if evaluation.get("burn_in", 0) >= ROUNDS:
        evaluation["burn_in"] = ROUNDS // 2


def _paths(value, prefix=()):
    """Every key path and list index in ``value``, outermost first."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, inner in items:
        yield (*prefix, key)
        yield from _paths(inner, (*prefix, key))


def _get(document, path):
    for key in path:
        document = document[key]
    return document


def _set(document, path, value) -> None:
    for key in path[:-1]:
        document = document[key]
    if value is DELETED:
        del document[path[-1]]
    else:
        document[path[-1]] = value


def _numbers(document) -> list[tuple]:
    """The paths of the document's numbers, but the run's length and chain count."""
    return [
        path
        for path in _paths(document)
        if path not in (("rounds",), ("chains",))
        and isinstance(_get(document, path), (int, float))
        and not isinstance(_get(document, path), bool)
    ]


def _change(document, kind: str, rng: random.Random):
    """One mutation of ``kind`` made in ``document``: (where, what), or None if it found
    nothing to change."""
    if kind == "wrong":
        path = rng.choice(list(_paths(document)))
        value = rng.choice([*WRONG, DELETED])
        _set(document, path, value if value is DELETED else copy.deepcopy(value))
        return ".".join(map(str, path)), "deleted" if value is DELETED else value
    numbers = _numbers(document)
    if not numbers:
        return None
    path = rng.choice(numbers)
    value = _get(document, path)
    up = rng.random() < 0.5
    if isinstance(value, int):
        value = value * 10 if up else max(1, value // 10)
    else:
        value = value * (10.0 if up else 0.1)
    _set(document, path, value)
    return ".".join(map(str, path)), value


def _mutations():
    rng = random.Random(20261128)
    for kind, count in MUTATIONS.items():
        for index in range(count):
            source = rng.choice(EXPERIMENTS)
            document = yaml.safe_load(source.read_text())
            _shorten(document)
            changes = []
            for _ in range(rng.choice((1, 1, 2))):
                try:
                    changes.append(_change(document, kind, rng))
                except (KeyError, IndexError, TypeError):  # the first change took its parent
                    continue
            yield pytest.param(document, id=f"{kind}{index}-{source.stem}-{changes}"[:140])


@pytest.mark.parametrize("document", list(_mutations()))
def test_a_mutated_experiment_runs_or_is_refused_in_one_line(document, tmp_path, capsys):
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(document))
    code = main(["simulate", str(path), "--out", str(tmp_path / "out"), "--quiet", "--no-report"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code in (0, 2, 3, 4), err
    if code == 2:
        refusal = [line for line in err.splitlines() if line.strip()]
        assert len(refusal) == 1 and refusal[0].startswith("starling: "), err
