"""What an algorithm declares about itself: roles, graph it needs, hyperparameters."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["AlgorithmInfo"]


@dataclass(frozen=True)
class AlgorithmInfo:
    name: str
    summary: str
    source: str
    graph: str
    """``undirected``, ``directed`` (strongly connected over time), ``star`` or ``none``."""
    params: type
    programs: dict[str, type] = field(default_factory=dict)
    """Role name -> NodeProgram class; the first role is the default one."""
    data_roles: tuple[str, ...] = ("peer",)
    """Roles whose nodes hold data (and so a share of the prior)."""
    synchronous: bool = True

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.programs)
