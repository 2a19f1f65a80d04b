"""``python -m benchmarks.doors [--count N]``: a node under a flood of idle calls, and under
oversized messages, from an attacker's own process (:mod:`tests.door_attacker`).

Two figures of issue 27, printed, never asserted:

* **Health and Control under a thousand idle calls of each kind**: a node that can tell the
  orchestrator from the others is configured, then the attacker opens ``N`` calls of every
  kind (reflection, health watch, health check, Control, sample streams, Peer streams that
  never prove themselves) and holds them. Meanwhile the orchestrator's Health.Check and
  Control.Status are timed (the median and the slowest of 20 of each); the attacker then
  says how its calls ended (held by the node, refused and with what), and the node how
  many it refused, per door. Twice: a node with a Control token and an attacker with none,
  and a node with mutual TLS and an attacker holding a certificate the CA signed (node b's:
  the case of the issue, where a few hundred reflection streams took every thread).
* **Memory before identity**: ``K`` Control.Configure calls of ``B`` MB each without a token;
  the node's peak RSS (VmHWM) before and after, beside what the same node took to read
  one message of that size before (the old unbounded receive limit is not run here: it
  is in the issue, 0.6 to 0.8 GB for one 300 MB message).

A node on loopback: the numbers are the node's own work under the flood, on whatever the
machine gives it (2 shared cores here), not network figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ["reflection", "watch", "check", "control", "samples", "peer"]


def _rss(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def _probe(client, health, probes: int = 20) -> dict[str, dict[str, float]]:
    """The orchestrator's Health.Check and Control.Status, timed (seconds)."""
    from grpc_health.v1 import health_pb2

    times: dict[str, list[float]] = {"health": [], "status": []}
    failures: dict[str, list[str]] = {"health": [], "status": []}
    for _ in range(probes):
        began = time.perf_counter()
        try:
            health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            times["health"].append(time.perf_counter() - began)
        except Exception as exc:  # noqa: BLE001 - reported
            failures["health"].append(str(exc)[:120])
        began = time.perf_counter()
        try:
            client.status(attempts=1)
            times["status"].append(time.perf_counter() - began)
        except Exception as exc:  # noqa: BLE001 - reported
            failures["status"].append(str(exc)[:120])
    return {
        what: {
            "answered": len(values),
            "failed": len(failures[what]),
            "median_s": statistics.median(values) if values else float("nan"),
            "max_s": max(values) if values else float("nan"),
            "first_failure": failures[what][0] if failures[what] else "",
        }
        for what, values in times.items()
    }


def _node(work: Path, access_flags: list[str]) -> tuple[subprocess.Popen, str]:
    from starling.node.protocol.contract import READY_PREFIX

    log = open(work / "node.log", "wb")  # noqa: SIM115 - the child's
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "starling.node",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--id",
            "0",
            "--store",
            str(work / "store"),
            *access_flags,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    log.close()
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith(READY_PREFIX):
        proc.kill()
        raise SystemExit(f"node did not start: {line!r}\n{(work / 'node.log').read_text()}")
    return proc, line[len(READY_PREFIX) :].strip()


def _settled(client, seconds: float = 10.0) -> dict[str, int]:
    """The node's refusals once they stop growing (the flood's last calls handled)."""
    last, deadline = None, time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = client.status(attempts=1).refused
        if now == last:
            return now
        last = now
        time.sleep(1.0)
    return last or {}


def _attacker(plan: dict) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.door_attacker", json.dumps(plan)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if line.strip() != "opened":
        proc.kill()
        raise SystemExit(f"attacker failed: {line!r} {proc.stderr.read() if proc.stderr else ''}")
    return proc


def flood(scenario: str, count: int, big_calls: int = 0, big_mb: int = 0) -> dict:
    """One scenario (``token`` or ``tls``, see module); returns its figures."""
    from grpc_health.v1 import health_pb2_grpc

    from starling.node.security import TlsFiles
    from starling.node.tokens import node_token
    from starling.orchestrator.deploy.certs import init_certs
    from starling.orchestrator.execution.access import Access
    from starling.orchestrator.execution.client import NodeClient
    from starling.orchestrator.planning.node_specs import node_specs
    from tests.node.test_runtime_harness import ring_experiment

    report: dict = {"scenario": scenario, "count": count, "kinds": KINDS}
    with tempfile.TemporaryDirectory(prefix="starling-doors-") as scratch:
        work = Path(scratch)
        plan: dict = {"kinds": KINDS, "count": count, "sender": "1", "hold": 120}
        if scenario == "tls":
            certs = work / "certs"
            init_certs(certs, ["0", "b"])
            files = {k: str(certs / f"0.{e}") for k, e in (("cert", "pem"), ("key", "key"))}
            flags = ["--tls-ca", str(certs / "ca.pem"), "--tls-cert", files["cert"]]
            flags += ["--tls-key", files["key"]]
            orchestrator = TlsFiles(
                str(certs / "ca.pem"),
                str(certs / "orchestrator.pem"),
                str(certs / "orchestrator.key"),
            )
            access = Access(tls=orchestrator)
            plan["tls"] = {
                "ca": str(certs / "ca.pem"),
                "cert": str(certs / "b.pem"),
                "key": str(certs / "b.key"),
                "target_id": "0",
            }
        else:
            master = "doors-benchmark-master-" + "m" * 16
            (work / "token").write_text(node_token(master, "0") + "\n")
            (work / "token").chmod(0o600)
            flags = ["--token-file", str(work / "token")]
            access = Access(token=master)
        node, address = _node(work, flags)
        plan["target"] = address
        plan["stop"] = str(work / "stop")
        client = NodeClient(address, access=access, node_id="0")
        health_channel = access.channel(address, "0")
        health = health_pb2_grpc.HealthStub(health_channel)
        try:
            client.wait_ready()
            nowhere = {"0": address, "1": "127.0.0.1:9", "2": "127.0.0.1:9"}
            client.configure(node_specs(ring_experiment("doors", 5, 1.0), nowhere)[0])
            report["quiet"] = _probe(client, health)
            report["rss_before_mb"] = _rss(node.pid)
            began = time.perf_counter()
            attacker = _attacker(plan)
            report["attack_open_s"] = time.perf_counter() - began
            report["flooded"] = _probe(client, health)
            report["rss_flooded_mb"] = _rss(node.pid)
            report["node_refused"] = _settled(client)
            (work / "stop").touch()
            out, err = attacker.communicate(timeout=120)
            report["attacker_saw"] = json.loads(out.splitlines()[-1]) if out.strip() else err
            (work / "stop").unlink()
            if big_calls:
                big = {**plan, "kinds": ["big"], "count": big_calls, "big_bytes": big_mb << 20}
                before = _rss(node.pid)
                attacker = _attacker(big)
                _settled(client)  # every message sent and refused before the attack stops
                (work / "stop").touch()
                out, _ = attacker.communicate(timeout=300)
                report["big"] = {
                    "calls": big_calls,
                    "mb_each": big_mb,
                    "attacker_saw": json.loads(out.splitlines()[-1]) if out.strip() else {},
                    "hwm_before_mb": before["VmHWM"],
                    "hwm_after_mb": _rss(node.pid)["VmHWM"],
                }
            report["after"] = _probe(client, health, probes=5)
        finally:
            client.close()
            health_channel.close()
            node.kill()
            node.wait()
    return report


def doors(count: int = 1000, big_calls: int = 8, big_mb: int = 300) -> list[dict]:
    """Both scenarios; the oversized messages against the token node."""
    return [flood("token", count, big_calls, big_mb), flood("tls", count)]


def table(report: dict) -> str:
    who = {
        "token": "node with a Control token; attacker without one",
        "tls": "node with mutual TLS; attacker with node b's certificate",
    }[report["scenario"]]
    lines = [
        f"{who}: {report['count']} idle calls of each kind "
        f"({', '.join(report['kinds'])}), from a process of its own"
    ]
    for phase in ("quiet", "flooded", "after"):
        for what, figures in report[phase].items():
            lines.append(
                f"  {phase:8} {what:7} answered {figures['answered']:2d}, failed "
                f"{figures['failed']:2d}: median {1e3 * figures['median_s']:7.1f} ms, "
                f"slowest {1e3 * figures['max_s']:7.1f} ms"
                + (f"  ({figures['first_failure']})" if figures["first_failure"] else "")
            )
    lines.append(f"  opening the flood took {report['attack_open_s']:.1f} s")
    lines.append("  how the attacker's calls ended:")
    for kind, codes in report["attacker_saw"].items():
        lines.append(f"    {kind:10} " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items())))
    lines.append(
        "  node refused: " + ", ".join(f"{k} {v}" for k, v in report["node_refused"].items())
    )
    rss = report["rss_before_mb"], report["rss_flooded_mb"]
    lines.append(f"  node RSS {rss[0]['VmRSS']:.0f} MB quiet, {rss[1]['VmRSS']:.0f} MB flooded")
    big = report.get("big")
    if big:
        lines.append(
            f"memory before identity: {big['calls']} Configure calls of {big['mb_each']} MB, "
            f"no token: {big['attacker_saw']}; node peak RSS {big['hwm_before_mb']:.0f} -> "
            f"{big['hwm_after_mb']:.0f} MB"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.doors", description=__doc__)
    parser.add_argument("--count", type=int, default=1000, help="idle calls of each kind")
    parser.add_argument("--big-calls", type=int, default=8)
    parser.add_argument("--big-mb", type=int, default=300)
    args = parser.parse_args(argv)
    for report in doors(args.count, args.big_calls, args.big_mb):
        print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
