"""The network average computed at the rounds asked
(:class:`starling.orchestrator.evaluation.network_average.NetworkAverage`): the same floats
as the whole average built first, and built whole only when a figure reads every round."""

from __future__ import annotations

import numpy as np
import pytest

from starling.orchestrator.config.experiment import parse_experiment
from starling.orchestrator.evaluation import evaluate as evaluate_module
from starling.orchestrator.evaluation.evaluate import evaluate
from starling.orchestrator.evaluation.network_average import NetworkAverage
from starling.orchestrator.planning.plan import plan_run


def _samples(seed: int, nodes: int = 4, rounds: int = 30) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {str(k): rng.standard_normal((rounds, 7, 3)) * (k + 1) for k in range(nodes)}


def _whole_average(samples: dict[str, np.ndarray]) -> np.ndarray:
    """The plain definition: every node summed in sorted order, then divided."""
    names = sorted(samples)
    total = samples[names[0]].copy()
    for name in names[1:]:
        total = total + samples[name]
    return total / len(names)


@pytest.mark.parametrize("seed", range(3))
def test_any_rounds_asked_are_the_whole_averages_rounds_to_the_bit(seed):
    samples = _samples(seed)
    whole = _whole_average(samples)
    average = NetworkAverage(samples, lambda block: np.isfinite(block).all(axis=(1, 2)))
    rng = np.random.default_rng(100 + seed)
    picked = np.sort(rng.choice(30, size=9, replace=False))
    for rounds in (slice(0, 30), slice(12, 13), slice(25, 30), picked, np.array([29])):
        np.testing.assert_array_equal(average.at(rounds), whole[rounds])
    np.testing.assert_array_equal(average.tail(4), whole[-4:])
    np.testing.assert_array_equal(average.tail(40), whole)  # a window longer than the run
    np.testing.assert_array_equal(average.whole(), whole)
    np.testing.assert_array_equal(average.at(picked), whole[picked])  # from the whole now
    assert average.nodes == sorted(samples) and average.rounds == 30


def test_a_blocks_flags_judge_the_averages_own_values():
    samples = _samples(0)
    samples["2"][5, 0, 1] = np.inf  # the average is infinite at round 5, and only there
    average = NetworkAverage(samples, lambda block: np.isfinite(block).all(axis=(1, 2)))
    values, flags = average.block(np.array([4, 5, 6]))
    assert flags.tolist() == [True, False, True]
    assert np.isinf(values[1, 0, 1])


def test_an_average_of_no_node_is_refused():
    with pytest.raises(ValueError, match="at least one node"):
        NetworkAverage({}, lambda block: np.ones(block.shape[0], dtype=bool))


def _gaussian_plan(hpd: float | None = None):
    raw = {
        "name": "average",
        "algorithm": "d-sgld",
        "hyperparameters": {"eta": 1e-3},
        "model": {"name": "linear_regression", "params": {"dim": 2, "prior_var": 10.0}},
        "data": {"source": "synthetic", "size": 60, "seed": 3},
        "topology": {"kind": "ring", "nodes": 3},
        "rounds": 40,
        "chains": 20,
        "evaluation": {"window": 3, **({"hpd": hpd} if hpd else {})},
    }
    return plan_run(parse_experiment(raw)).evaluation


def _evaluated(plan, monkeypatch, seed: int = 1):
    """The evaluation of exact-ish draws, counting how often the whole average is built."""
    built = []
    whole = NetworkAverage.whole

    def counted(self):
        built.append(self.rounds)
        return whole(self)

    monkeypatch.setattr(evaluate_module.NetworkAverage, "whole", counted)
    rng = np.random.default_rng(seed)
    samples = {node: rng.standard_normal((40, 20, 2)) for node in plan.sampling_nodes}
    return evaluate(plan, samples).metrics, built, samples


def test_w2_and_consensus_alone_never_build_the_whole_average(monkeypatch):
    plan = _gaussian_plan()
    metrics, built, samples = _evaluated(plan, monkeypatch)
    assert built == []
    # and the figures are those of the whole average: the consensus error by its definition
    whole = _whole_average(samples)
    spread = sum(((samples[n][-3:] - whole[-3:]) ** 2).sum() for n in samples)
    expected = spread / (len(samples) * 3 * 20)
    assert abs(metrics["consensus_error"] - expected) <= 1e-12 * expected
    assert metrics["w2"]["average"] is not None and metrics["w2"]["average_se"] is not None


def test_a_figure_over_every_round_reads_the_whole_average_once(monkeypatch):
    """The HPD error's curve runs over the rounds ([003] §5.2): it reads the whole average,
    built once however many figures read it."""
    plan = _gaussian_plan(hpd=0.1)
    metrics, built, _ = _evaluated(plan, monkeypatch)
    assert built == [40]
    assert metrics["hpd"]["average"] is not None
