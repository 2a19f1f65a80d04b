"""The compose testbed survives a node's death under exactly its documented command.

``docker compose run --rm orchestrator`` (docs/deployment/testbed.md, the header of
docker-compose.yml) in a fresh copy of the files: while the run goes, a live command as root
(``docker compose exec orchestrator starling status`` and ``... nodes kill c``, which the
inventory backend refuses in one line) leaves the run unharmed, then ``docker compose kill
node-c`` kills a node's container for good. What must hold:

* the run goes on and exits 5 (a node down at the end, not by the schedule), with its
  results written (``partial``): every survivor's every sample, the dead node named in
  ``down_at_end`` and ``not_collected``, and the last lines spelling out the compose
  commands that collect it and the warning that ``down -v`` deletes it;
* the documented collect path — ``docker compose start node-c``, then ``docker compose run
  --rm orchestrator starling collect DIR`` — recovers the dead node's samples up to its
  death, and the survivors' stay whole.

Before, the documented ``up --abort-on-container-exit`` stopped every container when one
died: the survivors stopped at ~60 % of their rounds and the orchestrator, killed in its
shutdown, wrote nothing. The orchestrator image used is the one this machine holds with the
checkout's own ``starling`` packages and entrypoint laid over it (built here, removed after),
so the test checks this code whichever build of the image is present.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.docker.test_compose_testbed import _copy_testbed

pytestmark = [pytest.mark.e2e, pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

ROUNDS = 3000
LINK_DELAY = "20ms"
"""Every message late by this much: about 25 ms a round, so the run lasts about a minute
and the kill lands in the middle (without it, 600 rounds took 5 s here)."""
SURVIVORS = ["a", "b", "d", "e"]
SITE = "/opt/starling/lib/python3.11/site-packages/starling"
OVERLAY = f"""FROM starling-orchestrator:latest
COPY node {SITE}/node
COPY orchestrator {SITE}/orchestrator
COPY docker/entrypoint.sh /usr/local/bin/starling-entrypoint
"""


def _image(tag: str, folder: Path) -> None:
    for image in ("starling-node:latest", "starling-orchestrator:latest"):
        found = subprocess.run(["docker", "image", "inspect", image], capture_output=True)
        if found.returncode != 0:
            pytest.fail(f"no {image} image: build it with docker/build-offline.sh", pytrace=False)
    built = subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-f", "-", str(folder)],
        input=OVERLAY,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]


def _experiment(folder: Path, down_grace: float = 5) -> str:
    raw = yaml.safe_load((folder / "examples" / "compose-quickstart.yaml").read_text())
    raw.update(
        name="compose-kill", rounds=ROUNDS, chains=10, round_deadline=2.0, link_delay=LINK_DELAY
    )
    raw["limits"] = {"down_grace": down_grace}
    (folder / "examples" / "compose-kill.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return "examples/compose-kill.yaml"


def _healthy(container: str) -> bool:
    done = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Health.Status}}", container],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() == "healthy"


def test_a_node_killed_under_the_documented_command_loses_no_run_and_no_sample(tmp_path):
    folder = _copy_testbed(tmp_path / "testbed")
    (folder / "results").mkdir()
    project = f"starling-kill-{uuid.uuid4().hex[:8]}"
    tag = f"starling-orchestrator:{project}"
    _image(tag, folder)
    compose_file = folder / "docker-compose.yml"
    compose_file.write_text(
        compose_file.read_text().replace("image: starling-orchestrator:latest", f"image: {tag}")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARLING_")}
    env["STARLING_EXPERIMENT"] = _experiment(folder)
    compose = ["docker", "compose", "--project-name", project]

    def compose_run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*compose, *args], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
        )

    run = subprocess.Popen(
        [*compose, "run", "--rm", "orchestrator"],  # the documented command
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        parent = folder / "results" / "compose-kill"
        deadline = time.monotonic() + 600
        while not (parent / "latest" / "run.json").exists():
            assert run.poll() is None, run.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.5)
        out = (parent / "latest").resolve()
        # Live commands as root, the compose guide's form: they work, or refuse in one line.
        reached = 0
        while reached < 100:
            status = compose_run(
                "exec", "-T", "orchestrator", "starling", "status", "--format", "json"
            )
            assert status.returncode == 0, status.stdout + status.stderr
            reached = json.loads(status.stdout)["nodes"]["c"].get("round") or 0
            assert run.poll() is None, run.communicate()[0][-4000:]
        refused = compose_run("exec", "-T", "orchestrator", "starling", "nodes", "kill", "c")
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        killed = compose_run("kill", "node-c")  # SIGKILL: the container dies, for good
        assert killed.returncode == 0, killed.stderr
        said, _ = run.communicate(timeout=900)
        assert run.returncode == 5, said[-4000:]  # EXIT_NODE_DOWN, never 0
        assert "Traceback" not in said, said[-4000:]
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["status"] == "partial", metrics["status"]
        assert metrics["down_at_end"]["nodes"] == ["c"], metrics.get("down_at_end")
        assert metrics["not_collected"]["nodes"] == ["c"], metrics.get("not_collected")
        for node in SURVIVORS:  # every survivor's every sample
            assert metrics["samples_per_node"][node] == ROUNDS, metrics["samples_per_node"]
        before = metrics["samples_per_node"].get("c", 0)
        assert "`docker compose down -v` before that deletes them" in said, said[-4000:]
        assert "docker compose start node-c" in said, said[-4000:]

        # The documented collect path: the node started again, then `starling collect`.
        started = compose_run("start", "node-c")
        assert started.returncode == 0, started.stderr
        name = f"{project}-node-c-1"
        deadline = time.monotonic() + 300
        while not _healthy(name):
            assert time.monotonic() < deadline, "node-c never came back healthy"
            time.sleep(1)
        collected = compose_run(
            "run",
            "--rm",
            "orchestrator",
            "starling",
            "collect",
            f"/results/compose-kill/{out.name}",
        )
        assert collected.returncode == 0, collected.stdout[-4000:] + collected.stderr[-4000:]
        recovered = json.loads((out / "metrics.json").read_text())
        assert recovered["samples_per_node"]["c"] >= max(before, reached - 1), recovered
        assert recovered["samples_per_node"]["c"] < ROUNDS
        for node in SURVIVORS:
            assert recovered["samples_per_node"][node] == ROUNDS
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        compose_run("down", "--volumes", "--remove-orphans", timeout=300)
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def test_a_stopped_orchestrator_container_still_writes_the_results(tmp_path):
    """``docker stop`` of the run's container (what the engine sends at a shutdown, or a
    user from another terminal; Ctrl-C in the run's own terminal reaches the run through
    its TTY the same way): its init hands SIGTERM to the run, which stops the nodes'
    rounds, collects what they hold and writes the results, marked interrupted, exit 130 —
    within the compose file's 2-minute stop grace, not killed after docker's 10 s."""
    folder = _copy_testbed(tmp_path / "testbed")
    (folder / "results").mkdir()
    project = f"starling-int-{uuid.uuid4().hex[:8]}"
    tag = f"starling-orchestrator:{project}"
    _image(tag, folder)
    compose_file = folder / "docker-compose.yml"
    compose_file.write_text(
        compose_file.read_text().replace("image: starling-orchestrator:latest", f"image: {tag}")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARLING_")}
    env["STARLING_EXPERIMENT"] = _experiment(folder)
    compose = ["docker", "compose", "--project-name", project]
    run = subprocess.Popen(
        [*compose, "run", "--rm", "orchestrator"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        latest = folder / "results" / "compose-kill" / "latest"
        deadline = time.monotonic() + 600
        while not (latest / "run.json").exists():
            assert run.poll() is None, run.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.5)
        time.sleep(5)  # some rounds run
        label = f"label=com.docker.compose.project={project}"
        ids = subprocess.run(
            [
                "docker",
                "ps",
                "-q",
                "--filter",
                label,
                "--filter",
                "label=com.docker.compose.oneoff=True",
            ],
            capture_output=True,
            text=True,
        ).stdout.split()
        assert len(ids) == 1, ids
        grace = subprocess.run(
            ["docker", "inspect", "-f", "{{.Config.StopTimeout}}", ids[0]],
            capture_output=True,
            text=True,
        )
        assert grace.stdout.strip() == "120", grace.stdout  # stop_grace_period: 2m
        stopped = subprocess.run(["docker", "stop", ids[0]], capture_output=True, timeout=300)
        assert stopped.returncode == 0, stopped.stderr
        said, _ = run.communicate(timeout=300)
        assert run.returncode == 130, said[-4000:]
        metrics = json.loads((latest.resolve() / "metrics.json").read_text())
        assert metrics["status"] == "interrupted" and metrics["interrupted"] is True
        samples = metrics["samples_per_node"]
        assert set(samples) == {"a", "b", "c", "d", "e"} and min(samples.values()) > 0, samples
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        subprocess.run(
            [*compose, "down", "--volumes", "--remove-orphans"],
            cwd=folder,
            env=env,
            capture_output=True,
            timeout=300,
        )
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)


def test_books_add_up_after_a_node_container_is_paused_and_cut_off_by_hand(tmp_path):
    """``docker pause node-c`` for a few seconds, then ``docker network disconnect`` of
    node-b and back, under the documented command: the nodes only went unreachable, so the
    run completes with every sample, exit 0, and every link's books add up. Before, each
    such node was carried over as if it had died and counted again once it answered (c→b
    "sent 4,014" in a 2,500-round run, delivered above sent on the reverse link)."""
    folder = _copy_testbed(tmp_path / "testbed")
    (folder / "results").mkdir()
    project = f"starling-pause-{uuid.uuid4().hex[:8]}"
    tag = f"starling-orchestrator:{project}"
    _image(tag, folder)
    compose_file = folder / "docker-compose.yml"
    compose_file.write_text(
        compose_file.read_text().replace("image: starling-orchestrator:latest", f"image: {tag}")
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("STARLING_")}
    env["STARLING_EXPERIMENT"] = _experiment(folder, down_grace=30)
    compose = ["docker", "compose", "--project-name", project]
    run = subprocess.Popen(
        [*compose, "run", "--rm", "orchestrator"],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        latest = folder / "results" / "compose-kill" / "latest"
        deadline = time.monotonic() + 600
        while not (latest / "run.json").exists():
            assert run.poll() is None, run.communicate()[0][-4000:]
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.5)
        time.sleep(5)
        network = f"{project}_testbed"
        # Each fault lasts past the orchestrator's 10 s status timeout: it sees the node
        # down (which is what was counted twice), not just a slow answer.
        for command, seconds in (
            (["pause", f"{project}-node-c-1"], 12),
            (["unpause", f"{project}-node-c-1"], 3),
            (["network", "disconnect", network, f"{project}-node-b-1"], 12),
            (["network", "connect", "--alias", "node-b", network, f"{project}-node-b-1"], 3),
        ):
            done = subprocess.run(["docker", *command], capture_output=True, text=True)
            assert done.returncode == 0, (command, done.stderr)
            time.sleep(seconds)
        said, _ = run.communicate(timeout=900)
        assert run.returncode == 0, said[-4000:]
        metrics = json.loads((latest.resolve() / "metrics.json").read_text())
        assert metrics["status"] == "complete", metrics["status"]
        assert set(metrics["samples_per_node"].values()) == {ROUNDS}, metrics["samples_per_node"]
        for key, c in metrics["links"].items():  # a ring: one message a round per link
            assert c["sent"] <= ROUNDS and c["delivered"] <= c["sent"], (key, c)
            assert c["sent"] + c["withheld"] + c["dropped"] <= ROUNDS, (key, c)
            assert c["lost"] == c["withheld"] + c["dropped"] + c["sent"] - c["delivered"] >= 0
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
        subprocess.run(
            [*compose, "down", "--volumes", "--remove-orphans"],
            cwd=folder,
            env=env,
            capture_output=True,
            timeout=300,
        )
        subprocess.run(["docker", "image", "rm", "-f", tag], capture_output=True)
