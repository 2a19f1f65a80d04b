"""The swarm stack end to end, on a single-node swarm of this machine's engine: ``starling
certs init``, ``starling deploy generate --target swarm --tls``, ``docker stack deploy``, and
the orchestrator's one-shot service runs the quickstart to completion on five node services
over mutual TLS, with the TLS files handed out as swarm secrets.

As in the compose test, the nodes hold shards 0..4 of seed 1, so the run must give exactly
what ``starling simulate examples/quickstart.yaml`` gives in-process: the same W2 for every
node and for the average, to 1e-12 (the samples are bit-identical; only float summation
order in the evaluation could differ, and it does not). The stack is removed, its volumes
with it, and the swarm left at the end (a swarm that was already there is kept, only this
test's labels are taken off its node).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest

from tests.conftest import run_cli
from tests.docker.conftest import (
    QUICKSTART_TWINS,
    assert_quickstart_w2,
    generate_long_run,
    nft_tables,
)

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

NODES = QUICKSTART_TWINS
LABELS = [f"starling.node.{n}" for n in NODES] + ["starling.orchestrator"]


def _docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


@pytest.fixture
def swarm():
    """This engine in swarm mode, its one node labelled for every Starling service; the
    node's id. Leaves swarm mode afterwards if it was not in it before."""
    state = _docker("info", "--format", "{{.Swarm.LocalNodeState}}")
    joined = state == "inactive"
    if joined:
        _docker("swarm", "init", "--advertise-addr", "127.0.0.1")
    elif state != "active":
        pytest.fail(f"the engine's swarm state is {state!r}", pytrace=False)
    node = _docker("info", "--format", "{{.Swarm.NodeID}}")
    adds = [arg for label in LABELS for arg in ("--label-add", f"{label}=true")]
    _docker("node", "update", *adds, node)
    try:
        yield node
    finally:
        if joined:
            _docker("swarm", "leave", "--force", check=False)
        else:
            rms = [arg for label in LABELS for arg in ("--label-rm", label)]
            _docker("node", "update", *rms, node, check=False)


def _deploy(folder, stack: str, results) -> None:
    """``docker stack deploy`` of the generated folder, as its header says, results in
    ``results``; the images are this engine's own (no registry)."""
    deployed = subprocess.run(
        ["docker", "stack", "deploy", "--resolve-image", "never", "-c", "stack.yml", stack],
        cwd=folder,
        env={**os.environ, "STARLING_RESULTS": str(results)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert deployed.returncode == 0, deployed.stderr


def _wait_done(service: str, timeout: float) -> str:
    """The orchestrator task's final state (Complete, Failed, ...) once it has one."""
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        state = _docker(
            "service", "ps", service, "--no-trunc", "--format", "{{.CurrentState}}", check=False
        )
        first = state.splitlines()[0].split()[0] if state else ""
        if first in ("Complete", "Failed", "Rejected", "Shutdown", "Orphaned"):
            return first
        time.sleep(2)
    return f"still {state or 'unscheduled'} after {timeout:g} s"


def _remove_stack(stack: str) -> None:
    _docker("stack", "rm", stack, check=False)
    label = f"label=com.docker.stack.namespace={stack}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and _docker("ps", "-aq", "--filter", label, check=False):
        time.sleep(1)
    for volume in _docker("volume", "ls", "-q", "--filter", label, check=False).split():
        _docker("volume", "rm", "--force", volume, check=False)
    deadline = time.monotonic() + 60  # the overlay network goes once its tasks are gone
    while time.monotonic() < deadline and _docker(
        "network", "ls", "-q", "--filter", label, check=False
    ):
        time.sleep(1)


def test_the_quickstart_runs_to_completion_on_a_swarm_stack(tmp_path, swarm):
    for image in ("starling-node:latest", "starling-orchestrator:latest"):
        if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode:
            pytest.fail(f"no {image} image: build it with docker/build-offline.sh", pytrace=False)
    certs = tmp_path / "certs"
    hosts = [arg for n in NODES for arg in ("--host", f"{n}=node-{n}")]
    made = run_cli("certs", "init", str(certs), "--nodes", ",".join(NODES), *hosts)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "stack"
    generated = run_cli(
        "deploy", "generate", "--target", "swarm", "--tls", str(certs), "--out", str(folder)
    )
    assert generated.returncode == 0, generated.stderr
    stack_text = (folder / "stack.yml").read_text()
    assert "BEGIN" not in stack_text  # certificates travel as secrets, by file reference
    results = tmp_path / "results"
    results.mkdir()
    stack = f"starling-swarm-{uuid.uuid4().hex[:8]}"
    try:
        _deploy(folder, stack, results)
        # Each node's certificate and key reach it as secrets, in its tmpfs only.
        state = _wait_done(f"{stack}_orchestrator", timeout=900)
        logs = _docker("service", "logs", "--raw", f"{stack}_orchestrator", check=False)
        assert state == "Complete", f"orchestrator {state}:\n{logs[-4000:]}"
        for node in NODES:
            spec = json.loads(_docker("service", "inspect", f"{stack}_node-{node}"))[0]["Spec"]
            task = spec["TaskTemplate"]
            assert spec["EndpointSpec"]["Mode"] == "dnsrr"
            assert task["Placement"]["Constraints"] == [f"node.labels.starling.node.{node} == true"]
            mounted = {s["File"]["Name"] for s in task["ContainerSpec"]["Secrets"]}
            assert mounted == {"ca.pem", f"{node}.pem", f"{node}.key"}, node
    finally:
        _remove_stack(stack)

    out = (results / "compose-quickstart-5-ring" / "latest").resolve()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["backend"] == "inventory" and metrics["status"] == "complete", metrics
    assert metrics["samples_per_node"] == dict.fromkeys(NODES, 100)
    assert_quickstart_w2(metrics, tmp_path / "sim")
    record = json.loads((out / "run.json").read_text())
    assert record["access"]["tls"]["cert"] == "/run/secrets/orchestrator.pem"
    label = f"label=com.docker.stack.namespace={stack}"
    assert not _docker("ps", "-aq", "--filter", label), "a container outlived stack rm"


def _containers(stack: str, node: str, every: bool = False) -> list[str]:
    labels = [
        "--filter",
        f"label=com.docker.stack.namespace={stack}",
        "--filter",
        f"label=com.docker.swarm.service.name={stack}_node-{node}",
    ]
    return _docker("ps", *(["-a"] if every else []), "-q", *labels, check=False).split()


def _wait(what: str, check, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"no {what} after {timeout:g} s")


def test_node_and_kernel_faults_through_the_engine_on_a_swarm_stack(tmp_path, swarm):
    """``starling nodes kill|restart|pause|unpause`` and ``links cut|restore --kernel`` with
    ``--swarm STACK`` act on the stack's containers in the middle of a run, which still
    completes with every node's every sample (a killed node is started again by swarm and
    resumes from its volume); ``disconnect`` is refused in one line."""
    folder = tmp_path / "stack"
    generate_long_run(tmp_path, "swarm-faults", 1000, folder, "--target", "swarm")
    results = tmp_path / "results"
    results.mkdir()
    stack = f"starling-faults-{uuid.uuid4().hex[:8]}"

    def starling(*words: str):
        return run_cli(*words, "--swarm", stack, timeout=120)

    try:
        _deploy(folder, stack, results)
        orchestrator = f"{stack}_orchestrator"
        # Faults once the rounds run: a node lost while being configured fails the run.
        _wait(
            "rounds under way",
            lambda: (
                "\nrounds " in "\n" + _docker("service", "logs", "--raw", orchestrator, check=False)
            ),
            timeout=300,
        )
        (paused,) = _wait("container of node c", lambda: _containers(stack, "c"))
        done = starling("nodes", "pause", "c")
        assert done.returncode == 0 and done.stdout.strip() == "node c: pause done", done
        assert _docker("inspect", "-f", "{{.State.Status}}", paused) == "paused"
        assert starling("nodes", "unpause", "c").returncode == 0
        assert _docker("inspect", "-f", "{{.State.Status}}", paused) == "running"

        (receiver,) = _containers(stack, "b")
        done = starling("links", "cut", "a", "b", "--kernel")
        assert done.returncode == 0, done.stderr
        assert "starling_from_a" in nft_tables(receiver)
        assert starling("links", "restore", "a", "b", "--kernel").returncode == 0
        assert "starling_from_a" not in nft_tables(receiver)

        done = starling("nodes", "kill", "c")
        assert done.returncode == 0 and "swarm starts it again" in done.stdout, done
        _wait("new task of node c", lambda: set(_containers(stack, "c")) - {paused})
        (before,) = _containers(stack, "d")
        assert starling("nodes", "restart", "d").returncode == 0
        _wait("new task of node d", lambda: set(_containers(stack, "d")) - {before}, 180)

        refused = starling("nodes", "disconnect", "e")
        assert refused.returncode == 2
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "cannot take it off" in refused.stderr

        state = _wait_done(orchestrator, timeout=900)
        logs = _docker("service", "logs", "--raw", orchestrator, check=False)
        assert state == "Complete", f"orchestrator {state}:\n{logs[-4000:]}"
    finally:
        _remove_stack(stack)
    out = (results / "swarm-faults" / "latest").resolve()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "complete", (out / "summary.txt").read_text()
    assert metrics["samples_per_node"] == dict.fromkeys(NODES, 1000)


def test_a_dead_orchestrator_s_run_is_recovered_as_the_guide_says(tmp_path, swarm):
    """docs/deployment/swarm.md, "If the orchestrator dies": its container is killed in the
    middle of a run over mutual TLS; ``starling stop`` and ``starling collect`` in a
    container on the stack's network, with the orchestrator's certificate mounted, write the
    results from what the nodes stored: partial, every node's samples and its W2."""
    certs = tmp_path / "certs"
    hosts = [arg for n in NODES for arg in ("--host", f"{n}=node-{n}")]
    assert run_cli("certs", "init", str(certs), "--nodes", ",".join(NODES), *hosts).returncode == 0
    folder = tmp_path / "stack"
    generate_long_run(
        tmp_path, "swarm-recovery", 1000, folder, "--target", "swarm", "--tls", str(certs)
    )
    results = tmp_path / "results"
    results.mkdir()
    stack = f"starling-recovery-{uuid.uuid4().hex[:8]}"
    orchestrator = f"{stack}_orchestrator"
    tls = [
        arg
        for name in ("ca.pem", "orchestrator.pem", "orchestrator.key")
        for arg in ("-v", f"{certs / name}:/run/secrets/{name}:ro")
    ]
    run_folder = "/results/swarm-recovery/latest"

    def recover(*words: str) -> str:
        return _docker(
            "run",
            "--rm",
            "--network",
            f"{stack}_testbed",
            "--user",
            "root",
            "--entrypoint",
            "starling",
            "-v",
            f"{results}:/results",
            *tls,
            "starling-orchestrator:latest",
            *words,
            timeout=300,
        )

    try:
        _deploy(folder, stack, results)
        _wait(
            "rounds under way",
            lambda: (
                "\nrounds " in "\n" + _docker("service", "logs", "--raw", orchestrator, check=False)
            ),
            timeout=300,
        )
        (container,) = _docker(
            "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={orchestrator}"
        ).split()
        _docker("kill", container)
        stopped = recover("stop", "--run", run_folder)
        assert stopped.count("rounds stopped") == len(NODES), stopped
        collected = recover("collect", run_folder)
        assert "results written to" in collected, collected
    finally:
        _remove_stack(stack)
    out = (results / "swarm-recovery" / "latest").resolve()
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "partial", metrics["status"]
    assert set(metrics["samples_per_node"]) == set(NODES)
    assert all(count > 0 for count in metrics["samples_per_node"].values())
    # Each node scored on what it stored (the nodes stopped a round or so apart).
    assert all(metrics["w2"]["per_node"][node] > 0 for node in NODES), metrics["w2"]
