"""A broken experiment file gets one clear line naming the field or node, exit code 2."""

from __future__ import annotations

import socket

import pytest
import yaml

from tests.conftest import ROOT, run_cli

pytestmark = pytest.mark.e2e

BASE = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())


def _write(tmp_path, **changes):
    config = {**BASE, **changes}
    for key, value in list(config.items()):
        if value is None:
            del config[key]
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _assert_one_clear_line(result, *needles):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize("command", ["run", "simulate"])
@pytest.mark.parametrize(
    ("changes", "needles"),
    [
        ({"algorithm": "d-magic"}, ["algorithm", "d-magic"]),
        ({"rounds": None}, ["rounds", "missing"]),
        ({"chains": "many"}, ["chains", "integer"]),
        ({"hyperparameters": {"rho": "five"}}, ["hyperparameters.rho"]),
        ({"hyperparameters": {"rhoo": 5}}, ["hyperparameters.rhoo", "unknown"]),
        ({"model": {"name": "linear_regression", "params": {"dim": -1}}}, ["model.params"]),
        ({"topology": {"kind": "edges", "nodes": 3, "edges": [["0", "9"]]}}, ["'9'", "not a node"]),
        ({"topology": {"kind": "moebius", "nodes": 3}}, ["topology.kind", "moebius"]),
        ({"unexpected": 1}, ["unexpected", "unknown field"]),
        ({"link_delay": "soon"}, ["link_delay", "duration"]),
        ({"faults": [{"link": ["0", "2"], "rounds": [1, 3]}]}, ["faults[0].link", "not an edge"]),
        # Names become paths (results/NAME/, samples/node-ID.npz): nothing that leaves them.
        ({"name": "../../escape"}, ["name", "expected a name", "'../../escape'"]),
        ({"name": "."}, ["name", "expected a name"]),
        ({"name": "/tmp/abs"}, ["name", "expected a name"]),
        (
            {"nodes": [{"id": "../x"}, {"id": "b"}, {"id": "c"}], "topology": {"kind": "ring"}},
            ["nodes[0].id", "expected a name"],
        ),
        (
            {"nodes": [{"id": ""}, {"id": "b"}, {"id": "c"}], "topology": {"kind": "ring"}},
            ["nodes[0].id", "expected a name"],
        ),
        # The orchestrator's identity: a node of that name would have a certificate that
        # calls Control on every node.
        (
            {"nodes": [{"id": "orchestrator"}, {"id": "b"}], "topology": {"kind": "ring"}},
            ["nodes[0].id", "'orchestrator' is the orchestrator's identity"],
        ),
        ({"round_deadline": 1e10}, ["round_deadline", "up to 1e+06"]),
        # Seeds travel to the nodes as int64: a larger one passed simulate and crashed run.
        ({"seed": 2**70}, ["seed", "at most 9223372036854775807"]),
        ({"data": {"source": "synthetic", "size": 5, "seed": 2**63}}, ["data.seed", "at most"]),
        ({"faults": [{"link": "all", "drop": 0.1, "seed": 2**70}]}, ["faults[0].seed", "at most"]),
        # YAML 1.1 reads 1e-3 (no dot) as text: the error says why.
        ({"hyperparameters": {"rho": "1e-3"}}, ["hyperparameters.rho", "write it with a dot"]),
        ({"round_deadline": "2e0"}, ["round_deadline", "write it with a dot"]),
        ({"backend": {"kind": "local", "base_port": 65534}}, ["backend.base_port", "65538"]),
        # Every sample is held to be evaluated: 10^9 rounds would fill any memory.
        ({"rounds": 10**9}, ["rounds × chains × dim × nodes", "limits.samples_memory"]),
        # Positive, but its square is 0.0: the nodes divided by zero building their potential.
        (
            {"model": {"name": "linear_regression", "params": {"dim": 2, "noise_std": 1e-200}}},
            ["model.params.noise_std", "between 1e-100 and 1e+100"],
        ),
        ({"faults": [{"node": "7", "kill_at_round": 3}]}, ["faults[0].node", "'7'"]),
        # A field the source never reads was ignored without a word.
        ({"data": {"source": "synthetic", "path": "mine.csv"}}, ["data.path", "source: file"]),
        ({"data": {"source": "file", "path": "x.csv", "total": 9}}, ["data.total", "synthetic"]),
    ],
)
def test_broken_experiment_is_refused_clearly(tmp_path, starling_home, command, changes, needles):
    path = _write(tmp_path, **changes)
    result = run_cli(command, str(path), "--out", str(tmp_path / "out"), env_home=starling_home)
    _assert_one_clear_line(result, *needles)


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_data_path_naming_a_directory_says_so(tmp_path, starling_home, command):
    """A directory as data.path was reported as 'no such file': the user looked for a
    missing file that was there, as a folder."""
    folder = tmp_path / "shards"
    folder.mkdir()
    path = _write(tmp_path, data={"source": "file", "path": str(folder), "format": "csv"})
    result = run_cli(command, str(path), "--out", str(tmp_path / "out"), env_home=starling_home)
    _assert_one_clear_line(result, "data.path", repr(str(folder)), "is a directory")
    assert "no such file" not in result.stderr


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_a_bad_test_file_names_evaluation_test_path(tmp_path, starling_home, command):
    """A missing, folder or malformed evaluation.test.path was reported as data.path (the
    test file was read by the training data's loader): the user looked at a training file
    that was fine."""
    folder = tmp_path / "test-set.csv"
    folder.mkdir()
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("1,2,1\n3,4\n")
    model = {"name": "logistic_regression", "params": {"features": 2}}
    for case, (test, needles) in enumerate(
        [
            (str(tmp_path / "none.csv"), ["evaluation.test.path", "no such file"]),
            (str(folder), ["evaluation.test.path", repr(str(folder)), "is a directory"]),
            (str(ragged), ["evaluation.test.path", "line 2"]),
        ]
    ):
        path = _write(
            tmp_path,
            algorithm="d-sgld",
            hyperparameters={"eta": 0.01},
            model=model,
            rounds=2,
            chains=2,
            evaluation={"test": {"path": test}},
        )
        out = tmp_path / f"out-{case}"
        result = run_cli(command, str(path), "--out", str(out), env_home=starling_home)
        _assert_one_clear_line(result, *needles)
        assert "data.path" not in result.stderr


def test_missing_file_is_named(tmp_path, starling_home):
    result = run_cli("run", str(tmp_path / "nope.yaml"), env_home=starling_home)
    _assert_one_clear_line(result, "nope.yaml")


def test_port_in_use_names_the_node(tmp_path, starling_home):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        path = _write(tmp_path, backend={"kind": "local", "base_port": port}, rounds=3, chains=2)
        result = run_cli("run", str(path), "--out", str(tmp_path / "out"), env_home=starling_home)
    _assert_one_clear_line(result, "node '0'", str(port))


@pytest.mark.parametrize(
    "command",
    [["status"], ["links", "cut", "0", "1"], ["nodes", "kill", "0"]],
)
def test_live_commands_without_a_running_experiment_say_so(starling_home, command):
    result = run_cli(*command, env_home=starling_home)
    _assert_one_clear_line(result, "no running experiment found", "starling run")


def test_a_name_taken_from_the_file_is_made_a_plain_name():
    from starling.orchestrator.config.experiment import parse_experiment

    raw = {k: v for k, v in BASE.items() if k != "name"}
    assert parse_experiment(raw, default_name="my exp (v2)").name == "my-exp--v2-"
    assert parse_experiment(raw, default_name="..").name == "experiment"


def test_hostile_yaml_is_refused_at_once(tmp_path, starling_home):
    """Nine levels of nested aliases (9^9 paths through ten small lists) and a value nested
    3000 deep: each one clear line, at once (the alias walk used to run for ever, the
    nesting to end in a RecursionError traceback)."""
    laughs = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        here, below = chr(ord("a") + level), chr(ord("a") + level - 1)
        laughs.append(f"{here}: &{here} [" + ", ".join([f"*{below}"] * 9) + "]")
    cases = {
        "laughs.yaml": ("\n".join(laughs) + "\nalgorithm: d-admms\n", "aliases expand to more"),
        "deep.yaml": (
            "algorithm: d-admms\nx: " + "[" * 3000 + "]" * 3000 + "\n",
            "nested more than 100 levels deep",
        ),
    }
    for name, (text, needle) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        result = run_cli("simulate", str(path), env_home=starling_home, timeout=60)
        _assert_one_clear_line(result, needle)


def test_a_key_given_twice_is_refused_with_its_line(tmp_path, starling_home):
    path = tmp_path / "twice.yaml"
    path.write_text("name: twice\nrounds: 10\nalgorithm: d-admms\nrounds: 10000\n")
    result = run_cli("simulate", str(path), env_home=starling_home)
    _assert_one_clear_line(result, "twice.yaml:4:1", "the key 'rounds' is given twice")


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_a_nodes_own_data_file_missing_names_the_node(tmp_path, starling_home, command):
    """A node's own file (nodes[k].data.path) that is not there was reported as
    ``data.path`` alone by simulate, as if the experiment's shared file were missing, and
    by run as the data folder the local backend derived from it."""
    shared = tmp_path / "shared.csv"
    shared.write_text("".join(f"{k},{k % 3},{k % 5}\n" for k in range(40)))
    missing = tmp_path / "gone" / "mine.csv"
    path = _write(
        tmp_path,
        data={"source": "file", "path": str(shared), "format": "csv"},
        nodes=[{"id": "a", "data": {"path": str(missing)}}, *({"id": n} for n in "bcde")],
        topology={"kind": "ring"},
        rounds=3,
        chains=2,
    )
    result = run_cli(command, str(path), "--out", str(tmp_path / "out"), env_home=starling_home)
    _assert_one_clear_line(result, "node 'a': data.path: no such file", repr(str(missing)))
