"""The run's account and counters, without processes: schedule descriptions, link tables,
the live journal, divergence reports, ``simulate``'s results folder."""

from __future__ import annotations

import json

import numpy as np
import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation.evaluate import evaluate
from starling.orchestrator.execution import live
from starling.orchestrator.execution.collector import Collector
from starling.orchestrator.execution.simulation import simulate_experiment
from starling.orchestrator.faults.account import (
    describe_link_faults,
    describe_node_faults,
    scheduled_link_counts,
)
from starling.orchestrator.planning.node_specs import node_specs
from starling.orchestrator.planning.plan import plan_run
from starling.orchestrator.results.link_books import link_account, link_summary
from starling.orchestrator.results.summary import summary_table
from starling.orchestrator.results.write import write_results


def _raw(**fields):
    raw = {
        "name": "acct",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 0.009},
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "data": {"source": "synthetic", "size": 20, "seed": 1},
        "topology": {"kind": "ring", "nodes": 4},
        "rounds": 30,
        "chains": 3,
        "seed": 4,
    }
    raw.update(fields)
    return raw


def test_schedule_is_described_as_the_user_wrote_it():
    experiment = parse_experiment(
        _raw(
            faults=[
                {"link": ["0", "1"], "rounds": [5, 15]},
                {"link": ["1", "2"], "at_round": 20, "both_ways": False},
                {"link": "all", "drop": 0.3, "rounds": [10, 12]},
                {"node": "3", "kill_at_round": 7, "restart_after_rounds": 4},
            ]
        )
    )
    links = describe_link_faults(experiment.faults, experiment.rounds)
    assert [text for _, text in links] == [
        "scheduled: link 0<->1 down, rounds 5..14",
        "scheduled: link 1->2 down, rounds 20..29",
        "scheduled: every link fails w.p. 0.3 per round (seeded), rounds 10..11",
    ]
    assert links[0][0] == {"link": ["0", "1"], "both_ways": True, "rounds": [5, 15], "drop": 1.0}
    assert links[1][0]["rounds"] == [20, 30]  # "until the end" is written as the run's end
    assert links[2][0]["senders"] == ["0", "1", "2", "3"]
    nodes = describe_node_faults(experiment.node_faults, experiment.rounds)
    assert nodes == [
        (
            {"node": "3", "kill_at_round": 7, "restart_at_round": 11},
            "scheduled: node 3 killed at round 7, restarted at round 11",
        )
    ]


def test_directed_link_all_is_one_fault_although_each_sender_has_its_own_seed():
    experiment = parse_experiment(
        _raw(
            algorithm="push-sum-rs",
            hyperparameters={},
            topology={"kind": "directed_ring", "nodes": 4},
            faults=[{"link": "all", "drop": 0.5}],
        )
    )
    (described,) = describe_link_faults(experiment.faults, experiment.rounds)
    assert described[1] == "scheduled: every link fails w.p. 0.5 per round (seeded), rounds 0..29"


def test_scheduled_counts_are_what_the_links_withhold():
    experiment = parse_experiment(
        _raw(
            faults=[
                {"link": ["0", "1"], "rounds": [5, 15]},
                {"node": "2", "kill_at_round": 20, "restart_after_rounds": 5},
            ]
        )
    )
    counts = scheduled_link_counts(node_specs(experiment))
    assert sorted(counts) == ["0->1", "0->3", "1->0", "1->2", "2->1", "2->3", "3->0", "3->2"]
    assert counts["0->1"] == {"sent": 20, "delivered": 20, "withheld": 10, "dropped": 0, "late": 0}
    # The killed node is cut off both ways for its 5 rounds.
    for key in ("1->2", "2->1", "2->3", "3->2"):
        assert counts[key]["withheld"] == 5, key
    assert counts["0->3"]["withheld"] == 0


def test_link_summary_joins_what_the_sender_and_the_receiver_counted():
    books = {
        "a": {
            "outbound": {"b": {"sent": 7, "withheld": 3, "dropped": 1, "send_errors": 1}},
            "inbound": {},
        },
        "b": {
            "outbound": {},
            "inbound": {"a": {"received": 5, "late": 1, "rejected": 2, "screened": 2}},
        },
    }
    links = link_summary(books)
    assert links == {
        "a->b": {
            "sent": 7,
            "delivered": 5,
            "withheld": 3,
            "dropped": 1,
            "late": 1,
            "rejected": 2,
            "screened": 2,
            "send_errors": 1,
            "overruns": 0,
            "resent": 0,
            "lost": 3 + 1 + 7 - 5,
        }
    }
    lines = link_account(links)
    assert lines[0].startswith("links: 1 of 1 did not deliver every message in time")
    # The receiver's screening names the sender: the link a→b.
    assert lines[1] == (
        "  a→b: 7 sent, 5 delivered in time, 1 late, 2 screened (a value beyond the "
        "receiver's bound), 3 dropped by a fault, 1 not sent (receiver unreachable), "
        "1 stream failures (messages sent again)"
    )
    clean = {"a->b": {"sent": 4, "delivered": 4, "withheld": 0, "dropped": 0, "late": 0}}
    assert link_account(clean) == ["links: all 1 links delivered every message in time"]


def test_a_message_sent_again_after_a_stream_failure_and_delivered_is_not_lost():
    """A stream broke, its messages were sent again and arrived: the account said the link
    "lost messages"."""
    resent = {"a->b": {"sent": 9, "delivered": 9, "send_errors": 2}}
    assert link_account(resent) == [
        "links: all 1 links delivered every message in time; 2 stream failures, "
        "their messages sent again"
    ]
    assert "lost" not in " ".join(link_account({"a->b": {"sent": 9, "delivered": 8}}))


def test_the_live_journal_replays_into_link_states(tmp_path):
    live.log_event(
        tmp_path,
        {"kind": "link", "action": "set", "sender": "0", "receiver": "*", "delay_ms": 30.0},
    )
    live.log_event(
        tmp_path, {"kind": "link", "action": "cut", "sender": "0", "receiver": "1", "up": False}
    )
    live.log_event(
        tmp_path, {"kind": "link", "action": "set", "sender": "2", "receiver": "3", "drop": 0.25}
    )
    # A line still being written is left for the next read.
    with open(tmp_path / live.JOURNAL, "a") as handle:
        handle.write('{"kind": "link", "sender": "9"')
    events, offset = live.read_events(tmp_path)
    assert [e["action"] for e in events] == ["set", "cut", "set"]
    assert all("who" in e and "time" in e for e in events)
    assert live.read_events(tmp_path, offset) == ([], offset)
    assert live.link_states(events) == {
        "0->1": {"up": False, "drop": 0.0, "delay_ms": 30.0},  # inherits 0 -> * delay
        "2->3": {"up": True, "drop": 0.25, "delay_ms": 0.0},
    }
    restore = {
        "kind": "link",
        "action": "restore",
        "sender": "0",
        "receiver": "1",
        "up": True,
        "drop": 0.0,
        "delay_ms": 0.0,
    }
    assert live.link_states([*events, restore])["0->1"] == {
        "up": True,
        "drop": 0.0,
        "delay_ms": 0.0,
    }


@pytest.mark.parametrize(
    "value, message",
    [
        ("fast", "link_delay: expected a duration like 20ms or 0.5s, got 'fast'"),
        (-5, "link_delay: expected a duration"),
        ("3s", "link_delay: 3000 ms is not under round_deadline (2 s)"),
    ],
)
def test_link_delay_errors_name_the_field(value, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_experiment(_raw(link_delay=value, round_deadline=2.0))


def test_link_delay_reads_milliseconds_and_seconds():
    assert parse_experiment(_raw(link_delay="20ms")).link_delay_ms == 20.0
    assert parse_experiment(_raw(link_delay="0.5s", round_deadline=2.0)).link_delay_ms == 500.0
    assert parse_experiment(_raw(link_delay=15)).link_delay_ms == 15.0
    assert parse_experiment(_raw()).link_delay_ms == 0.0


def test_a_diverged_node_is_reported_not_turned_into_nan():
    experiment = parse_experiment(_raw(rounds=10, evaluation={"window": 3}))
    rng = np.random.default_rng(0)
    samples = {n: rng.standard_normal((10, 3, 2)) for n in "0123"}
    samples["2"][6:] = np.inf
    samples["2"][7:] = np.nan
    samples["3"][8:] = 1e200  # finite, but no longer a number anything can square
    metrics = evaluate(
        plan_run(experiment).evaluation, samples
    ).metrics  # warnings are errors in this suite
    assert metrics["diverged"] == {"2": 6, "3": 8}
    assert metrics["w2"]["per_node"]["2"] is None and metrics["w2"]["per_node"]["3"] is None
    assert metrics["w2"]["per_node"]["0"] > 0
    assert metrics["w2"]["average"] is None and metrics["w2"]["node_mean"] is None
    assert metrics["consensus_error"] is None
    table = summary_table(metrics)
    assert "diverged: node 2 from round 6, node 3 from round 8" in table
    json.dumps(metrics, allow_nan=False)  # strict JSON: no NaN or Infinity anywhere


def test_a_diverged_round_is_an_empty_cell_in_every_csv(tmp_path):
    """w2_curve.csv wrote a diverged round as ``nan`` where the other tables left the cell
    empty; now every file leaves it empty, and a figure that exists is still written."""
    raw = _raw(rounds=10, evaluation={"window": 3})
    experiment = parse_experiment(raw)
    rng = np.random.default_rng(0)
    samples = {n: rng.standard_normal((10, 3, 2)) for n in "0123"}
    samples["2"][6:] = np.nan
    evaluation = evaluate(plan_run(experiment).evaluation, samples)
    rounds = {n: np.arange(10) for n in samples}
    write_results(tmp_path, raw, samples, rounds, evaluation)
    written = sorted(tmp_path.glob("*.csv"))
    assert "w2_curve.csv" in {p.name for p in written}
    for path in written:
        text = path.read_text().lower()
        assert "nan" not in text and "inf" not in text, path.name
    curve = [line.split(",") for line in (tmp_path / "w2_curve.csv").read_text().splitlines()]
    column = curve[0].index("node-2")
    by_round = {int(row[0]): row[column] for row in curve[1:]}
    assert by_round[9] == "" and by_round[5] != ""  # diverged from round 6, scored before


def test_a_posterior_std_that_left_the_floats_is_shown_not_crashed_on():
    # Data near 1e308: the exact posterior's std is stored as None (strict JSON).
    metrics = {"w2": {"per_node": {"0": None}}, "posterior": {"std": [None, 0.5]}}
    assert "posterior std per coordinate: not finite, 0.5000" in summary_table(metrics)


def test_collector_steps_back_to_the_nodes_checkpoint():
    collector = Collector()
    collector.rounds["a"] = [0, 1, 2, 3]
    collector.values["a"] = [np.full((1, 1), k) for k in range(4)]
    assert collector.truncate("a", 3) == 1
    assert collector.offset("a") == 3 and collector.rounds["a"] == [0, 1, 2]
    assert collector.truncate("a", 5) == 0 and collector.truncate("b", 0) == 0


def test_simulate_writes_the_same_keys_as_run(tmp_path):
    experiment = parse_experiment(_raw(faults=[{"link": ["0", "1"], "rounds": [2, 6]}]))
    said: list[str] = []
    metrics = simulate_experiment(plan_run(experiment), tmp_path, say=said.append)
    written = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("account", "faults", "links", "program_metrics", "backend"):
        assert key in written, key
    assert written["backend"] == "simulate"
    assert written["links"]["0->1"]["withheld"] == 4 == written["links"]["1->0"]["withheld"]
    assert written["faults"]["scheduled_links"][0]["rounds"] == [2, 6]
    assert "scheduled: link 0<->1 down, rounds 2..5" in written["account"]
    assert metrics["links"] == written["links"]
    assert any("what happened:" in line for line in said)


def test_many_coordinates_show_their_std_as_a_range():
    # dim 200 printed 200 figures on one line of summary.txt; past 10 the range is shown.
    many = [0.1 + k / 1000 for k in range(200)]
    table = summary_table({"w2": {"per_node": {}}, "posterior": {"std": many}})
    assert "posterior std over 200 coordinates: from 0.1000 to 0.2990" in table
    assert "0.1010" not in table
    with_gaps = summary_table({"w2": {"per_node": {}}, "posterior": {"std": [None, *many]}})
    assert "201 coordinates: from 0.1000 to 0.2990, 1 not finite" in with_gaps
    ten = summary_table({"w2": {"per_node": {}}, "posterior": {"std": many[:10]}})
    assert "posterior std per coordinate: 0.1000, 0.1010" in ten


def test_one_chain_is_not_judged_on_r_hat():
    verdict = {
        "run": "converged",
        "criteria": {"window": [5, 9], "rhat_max": 1.01, "ess_min": 100},
    }
    one = summary_table({"chains": 1, "verdict": verdict})
    many = summary_table({"chains": 4, "verdict": verdict})
    assert "R-hat" not in one and "bulk and tail ESS ≥ 100" in one
    assert "R-hat ≤ 1.010, bulk and tail ESS ≥ 100" in many
