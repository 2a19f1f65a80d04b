"""The JSON type of every field of ``metrics.json`` a reader of a results folder relies on,
top-level and nested: a hand-edited file (``"w2": {"average": "x"}``, ``"faults": {"nodes":
[1]}``) is refused in one line naming the field (``w2.average``, ``faults.nodes[0]``), never
a traceback or a figure drawn from a string.

A field the schema does not name is left alone, as is ``null`` wherever the writer may put
one (every number: :func:`starling.orchestrator.results.write.write_results` writes NaN and
infinity as ``null``). Sections shown only as generic tables (``diagnostics``,
``predictive``, ``distances``, ``hpd``, ``link_stats``) are checked as objects only: any
leaf of theirs is shown as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["METRICS", "type_error"]


@dataclass(frozen=True)
class Leaf:
    """A string, number, integer or true/false (``types``), said as ``what``."""

    types: type | tuple[type, ...]
    what: str
    null: bool = True

    def accepts(self, value: Any) -> bool:
        if isinstance(value, bool) and bool not in _tuple(self.types):
            return False  # JSON true/false are Python ints: never a number or a count here
        return isinstance(value, self.types)

    def parts(self, value: Any, where: str) -> Parts:
        return []


@dataclass(frozen=True)
class Obj:
    """A JSON object: the ``fields`` named (others left alone), ``required`` ones present,
    and ``rule`` (a check across fields, once each field has its type) returning None or
    ``"<field>: <problem>"``."""

    fields: Mapping[str, Kind] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    null: bool = True
    what: str = "a JSON object"
    rule: Callable[[Mapping[str, Any]], str | None] | None = None

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def parts(self, value: Any, where: str) -> Parts:
        for name in self.required:
            if name not in value:
                return f"{_dotted(where, name)}: missing"
        return [(_dotted(where, k), value[k], sub) for k, sub in self.fields.items() if k in value]


@dataclass(frozen=True)
class Each:
    """A JSON object whose every value (a node's, a link's ...) is ``value``, and every key
    one ``key`` accepts (any key without it), said as ``key_what``."""

    value: Kind
    null: bool = True
    what: str = "a JSON object"
    key: Callable[[str], bool] | None = None
    key_what: str = ""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, dict)

    def parts(self, value: Any, where: str) -> Parts:
        for k in value:
            if self.key is not None and not self.key(k):
                return f"{_dotted(where, k)}: expected a key {self.key_what}"
        return [(_dotted(where, k), v, self.value) for k, v in value.items()]


@dataclass(frozen=True)
class Items:
    """A JSON list of ``item``, of ``size`` items when given."""

    item: Kind
    size: int | None = None
    null: bool = True

    @property
    def what(self) -> str:
        return "a JSON list" + (f" of {self.size}" if self.size is not None else "")

    def accepts(self, value: Any) -> bool:
        return isinstance(value, list) and self.size in (None, len(value))

    def parts(self, value: Any, where: str) -> Parts:
        return [(f"{where}[{k}]", v, self.item) for k, v in enumerate(value)]


Kind = Leaf | Obj | Each | Items

Parts = list[tuple[str, Any, Kind]] | str
"""A value's parts to check next, (field name, value, kind) each, or the line saying why
they cannot be."""


def _dotted(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def type_error(value: Any, kind: Kind, where: str = "") -> str | None:
    """The first field of ``value`` (``where``: its name, "" for the file itself) that is
    not of ``kind``, as ``"<field>: expected ..., got ..."``; None when all is well."""
    if value is None:
        return None if kind.null else f"{where}: expected {kind.what}, got null"
    if not kind.accepts(value):
        got = type(value).__name__
        if isinstance(value, list) and isinstance(kind, Items):
            got = f"{len(value)} items"
        return f"{where}: expected {kind.what}, got {got}"
    parts = kind.parts(value, where)
    if isinstance(parts, str):
        return parts
    for name, item, sub in parts:
        if (error := type_error(item, sub, name)) is not None:
            return error
    if isinstance(kind, Obj) and kind.rule is not None:
        if (error := kind.rule(value)) is not None:
            return _dotted(where, error)
    return None


TEXT, NUMBER = Leaf(str, "a string"), Leaf((int, float), "a number")
INTEGER, FLAG = Leaf(int, "an integer"), Leaf(bool, "true or false")
_COUNT = Leaf(int, "an integer", null=False)
_NAME = Leaf(str, "a string", null=False)
_NUMBERS = Each(NUMBER)


def _is_link(key: str) -> bool:
    """``SENDER->RECEIVER``, both named: a key the report splits into its two ends."""
    sender, arrow, receiver = key.partition("->")
    return bool(sender and arrow and receiver)


def _scheduled_link(record: Mapping[str, Any]) -> str | None:
    """A scheduled link fault names its link, or (receiver ``*``) at least one sender: the
    timeline draws its row from one or the other."""
    if record.get("receiver") == "*":
        name, want = "senders", "a JSON list of 1 or more"
    else:
        name, want = "link", "a JSON list of 2"
    if name not in record:
        return f"{name}: missing"
    if not record[name]:
        got = "null" if record[name] is None else "0 items"
        return f"{name}: expected {want}, got {got}"
    return None


_FAULTS = Obj(
    {
        "scheduled_nodes": Items(
            Obj(
                {"node": _NAME, "kill_at_round": _COUNT, "restart_at_round": INTEGER},
                required=("node", "kill_at_round"),
                null=False,
            )
        ),
        "scheduled_links": Items(
            Obj(
                {
                    "rounds": Items(_COUNT, size=2, null=False),
                    "link": Items(_NAME, size=2),
                    "senders": Items(_NAME),
                    "receiver": TEXT,
                    "both_ways": FLAG,
                    "drop": Leaf((int, float), "a number", null=False),
                },
                null=False,
                rule=_scheduled_link,
            )
        ),
        "nodes": Items(
            Obj({"node": _NAME, "event": _NAME, "round": INTEGER}, ("node", "event"), False)
        ),
        "live_links": Items(
            Obj(
                {"sender": TEXT, "receiver": TEXT, "action": TEXT, "sender_round": INTEGER},
                null=False,
            )
        ),
        "kernel": Items(
            Obj(
                {
                    "node": TEXT,
                    "peer": TEXT,
                    "kind": TEXT,
                    "started": FLAG,
                    "started_round": INTEGER,
                    "ended_round": INTEGER,
                },
                null=False,
            )
        ),
    }
)

METRICS = Obj(
    {
        **dict.fromkeys(("status", "experiment", "algorithm", "backend", "error"), TEXT),
        "interrupted_during": TEXT,
        **dict.fromkeys(("rounds", "chains", "nodes"), INTEGER),
        "interrupted": FLAG,
        "consensus_error": NUMBER,
        "averaged_nodes": Items(_NAME),
        "rounds_evaluated": INTEGER,
        "account": Items(_NAME),
        "samples_per_node": Each(INTEGER),
        "diverged": Each(INTEGER),
        "verdict": Obj(
            {
                "run": TEXT,
                "reasons": Items(_NAME),
                "criteria": Obj(),
                "per_node": Each(Obj({"verdict": TEXT, "reasons": Items(_NAME)})),
            }
        ),
        "w2": Obj(
            {
                "average": NUMBER,
                "per_node": _NUMBERS,
                "node_mean": NUMBER,
                "window": INTEGER,
                "estimator": TEXT,
                "se": _NUMBERS,
                "average_se": NUMBER,
                "se_sets": INTEGER,
                "floor": Obj({"points": INTEGER, "mean": NUMBER, "sd": NUMBER}),
                "floor_round": Obj({"points": INTEGER, "mean": NUMBER, "sd": NUMBER}),
                "scale": NUMBER,
            }
        ),
        "posterior": Obj({"mean": Items(NUMBER), "std": Items(NUMBER)}),
        "faults": _FAULTS,
        "links": Each(Each(_COUNT, null=False), key=_is_link, key_what="SENDER->RECEIVER"),
        "program_metrics": Each(_NUMBERS),
        "refused": Each(Each(_COUNT)),
        "not_collected": Obj({"nodes": Items(_NAME), "line": TEXT}),
        **dict.fromkeys(("link_stats", "diagnostics", "predictive", "distances", "hpd"), Obj()),
    },
    null=False,
)
"""``metrics.json`` as its readers (``starling report``, ``starling export``) rely on it."""
