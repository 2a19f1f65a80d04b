"""Fault windows against the run's length: what lies wholly past the last round is refused
at parse time, naming the field and the rounds; what starts inside and runs past it is
accepted, applies up to the last round, and the account says it was cut there - for link
faults as for a node restarted after the last round."""

from __future__ import annotations

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.results.account import Account, account_schedule

ROUNDS = 50


def _experiment(faults, **fields):
    return parse_experiment(
        {
            "name": "windows",
            "algorithm": "d-sgld",
            "hyperparameters": {"eta": 0.009},
            "model": {"name": "linear_regression", "params": {"dim": 2}},
            "data": {"source": "synthetic", "size": 20, "seed": 1},
            "topology": {"kind": "ring", "nodes": 4},
            "rounds": ROUNDS,
            "round_seconds": 1.0,
            "faults": faults,
            **fields,
        }
    )


def _account(experiment) -> list[str]:
    account = Account(lambda _line: None)
    account_schedule(account, experiment.faults, experiment.node_faults, experiment.rounds)
    return account.lines


# fmt: off
@pytest.mark.parametrize(("fault", "message"), [
    ({"link": ["0", "1"], "rounds": [80, 90]},
     r"^faults\[0\]\.rounds: starts at round 80, after the last round \(49\)$"),
    ({"link": ["0", "1"], "rounds": [50, 51]},
     r"^faults\[0\]\.rounds: starts at round 50, after the last round \(49\)$"),
    ({"link": ["0", "1"], "at_round": 80, "for_rounds": 10},
     r"^faults\[0\]\.at_round: starts at round 80, after the last round \(49\)$"),
    ({"link": "all", "drop": 0.2, "rounds": [80, 90]},
     r"^faults\[0\]\.rounds: starts at round 80, after the last round \(49\)$"),
    ({"link": ["0", "1"], "at_seconds": 80, "for_seconds": 5},
     r"^faults\[0\]\.at_seconds: starts at round 80, after the last round \(49\)$"),
    ({"node": "1", "kill_at_round": 80},
     r"^faults\[0\]\.kill_at_round: kills at round 80, after the last round \(49\)$"),
    ({"node": "1", "kill_at_seconds": 60, "restart_after_seconds": 5},
     r"^faults\[0\]\.kill_at_seconds: kills at round 60, after the last round \(49\)$"),
])
# fmt: on
def test_a_fault_wholly_past_the_last_round_is_refused_naming_field_and_rounds(fault, message):
    with pytest.raises(ConfigError, match=message):
        _experiment([{"link": ["1", "2"], "rounds": [1, 3]}, fault][1:])


def test_a_link_window_running_past_the_last_round_is_cut_there_and_said_so():
    experiment = _experiment([
        {"link": ["0", "1"], "rounds": [40, 90]},
        {"link": "all", "drop": 0.2, "at_round": 45, "for_rounds": 100},
        {"link": ["2", "3"], "at_round": 30},  # until the end: nothing is cut
        {"link": ["1", "2"], "rounds": [10, 50]},  # ends exactly at the end
    ])
    lines = _account(experiment)
    assert (
        "scheduled: link 0<->1 down, rounds 40..49 "
        "(given as rounds 40..89: cut at the run's last round)"
    ) in lines, lines
    assert (
        "scheduled: every link fails w.p. 0.2 per round (seeded), rounds 45..49 "
        "(given as rounds 45..144: cut at the run's last round)"
    ) in lines, lines
    assert "scheduled: link 2<->3 down, rounds 30..49" in lines, lines
    assert "scheduled: link 1<->2 down, rounds 10..49" in lines, lines
    # The node fault's counterpart: a restart after the last round is accepted and said so.
    restarted = _experiment([{"node": "1", "kill_at_round": 40, "restart_after_rounds": 30}])
    assert any("restarted at round 70 (after the run's last round)" in line
               for line in _account(restarted))
