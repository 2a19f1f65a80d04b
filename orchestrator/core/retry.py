"""Retrying what may fail for a moment: one policy object, one loop, everywhere.

A node that is starting, restarting or briefly unreachable answers UNAVAILABLE; a docker
volume is still in use for an instant after its container goes; the engine's cgroup freezer
can fail to settle on a busy host. Each of those callers states what is worth another try
and how long to wait (:class:`RetryPolicy`), and :func:`retry` (one call) or
:class:`Attempts` (a loop that makes progress between failures, such as a stream read from
an offset) does the rest. Modelled on Flower's ``RetryInvoker``: the wait before try k+1 is
the policy's ``wait(k)``; exponential waits use full jitter (uniform in [0, min(cap,
base·2^k)]), which spreads the retries of many clients that failed together.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["Attempts", "RetryPolicy", "constant", "exponential_jitter", "linear", "retry"]

T = TypeVar("T")

Wait = Callable[[int], float]
"""Seconds to wait after failed try ``k`` (0-based) before the next one."""


def exponential_jitter(base: float, cap: float) -> Wait:
    """Full jitter: uniform in [0, min(cap, base·2^k)]."""
    return lambda k: random.uniform(0.0, min(cap, base * 2**k))


def linear(step: float) -> Wait:
    """``step``, then twice it, three times it, ..."""
    return lambda k: step * (k + 1)


def constant(seconds: float) -> Wait:
    return lambda _k: seconds


@dataclass(frozen=True)
class RetryPolicy:
    """How often to try, which failures earn another try, and how long to wait between."""

    attempts: int
    """Tries in all, the first included (1: no retry)."""
    retriable: Callable[[BaseException], bool]
    wait: Wait
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    """How to wait (a test hands a clock of its own)."""

    def tries(self, attempts: int) -> RetryPolicy:
        """This policy with ``attempts`` tries in all (1: a single try)."""
        return dataclasses.replace(self, attempts=attempts)


class Attempts:
    """The failures in a row of one operation under ``policy``: :meth:`failed` waits before
    the next try, or re-raises when the failure is not retriable or the tries are spent;
    :meth:`succeeded` starts the count again (the operation made progress)."""

    def __init__(self, policy: RetryPolicy):
        self.policy = policy
        self.count = 0

    def failed(self, exc: BaseException) -> None:
        policy = self.policy
        if not policy.retriable(exc) or self.count >= max(policy.attempts, 1) - 1:
            raise exc
        policy.sleep(policy.wait(self.count))
        self.count += 1

    def succeeded(self) -> None:
        self.count = 0


def retry(call: Callable[[], T], policy: RetryPolicy) -> T:
    """``call()``, tried again as ``policy`` says; its last failure is raised as it was."""
    attempts = Attempts(policy)
    while True:
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - the policy decides, and re-raises
            attempts.failed(exc)
