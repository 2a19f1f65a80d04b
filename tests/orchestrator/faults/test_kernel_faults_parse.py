"""``kernel_faults`` is checked before anything starts: each bad entry is refused with one
line naming the entry and field, and a backend other than docker is refused outright
(only containers can be paused or packet-filtered)."""

from __future__ import annotations

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.faults.kernel import KernelFault, parse_kernel_faults

NODES = ["a", "b", "c"]


def test_entries_parse_into_faults():
    faults = parse_kernel_faults(
        [
            {"pause": "b", "at_round": 4, "for_rounds": 3},
            {"cut": ["a", "c"], "at_round": 2, "for_rounds": 1},
            {"loss": ["c", "a"], "percent": 30, "at_round": 5, "for_rounds": 2},
            {"rate": "a", "kbit": 64, "at_round": 0, "for_rounds": 1},
            {"reset": ["b", "c"], "at_round": 3, "for_rounds": 2},
            {"delay": ["a", "b"], "ms": 50, "jitter_ms": 10, "at_round": 1, "for_rounds": 2},
        ],
        NODES,
        rounds=10,
    )
    assert faults == (
        KernelFault("pause", "b", None, 4, 3),
        KernelFault("cut", "a", "c", 2, 1),
        KernelFault("loss", "c", "a", 5, 2, 30.0),
        KernelFault("rate", "a", None, 0, 1, 64.0),
        KernelFault("reset", "b", "c", 3, 2),
        KernelFault("delay", "a", "b", 1, 2, 50.0, 10.0),
    )
    assert faults[-1].label == "delay 50 ms ± 10 ms of link a->b"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"pause": "z", "at_round": 1, "for_rounds": 1}, "kernel_faults[0].pause: no node 'z'"),
        ({"cut": ["a", "a"], "at_round": 1, "for_rounds": 1}, "kernel_faults[0].cut: expected"),
        ({"pause": "a", "for_rounds": 1}, "kernel_faults[0].at_round: expected a whole"),
        ({"pause": "a", "at_round": 1}, "kernel_faults[0].for_rounds: expected a whole"),
        ({"pause": "a", "at_round": 10, "for_rounds": 1}, "kernel_faults[0].at_round: 10 is past"),
        (
            {"loss": ["a", "b"], "percent": 130, "at_round": 1, "for_rounds": 1},
            "kernel_faults[0].percent: expected a number in (0, 100]",
        ),
        (
            {"pause": "a", "cut": ["a", "b"], "at_round": 1, "for_rounds": 1},
            "kernel_faults[0]: name exactly one of",
        ),
        (
            {"pause": "a", "percent": 5, "at_round": 1, "for_rounds": 1},
            "kernel_faults[0].percent: unknown field for a pause fault",
        ),
        (
            {"delay": ["a", "b"], "ms": 5, "jitter_ms": -1, "at_round": 1, "for_rounds": 1},
            "kernel_faults[0].jitter_ms: expected a number >= 0",
        ),
        (
            {"loss": ["a", "b"], "percent": 5, "jitter_ms": 1, "at_round": 1, "for_rounds": 1},
            "kernel_faults[0].jitter_ms: unknown field for a loss fault",
        ),
    ],
)
def test_bad_entries_are_refused_with_the_field(entry, message):
    with pytest.raises(ConfigError) as caught:
        parse_kernel_faults([entry], NODES, rounds=10)
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def _raw(**changes):
    raw = {
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 10,
        "kernel_faults": [{"pause": "1", "at_round": 2, "for_rounds": 2}],
    }
    raw.update(changes)
    return raw


def test_kernel_faults_need_the_docker_backend():
    with pytest.raises(ConfigError, match=r"^kernel_faults: need backend kind docker"):
        parse_experiment(_raw(), "exp")
    parsed = parse_experiment(_raw(backend={"kind": "docker"}), "exp")
    assert parsed.kernel_faults == (KernelFault("pause", "1", None, 2, 2),)


def test_docker_backend_refuses_a_host_file_path(tmp_path):
    """A docker node cannot see a file of this machine: the backend's capabilities say so
    (``host_files``), and the file is refused as it is read, before anything starts."""
    data = tmp_path / "d.csv"
    data.write_text("1,2,3\n" * 30)
    raw = _raw(backend={"kind": "docker"}, kernel_faults=None)
    with pytest.raises(ConfigError, match=r"^data.source: file is a path on this machine"):
        parse_experiment({**raw, "data": {"source": "file", "path": str(data)}}, "exp")
    local = {**raw, "backend": {"kind": "local"}, "data": {"source": "file", "path": str(data)}}
    assert parse_experiment(local, "exp").data.path == str(data)  # the control
