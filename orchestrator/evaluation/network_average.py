"""The network-average iterate ``x̄_t = Σ_i x_{i,t} / N``, computed for the rounds asked.

The evaluation scores the average where it scores the nodes: its W2 at the rounds of the
curve's schedule and over the final window, and the consensus error over that window. Only
the figures on held-out data and the transport distances read every round of it. Building
the whole average first cost as much memory as one node's samples and, at 250 chains × dim
1000 × 80 rounds, a quarter of a second of the evaluation, most of it the kernel handing a
fresh process 160 MB of pages. So :class:`NetworkAverage` computes the rounds it is asked
for, and keeps the final window and the whole average once built.

Every round is summed over the nodes in sorted order and then divided by their count, so a
round's floats are the same whichever rounds are asked together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

__all__ = ["NetworkAverage"]


class NetworkAverage:
    """The average of ``complete`` (node -> samples (rounds, chains, d), every node with the
    same rounds); ``flags``: a block of rounds -> whether each round is sane (finite and
    within the run's divergence bound), applied to the average's own values."""

    def __init__(
        self,
        complete: Mapping[str, np.ndarray],
        flags: Callable[[np.ndarray], np.ndarray],
    ) -> None:
        if not complete:
            raise ValueError("a network average needs at least one node's samples")
        self._names = sorted(complete)
        self._complete = complete
        self._flags = flags
        self.shape: tuple[int, ...] = complete[self._names[0]].shape
        self._tails: dict[int, np.ndarray] = {}
        self._whole: np.ndarray | None = None

    @property
    def rounds(self) -> int:
        return self.shape[0]

    @property
    def nodes(self) -> list[str]:
        """The nodes averaged, in the order they are summed."""
        return list(self._names)

    def at(self, rounds: slice | np.ndarray) -> np.ndarray:
        """The average at ``rounds`` (a slice or sorted round indices); not to be written
        to (a view once the whole average is built)."""
        if self._whole is not None:
            return self._whole[rounds]
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged node: see flags
            total = np.array(self._complete[self._names[0]][rounds], dtype=float)
            for name in self._names[1:]:
                total += self._complete[name][rounds]
            total /= len(self._names)
        return total

    def block(self, rounds: slice | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The average at ``rounds`` and whether each of those rounds is sane."""
        values = self.at(rounds)
        return values, self._flags(values)

    def tail(self, window: int) -> np.ndarray:
        """The last ``window`` rounds, built once (the consensus error, the final W2 and its
        standard error all read them)."""
        if window not in self._tails:
            self._tails[window] = self.at(slice(max(self.rounds - window, 0), self.rounds))
        return self._tails[window]

    def whole(self) -> np.ndarray:
        """Every round, built once: for the figures that read the whole run."""
        if self._whole is None:
            self._whole = self.at(slice(None))
        return self._whole
