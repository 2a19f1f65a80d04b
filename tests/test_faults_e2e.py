"""Fault schedules end to end, through the real ``starling`` command on real node processes.

* A seeded link-fault schedule (a cut at rounds and i.i.d. drops) means the same thing in
  ``run`` and ``simulate``: bit-identical samples, identical withheld counts.
* A node killed mid-run by the experiment's schedule and restarted resumes from its
  checkpoint: the run completes and its collected samples cover every round exactly once,
  and every sample it produced before the kill is exactly what it was.
* Push-sum on a directed ring with one one-way link cut for a stretch of rounds: running
  sums reach the posterior as if nothing had happened, plain push-sum does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from starling.node.engine import simulate
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.evaluate import ground_truth
from starling.orchestrator.evaluation.metrics import empirical_w2
from starling.orchestrator.planning.node_specs import node_specs
from starling.orchestrator.planning.plan import plan_run
from tests.conftest import run_cli

pytestmark = pytest.mark.e2e

MODEL = {"name": "linear_regression", "params": {"dim": 2, "noise_std": 4.0, "prior_var": 10.0}}


def _experiment(tmp_path: Path, name: str, **fields) -> tuple[Path, dict]:
    raw = {
        "name": name,
        "model": MODEL,
        "data": {"source": "synthetic", "size": 50, "seed": 3},
        "seed": 11,
        **fields,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path, raw


def _run(path: Path, out: Path, home: Path, command: str = "run", timeout: float = 300):
    done = run_cli(command, str(path), "--out", str(out), env_home=home, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return json.loads((out / "metrics.json").read_text()), done.stdout


def _samples(out: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    found = {}
    for file in sorted((out / "samples").glob("node-*.npz")):
        with np.load(file) as data:
            found[file.stem[len("node-") :]] = (data["samples"], data["rounds"])
    return found


def test_a_seeded_schedule_means_the_same_in_run_and_simulate(tmp_path, starling_home):
    rounds = 60
    path, _ = _experiment(
        tmp_path,
        "schedule",
        algorithm="d-sgld",
        hyperparameters={"eta": 0.009},
        topology={"kind": "ring", "nodes": 5},
        rounds=rounds,
        chains=8,
        # Generous: with withheld notices nobody ever waits for a scheduled loss.
        round_deadline=10.0,
        faults=[
            {"link": ["0", "1"], "rounds": [5, 15]},
            {"link": "all", "drop": 0.3, "rounds": [20, 45]},
        ],
    )
    run_metrics, stdout = _run(path, tmp_path / "run", starling_home)
    sim_metrics, _ = _run(path, tmp_path / "sim", starling_home, command="simulate")

    ran, simulated = _samples(tmp_path / "run"), _samples(tmp_path / "sim")
    assert sorted(ran) == sorted(simulated) == ["0", "1", "2", "3", "4"]
    for node in ran:
        assert list(ran[node][1]) == list(range(rounds)), node
        assert ran[node][0].tobytes() == simulated[node][0].tobytes(), f"node {node} differs"

    # The counters agree too: what the run withheld is exactly what the schedule says,
    # and the network lost nothing on top of it.
    run_links, sim_links = run_metrics["links"], sim_metrics["links"]
    assert sorted(run_links) == sorted(sim_links)
    for key, counters in run_links.items():
        assert counters["withheld"] == sim_links[key]["withheld"], key
        assert counters["sent"] == counters["delivered"] == sim_links[key]["sent"], key
        assert counters["dropped"] == counters["late"] == 0, key
    assert run_links["0->1"]["withheld"] >= 10  # the cut, plus random drops in 20..44
    assert sum(c["withheld"] for c in run_links.values()) > 20
    # The account says what was scheduled, in both.
    for metrics in (run_metrics, sim_metrics):
        assert "scheduled: link 0<->1 down, rounds 5..14" in metrics["account"]
        assert any("every link fails w.p. 0.3" in line for line in metrics["account"])
    assert "scheduled: link 0<->1 down, rounds 5..14" in stdout


def test_a_node_killed_by_the_schedule_resumes_and_loses_no_sample(tmp_path, starling_home):
    """Node 2 is killed at round 50 and restarted 3 rounds later; node 0 is killed at
    round 110 for good. Every sample either produced is collected, exactly once."""
    rounds, kill_at, down_for, final_kill = 150, 50, 3, 110
    path, raw = _experiment(
        tmp_path,
        "scheduled-kill",
        algorithm="d-sgld",
        hyperparameters={"eta": 0.009},
        topology={"kind": "ring", "nodes": 4},
        rounds=rounds,
        chains=8,
        # Neighbours never wait for a node the schedule has killed; the deadline bounds
        # how long they wait for it at its restart round while its process boots. The
        # latency puts messages in flight when the kill lands.
        round_deadline=5.0,
        link_delay="20ms",
        faults=[
            {"node": "2", "kill_at_round": kill_at, "restart_after_rounds": down_for},
            {"node": "0", "kill_at_round": final_kill},
        ],
    )
    metrics, stdout = _run(path, tmp_path / "run", starling_home)

    events = metrics["faults"]["nodes"]
    killed = [e for e in events if e["node"] == "2" and e["event"] == "killed"]
    resumed = [e for e in events if e["node"] == "2" and e["event"] == "resumed"]
    assert len(killed) == 1 and len(resumed) == 1, events
    # It was held before round 50 (Control.Hold) and killed there, exactly.
    assert killed[0]["round"] == kill_at, killed
    assert resumed[0]["resumed"] is True and resumed[0]["round"] <= killed[0]["round"]
    assert "node 2: killed at round" in stdout and "resumed from its checkpoint" in stdout

    collected = _samples(tmp_path / "run")
    for node in ("1", "2", "3"):
        values, sample_rounds = collected[node]
        assert list(sample_rounds) == list(range(rounds)), node  # every round, exactly once
        assert np.isfinite(values).all()

    # Node 0 never came back: what it stored up to its death is all there, streamed over
    # gRPC by its process started again idle on its state dir (never read from its files).
    final, down = [e for e in events if e["node"] == "0"]
    assert final["event"] == "killed" and final["round"] == final_kill, final
    # ... and, down for good, it was named to the two nodes that waited for it.
    assert down["event"] == "declared_down" and sorted(down["told"]) == ["1", "3"], down
    assert "not restarted" in stdout
    assert any(
        "node 0: down at the end" in line and "started again idle" in line
        for line in metrics["account"]
    ), metrics["account"]
    kept = len(collected["0"][1])
    assert list(collected["0"][1]) == list(range(kept))
    assert kept == final_kill  # every round before the one it died at
    assert metrics["samples_per_node"] == {"0": kept, "1": rounds, "2": rounds, "3": rounds}

    # Nothing was lost or altered, and the schedule meant the same as in-process: every
    # node's samples equal the simulator's byte for byte, through the outage and after it
    # (the neighbours knew from the schedule not to wait for the dead node, so no other
    # link lost a message to a deadline).
    expected = simulate(node_specs(parse_experiment(raw)))
    for node, (values, _) in collected.items():
        assert values.tobytes() == expected[node][: len(values)].tobytes(), node
    late = {link: c["late"] for link, c in metrics["links"].items() if c["late"]}
    assert not late, late


def test_a_node_killed_and_restarted_twice_by_the_schedule_finishes_the_run(
    tmp_path, starling_home
):
    """Two scheduled outages of one node: the first restart used to wait for the second
    kill (which a dead node never reaches), so the run hung with the node down. Each
    restart follows its own kill; the run completes, every round stored exactly once,
    bit-identical to the simulator."""
    rounds = 40
    path, raw = _experiment(
        tmp_path,
        "killed-twice",
        algorithm="d-admms",
        hyperparameters={"rho": 5.0},
        topology={"kind": "ring", "nodes": 3},
        rounds=rounds,
        chains=4,
        round_deadline=5.0,
        faults=[
            {"node": "1", "kill_at_round": 8, "restart_after_rounds": 3},
            {"node": "1", "kill_at_round": 20, "restart_after_rounds": 3},
        ],
    )
    metrics, _ = _run(path, tmp_path / "run", starling_home, timeout=240)
    events = [(e["event"], e.get("round")) for e in metrics["faults"]["nodes"] if e["node"] == "1"]
    assert [e for e, _ in events if e in ("killed", "resumed")] == [
        "killed",
        "resumed",
        "killed",
        "resumed",
    ], events
    assert [r for e, r in events if e == "killed"] == [8, 20], events
    collected = _samples(tmp_path / "run")
    expected = simulate(node_specs(parse_experiment(raw)))
    for node, (values, sample_rounds) in collected.items():
        assert list(sample_rounds) == list(range(rounds)), node
        assert values.tobytes() == expected[node].tobytes(), node


def _node_w2(samples: dict[str, np.ndarray], truth, window: int, chains=None) -> float:
    """Mean over nodes of W2(Gaussian fitted to the node's last ``window`` rounds, posterior)."""
    values = []
    for s in samples.values():
        tail = s[-window:] if chains is None else s[-window:, chains]
        values.append(empirical_w2(tail.reshape(-1, s.shape[-1]), truth.mean, truth.cov))
    return float(np.mean(values))


def test_running_sums_reach_the_posterior_after_a_cut_and_plain_push_sum_does_not(
    tmp_path, starling_home
):
    """Directed ring of 5; the one-way link 0 → 1 is cut for rounds 100..104 (node 1's only
    in-link: it hears nothing for five rounds). Constant step a = 0.02, 500 rounds, W2 of
    each node's last 200 rounds × 40 chains against the exact posterior.

    Tolerance: chains are independent, so the spread of the statistic over a bootstrap of
    chains is its Monte-Carlo standard error (≈ 0.007). Running sums must come within 4 SE
    of the same run without the cut (≈ 0.097, the step's discretisation plus the fit's
    finite-sample bias): 4 SE ≈ 0.026. Plain push-sum loses node 0's shares for good and
    samples a hotter law afterwards: measured ≈ 0.34, and asserted above the tolerance.
    """
    rounds, window, chains = 500, 200, 40
    common = dict(
        hyperparameters={"a": 0.02, "gamma": 0.0},
        topology={"kind": "directed_ring", "nodes": 5},
        rounds=rounds,
        chains=chains,
        round_deadline=10.0,
        evaluation={"window": window},
    )
    cut = [{"link": ["0", "1"], "rounds": [100, 105]}]
    rs_path, rs_raw = _experiment(
        tmp_path, "ps-rs-cut", algorithm="push-sum-rs", faults=cut, **common
    )
    plain_path, _ = _experiment(
        tmp_path, "ps-plain-cut", algorithm="push-sum", faults=cut, **common
    )
    rs_metrics, _ = _run(rs_path, tmp_path / "rs", starling_home)
    plain_metrics, _ = _run(plain_path, tmp_path / "plain", starling_home)

    experiment = parse_experiment(rs_raw)
    truth = ground_truth(plan_run(experiment).evaluation)
    clean = simulate(node_specs(parse_experiment({**rs_raw, "faults": []})))
    rs = {n: s for n, (s, _) in _samples(tmp_path / "rs").items()}
    plain = {n: s for n, (s, _) in _samples(tmp_path / "plain").items()}

    # The same schedule means the same thing on the network and in-process.
    expected = simulate(node_specs(experiment))
    for node in rs:
        assert rs[node].tobytes() == expected[node].tobytes(), node
    # The cut really happened on the wire: 5 messages withheld, none lost otherwise.
    assert rs_metrics["links"]["0->1"]["withheld"] == 5
    assert plain_metrics["links"]["0->1"]["withheld"] == 5

    rng = np.random.default_rng(0)
    boot = [_node_w2(rs, truth, window, rng.integers(0, chains, chains)) for _ in range(200)]
    se = float(np.std(boot))
    w2_clean = _node_w2(clean, truth, window)
    w2_rs = _node_w2(rs, truth, window)
    w2_plain = _node_w2(plain, truth, window)
    tolerance = w2_clean + 4 * se
    report = (
        f"W2 (mean over nodes, last {window} rounds): fault-free {w2_clean:.4f}, "
        f"running sums {w2_rs:.4f}, plain {w2_plain:.4f}; MC SE {se:.4f}, "
        f"tolerance {tolerance:.4f}"
    )
    # metrics.json reports the same figure the test computes.
    assert rs_metrics["w2"]["node_mean"] == pytest.approx(w2_rs, rel=1e-9)
    assert plain_metrics["w2"]["node_mean"] == pytest.approx(w2_plain, rel=1e-9)
    assert w2_rs <= tolerance, report
    assert w2_plain > tolerance, report
    assert w2_plain > 2 * w2_rs, report
    print(report)


def test_a_node_killed_before_round_0_is_listed_with_no_sample(tmp_path, starling_home):
    """A node the schedule kills before its first round records nothing: it is still in
    ``samples_per_node`` (with 0), the run is ``partial`` (it stored fewer samples than
    rounds), and the summary and the report show it. ``simulate`` says the same."""
    rounds = 12
    path, _ = _experiment(
        tmp_path,
        "dead-at-0",
        algorithm="d-sgld",
        hyperparameters={"eta": 0.009},
        topology={"kind": "ring", "nodes": 4},
        rounds=rounds,
        chains=2,
        round_deadline=5.0,
        faults=[{"node": "1", "kill_at_round": 0}],
    )
    metrics, stdout = _run(path, tmp_path / "run", starling_home)
    assert metrics["samples_per_node"] == {"0": rounds, "1": 0, "2": rounds, "3": rounds}
    assert metrics["status"] == "partial"
    assert sorted(_samples(tmp_path / "run")) == ["0", "2", "3"]
    assert any(line.split() == ["1", "-", "0"] for line in stdout.splitlines()), stdout
    report = run_cli("report", str(tmp_path / "run"), env_home=starling_home, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    assert (tmp_path / "run" / "report.html").is_file()
    _same_as_simulate(path, tmp_path, starling_home, metrics)


def test_nodes_killed_for_good_leave_the_same_results_in_run_and_simulate(tmp_path, starling_home):
    """Node 1 is killed at round 7 and node 3 at round 0, neither restarted: each keeps the
    rounds before its kill and its links count nothing after it, in both engines (the
    in-process engine runs a dead node's later rounds in isolation and drops them)."""
    path, _ = _experiment(
        tmp_path,
        "dead-for-good",
        algorithm="d-admms",
        hyperparameters={"rho": 5.0},
        topology={"kind": "ring", "nodes": 5},
        rounds=15,
        chains=3,
        round_deadline=5.0,
        faults=[{"node": "1", "kill_at_round": 7}, {"node": "3", "kill_at_round": 0}],
    )
    metrics, _ = _run(path, tmp_path / "run", starling_home)
    assert metrics["samples_per_node"] == {"0": 15, "1": 7, "2": 15, "3": 0, "4": 15}
    _same_as_simulate(path, tmp_path, starling_home, metrics)


def _same_as_simulate(path: Path, tmp_path: Path, home: Path, run_metrics: dict) -> None:
    sim_metrics, _ = _run(path, tmp_path / "sim", home, command="simulate")
    ran, simulated = _samples(tmp_path / "run"), _samples(tmp_path / "sim")
    assert sorted(ran) == sorted(simulated)
    for node, (values, rounds) in ran.items():
        assert values.tobytes() == simulated[node][0].tobytes(), f"node {node} differs"
        assert list(rounds) == list(simulated[node][1]), node
    for key in ("samples_per_node", "status", "w2", "consensus_error"):
        assert run_metrics[key] == sim_metrics[key], key
    run_links, sim_links = run_metrics["links"], sim_metrics["links"]
    assert sorted(run_links) == sorted(sim_links)
    for link, counters in sim_links.items():
        assert {k: run_links[link][k] for k in counters} == counters, link


def test_a_restart_counts_each_message_once_on_every_link(tmp_path, starling_home):
    """Node 2 is held before round 20 and killed there, restarted at round 23. Its
    neighbours, told by the schedule not to wait for it, reach round 23 and send it their
    round-23 message before the kill: the killed process counted it received, and the
    restarted one, resuming at round 20, counted it again when the link resent it - so the
    account showed 1→2 and 3→2 delivering one message more than was sent. What a process
    held for rounds it never ran dies with it; the next one counts it when it comes."""
    rounds = 40
    path, _ = _experiment(
        tmp_path,
        "restart-counts",
        algorithm="d-sgld",
        hyperparameters={"eta": 0.009},
        topology={"kind": "ring", "nodes": 4},
        rounds=rounds,
        chains=2,
        round_deadline=5.0,
        link_delay="20ms",
        faults=[{"node": "2", "kill_at_round": 20, "restart_after_rounds": 3}],
    )
    metrics, _ = _run(path, tmp_path / "run", starling_home)
    assert [e["event"] for e in metrics["faults"]["nodes"] if e["node"] == "2"][:3] == [
        "killed",
        "restarted",
        "resumed",
    ]
    links = metrics["links"]
    for key, c in links.items():
        assert c["delivered"] <= c["sent"], (key, c)
        # Nothing is lost but the schedule's withheld rounds 20..22 into and out of node 2.
        assert c["delivered"] + c["late"] == c["sent"], (key, c)
    for key in ("1->2", "3->2", "2->1", "2->3"):
        assert links[key]["sent"] == rounds - 3 and links[key]["withheld"] == 3, links[key]
    # Each node's own books agree: node 2 received each neighbour's message, and notice, once.
    inbound = metrics["link_stats"]["2"]["inbound"]
    for peer in ("1", "3"):
        assert inbound[peer]["received"] == rounds - 3, inbound[peer]
        assert inbound[peer]["withheld"] == 3, inbound[peer]


def test_a_restart_counts_each_message_once_for_an_asynchronous_sampler(tmp_path, starling_home):
    """EC-SGHMC (asynchronous) on a star, worker 2 killed at round 20 and restarted at 23:
    the restarted process counted every message the centre's link resent - the last
    deadline's worth, 20 rounds here - a second time (0→2 delivered 77 of 57 sent).
    A resend for a round before the process's first is its predecessor's, counted there."""
    rounds = 60
    raw = yaml.safe_load(
        (Path(__file__).parent.parent / "examples" / "ec-sghmc-gaussian.yaml").read_text()
    )
    raw.pop("evaluation", None)
    path, _ = _experiment(
        tmp_path,
        "restart-counts-async",
        **{k: raw[k] for k in ("algorithm", "hyperparameters", "model", "data", "topology")},
        rounds=rounds,
        chains=2,
        round_deadline=5.0,
        link_delay="20ms",
        faults=[{"node": "2", "kill_at_round": 20, "restart_after_rounds": 3}],
    )
    metrics, _ = _run(path, tmp_path / "run", starling_home)
    assert "resumed" in [e["event"] for e in metrics["faults"]["nodes"] if e["node"] == "2"]
    for key, c in metrics["links"].items():
        assert c["delivered"] + c["late"] == c["sent"], (key, c)
    assert metrics["links"]["0->2"]["sent"] == rounds - 3
    inbound = metrics["link_stats"]["2"]["inbound"]["0"]
    assert (inbound["received"], inbound["withheld"]) == (rounds - 3, 3), inbound
