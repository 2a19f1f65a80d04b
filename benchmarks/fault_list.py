"""``python -m benchmarks.fault_list``: how long a long fault list takes to read and check.

A quickstart experiment with 10³, 10⁴ and 10⁵ scheduled link faults, written as YAML; each
is read (node/yaml_input.py: libyaml's parser where installed, alias expansion measured),
checked against the schema and the topology (config/), and planned (planning/), the steps
``starling run`` and ``simulate`` take before anything starts. Also the account a run
opens with those faults (its lines are capped). Prints seconds for each step and the process's peak
resident memory so far; never asserts a time (issue 31: a list of 10⁵ took minutes).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def main(sizes: tuple[int, ...] = (1_000, 10_000, 100_000)) -> None:
    from starling.orchestrator.config.experiment import parse_experiment
    from starling.orchestrator.config.yaml_files import read_yaml_file
    from starling.orchestrator.planning.plan import plan
    from starling.orchestrator.results.account import Account, account_schedule

    base = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
    heads = ("faults", "MB", "read", "check", "plan", "account")
    print(
        "  ".join(f"{h:>{w}}" for h, w in zip(heads, (8, 6, 7, 7, 7, 8), strict=True)), "peak RSS"
    )
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            faults = [
                {"link": ["0", "1"], "rounds": [k % 90, k % 90 + 1], "drop": 0.5}
                for k in range(size)
            ]
            path = Path(folder) / f"faults-{size}.yaml"
            path.write_text(yaml.safe_dump({**base, "faults": faults}))
            t0 = time.perf_counter()
            raw = read_yaml_file(path)
            t1 = time.perf_counter()
            experiment = parse_experiment(raw)
            t2 = time.perf_counter()
            planned = plan(experiment)
            t3 = time.perf_counter()
            account = Account(lambda line: None)
            account_schedule(account, planned.link_faults, planned.node_faults, planned.rounds)
            t4 = time.perf_counter()
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
            print(
                f"{size:>8}  {path.stat().st_size / 1e6:>6.1f}  {t1 - t0:>6.2f}s  "
                f"{t2 - t1:>6.2f}s  {t3 - t2:>6.2f}s  {t4 - t3:>7.2f}s  {peak / 2**20:.0f} MiB",
                flush=True,
            )


if __name__ == "__main__":
    main(tuple(int(a) for a in sys.argv[1:]) or (1_000, 10_000, 100_000))
