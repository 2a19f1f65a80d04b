"""Every user mistake in an experiment or study file: one line, a non-zero exit, no traceback.

Each row is a case, the exit code ``starling`` must return, and a piece of the one line
it must print on stderr. The rows run the real command line
(``starling.orchestrator.cli.main.main``) in-process, so an unexpected exception anywhere fails the
row with its traceback; the files are real files in a temporary folder. Every case fails at parse
time, before any node process starts (for ``run``) or any array is allocated (for ``simulate``).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from starling.orchestrator.cli.main import main
from tests.conftest import ROOT, run_cli

QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
STUDY = {
    "study": "s",
    "base": {**QUICKSTART, "rounds": 5, "chains": 2},
    "variants": [{"label": "a"}],
}
DROP = object()
"""As a change: remove the key."""


def _changed(base: dict, changes: dict) -> dict:
    out = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and "=" in value:  # {"=": 1, ...}: replace, do not merge
            out[key] = {k: v for k, v in value.items() if k != "="}
        elif value is DROP:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _changed(out[key], value)
        else:
            out[key] = value
    return out


def _q(**changes: Any) -> dict:
    """The quickstart with ``changes`` merged in (mapping by mapping)."""
    return _changed(QUICKSTART, changes)


def _s(**changes: Any) -> dict:
    return _changed(STUDY, changes)


# (case, command, file content: a mapping to dump, raw text, raw bytes or None for no file,
#  expected exit code, what the one line must contain)
# fmt: off
CASES: list[tuple[str, str, Any, int, str]] = [
    # --- the file itself
    ("missing file", "simulate", None, 2, "nope.yaml' does not exist"),
    ("empty file", "simulate", "", 2, "the file is empty"),
    ("only a comment", "run", "# nothing here\n", 2, "the file is empty"),
    ("binary file", "simulate", bytes(range(256)) * 4, 2, "not a text file"),
    ("latin-1 text", "run", "name: caf\xe9\n".encode("latin-1"), 2, "not a text file"),
    ("unclosed bracket", "simulate", "name: x\nrounds: [1,\n  foo: 3\n", 2, "case.yaml:4:1:"),
    ("bad indentation", "simulate", "model:\n  name: a\n b: 2\n", 2, "case.yaml:3:"),
    ("tab indentation", "run", "model:\n\tname: a\n", 2, "not valid YAML"),
    ("list instead of mapping", "simulate", "- algorithm: d-sgld\n", 2, "got a list"),
    ("scalar instead of mapping", "simulate", "just words\n", 2, "expected a mapping"),
    # --- top level
    ("unknown top-level key", "simulate", _q(colour="red"), 2, "colour: unknown field (known:"),
    ("misspelt top-level key", "run", _q(round=3), 2, "round: unknown field"),
    ("unknown algorithm", "simulate", _q(algorithm="d-magic"), 2, "d-magic"),
    ("algorithm not a name", "simulate", _q(algorithm=7), 2, "algorithm: expected a string"),
    ("algorithm missing", "simulate", _q(algorithm=DROP), 2, "algorithm: required field"),
    ("name is a list", "simulate", _q(name=["a"]), 2, "name: expected a string"),
    ("rounds missing", "simulate", _q(rounds=DROP), 2, "rounds: required field is missing"),
    ("negative rounds", "simulate", _q(rounds=-5), 2, "rounds: must be at least 1, got -5"),
    ("zero rounds", "run", _q(rounds=0), 2, "rounds: must be at least 1"),
    ("rounds as text", "simulate", _q(rounds="ten"), 2, "rounds: expected an integer"),
    ("fractional rounds", "simulate", _q(rounds=2.5), 2, "rounds: expected an integer"),
    ("rounds true", "simulate", _q(rounds=True), 2, "rounds: expected an integer"),
    ("chains as text", "simulate", _q(chains="many"), 2, "chains: expected an integer"),
    ("chains beyond any integer", "simulate", _q(chains=1e308), 2,
     "chains: expected an integer, got 1e+308"),
    ("zero chains", "simulate", _q(chains=0), 2, "chains: must be at least 1"),
    ("negative seed", "simulate", _q(seed=-1), 2, "seed: must be at least 0"),
    ("checkpoint_every zero", "run", _q(checkpoint_every=0), 2, "checkpoint_every: must be at"),
    ("negative deadline", "simulate", _q(round_deadline=-1), 2, "round_deadline: expected a pos"),
    ("infinite deadline", "run", _q(round_deadline=float("inf")), 2, "round_deadline: expected"),
    ("zero round_seconds", "simulate", _q(round_seconds=0), 2, "round_seconds: expected a pos"),
    ("link_delay words", "simulate", _q(link_delay="soon"), 2, "link_delay: expected a duration"),
    ("link_delay negative", "simulate", _q(link_delay=-3), 2, "link_delay: expected a duration"),
    ("link_delay over deadline", "run", _q(link_delay="6s"), 2, "is not under round_deadline"),
    # --- hyperparameters
    ("hyperparameter as text", "simulate", _q(hyperparameters={"rho": "five"}), 2,
     "hyperparameters.rho: expected a number, got 'five'"),
    ("infinite hyperparameter", "run", _q(hyperparameters={"rho": float("inf")}), 2,
     "hyperparameters.rho: expected a finite number, got inf"),
    ("NaN hyperparameter", "simulate", _q(hyperparameters={"rho": float("nan")}), 2,
     "hyperparameters.rho: expected a finite number"),
    ("unknown hyperparameter", "simulate", _q(hyperparameters={"rhoo": 5}), 2,
     "hyperparameters.rhoo: unknown field (known:"),
    ("hyperparameters a list", "simulate", _q(hyperparameters=[1, 2]), 2,
     "hyperparameters: expected a mapping"),
    # simulate ran it; run refused it on the wire (hyperparameters travel as doubles).
    ("hyperparameter past 2^53", "simulate",
     _q(algorithm="d-sgld", hyperparameters={"=": 1, "batch_size": 2**60}), 2,
     "hyperparameters.batch_size: expected an integer of at most 2^53"),
    ("model parameter past 2^53", "simulate",
     _q(model={"=": 1, "name": "logistic_regression", "params": {"truth_seed": 2**60}},
        algorithm="d-sgld", hyperparameters={"=": 1}), 2,
     "model.params.truth_seed: expected an integer of at most 2^53"),
    ("hyperparameter a bool", "simulate", _q(hyperparameters={"rho": True}), 2,
     "hyperparameters.rho: expected a number, got True"),
    # --- model and data
    ("model missing", "simulate", _q(model=DROP), 2, "model: required field is missing"),
    ("unknown model", "simulate", _q(model={"name": "unicorn"}), 2, "model.name: unknown model"),
    ("model params wrong", "simulate", _q(model={"params": {"dim": -1}}), 2, "model.params"),
    ("model params NaN", "simulate", _q(model={"params": {"noise_std": float("nan")}}), 2,
     "model.params.noise_std: expected a finite number"),
    ("unknown model key", "simulate", _q(model={"colour": 1}), 2, "model.colour: unknown field"),
    ("model a string", "simulate", _q(model="linear_regression"), 2, "model: expected a mapping"),
    ("unknown data source", "simulate", _q(data={"source": "cloud"}), 2, "data.source: unknown"),
    ("unknown data key", "simulate", _q(data={"rows": 5}), 2, "data.rows: unknown field"),
    ("data size as text", "simulate", _q(data={"size": "big"}), 2, "data.size: expected an int"),
    ("data size zero", "simulate", _q(data={"size": 0}), 2, "data.size: must be at least 1"),
    ("file source without path", "run", _q(data={"source": "file"}), 2, "data.path: required"),
    # Was "unknown source 'node' (use synthetic or file)", of a documented source.
    ("node data simulated", "simulate", _q(data={"=": 1, "source": "node"}), 2,
     "data.source: node leaves the data to node processes, which only starling run starts"),
    ("node data in a simulated study", "simulate",
     _s(base={**STUDY["base"], "data": {"source": "node"}}), 2,
     "data.source: node leaves the data to node processes"),
    # --- bounds
    ("a billion chains", "simulate", _q(chains=1_000_000_000), 2, "would take 745.1 GiB per node"),
    ("a billion chains, run", "run", _q(chains=1_000_000_000), 2, "over limits.node_memory"),
    ("a billion points", "simulate", _q(data={"size": 10**9}), 2,
     "100 × 2 × 1000000000 float64s would"),
    ("a billion points, run", "run", _q(data={"size": 10**9}), 2, "over limits.node_memory"),
    ("local host not an address", "run", _q(backend={"kind": "local", "host": "999.1.1.1"}), 2,
     "backend.host: not an IPv4 address: '999.1.1.1'"),
    ("local host blank", "run", _q(backend={"kind": "local", "host": " "}), 2,
     "backend.host: expected a host name or address"),
    ("D-ADMMS on a wide logistic model", "simulate",
     _q(model={"=": 1, "name": "logistic_regression", "params": {"features": 3000}}), 2,
     "the proximal step's Newton Hessians and their factors): 2 × 100 × 3000 × 3000"),
    ("a billion points in one shard", "simulate",
     _q(data={"=": 1, "source": "synthetic", "sizes": [10, 10, 10**9, 10, 10], "seed": 1}), 2,
     "chains × dim × data.sizes: 100 × 2 × 1000000000 float64s would"),
    ("size 1e9 as YAML writes it", "run", "name: q\nalgorithm: d-sgld\nrounds: 3\n"
     "model: {name: linear_regression}\ndata: {size: 1e9}\n", 2,
     "data.size: expected an integer, got '1e9'"),
    ("a billion chains as a float", "simulate", _q(chains=1e9), 2, "would take 745.1 GiB"),
    # A Gaussian posterior's dim × dim matrices: numpy's _ArrayMemoryError traceback (74.5 GiB).
    ("a dim whose Gram matrix cannot fit", "simulate", _q(model={"params": {"dim": 100_000}}), 2,
     "model.params.dim (a dim × dim matrix: the Gram or precision matrix, the posterior's "
     "covariance): 100000 × 100000 float64s would take 74.5 GiB per node"),
    ("a conjugate Gaussian too wide, run", "run",
     _q(model={"=": 1, "name": "conjugate_gaussian", "params": {"dim": 20_000}}), 2,
     "20000 × 20000 float64s would take 3.0 GiB per node, over limits.node_memory"),
    # The evaluation's own arrays and loops: a traceback, or evaluated for ever, after the run.
    ("a reference past the memory", "simulate",
     _q(evaluation={"reference": {"method": "mala", "size": 10**11}}), 2,
     "evaluation.reference.size: 100000000000 × 2 float64 reference samples would take"),
    ("projections past the memory", "simulate",
     _q(evaluation={"transport": {"projections": 10**11}}), 2,
     "evaluation.transport.projections: 100000000000 × 2 float64 directions would take"),
    ("Sinkhorn past the memory", "run", _q(evaluation={"transport": {"points": 10**5}}), 2,
     "evaluation.transport.points: 100000 × 100000 float64 Sinkhorn costs would take 74.5 GiB"),
    ("endless reference chains", "simulate", _q(evaluation={"reference": {"steps": 10**11}}), 2,
     "evaluation.reference.steps: must be at most 1000000"),
    ("endless repeats", "simulate", _q(evaluation={"transport": {"repeats": 10**11}}), 2,
     "evaluation.transport.repeats: must be at most 1000"),
    ("tiny memory limit", "simulate", _q(limits={"node_memory": "1KiB"}), 2, "(1.0 KiB)"),
    ("bad memory limit", "simulate", _q(limits={"node_memory": "lots"}), 2,
     "limits.node_memory: expected a size like 2GiB"),
    ("unknown limit", "simulate", _q(limits={"cpu": 1}), 2, "limits.cpu: unknown field"),
    # --- topology and nodes
    ("unknown topology", "simulate", _q(topology={"kind": "moebius"}), 2, "topology.kind"),
    # D-ADMMS uses the graph's Laplacian: a weight matrix given to it was ignored.
    ("weights no sampler uses", "simulate",
     _q(topology={"=": 1, "kind": "ring", "nodes": 3,
                  "weights": [[0.5, 0.25, 0.25], [0.25, 0.5, 0.25], [0.25, 0.25, 0.5]]}), 2,
     "topology.weights: d-admms does not average with mixing weights and would ignore them"),
    ("odd topology key", "simulate", _q(topology={"my-key": 1}), 2,
     "topology.my-key: unknown field"),
    ("unknown topology key", "simulate", _q(topology={"colour": 1}), 2,
     "topology.colour: unknown field"),
    ("zero nodes", "simulate", _q(topology={"nodes": 0}), 2, "topology.nodes: must be at least 1"),
    ("nodes as text", "simulate", _q(topology={"nodes": "five"}), 2,
     "topology.nodes: expected an integer"),
    ("edge to a stranger", "simulate",
     _q(topology={"=": 1, "kind": "edges", "nodes": 3, "edges": [["0", "9"]]}), 2,
     "'9' is not a node"),
    ("NaN edge probability", "simulate",
     _q(topology={"=": 1, "kind": "erdos_renyi", "nodes": 5, "p": float("nan")}), 2,
     "topology.p: expected a finite number"),
    ("duplicate node ids", "simulate",
     _q(topology={"=": 1, "kind": "ring"}, nodes=[{"id": "a"}, {"id": "a"}, {"id": "b"}]), 2,
     "nodes: node id 'a' appears twice"),
    ("two nodes at one address", "run",
     _q(topology={"=": 1, "kind": "ring"},
        nodes=[{"id": "a", "address": "127.0.0.1:50999"}, {"id": "b"},
               {"id": "c", "address": "127.0.0.1:50999"}]), 2,
     "nodes[2].address: '127.0.0.1:50999' is nodes[0]'s address too"),
    ("empty nodes list", "simulate", _q(nodes=[]), 2, "nodes: expected a non-empty list"),
    ("nodes a mapping", "simulate", _q(nodes={"a": 1}), 2, "nodes: expected a list"),
    ("unknown node key", "simulate", _q(nodes=[{"id": "a", "colour": 1}]), 2,
     "nodes[0].colour: unknown field"),
    ("node without id", "simulate", _q(nodes=[{"role": "agent"}]), 2,
     "nodes[0].id: required field is missing"),
    ("unknown role", "simulate", _q(nodes=[{"id": "a", "role": "king"}]), 2,
     "nodes[0].role: 'king' is not a role"),
    # --- faults
    ("faults a mapping", "simulate", _q(faults={"link": "all"}), 2, "faults: expected a list"),
    ("fault a string", "simulate", _q(faults=["cut"]), 2, "faults[0]: expected a mapping"),
    ("fault on a non-edge", "simulate", _q(faults=[{"link": ["0", "2"]}]), 2,
     "faults[0].link: 0→2 is not an edge"),
    ("fault on a stranger", "simulate", _q(faults=[{"node": "7", "kill_at_round": 3}]), 2,
     "faults[0].node: '7' is not a node"),
    ("drop over one", "simulate", _q(faults=[{"link": "all", "drop": 1.5}]), 2,
     "faults[0].drop: expected a probability"),
    ("unknown fault key", "simulate", _q(faults=[{"link": "all", "when": 3}]), 2,
     "faults[0].when: unknown field for a link fault"),
    ("kill after the end", "simulate", _q(faults=[{"node": "1", "kill_at_round": 500}]), 2,
     "faults[0].kill_at_round: kills at round 500"),
    ("kill at negative round", "run", _q(faults=[{"node": "1", "kill_at_round": -1}]), 2,
     "faults[0].kill_at_round: expected an integer >= 0"),
    ("fault on link and node", "simulate", _q(faults=[{"node": "1", "link": "all"}]), 2,
     "faults[0]: a fault is on a link or on a node"),
    # --- backend and evaluation
    ("unknown backend", "run", _q(backend={"kind": "cloud"}), 2, "backend.kind: unknown backend"),
    ("unknown backend key", "run", _q(backend={"colour": 1}), 2, "backend.colour: unknown field"),
    ("port out of range", "run", _q(backend={"base_port": 70000}), 2,
     "backend.base_port: must be at most 65535"),
    ("window over rounds", "simulate", _q(evaluation={"window": 500}), 2, "evaluation.window"),
    ("unknown evaluation key", "simulate", _q(evaluation={"last": 3}), 2,
     "evaluation.last: unknown field"),
    # --- studies
    ("unknown study key", "simulate", _s(colour=1), 2, "colour: unknown field (known:"),
    ("study without variants", "simulate", _s(variants=DROP), 2, "variants: required field"),
    ("study empty variants", "simulate", _s(variants=[]), 2, "variants: expected a non-empty"),
    ("variant without label", "simulate", _s(variants=[{"x": 1}]), 2,
     "variants[0].label: required field is missing"),
    ("duplicate variant labels", "simulate", _s(variants=[{"label": "a"}, {"label": "a"}]), 2,
     "variants[1].label: 'a' appears twice"),
    ("unknown study summary", "simulate", _s(summary="median"), 2,
     "summary: expected one of average, agent"),
    ("bad experiment in a study", "simulate", _s(variants=[{"label": "a", "rounds": -1}]), 2,
     "cell 'all', variant 'a': rounds: must be at least 1"),
    # Two labels, one folder: the second run's files replaced the first's.
    ("labels sharing a folder", "simulate", _s(variants=[{"label": "a/b"}, {"label": "a-b"}]), 2,
     "variants[1].label: 'a-b' would be written to the folder 'a-b', as 'a/b' is"),
    ("cell labels sharing a folder", "run", _s(cells=[{"label": "!"}, {"label": "?"}]), 2,
     "cells[1].label: '?' would be written to the folder 'run', as '!' is"),
    # Every run went, then the table could not be written where the cell's folder was.
    ("cell label a study file", "simulate", _s(cells=[{"label": "table.csv"}]), 2,
     "cells[0].label: 'table.csv' would be the folder 'table.csv', beside the study's own"),
    # A per_cell entry for no cell was never merged; a list of them was a traceback.
    ("per_cell for no cell", "simulate",
     _s(variants=[{"label": "a", "per_cell": {"rign": {"rounds": 3}}}]), 2,
     "variants[0].per_cell.rign: 'rign' is not a cell's label (all)"),
    ("per_cell a list", "simulate", _s(variants=[{"label": "a", "per_cell": [1]}]), 2,
     "variants[0].per_cell: expected a mapping of cell labels to fields, got [1]"),
    ("per_cell entry a number", "run", _s(variants=[{"label": "a", "per_cell": {"all": 5}}]), 2,
     "variants[0].per_cell.all: expected a mapping of experiment fields, got 5"),
    # 10^9 seeds parsed run after run for hours before the first began.
    ("seeds unbounded", "simulate", _s(seeds=10**9), 2, "seeds: must be at most 1000"),
    ("runs past the study's bound", "simulate",
     _s(cells=[{"label": f"c{k}"} for k in range(11)], seeds=1000), 2,
     "seeds: 11 cells × 1 variants × 1000 seeds make 11000 runs, more than a study holds"),
    # Named nothing in the plots' legends (a warning on stderr), a folder 'run' on disk.
    ("an empty variant label", "simulate", _s(variants=[{"label": ""}]), 2,
     "variants[0].label: expected a label, got ''"),
    ("a blank cell label", "simulate", _s(cells=[{"label": "  "}]), 2,
     "cells[0].label: expected a label, got '  '"),
    # Booleans are true or false, as everywhere else: 'yes', 1 and 'off' were taken.
    ("vary_data as text", "simulate", _s(vary_data="yes"), 2,
     "vary_data: expected true or false, got 'yes'"),
    ("diagnostics as a number", "simulate", _q(evaluation={"diagnostics": 1}), 2,
     "evaluation.diagnostics: expected true or false, got 1"),
    # Written after the rounds: a traceback there, and the samples were never written.
    ("reference cache a file", "simulate",
     _q(evaluation={"reference": {"method": "mala", "cache": "/etc/hostname"}}), 2,
     "evaluation.reference.cache: '/etc/hostname' is a file, not a folder"),
    ("reference cache under a file", "run",
     _q(evaluation={"reference": {"method": "mala", "cache": "/etc/hostname/refs"}}), 2,
     "evaluation.reference.cache: '/etc/hostname/refs' is under /etc/hostname, which is a file"),
    # The tables said "agent 9" over node 0's figures.
    ("agent not a node", "simulate", _s(agent="9"), 2,
     "agent: '9' is not a node of cell 'all', variant 'a' (its nodes: 0, 1, 2, 3, 4)"),
]
# fmt: on


def _write(tmp_path, content) -> str:
    path = tmp_path / "case.yaml"
    if content is None:
        return str(tmp_path / "nope.yaml")
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content)
    else:
        path.write_text(yaml.safe_dump(content, allow_unicode=True))
    return str(path)


def test_there_are_enough_cases():
    assert len(CASES) >= 60
    assert len({case[0] for case in CASES}) == len(CASES), "case names must be distinct"


@pytest.mark.parametrize(
    ("command", "content", "code", "needle"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_user_mistake_is_one_line(tmp_path, capsys, starling_home, command, content, code, needle):
    path = _write(tmp_path, content)
    result = main([command, path, "--out", str(tmp_path / "out")])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert result == code, captured
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("starling: "), lines[0]
    assert needle in lines[0], lines[0]
    assert not (tmp_path / "out").exists(), "a refused file must not start a run"


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (bytes(range(256)) * 4, "not a text file"),
        ("name: x\nrounds: [1,\n", "case.yaml:3:1: not valid YAML"),
        (_q(hyperparameters={"rho": float("inf")}), "hyperparameters.rho: expected a finite"),
    ],
    ids=["binary", "yaml", "inf"],
)
def test_the_installed_command_says_the_same(tmp_path, starling_home, content, needle):
    """The same one line through a fresh ``starling`` process (its own error handling)."""
    result = run_cli("run", _write(tmp_path, content), env_home=starling_home)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_the_parser_accepts_exactly_the_backend_kinds():
    from starling.orchestrator.config.backends import BACKENDS

    assert set(BACKENDS) == {"local", "inventory", "docker"}


# --- the command line itself: where results go, recovery, live commands, help.
# (case, argv with {tmp} for the test's folder and {exp} for a valid experiment file,
#  a setup of the folder before the command, exit code, what the one line must contain)


def _file(tmp):
    (tmp / "afile").write_text("mine\n")


def _user_folder(tmp):
    (tmp / "p" / "samples").mkdir(parents=True)
    (tmp / "p" / "samples" / "f.csv").write_text("mine\n")


def _finished_run(tmp):
    assert main(["simulate", str(tmp / "exp.yaml"), "--out", str(tmp / "done")]) == 0


def _unfinished_run(tmp, pid=None):
    import json
    import os

    (tmp / "crashed").mkdir()
    body = {"status": "running", "files": [], "foreign": [], "pid": pid or os.getppid()}
    (tmp / "crashed" / "manifest.json").write_text(json.dumps(body))


def _dead_run_without_start(tmp):
    _unfinished_run(tmp, pid=2**22 + 1)  # above pid_max on Linux: no such process


# fmt: off
COMMAND_CASES: list[tuple[str, list[str], Any, int, str]] = [
    ("out under /proc", ["run", "{exp}", "--out", "/proc/foo"], None, 2,
     "--out: cannot create /proc/foo"),
    ("out an existing file", ["simulate", "{exp}", "--out", "{tmp}/afile"], _file, 2,
     "afile is a file, not a folder"),
    ("out under a file", ["run", "{exp}", "--out", "{tmp}/afile/x"], _file, 2,
     "afile/x is under"),
    ("out not empty", ["simulate", "{exp}", "--out", "{tmp}/p"], _user_folder, 2,
     "/p is not empty (samples); choose a new folder, or pass --overwrite"),
    ("overwrite a folder without manifest", ["run", "{exp}", "--out", "{tmp}/p", "--overwrite"],
     _user_folder, 2, "--overwrite: {tmp}/p holds no manifest.json"),
    ("overwrite without out", ["simulate", "{exp}", "--overwrite"], None, 2,
     "--overwrite: only with --out"),
    ("overwrite a run that never ended",
     ["simulate", "{exp}", "--out", "{tmp}/crashed", "--overwrite"], _unfinished_run, 2,
     "never finished (it is running, or crashed); recover its samples with `starling collect"),
    ("collect a missing folder", ["collect", "{tmp}/nowhere"], None, 2,
     "collect: {tmp}/nowhere is not a folder"),
    ("collect a file", ["collect", "{tmp}/afile"], _file, 2, "is not a folder"),
    ("collect a folder of yours", ["collect", "{tmp}/p"], _user_folder, 2,
     "collect: {tmp}/p has no manifest.json"),
    ("collect a finished run", ["collect", "{tmp}/done"], _finished_run, 2,
     "collect: the run in {tmp}/done ended (complete); its results are already there"),
    ("collect a run still running", ["collect", "{tmp}/crashed"], _unfinished_run, 2,
     "still runs; stop it first"),
    ("collect a run that never started nodes", ["collect", "{tmp}/crashed"],
     _dead_run_without_start, 2, "has no start.json: the run stopped before its nodes started"),
    ("negative delay, spaced", ["links", "set", "A", "B", "--delay", "-3ms"], None, 2,
     "--delay: expected a duration like 20ms or 0.5s, got '-3ms'"),
    ("negative delay, joined", ["links", "set", "A", "B", "--delay=-3ms"], None, 2,
     "--delay: expected a duration"),
    ("drop over one, no run", ["links", "set", "A", "B", "--drop", "2"], None, 2,
     "--drop: expected a probability in [0, 1], got 2.0"),
    ("links set with nothing to set", ["links", "set", "A", "B"], None, 2,
     "links set: give --drop and/or --delay"),
    ("kernel link to every peer", ["links", "cut", "A", "*", "--kernel"], None, 2,
     "links --kernel: name one receiving node, not '*'"),
    ("kernel set with nothing to set", ["links", "set", "A", "B", "--kernel"], None, 2,
     "links set --kernel: give either --drop or --delay"),
    ("kernel set with both", ["links", "set", "A", "B", "--kernel", "--drop", "0.1",
                              "--delay", "5ms"], None, 2,
     "links set --kernel: give either --drop or --delay"),
    ("kernel drop of nothing", ["links", "set", "A", "B", "--kernel", "--drop", "0"], None, 2,
     "--drop: expected a probability in (0, 1], got 0.0"),
    ("kernel link, no run", ["links", "cut", "A", "B", "--kernel"], None, 2,
     "no running experiment found"),
    ("reset without --kernel", ["links", "reset", "A", "B"], None, 2,
     "links reset: a kernel fault; add --kernel"),
    ("jitter without --kernel", ["links", "set", "A", "B", "--delay", "5ms", "--jitter", "2ms"],
     None, 2, "--jitter: a kernel fault; add --kernel"),
    ("jitter with a kernel drop", ["links", "set", "A", "B", "--kernel", "--drop", "0.2",
                                   "--jitter", "2ms"], None, 2,
     "--jitter: only with links set --delay ... --kernel"),
    # An option by its whole name only: argparse took --ou for --out.
    ("an option cut short", ["simulate", "{exp}", "--ou", "{tmp}/p"], None, 2,
     "unrecognized arguments: --ou"),
    ("status --wait without --watch", ["status", "--wait", "5"], None, 2,
     "--wait: only with --watch"),
]
# fmt: on


@pytest.mark.parametrize(
    ("argv", "setup", "code", "needle"),
    [case[1:] for case in COMMAND_CASES],
    ids=[case[0] for case in COMMAND_CASES],
)
def test_command_line_mistake_is_one_line(
    tmp_path, capsys, starling_home, monkeypatch, argv, setup, code, needle
):
    monkeypatch.chdir(tmp_path)  # a default results/ folder lands here, never in the repo
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump({**QUICKSTART, "rounds": 3}))
    if setup is not None:
        setup(tmp_path)
        capsys.readouterr()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = main([a.format(tmp=tmp_path, exp=tmp_path / "exp.yaml") for a in argv])
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert result == code, captured
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("starling: "), lines[0]
    assert needle.format(tmp=tmp_path) in lines[0], lines[0]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before, (
        "a refused command must leave every folder as it was"
    )


def test_there_are_enough_command_cases():
    assert len(CASES) + len(COMMAND_CASES) >= 100
    assert len({case[0] for case in COMMAND_CASES}) == len(COMMAND_CASES)


def test_node_help_names_the_command_it_was_given_as(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["node", "serve", "--help"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.startswith("usage: starling node serve")
