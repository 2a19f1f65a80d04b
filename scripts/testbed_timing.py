"""How long the compose testbed takes a new user, from a built base image: prints the figures.

    python scripts/testbed_timing.py          # needs a Docker engine and compose v2

1. **First result**: the images built from the base with no build cache (``docker compose
   build --no-cache``: what a first ``up --build`` does), then ``docker compose up
   --abort-on-container-exit --exit-code-from orchestrator`` until the orchestrator exits
   with its results. Goal: 120 s.
2. **Second up**: the same ``up --build`` again with no code change. Goal: 30 s. The image
   ids before and after tell whether anything was rebuilt (it must not be).

Also printed: the build context each build sent (BuildKit's "transferring context"), the
date and the load average (this machine is shared), and which base. The base is
``STARLING_BASE_IMAGE``, else ``starling-base:bookworm`` when the engine has it (offline,
with the wheelhouse docker/wheels/), else the registry's image. Runs in a project of its own
(removed at the end, volumes included) with results in a temporary folder; the images it
builds are the testbed's own ``starling-node:latest`` and ``starling-orchestrator:latest``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ("starling-node:latest", "starling-orchestrator:latest")
GOALS = {"first result": 120.0, "second up": 30.0}


def _run(args: list[str], env: dict[str, str], timeout: float = 1800) -> tuple[float, str]:
    """Seconds taken and the output; exits with the output's tail if the command fails."""
    start = time.monotonic()
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    took = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(
            f"{' '.join(args)} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
        )
    return took, done.stdout + done.stderr


def _image_ids() -> dict[str, str]:
    ids = {}
    for image in IMAGES:
        found = subprocess.run(
            ["docker", "image", "inspect", "-f", "{{.Id}}", image], capture_output=True, text=True
        )
        ids[image] = found.stdout.strip()
    return ids


def _contexts(output: str) -> list[str]:
    """What BuildKit reported sending per build: only what its copy of the context lacked."""
    sizes = re.findall(r"transferring context: ([\d.]+\s*[kMG]?B)", output)
    return sorted(set(sizes), key=sizes.index)


def context_megabytes() -> tuple[float, float]:
    """The whole build context (MB) and its wheelhouse's share: the files under the entries
    .dockerignore lets in (its ``!name`` lines), less bytecode."""
    allowed = [
        line[1:].strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    total = wheels = 0
    for name in allowed:
        path = ROOT / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for file in files:
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            size = file.stat().st_size
            total += size
            wheels += size if file.suffix == ".whl" else 0
    return total / 1e6, wheels / 1e6


def _base() -> str:
    if os.environ.get("STARLING_BASE_IMAGE"):
        return os.environ["STARLING_BASE_IMAGE"]
    offline = subprocess.run(
        ["docker", "image", "inspect", "starling-base:bookworm"], capture_output=True
    )
    return "starling-base:bookworm" if offline.returncode == 0 else "python:3.11-slim-bookworm"


def main() -> int:
    base = _base()
    results = Path(tempfile.mkdtemp(prefix="starling-timing-"))
    project = f"starling-timing-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "STARLING_BASE_IMAGE": base,
        "STARLING_RESULTS": str(results),
        "BUILDKIT_PROGRESS": "plain",
    }
    compose = ["docker", "compose", "--progress", "plain", "--project-name", project]
    until_result = ["--abort-on-container-exit", "--exit-code-from", "orchestrator"]
    load = os.getloadavg()
    print(f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, base {base}")
    print(
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores"
    )
    try:
        build_s, build_out = _run([*compose, "build", "--no-cache"], env)
        run_s, _ = _run([*compose, "up", *until_result], env)
        first = build_s + run_s
        before = _image_ids()
        second, _ = _run([*compose, "up", "--build", *until_result], env)
        after = _image_ids()
    finally:
        subprocess.run([*compose, "down", "--volumes"], cwd=ROOT, env=env, capture_output=True)
    rebuilt = [image for image in IMAGES if before[image] != after[image]]
    runs = sorted(p.name for p in (results / "compose-quickstart").iterdir() if p.name != "latest")
    total, wheels = context_megabytes()
    print(f"build context {total:.1f} MB ({wheels:.1f} MB of it the wheelhouse docker/wheels/);")
    print(f"  BuildKit sent per build (what its copy lacked): {', '.join(_contexts(build_out))}")
    print(
        f"first result   {first:6.1f} s  (build {build_s:.1f} s, up to results {run_s:.1f} s)"
        f"  goal {GOALS['first result']:.0f} s"
    )
    print(
        f"second up      {second:6.1f} s  (rebuilt: {', '.join(rebuilt) or 'nothing'})"
        f"  goal {GOALS['second up']:.0f} s"
    )
    print(f"runs written: {len(runs)} in {results}")
    load = os.getloadavg()
    print(f"load average at end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if not rebuilt and len(runs) == 2 else 1


if __name__ == "__main__":
    sys.exit(main())
