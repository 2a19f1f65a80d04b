"""A node started on its own: settings file and flags, its own data, fresh runs, health.

Real node processes over gRPC (the Cluster harness); the settings parser on real files.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from starling.node.config import HomeData, load_settings, override
from starling.node.data.shards import load_shard
from starling.node.models import build_model
from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs
from tests.conftest import ROOT
from tests.node.test_runtime_harness import Cluster, wait_until


def _write(tmp_path, text: str):
    path = tmp_path / "node.yaml"
    path.write_text(text)
    return path


def _serve_refusal(*args: str) -> list[str]:
    """``node serve ARGS`` run as a user would; it must exit 2, refused before serving.
    Its stderr's lines."""
    done = subprocess.run(
        [sys.executable, "-m", "starling.node", "serve", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    return done.stderr.strip().splitlines()


def test_settings_file_and_flags_over_it(tmp_path):
    path = _write(
        tmp_path,
        "id: a\nlisten: 0.0.0.0:50051\nstore: /var/lib/x\n"
        "data: {source: synthetic, shard: 3, size: 40, seed: 2}\ntls: {}\n",
    )
    settings = load_settings(path)
    assert (settings.id, settings.listen, settings.store) == ("a", "0.0.0.0:50051", "/var/lib/x")
    assert settings.data == HomeData(source="synthetic", shard=3, size=40, seed=2)
    flags = dict(
        id=None,
        listen="127.0.0.1:0",
        store=None,
        log_level=None,
        shard=None,
        size=None,
        seed=None,
        path=None,
        format=None,
    )
    changed = override(settings, **{**flags, "shard": 1})
    assert changed.listen == "127.0.0.1:0" and changed.id == "a"
    assert changed.data == HomeData(source="synthetic", shard=1, size=40, seed=2)
    as_file = override(settings, **{**flags, "path": "/data/mine.csv"})
    assert as_file.data.source == "file" and as_file.data.path == "/data/mine.csv"
    assert override(load_settings(None), **{**flags, "shard": 0}).data == HomeData(shard=0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("port: 1\n", "port: unknown field"),
        ("tls: {cert: /etc/cert.pem}\n", "tls.ca: required, the path of a PEM file"),
        ("tls: {ca: a, cert: b, key: c, pin: d}\n", "tls.pin: unknown field"),
        ("insecure: yes please\n", "insecure: expected true or false"),
        ("data: {source: synthetic, shard: -1}\n", "data.shard: must be 0 or more"),
        ("data: {source: file}\n", "data.path: required"),
        ("data: {source: http}\n", "data.source: 'http' is not synthetic or file"),
        ("data: {shard: two}\n", "data.shard: expected an integer"),
        ("data: {source: synthetic, seed: -1}\n", "data.seed: must be 0 or more, got -1"),
        ("id: 7\n", "id: expected a string"),
    ],
)
def test_bad_settings_are_one_line_naming_the_field(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(_write(tmp_path, text))


@pytest.mark.e2e
def test_serve_reports_a_bad_settings_file_in_one_line(tmp_path):
    path = _write(tmp_path, "data: {source: synthetic, shard: -2}\n")
    assert _serve_refusal("--config", str(path)) == [
        "starling-node: data.shard: must be 0 or more, got -2"
    ]


def test_a_settings_path_that_is_a_directory_says_so(tmp_path):
    with pytest.raises(ConfigError, match=r"^--config: no such file"):
        load_settings(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=rf"^--config: '{tmp_path}' is a directory, not a file"):
        load_settings(tmp_path)


@pytest.mark.e2e
def test_serve_with_a_directory_as_config_says_it_is_one(tmp_path):
    """A directory given as --config was reported as 'no such file': the user looked for a
    missing file that was there, as a folder."""
    assert _serve_refusal("--config", str(tmp_path)) == [
        f"starling-node: --config: {str(tmp_path)!r} is a directory, not a file"
    ]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-workers", "-5"], "--max-workers: must be at least 1, got -5"),
        (["--max-message-bytes", "0"], "--max-message-bytes: must be at least 1024, got 0"),
        (["--max-peer-streams", "0"], "--max-peer-streams: must be at least 1, got 0"),
    ],
)
def test_serve_refuses_impossible_limits_in_one_line(flags, message):
    assert _serve_refusal(*flags) == [f"starling-node: {message}"]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--data-seed", "-1"], "data.seed: must be 0 or more, got -1"),
        (["--shard", str(2**63)], f"data.shard: must be at most 2^63 - 1, got {2**63}"),
        (["--data-file", "{tmp}/absent.npz"], "data.path: no such file '{tmp}/absent.npz'"),
        (["--data-dir", "{tmp}/absent"], "data_dir: '{tmp}/absent' is not a folder"),
        (["--data-dir", "{tmp}/file.txt"], "data_dir: '{tmp}/file.txt' is not a folder"),
    ],
    ids=[
        "negative seed",
        "shard past int64",
        "missing data file",
        "missing data folder",
        "data folder a file",
    ],
)
def test_serve_refuses_data_it_could_never_use_before_it_serves(tmp_path, flags, message):
    """Each of these passed ``node serve`` and failed only when an experiment first asked
    the node for its data (Configure), long after whoever started it had gone."""
    (tmp_path / "file.txt").write_text("not a folder")
    given = [flag.format(tmp=tmp_path) for flag in flags]
    assert _serve_refusal("--listen", "127.0.0.1:0", *given) == [
        f"starling-node: {message.format(tmp=tmp_path)}"
    ]


@pytest.mark.e2e
def test_serve_refuses_a_store_that_is_a_file(tmp_path):
    store = tmp_path / "store"
    store.write_text("not a folder")
    assert _serve_refusal("--store", str(store)) == [
        f"starling-node: --store {store}: is a file, not a folder"
    ]


def _experiment(name: str = "own-data", rounds: int = 6, **extra):
    return parse_experiment(
        {
            "name": name,
            "algorithm": "d-sgld",
            "hyperparameters": {"eta": 0.01},
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "node"},
            "nodes": [{"id": "a"}, {"id": "b"}],
            "topology": {"kind": "ring"},
            "rounds": rounds,
            "chains": 2,
            "seed": 3,
            "round_deadline": 5.0,
            **extra,
        }
    )


def _own_data_nodes(cluster: Cluster, seed: int = 9, size: int = 17):
    procs = {
        node: cluster.launch(
            node,
            extra=[
                "--id",
                node,
                "--shard",
                str(k),
                "--data-size",
                str(size),
                "--data-seed",
                str(seed),
            ],
        )
        for k, node in enumerate(["a", "b"])
    }
    return {node: cluster.ready(proc) for node, proc in procs.items()}


@pytest.mark.e2e
def test_node_uses_its_own_data_and_reports_only_the_recipe(tmp_path):
    experiment = _experiment()
    with Cluster(tmp_path) as cluster:
        procs = _own_data_nodes(cluster)
        specs = node_specs(experiment, {n: p.address for n, p in procs.items()})
        assert all(s.data.source == "node" and not s.data.path for s in specs)
        clients = {s.node_id: procs[s.node_id].client() for s in specs}
        replies = {s.node_id: clients[s.node_id].configure(s) for s in specs}
        for k, node in enumerate(["a", "b"]):
            data = replies[node].data
            assert (data.source, data.shard, data.seed, data.size) == ("synthetic", k, 9, 17)
            assert data.path == ""
        for client in clients.values():
            client.start()
        wait_until(lambda: all(c.status().state == "done" for c in clients.values()), 60, "done")
        # The node's shard is the one --shard/--data-seed name: the same program on the
        # same spec with that shard, in-process, gives the same samples bit for bit.
        from starling.node.engine import simulate

        resolved = [dataclasses.replace(s, data=replies[s.node_id].data, peers={}) for s in specs]
        expected = simulate(resolved)
        for node, client in clients.items():
            got = np.stack([value for _, value in client.samples()])
            assert np.array_equal(got, expected[node]), node
        model = build_model(experiment.model)
        assert len(load_shard(replies["a"].data, model)) == 17


@pytest.mark.e2e
def test_node_without_own_data_or_with_another_id_refuses_in_one_line(tmp_path):
    experiment = _experiment()
    with Cluster(tmp_path) as cluster:
        bare = cluster.ready(cluster.launch("a"))
        other = cluster.ready(cluster.launch("b", extra=["--id", "b", "--shard", "1"]))
        specs = {s.node_id: s for s in node_specs(experiment)}
        with pytest.raises(
            ConfigError,
            match="node 'a': the experiment leaves the data to the node .* started without data",
        ):
            bare.client().configure(specs["a"])
        with pytest.raises(ConfigError, match="node 'b': asked to run as node 'a'"):
            other.client().configure(specs["a"])


@pytest.mark.e2e
def test_a_fresh_run_starts_over_and_a_reconfigured_node_resumes(tmp_path):
    experiment = _experiment("fresh", rounds=5)
    with Cluster(tmp_path) as cluster:
        procs = _own_data_nodes(cluster)
        specs = node_specs(experiment, {n: p.address for n, p in procs.items()})
        clients = {s.node_id: procs[s.node_id].client() for s in specs}

        def run(fresh: bool):
            replies = {s.node_id: clients[s.node_id].configure(s, fresh=fresh) for s in specs}
            for client in clients.values():
                client.start()
            wait_until(
                lambda: all(c.status().state == "done" for c in clients.values()), 60, "done"
            )
            return replies

        first = run(fresh=True)
        assert not any(r.resumed for r in first.values())
        again = run(fresh=False)  # same node-data spec: the same fingerprint, so it resumes
        assert all(
            r.resumed and r.next_round == 5 and r.samples_stored == 5 for r in again.values()
        )
        anew = run(fresh=True)
        assert all(not r.resumed and r.next_round == 0 for r in anew.values())


@pytest.mark.e2e
def test_health_command_exit_codes(tmp_path):
    with Cluster(tmp_path) as cluster:
        proc = cluster.ready(cluster.launch("a"))

        def health(address: str):
            return subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "starling.orchestrator.cli",
                    "node",
                    "health",
                    address,
                    "--timeout",
                    "2",
                ],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )

        up = health(proc.address)
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == f"{proc.address}: serving"
        proc.process.kill()
        proc.process.wait(timeout=10)
        down = health(proc.address)
        assert down.returncode == 1
        assert down.stderr.strip() == (
            f"starling-node: {proc.address}: unavailable: connection refused: nothing "
            "listens on that port"
        )


def test_the_shipped_device_config_loads_and_the_unit_serves_it():
    """deploy/node.yaml is what the docs' device page installs; the unit runs it."""
    root = Path(__file__).resolve().parents[2]
    settings = load_settings(root / "deploy" / "node.yaml")
    assert settings.id == "a" and settings.tls is not None and not settings.insecure
    assert settings.data.source == "file" and settings.data_dir == "/var/lib/starling/data"
    unit = (root / "deploy" / "starling-node.service").read_text()
    serve = "ExecStart=/opt/starling/bin/starling node serve --config /etc/starling/node.yaml"
    assert serve in unit
