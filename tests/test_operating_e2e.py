"""Operating nodes with standard tools: reflection, health per service, Prometheus metrics
and JSON logs, on real node processes driven by a real ``starling run``.

* A reflection client that is not the project's stubs lists a node's services and calls
  the health check by name; the Peer service's health follows the node's state.
* Three nodes with ``--metrics`` and ``--log-format json`` run an experiment driven by
  ``starling run --metrics --log-format json``; every endpoint is scraped over HTTP and
  passes ``promtool check metrics``; the counters agree with the run (rounds, messages,
  bytes counted at both ends of each link), and every log line parses as JSON.
* A real Prometheus server (Debian's ``prometheus``) scrapes a 3-node run; its HTTP API
  shows the round counter rising, and the per-link withheld and late counters rising
  after ``starling links cut`` and ``starling links set --delay``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.parse
import urllib.request

import grpc
import pytest
import yaml

from starling.orchestrator.planning.node_specs import node_specs
from tests.conftest import run_cli
from tests.node.test_runtime_harness import ROOT, Cluster, ring_experiment, start_run
from tests.operating import (
    Reflector,
    free_port,
    need,
    promtool_check,
    samples,
    scrape,
    value,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e

NODES = ("a", "b", "c")
RING = {"a": ("b", "c"), "b": ("a", "c"), "c": ("a", "b")}  # out-peers of a 3-ring


def _experiment(name: str, rounds: int, deadline: float = 5.0) -> dict:
    return {
        "name": name,
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.01},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "node"},
        "nodes": [{"id": n} for n in NODES],
        "topology": {"kind": "ring"},
        "rounds": rounds,
        "chains": 4,
        "seed": 2,
        "round_deadline": deadline,
    }


def _write(path, content) -> str:
    path.write_text(yaml.safe_dump(content))
    return str(path)


def _nodes_with_metrics(cluster: Cluster, extra: tuple[str, ...] = ()) -> tuple[dict, dict]:
    """Three nodes with their own data, metrics and JSON logs: (addresses, metrics)."""
    metrics = {n: f"127.0.0.1:{free_port()}" for n in NODES}
    procs = {
        node: cluster.launch(
            node,
            extra=[
                "--id",
                node,
                "--shard",
                str(k),
                "--data-seed",
                "5",
                "--data-size",
                "20",
                "--metrics",
                metrics[node],
                "--log-format",
                "json",
                *extra,
            ],
        )
        for k, node in enumerate(NODES)
    }
    return {n: cluster.ready(p).address for n, p in procs.items()}, metrics


def _run(args: list[str], home) -> subprocess.Popen:
    env = {**os.environ, "STARLING_HOME": str(home)}
    return subprocess.Popen(
        [sys.executable, "-m", "starling.orchestrator.cli", "run", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _json_lines(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines
    parsed = [json.loads(line) for line in lines]  # every line one object
    for entry in parsed:
        assert {"time", "level", "message", "event", "node", "experiment", "round", "peer"} <= set(
            entry
        ), entry
    return parsed


def test_reflection_lists_services_and_health_follows_the_node(tmp_path):
    experiment = ring_experiment("health", rounds=100000, deadline=5.0)
    with Cluster(tmp_path) as cluster:
        procs = cluster.start_nodes(experiment.node_ids)
        closed = cluster.start_nodes(["x"], extra=["--no-reflection"])["x"]
        first = experiment.node_ids[0]
        with Reflector(procs[first].address) as reflector:
            assert reflector.services() == [
                "grpc.health.v1.Health",
                "grpc.reflection.v1alpha.ServerReflection",
                "starling.v1.Control",
                "starling.v1.Peer",
            ]
            assert reflector.health() == "SERVING"
            assert reflector.health("starling.v1.Peer") == "SERVING"  # idle
            # Any method, by name: the node's status through reflected descriptors.
            assert reflector.call("starling.v1.Control/Status").state == 1  # IDLE
            specs = node_specs(experiment, {n: p.address for n, p in procs.items()})
            clients = start_run(procs, specs)
            wait_until(lambda: clients[first].status().round >= 3, 60, "round 3")
            assert reflector.health("starling.v1.Peer") == "SERVING"  # running
            clients[first].stop()
            assert clients[first].status().state == "stopped"
            assert reflector.health("starling.v1.Peer") == "NOT_SERVING"
            assert reflector.health() == "SERVING"  # still configurable
            assert reflector.health("starling.v1.Control") == "SERVING"
            peer_check = ("node", "health", procs[first].address, "--service", "starling.v1.Peer")
            stopped = run_cli(*peer_check, timeout=120)
            assert stopped.returncode == 1 and "not_serving" in stopped.stderr, stopped.stderr
            clients[first].configure(next(s for s in specs if s.node_id == first))
            assert reflector.health("starling.v1.Peer") == "SERVING"
            assert run_cli(*peer_check, timeout=120).returncode == 0
            with pytest.raises(grpc.RpcError) as unknown:
                reflector.health("no.such.Service")
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        with Reflector(closed.address) as reflector:
            with pytest.raises(grpc.RpcError) as off:
                reflector.services()
            assert off.value.code() == grpc.StatusCode.UNIMPLEMENTED
            assert (
                reflector.channel.unary_unary(
                    "/grpc.health.v1.Health/Check",
                    request_serializer=lambda _: b"",
                    response_deserializer=lambda raw: raw,
                )(None, timeout=10)
                == b"\x08\x01"
            )  # status: SERVING, on the wire


def test_metrics_endpoints_and_json_logs_of_a_run(tmp_path, starling_home):
    rounds = 300
    with Cluster(tmp_path) as cluster:
        addresses, metrics = _nodes_with_metrics(cluster)
        inventory = _write(tmp_path / "nodes.yaml", {"nodes": addresses})
        experiment = _write(tmp_path / "exp.yaml", _experiment("ops", rounds))
        orchestrator = f"127.0.0.1:{free_port()}"
        out = tmp_path / "out"
        run = _run(
            [
                experiment,
                "--inventory",
                inventory,
                "--out",
                str(out),
                "--metrics",
                orchestrator,
                "--log-format",
                "json",
            ],
            starling_home,
        )
        try:
            seen: dict = {}

            def orchestrator_moving() -> bool:
                assert run.poll() is None, run.communicate()
                try:
                    text = scrape(orchestrator, timeout=5)
                except OSError:
                    return False  # not serving yet
                table = samples(text)
                name = "starling_experiment_node_round"
                reached = [v for (n, _), v in table.items() if n == name]
                if len(reached) < len(NODES) or min(reached) == 0:
                    return False
                seen.update(text=text, table=table)
                return True

            wait_until(orchestrator_moving, 120, "the orchestrator's endpoint showing rounds")
            promtool_check(seen["text"])
            table = seen["table"]
            for node in NODES:
                assert value(table, "starling_orchestrator_node_up", node=node) == 1.0
            assert value(table, "starling_orchestrator_nodes", state="up") == 3.0
            assert value(table, "starling_experiment_rounds", experiment="ops") == rounds
            assert 0.0 < value(table, "starling_experiment_progress_ratio") <= 1.0
            stdout, stderr = run.communicate(timeout=300)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()  # reaped, its pipes closed: no warning in a later test
        assert run.returncode == 0, stdout[-3000:] + stderr[-3000:]

        scraped = {node: scrape(metrics[node]) for node in NODES}
        for text in scraped.values():
            promtool_check(text)
        tables = {node: samples(text) for node, text in scraped.items()}
        for node, table in tables.items():
            mine = {"node": node, "experiment": "ops"}
            assert value(table, "starling_rounds_completed_total", **mine) == rounds
            assert value(table, "starling_round_duration_seconds_count", **mine) == rounds
            assert value(table, "starling_round_duration_seconds_sum", **mine) > 0
            assert value(table, "starling_checkpoint_duration_seconds_count", **mine) >= 1
            assert value(table, "starling_samples_stored", **mine) == rounds
            assert value(table, "starling_node_state", node=node, state="done") == 1.0
            assert value(table, "starling_inbound_streams_open", node=node) >= 0
            for peer in RING[node]:
                out_link = {**mine, "peer": peer, "direction": "out"}
                assert value(table, "starling_link_messages_sent_total", **out_link) == rounds
                sent_bytes = value(table, "starling_link_bytes_total", **out_link)
                # What the sender counts is what the receiver counts: 4 chains x dim 2.
                assert sent_bytes == rounds * 4 * 2 * 8
                in_link = {"node": peer, "peer": node, "direction": "in"}
                assert value(tables[peer], "starling_link_bytes_total", **in_link) == sent_bytes
                assert (
                    value(tables[peer], "starling_link_messages_received_total", **in_link)
                    == rounds
                )

        # One JSON object per line, from the orchestrator and from every node.
        said = _json_lines(stdout)
        assert {e["experiment"] for e in said} == {"ops"}
        assert any(e["event"] == "progress" and isinstance(e["round"], int) for e in said)
        for proc in cluster.procs:
            logged = _json_lines(proc.log())
            assert {e["node"] for e in logged} == {proc.node_id}
            configured = [e for e in logged if e["event"] == "configured"]
            assert configured and configured[0]["experiment"] == "ops"
            assert configured[0]["round"] == 0


def test_local_nodes_log_in_the_orchestrators_format(tmp_path, starling_home):
    experiment = {k: v for k, v in _experiment("local-json", 10).items() if k != "nodes"}
    experiment.update(
        data={"source": "synthetic", "size": 20, "seed": 5}, topology={"kind": "ring", "nodes": 3}
    )
    out = tmp_path / "out"
    done = run_cli(
        "run",
        _write(tmp_path / "exp.yaml", experiment),
        "--out",
        str(out),
        "--log-format",
        "json",
        env_home=starling_home,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert {e["experiment"] for e in _json_lines(done.stdout)} == {"local-json"}
    logs = sorted((out / "nodes").rglob("*.log"))
    assert len(logs) == 3
    for path in logs:
        events = {e["event"] for e in _json_lines(path.read_text())}
        assert {"serving", "configured", "run_finished"} <= events, (path, events)


def _query(prometheus: str, expression: str) -> list[dict]:
    url = f"http://{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as reply:
        body = json.loads(reply.read())
    assert body["status"] == "success", body
    return body["data"]["result"]


def _ready(prometheus: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{prometheus}/-/ready", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def _scalar(prometheus: str, expression: str) -> float | None:
    result = _query(prometheus, expression)
    return float(result[0]["value"][1]) if result else None


def _dashboard_queries_answer(prometheus: str) -> None:
    """Every query of the shipped Grafana dashboard is valid PromQL and, but for the
    ratios of what may not have happened, finds series in this run."""
    dashboard = json.loads((ROOT / "deploy" / "grafana-dashboard.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expression = target["expr"].replace("$__rate_interval", "10s")
            result = _query(prometheus, expression.replace("$experiment", ".*"))
            assert result or "fraction" in panel["title"].lower(), (panel["title"], expression)


def test_prometheus_scrapes_a_run_and_sees_a_cut_link(tmp_path, starling_home):
    server = need("prometheus")
    with Cluster(tmp_path) as cluster:
        addresses, metrics = _nodes_with_metrics(cluster)
        orchestrator = f"127.0.0.1:{free_port()}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {
                    "job_name": "starling-nodes",
                    "static_configs": [{"targets": sorted(metrics.values())}],
                },
                {
                    "job_name": "starling-orchestrator",
                    "static_configs": [{"targets": [orchestrator]}],
                },
            ],
        }
        prometheus = f"127.0.0.1:{free_port()}"
        log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - closed below
        scraper = subprocess.Popen(
            [
                server,
                f"--config.file={_write(tmp_path / 'prometheus.yml', config)}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address={prometheus}",
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        inventory = _write(tmp_path / "nodes.yaml", {"nodes": addresses})
        # Long enough to outlast the test: it is interrupted once everything was seen.
        experiment = _write(tmp_path / "exp.yaml", _experiment("watched", 1_000_000, 1.0))
        run = _run(
            [
                experiment,
                "--inventory",
                inventory,
                "--out",
                str(tmp_path / "out"),
                "--metrics",
                orchestrator,
            ],
            starling_home,
        )
        try:
            wait_until(lambda: _ready(prometheus), 120, "Prometheus ready (see prometheus.log)")
            rounds = "max(starling_rounds_completed_total)"
            wait_until(lambda: (_scalar(prometheus, rounds) or 0) > 0, 120, "rounds scraped")
            first = _scalar(prometheus, rounds)
            wait_until(lambda: _scalar(prometheus, rounds) > first, 60, "the round counter rise")
            up = 'sum(starling_orchestrator_node_up{experiment="watched"})'
            wait_until(lambda: _scalar(prometheus, up) == 3.0, 60, "3 nodes up in Prometheus")

            # a -> b cut: a withholds, b hears notices; the a -> b link's counter rises.
            withheld = 'starling_link_messages_withheld_total{node="b",peer="a",direction="in"}'
            before = _scalar(prometheus, withheld) or 0.0
            done = run_cli("links", "cut", "a", "b", env_home=starling_home, timeout=120)
            assert done.returncode == 0, done.stderr
            wait_until(
                lambda: (_scalar(prometheus, withheld) or 0) > before,
                60,
                "a per-link withheld counter rise after links cut",
            )
            faults = 'starling_faults_applied_total{node="a",kind="link_cut"}'
            wait_until(lambda: _scalar(prometheus, faults) == 1.0, 60, "the cut counted")

            # c -> b slower than b's deadline: its messages arrive late at b.
            late = 'starling_link_messages_late_total{node="b",peer="c",direction="in"}'
            done = run_cli(
                "links", "set", "c", "b", "--delay", "1500ms", env_home=starling_home, timeout=120
            )
            assert done.returncode == 0, done.stderr
            wait_until(
                lambda: (_scalar(prometheus, late) or 0) > 0,
                90,
                "a per-link late counter rise after links set --delay",
            )
            rate = _query(prometheus, "rate(starling_rounds_completed_total[10s])")
            assert {r["metric"]["node"] for r in rate} == set(NODES)
            _dashboard_queries_answer(prometheus)
        finally:
            run.send_signal(signal.SIGINT)
            try:
                run.communicate(timeout=120)
            except subprocess.TimeoutExpired:  # this test is about scraping, not the exit
                run.kill()
                run.communicate()  # reaped, its pipes closed: no warning in a later test
            scraper.terminate()
            try:
                scraper.wait(timeout=30)
            except subprocess.TimeoutExpired:
                scraper.kill()
            log.close()
