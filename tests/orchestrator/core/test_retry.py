"""One retry policy for everything that may fail for a moment (core/retry.py): how many tries,
which failures earn another, how long the waits are, and that progress starts the count again.
The waits go to a list instead of a clock, so the schedule is checked exactly."""

from __future__ import annotations

import pytest

from starling.orchestrator.core.retry import (
    Attempts,
    RetryPolicy,
    constant,
    exponential_jitter,
    linear,
    retry,
)


class Flaky:
    """Fails with ``error`` ``failures`` times, then returns how many calls it took."""

    def __init__(self, failures: int, error: Exception):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self) -> int:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.calls


def _policy(attempts: int, waits: list[float]) -> RetryPolicy:
    return RetryPolicy(
        attempts, lambda exc: isinstance(exc, TimeoutError), constant(0.5), waits.append
    )


def test_a_retriable_failure_is_tried_again_until_it_succeeds():
    waits: list[float] = []
    assert retry(Flaky(2, TimeoutError("busy")), _policy(5, waits)) == 3
    assert waits == [0.5, 0.5]  # a wait between tries, none before the first


def test_the_last_failure_is_raised_as_it_was_once_the_tries_are_spent():
    waits: list[float] = []
    error = TimeoutError("still busy")
    flaky = Flaky(10, error)
    with pytest.raises(TimeoutError) as raised:
        retry(flaky, _policy(3, waits))
    assert raised.value is error and flaky.calls == 3 and waits == [0.5, 0.5]


def test_a_failure_that_is_not_retriable_is_raised_at_once():
    waits: list[float] = []
    flaky = Flaky(1, ValueError("bad input"))
    with pytest.raises(ValueError, match="bad input"):
        retry(flaky, _policy(5, waits))
    assert flaky.calls == 1 and waits == []


def test_one_try_means_no_retry():
    waits: list[float] = []
    with pytest.raises(TimeoutError):
        retry(Flaky(1, TimeoutError()), _policy(5, waits).tries(1))
    assert waits == []


def test_progress_between_failures_starts_the_count_again():
    """A stream read from an offset: each failure after progress has its full tries again."""
    waits: list[float] = []
    attempts = Attempts(_policy(2, waits))
    for _ in range(4):  # fails once, makes progress, fails once... never spends its 2 tries
        attempts.failed(TimeoutError())
        attempts.succeeded()
    assert waits == [0.5] * 4
    attempts.failed(TimeoutError())
    with pytest.raises(TimeoutError):
        attempts.failed(TimeoutError())  # two failures in a row: the tries are spent


def test_the_waits_grow_as_their_rule_says():
    assert [linear(0.5)(k) for k in range(4)] == [0.5, 1.0, 1.5, 2.0]
    jitter = exponential_jitter(base=0.1, cap=2.0)
    for k in range(8):
        draws = [jitter(k) for _ in range(200)]
        bound = min(2.0, 0.1 * 2**k)
        assert all(0.0 <= d <= bound for d in draws)
        # Full jitter spreads the waits over the whole interval (200 uniform draws: the
        # largest is below 0.9 of the bound with probability 0.9^200 < 1e-9).
        assert max(draws) > 0.9 * bound
