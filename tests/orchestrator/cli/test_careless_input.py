"""Careless input, class by class: each case ends in one line naming the field, file or
value, with the documented exit code (docs/reference/exit-codes.md), and no traceback.

The classes (issue 31): YAML whose aliases expand exponentially, or nest past any file's
depth, in an experiment file, an inventory or a node config; a duplicate key; addresses
with a space or a bare IPv6 host; option values argparse refuses (one line, not its usage
block); options left empty; a hand-edited or foreign ``run.json``; a results folder whose
files come from two runs; ``collect`` on a folder whose experiment file was swapped; a fault
list of thousands of entries said in thousands of account lines. Every case runs the real
``starling`` command line in-process (``starling.orchestrator.cli.main.main``), so an
unexpected exception fails the case with its traceback. Cases that start a process are in
tests/test_careless_input_e2e.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from typing import Any

import numpy as np
import pytest
import yaml

from starling.orchestrator.cli.main import main
from starling.orchestrator.core.seals import sealed
from tests.conftest import ROOT

QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
SMALL = {**QUICKSTART, "rounds": 6, "chains": 4}


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A flow list defining its own anchors, each list ``width`` copies of the one
    before: ``width ** levels`` strings once expanded, a few objects to PyYAML."""
    parts = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    parts += [f"&a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]" for k in range(1, levels + 1)]
    return "[" + ", ".join(parts) + "]"


BOMB = alias_bomb()
HEAD = "algorithm: d-sgld\nmodel: {name: linear_regression}\n"

# (case, the file's text, what the one line must say)
# fmt: off
BOMBS: list[tuple[str, str, str]] = [
    ("as the name", f"{HEAD}name: {BOMB}\nrounds: 3\n", "aliases expand to more than"),
    ("as rounds", f"{HEAD}name: x\nrounds: {BOMB}\n", "aliases expand"),
    ("as a seed", f"{HEAD}name: x\nrounds: 3\nseed: {BOMB}\n", "aliases expand"),
    ("in the topology", f"{HEAD}name: x\nrounds: 3\ntopology: {{kind: ring, nodes: {BOMB}}}\n",
     "aliases expand"),
    ("as a hyperparameter", f"{HEAD}name: x\nrounds: 3\nhyperparameters: {{eta: {BOMB}}}\n",
     "aliases expand"),
    ("as a description", f"{HEAD}name: x\nrounds: 3\ndescription: {BOMB}\n", "aliases expand"),
    ("as the limits", f"{HEAD}name: x\nrounds: 3\nlimits: {{node_memory: {BOMB}}}\n",
     "aliases expand"),
    ("as the faults", f"{HEAD}name: x\nrounds: 3\nfaults: {BOMB}\n", "aliases expand"),
    ("an alias inside itself", f"{HEAD}name: x\nrounds: 3\nseed: &s [1, *s]\n",
     "an alias refers to the value that holds it"),
    ("nested 5000 deep", f"{HEAD}name: x\nrounds: 3\nseed: {'[' * 5000}{']' * 5000}\n",
     "nested more than 100 levels deep"),
    ("nested 150 deep", f"{HEAD}name: x\nrounds: 3\nseed: {'[' * 150}{']' * 150}\n",
     "nested more than 100 levels deep"),
    # PyYAML builds a list or a mapping as a key, then cannot hash it: a TypeError.
    ("a list as a key", f"{HEAD}name: x\nrounds: 3\n? [a, b]\n: 1\n",
     ":5:3: not valid YAML: a key must be a name or a number, not a list"),
    ("a mapping as a key", f"{HEAD}name: x\nrounds: 3\nhyperparameters: {{{{[a]: 1}}: 2}}\n",
     ":5:19: not valid YAML: a key must be a name or a number, not a mapping"),
]
# fmt: on


def _one_line(capsys, code: int, result: int, *needles: str) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert result == code, captured
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err and "usage:" not in captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(("text", "needle"), [c[1:] for c in BOMBS], ids=[c[0] for c in BOMBS])
@pytest.mark.parametrize("command", ["simulate", "run"])
def test_hostile_yaml_in_an_experiment_file_is_one_line(
    tmp_path, capsys, starling_home, command, text, needle
):
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    result = main([command, str(path), "--out", str(tmp_path / "out")])
    _one_line(capsys, 2, result, str(path), needle)
    assert not (tmp_path / "out").exists()


def test_hostile_yaml_in_an_inventory_is_one_line(tmp_path, capsys, starling_home):
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump(SMALL))
    inventory = tmp_path / "nodes.yaml"
    for text in (f"nodes: {BOMB}\n", f"nodes: {{a: {BOMB}}}\n", f"ready_timeout: {BOMB}\n"):
        inventory.write_text(text)
        argv = ["run", str(experiment), "--inventory", str(inventory), "--out", str(tmp_path / "o")]
        _one_line(capsys, 2, main(argv), str(inventory), "aliases expand")
    inventory.write_text("nodes:\n  ? [a, b]\n  : 127.0.0.1:50051\n")
    argv = ["run", str(experiment), "--inventory", str(inventory), "--out", str(tmp_path / "o")]
    _one_line(capsys, 2, main(argv), f"{inventory}:2:5", "a key must be a name or a number")


def test_hostile_yaml_in_a_node_config_is_refused_before_serving(tmp_path):
    from starling.node.config import load_settings
    from starling.node.params import ConfigError

    config = tmp_path / "node.yaml"
    for text in (f"id: {BOMB}\n", f"listen: {BOMB}\n", f"data: {{size: {BOMB}}}\n"):
        config.write_text(text)
        with pytest.raises(ConfigError, match="aliases expand to more than"):
            load_settings(config)
    config.write_text("id: a\n? {listen: x}\n: 1\n")
    with pytest.raises(ConfigError, match="a key must be a name or a number, not a mapping"):
        load_settings(config)


LONG = "9" * 5000
# (case, the text added to a small experiment, what the one line must say)
NUMBERS: list[tuple[str, str, str]] = [
    # PyYAML's int() of more than 4300 digits: a ValueError and its traceback.
    (
        "a 5000-digit count",
        f"rounds: {LONG}\n",
        "long.yaml:21:9: not valid YAML: an integer of 5,000",
    ),
    ("a 5000-digit seed", f"seed: {LONG}\n", "an integer of 5,000 digits is too long"),
    ("a 5000-digit size", f"limits: {{node_memory: {LONG}}}\n", "an integer of 5,000 digits"),
    # A size of hundreds of digits was float inf, and int(inf) an OverflowError.
    (
        "a 400-digit size",
        f"limits: {{node_memory: '{LONG[:400]}'}}\n",
        "limits.node_memory: expected",
    ),
    (
        "a 400-digit TiB",
        f"limits: {{samples_memory: {LONG[:400]}TiB}}\n",
        "samples_memory: expected",
    ),
    # A duration of hundreds of digits was "inf ms is not under round_deadline".
    ("a 400-digit delay", f"link_delay: '{LONG[:400]}'\n", "link_delay: expected a duration"),
]


@pytest.mark.parametrize(("text", "needle"), [c[1:] for c in NUMBERS], ids=[c[0] for c in NUMBERS])
def test_a_number_of_too_many_digits_is_one_line(tmp_path, capsys, starling_home, text, needle):
    field = text.split(":", 1)[0]
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in SMALL.items() if k != field}) + text)
    result = main(["simulate", str(path), "--out", str(tmp_path / "out")])
    line = _one_line(capsys, 2, result, needle)
    assert "inf" not in line and "Exceeds the limit" not in line
    assert not (tmp_path / "out").exists()


def test_a_number_of_too_many_digits_in_a_node_config_is_refused_before_serving(tmp_path):
    from starling.node.config import load_settings
    from starling.node.params import ConfigError

    config = tmp_path / "node.yaml"
    config.write_text(f"id: a\ndata: {{size: {LONG}}}\n")
    with pytest.raises(ConfigError, match=r"node.yaml:2:14: not valid YAML: an integer of 5,000"):
        load_settings(config)


def test_study_labels_of_dots_stay_inside_the_study_folder(tmp_path, capsys):
    """A label is a folder name: a variant ``..`` wrote its run's samples, metrics.json and
    summary into its cell's parent (the study's own folder), a cell ``..`` beside the study
    folder, and ``.`` into the folder above."""
    study = {
        "study": "dots",
        "base": {**SMALL, "rounds": 3},
        "cells": [{"label": ".."}],
        "variants": [{"label": "."}, {"label": ".hidden"}],
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(study))
    out = tmp_path / "results" / "dots"
    assert main(["simulate", str(path), "--out", str(out), "--no-report", "--quiet"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "study.yaml"]
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["dots"]
    assert not (out / "metrics.json").exists() and not (out / "samples").exists()
    for variant in ("run", "hidden"):
        run = out / "run" / variant
        assert (run / "metrics.json").is_file(), sorted(out.rglob("*"))
        assert len(list((run / "samples").glob("node-*.npz"))) == 5


def test_a_key_given_twice_in_an_inventory_is_named_not_reported_as_a_missing_node(
    tmp_path, capsys, starling_home
):
    """A second ``a:`` (a copied line meant as ``b:``) replaced the first, and the run
    then said node 'b' had no address."""
    experiment = tmp_path / "exp.yaml"
    raw = {**SMALL, "topology": {"kind": "ring"}, "nodes": [{"id": "a"}, {"id": "b"}]}
    experiment.write_text(yaml.safe_dump(raw))
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text("nodes:\n  a: 127.0.0.1:50051\n  a: 127.0.0.1:50052\n")
    argv = ["run", str(experiment), "--inventory", str(inventory), "--out", str(tmp_path / "o")]
    line = _one_line(capsys, 2, main(argv), "nodes.yaml:3:3", "the key 'a' is given twice")
    assert "no address" not in line


# (case, the inventory's nodes section, what the one line must say)
ADDRESSES: list[tuple[str, Any, str]] = [
    ("bare IPv6 host", {"a": "::1:50051"}, "an IPv6 address goes in brackets ([::1]:50051)"),
    ("host with a space", {"a": "my host:50051"}, "a host name has no spaces"),
    ("no port", {"a": "localhost"}, "expected HOST:PORT"),
    ("port zero", {"a": "localhost:0"}, "expected a port from 1 to 65535"),
    ("port too big", {"a": "localhost:70000"}, "expected a port from 1 to 65535"),
    ("empty address", {"a": ""}, "expected HOST:PORT"),
    ("blank node id", {" ": "127.0.0.1:5"}, "expected a name of letters"),
    ("node id with a space", {"a b": "127.0.0.1:5"}, "expected a name of letters"),
    ("no nodes at all", {}, "expected at least one node"),
]


@pytest.mark.parametrize(
    ("nodes", "needle"), [c[1:] for c in ADDRESSES], ids=[c[0] for c in ADDRESSES]
)
def test_an_inventory_address_is_checked_when_the_file_is_read(
    tmp_path, capsys, starling_home, nodes, needle
):
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(yaml.safe_dump({**SMALL, "topology": {"kind": "ring", "nodes": 2}}))
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text(yaml.safe_dump({"nodes": nodes}))
    argv = ["run", str(experiment), "--inventory", str(inventory), "--out", str(tmp_path / "o")]
    line = _one_line(capsys, 2, main(argv), needle)
    assert "host name not found" not in line
    assert not (tmp_path / "o").exists()


def test_a_node_address_in_the_experiment_is_checked_too(tmp_path, capsys, starling_home):
    raw = {**SMALL, "topology": {"kind": "ring"}, "nodes": [{"id": "a", "address": "::1:7"}]}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(raw))
    _one_line(capsys, 2, main(["simulate", str(path)]), "nodes[0].address", "in brackets")


# (case, argv, what the one line must say)
OPTIONS: list[tuple[str, list[str], str]] = [
    ("a choice not offered", ["status", "--format", "xml"], "status --format: invalid choice"),
    ("not a number", ["links", "set", "a", "b", "--drop", "lots"], "--drop: invalid float"),
    ("not an integer", ["compose", "generate", "--nodes", "five"], "--nodes: invalid int"),
    ("an unknown command", ["frobnicate"], "invalid choice: 'frobnicate'"),
    ("an unknown option", ["status", "--colour"], "unrecognized arguments: --colour"),
    ("a missing argument", ["report"], "report: missing: results"),
    ("--metrics ''", ["run", "quickstart", "--metrics", ""], "run --metrics: expected a value"),
    ("--out ''", ["simulate", "quickstart", "--out", ""], "simulate --out: expected a value"),
    ("--inventory ' '", ["run", "quickstart", "--inventory", " "], "--inventory: expected a"),
    ("--run ''", ["status", "--run", ""], "status --run: expected a value"),
    ("an empty node id", ["links", "cut", "", "b"], "sender: expected a value"),
    ("an empty results folder", ["report", ""], "results: expected a value"),
    ("--experiment ''", ["compose", "generate", "--experiment", ""], "--experiment: expected"),
    ("node serve --id ''", ["node", "serve", "--id", ""], "serve --id: expected a value"),
    ("node serve --store ''", ["node", "serve", "--store", ""], "serve --store: expected a"),
    ("node health, bare IPv6", ["node", "health", "::1:50051"], "IPv6 address goes in brackets"),
    ("node health, a space", ["node", "health", "my host:50051"], "a host name has no spaces"),
    ("node serve, a spaced id", ["node", "serve", "--id", "a b"], "id: expected a node id"),
    ("node serve, spaced listen", ["node", "serve", "--listen", "a b:1"], "--listen: a host"),
    ("node serve, bad workers", ["node", "serve", "--max-workers", "x"], "--max-workers: inv"),
    ("certs, a spaced id", ["certs", "init", "c", "--nodes", "a b"], "is not a DNS label"),
    ("certs, a blank id", ["certs", "init", "c", "--nodes", "a,,b"], "--nodes: '' is not a DNS"),
    ("certs, a repeated id", ["certs", "init", "c", "--nodes", "a,a"], "'a' is given twice"),
    ("certs, negative days", ["certs", "init", "c", "--nodes", "a", "--days", "-1"], "--days:"),
    (
        "certs, endless days",
        ["certs", "init", "c", "--nodes", "a", "--days", "1000000000"],
        "--days",
    ),
    ("compose, a spaced kind", ["compose", "generate", "--topology", "x y"], "--topology: unkn"),
    ("metrics, a spaced host", ["run", "quickstart", "--metrics", "a b:1"], "a host name has no"),
    ("metrics, bare IPv6", ["run", "quickstart", "--metrics", "::1:9000"], "in brackets"),
    ("a device as the file", ["simulate", "/dev/zero"], "is not a regular file"),
    ("watch, negative wait", ["status", "--watch", "--wait", "-1"], "--wait: expected"),
    # gRPC takes these as a C int: OverflowError and its traceback.
    (
        "node serve, endless message size",
        ["node", "serve", "--max-message-bytes", str(10**20)],
        "--max-message-bytes: must be at most 2147483647",
    ),
    (
        "node serve, endless request size",
        ["node", "serve", "--max-request-bytes", str(2**31)],
        "--max-request-bytes: must be at most 2147483647",
    ),
    # A name longer than the file system takes: Path.exists() raised ENAMETOOLONG.
    *[
        (f"a 300-character name, {argv[0]} {argv[1]}", argv, "name too long")
        for argv in (
            ["simulate", "quickstart", "--out", "a" * 300],
            ["run", "quickstart", "--out", f"{'a' * 300}/b"],
            ["simulate", f"{'a' * 300}.yaml"],
            ["report", "a" * 300],
            ["collect", "a" * 300],
            ["export", "a" * 300],
            ["examples", "--copy", "a" * 300],
            ["node", "serve", "--config", f"{'a' * 300}.yaml"],
            ["node", "serve", "--store", "a" * 300],
        )
    ],
]


@pytest.mark.parametrize(("argv", "needle"), [c[1:] for c in OPTIONS], ids=[c[0] for c in OPTIONS])
def test_a_bad_option_value_is_one_line_naming_the_option(
    tmp_path, capsys, starling_home, monkeypatch, argv, needle
):
    monkeypatch.chdir(tmp_path)  # nothing may be written; a default results/ would land here
    _one_line(capsys, 2, main(argv), needle)
    assert not list(tmp_path.iterdir())


# --- run.json, read back by status, links, nodes and stop

VALID_RECORD = {
    "name": "x",
    "out_dir": "/tmp/nowhere",
    "orchestrator_pid": 1,
    "addresses": {"a": "127.0.0.1:5"},
    "pids": {"a": None},
}
# (case, run.json's text, what the one line must say)
RECORDS: list[tuple[str, str, str]] = [
    ("not JSON", "{name: x", "not valid JSON"),
    ("a list", "[]", "expected a JSON object"),
    ("empty object", "{}", "name: missing"),
    ("a pid as text", json.dumps({**VALID_RECORD, "orchestrator_pid": "12"}), "orchestrator_pid"),
    ("pid -1", json.dumps({**VALID_RECORD, "orchestrator_pid": -1}), "orchestrator_pid"),
    ("addresses a list", json.dumps({**VALID_RECORD, "addresses": ["a"]}), "addresses"),
    ("an address a number", json.dumps({**VALID_RECORD, "addresses": {"a": 5}}), "addresses.a"),
    ("a blank node id", json.dumps({**VALID_RECORD, "addresses": {"": "h:1"}}), "addresses"),
    ("access not a mapping", json.dumps({**VALID_RECORD, "access": 3}), "access"),
    ("tls not a mapping", json.dumps({**VALID_RECORD, "access": {"tls": 5}}), "access.tls"),
    ("link delay text", json.dumps({**VALID_RECORD, "link_delay_ms": "1s"}), "link_delay_ms"),
    ("not UTF-8", "\udcff", "run.json"),
]


@pytest.mark.parametrize(("text", "needle"), [c[1:] for c in RECORDS], ids=[c[0] for c in RECORDS])
@pytest.mark.parametrize(
    "argv",
    [
        ["status"],
        ["status", "--format", "json"],
        ["links", "cut", "a", "b"],
        ["nodes", "kill", "a"],
        ["stop"],
    ],
    ids=["status", "status-json", "links", "nodes", "stop"],
)
def test_a_hand_edited_or_foreign_run_record_is_one_line(
    tmp_path, capsys, starling_home, argv, text, needle
):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.json").write_bytes(text.encode("utf-8", "surrogateescape"))
    _one_line(capsys, 2, main([*argv, "--run", str(folder)]), "run.json", needle)


def test_a_foreign_pointer_in_the_registry_is_passed_over(tmp_path, capsys, starling_home):
    (starling_home / "active").mkdir(parents=True)
    (starling_home / "active" / "1.json").write_text('{"what": "a file of another program"}')
    _one_line(capsys, 2, main(["status"]), "no running experiment found")


# --- results folders that mix two runs


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("finished")
    path = folder / "exp.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "name": "finished"}))
    assert main(["simulate", str(path), "--out", str(folder / "run"), "--no-report"]) == 0
    return folder / "run"


def _resave(path, change) -> None:
    with np.load(path) as stored:
        samples, rounds = stored["samples"], stored["rounds"]
    samples, rounds = change(samples, rounds)
    np.savez(path, samples=samples, rounds=rounds)


MIXES = [
    ("more coordinates", lambda s, r: (np.concatenate([s, s[..., :1]], -1), r), "3 coordinates"),
    ("fewer chains", lambda s, r: (s[:, :2], r), "2 chains, but metrics.json says 4"),
    ("fewer rounds", lambda s, r: (s[:3], r[:3]), "3 rounds, but metrics.json counts 6"),
]


@pytest.mark.parametrize(("change", "needle"), [m[1:] for m in MIXES], ids=[m[0] for m in MIXES])
def test_report_on_a_folder_whose_samples_and_experiment_disagree(
    finished, tmp_path, capsys, change, needle
):
    folder = tmp_path / "mixed"
    shutil.copytree(finished, folder)
    _resave(folder / "samples" / "node-0.npz", change)
    _one_line(capsys, 2, main(["report", str(folder)]), "node-0.npz", needle, "different runs")


def test_report_on_a_folder_whose_experiment_file_is_another_model(finished, tmp_path, capsys):
    folder = tmp_path / "mixed"
    shutil.copytree(finished, folder)
    raw = yaml.safe_load((folder / "experiment.yaml").read_text())
    raw["model"]["params"] = {**raw["model"].get("params", {}), "dim": 3}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(raw))
    _one_line(capsys, 2, main(["report", str(folder)]), "posterior has 3", "different runs")


def test_collect_refuses_a_folder_whose_experiment_file_was_swapped(tmp_path, capsys):
    """The results of the run would have been written under the other experiment's name.
    ``start.json`` (sealed with the user's key: core/seals.py) holds the digest of the
    experiment file the run wrote; another file in its place is refused before any node is
    asked."""
    folder = tmp_path / "crashed"
    folder.mkdir()
    written = yaml.safe_dump({**SMALL, "name": "mine"})
    start = {
        "experiment": "mine",
        "backend": "inventory",
        "orchestrator_pid": 2**22 + 1,  # above Linux's pid_max: no such process
        "nodes": {
            str(k): {"address": f"127.0.0.1:{5000 + k}", "stored_run": ["mine", str(k)]}
            for k in range(5)
        },
        "experiment_sha256": hashlib.sha256(written.encode()).hexdigest(),
    }
    (folder / "start.json").write_text(json.dumps(sealed(start)))
    (folder / "experiment.yaml").write_text(yaml.safe_dump({**SMALL, "name": "other"}))
    manifest = {"status": "running", "files": [], "foreign": [], "pid": 2**22 + 1}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    line = _one_line(capsys, 2, main(["collect", str(folder)]), "changed since the run wrote it")
    assert "experiment.yaml" in line
    assert not (folder / "metrics.json").exists()


def test_thousands_of_scheduled_faults_are_counted_in_the_account_not_listed(tmp_path, capsys):
    """Each scheduled fault was a line of the account printed at the end of the run."""
    faults = [{"link": ["0", "1"], "rounds": [k % 5, k % 5 + 1], "drop": 0.5} for k in range(2_000)]
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump({**SMALL, "faults": faults}))
    out = tmp_path / "out"
    assert main(["simulate", str(path), "--out", str(out), "--no-report", "--quiet"]) == 0
    printed = capsys.readouterr().out
    metrics = json.loads((out / "metrics.json").read_text())
    scheduled = [line for line in metrics["account"] if line.startswith("scheduled:")]
    assert len(scheduled) <= 21, len(scheduled)
    assert "1,980 more link faults" in scheduled[-1]
    assert len(metrics["faults"]["scheduled_links"]) == 2_000  # every one still recorded
    assert len(printed.splitlines()) < 100
