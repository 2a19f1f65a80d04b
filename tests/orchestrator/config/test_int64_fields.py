"""Every integer of an experiment reaches the nodes as a protobuf int64. A larger one
(``checkpoint_every: 10**21``, ``topology.period``, a fault's ``rounds: [1, 10**21]``, a
restart 10**21 rounds on) passed the checks and failed ``starling run`` with a Python
traceback once the nodes had started. Counts are now refused beyond int64, naming the
field; a fault or restart that ends beyond the run is kept as ending after it."""

from __future__ import annotations

import pytest

from starling.node.params import ConfigError
from starling.node.protocol.convert import spec_to_config
from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.planning.node_specs import node_specs

BIG = 10**21
HUGE = {"node_memory": "99999999999999TiB", "samples_memory": "99999999999999TiB"}


def _raw(**fields):
    return {
        "algorithm": "d-admms",
        "model": {"name": "linear_regression", "params": {"dim": 2}},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 10,
        "chains": 2,
        **fields,
    }


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"checkpoint_every": BIG}, "checkpoint_every"),
        ({"rounds": BIG, "limits": HUGE}, "rounds"),
        ({"chains": BIG, "limits": HUGE}, "chains"),
        ({"data": {"size": BIG}, "limits": HUGE}, "data.size"),
        ({"data": {"sizes": [5, BIG, 5]}, "limits": HUGE}, r"data.sizes\[1\]"),
        (
            {"topology": {"nodes": 3, "period": BIG, "schedule": [{"kind": "ring"}]}},
            "topology.period",
        ),
    ],
)
def test_a_count_beyond_int64_is_refused_naming_its_field(fields, field):
    with pytest.raises(ConfigError, match=rf"^{field}: must be at most 9223372036854775807"):
        parse_experiment(_raw(**fields))


@pytest.mark.parametrize(
    "fault",
    [
        {"link": ["0", "1"], "rounds": [1, BIG]},
        {"link": ["0", "1"], "at_round": 1, "for_rounds": BIG},
        {"link": ["0", "1"], "at_round": 1, "rounds": BIG},
        {"node": "0", "kill_at_round": 2, "restart_after_rounds": BIG},
    ],
)
def test_a_fault_ending_far_beyond_the_run_reaches_the_nodes(fault):
    experiment = parse_experiment(_raw(faults=[fault]))
    for spec in node_specs(experiment):
        spec_to_config(spec)  # raised ValueError: Value out of range
