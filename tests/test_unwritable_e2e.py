"""A results folder that cannot be written (``orchestrator/results/unwritable.py``): ``starling
run`` says so in one line and leaves the run for ``starling collect``, which then recovers every
sample the nodes stored.

The orchestrator runs under a file size limit (``RLIMIT_FSIZE``, with SIGXFSZ ignored, so a
write past it fails with EFBIG as a full disk fails with ENOSPC); the nodes, an inventory
started without it, are unaffected. Before, the error escaped as a chained traceback.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from starling.orchestrator.execution.client import NodeClient
from tests.conftest import ROOT, run_cli
from tests.node.test_runtime_harness import Cluster
from tests.test_live_cli_e2e import _ring, inventory_ring

pytestmark = pytest.mark.e2e


def _small_files() -> None:  # in the orchestrator's process, before it starts
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_run_that_cannot_write_its_results_says_so_and_collect_recovers_them(
    tmp_path, starling_home
):
    with Cluster(tmp_path) as cluster:
        procs, inventory, raw = inventory_ring(
            cluster, "unwritable", rounds=400, chains=4, round_deadline=5.0
        )
        (tmp_path / "exp.yaml").write_text(yaml.safe_dump(raw))
        out = tmp_path / "out"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "starling.orchestrator.cli",
                "run",
                str(tmp_path / "exp.yaml"),
                "--out",
                str(out),
                "--quiet",
            ],
            cwd=ROOT,
            env={**os.environ, "STARLING_HOME": str(starling_home)},
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_small_files,
        )
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"starling: cannot write the results to {out} ("), last
        assert f"`starling collect {out}` recovers them" in last, last
        assert json.loads((out / "manifest.json").read_text())["status"] == "running"

        collected = run_cli("collect", str(out), env_home=starling_home, timeout=120)
        assert collected.returncode == 0, collected.stderr
        for node, address in inventory.items():
            with NodeClient(address) as client:
                stored = client.status().samples_stored
            with np.load(out / "samples" / f"node-{node}.npz") as got:
                np.testing.assert_array_equal(got["rounds"], np.arange(stored))


def _run_with_manifest_immutable(
    tmp_path: Path, home: Path, raw: dict, options: list[str], timeout: float
) -> tuple[subprocess.Popen, str]:
    """``starling run`` of ``raw`` into ``tmp_path/out``, its ``manifest.json`` made
    immutable (``chattr +i``) once the run has written ``start.json`` (the manifest says
    running by then), and made writable again when the run has ended: (the process, its
    stderr). Skips where the file system cannot make a file immutable."""
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    manifest = out / "manifest.json"
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "starling.orchestrator.cli",
            "run",
            str(tmp_path / "exp.yaml"),
            "--out",
            str(out),
            *options,
        ],
        cwd=ROOT,
        env={**os.environ, "STARLING_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not (out / "start.json").is_file():
            assert run.poll() is None, run.communicate()
            time.sleep(0.05)
        if subprocess.run(["chattr", "+i", str(manifest)]).returncode != 0:
            pytest.skip("this file system cannot make a file immutable")
        _, stderr = run.communicate(timeout=timeout)
    finally:
        subprocess.run(["chattr", "-i", str(manifest)], check=False)
        if run.poll() is None:
            run.kill()
            run.wait(timeout=10)
    return run, stderr


def test_a_run_whose_manifest_cannot_be_written_says_so_and_collect_recovers_it(
    tmp_path, starling_home
):
    """Every results file but the manifest written, and the manifest refused (made
    immutable with ``chattr +i`` while the run ran): before, the ``OSError`` of the final
    manifest escaped as a traceback. Now it is the same one line as any other results file
    that cannot be written, exit 1, and ``collect`` later recovers the same samples."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    with Cluster(tmp_path) as cluster:
        procs, inventory, raw = inventory_ring(
            cluster, "manifest-unwritable", rounds=300, chains=4, round_deadline=5.0
        )
        out = tmp_path / "out"
        manifest = out / "manifest.json"
        run, stderr = _run_with_manifest_immutable(tmp_path, starling_home, raw, ["--quiet"], 120)
        assert "Traceback" not in stderr, stderr[-3000:]
        assert run.returncode == 1, stderr
        last = stderr.strip().splitlines()[-1]
        assert last.startswith(f"starling: cannot write the results to {out} ("), last
        assert f"{manifest}); " in last and f"`starling collect {out}` recovers them" in last
        assert json.loads(manifest.read_text())["status"] == "running"
        written = {}
        for node in inventory:
            with np.load(out / "samples" / f"node-{node}.npz") as got:
                written[node] = (got["rounds"].copy(), got["samples"].copy())

        collected = run_cli("collect", str(out), env_home=starling_home, timeout=120)
        assert collected.returncode == 0, collected.stderr
        assert json.loads(manifest.read_text())["status"] == "partial"
        for node, address in inventory.items():
            with NodeClient(address) as client:
                stored = client.status().samples_stored
            with np.load(out / "samples" / f"node-{node}.npz") as got:
                np.testing.assert_array_equal(got["rounds"], np.arange(stored))
                np.testing.assert_array_equal(got["rounds"], written[node][0])
                np.testing.assert_array_equal(got["samples"], written[node][1])


def test_a_complete_local_run_whose_manifest_cannot_be_written_keeps_its_stores(
    tmp_path, starling_home
):
    """A complete local run lets go of its nodes' stores once its npz files read back equal
    (``orchestrator/execution/store_release.py``). Before, it did so before the final manifest was
    written: when that write then failed, the line pointed at ``starling collect``, which
    found no store to recover from. Now the stores go only after the manifest is written, so
    the line is true: ``collect`` recovers the same samples, bit for bit."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    rounds = 60
    raw = _ring("local-manifest-unwritable", rounds=rounds, chains=3, round_deadline=5.0)
    out = tmp_path / "out"
    manifest = out / "manifest.json"
    run, stderr = _run_with_manifest_immutable(
        tmp_path, starling_home, raw, ["--quiet", "--no-report"], 180
    )
    assert "Traceback" not in stderr, stderr[-3000:]
    assert run.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert f"{manifest}); " in last and f"`starling collect {out}` recovers them" in last, last
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "complete", metrics["status"]  # the case whose stores go
    written = {}
    for npz in sorted((out / "samples").glob("node-*.npz")):
        with np.load(npz) as got:
            written[npz.name] = (got["rounds"].copy(), got["samples"].copy())
            np.testing.assert_array_equal(got["rounds"], np.arange(rounds))
    assert len(written) == 4, sorted(written)

    collected = run_cli("collect", str(out), env_home=starling_home, timeout=180)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert json.loads(manifest.read_text())["status"] == "partial"
    recovered = json.loads((out / "metrics.json").read_text())
    assert recovered["samples_per_node"] == dict.fromkeys("0123", rounds), (
        "\n".join(recovered["account"])  # before: "node holds no stored samples", all 0
    )
    for name, (rounds_written, values_written) in written.items():
        with np.load(out / "samples" / name) as got:
            np.testing.assert_array_equal(got["rounds"], rounds_written)
            np.testing.assert_array_equal(got["samples"], values_written)
