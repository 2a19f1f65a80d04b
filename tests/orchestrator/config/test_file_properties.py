"""Experiment files made up by the thousand (Hypothesis): whatever a file holds, reading and
planning it ends in an Experiment (a plan) or in Starling's one line, a ConfigError with
no line break. Never another exception, never a hang.

Two kinds of made-up file: the quickstart with one field (top level or nested) replaced by
any YAML value — numbers huge, negative, infinite or NaN, strings with spaces, lists and
mappings of them; and YAML built to hurt a reader — aliases that expand exponentially,
lists nested deeper than any file, an alias inside itself — at any field. The second must
also end within seconds: before the bound on alias expansion (node/yaml_input.py) such a
file hung the reader (the schema's checks and the error's echo of the value walked every
path through the shared lists).
"""

from __future__ import annotations

import signal
from contextlib import contextmanager

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starling.node.params import ConfigError
from starling.orchestrator.config.load import load
from starling.orchestrator.planning.plan import plan
from tests.conftest import ROOT

QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
PATHS = [
    ("name",),
    ("rounds",),
    ("chains",),
    ("seed",),
    ("algorithm",),
    ("round_deadline",),
    ("link_delay",),
    ("checkpoint_every",),
    ("hyperparameters",),
    ("hyperparameters", "rho"),
    ("model",),
    ("model", "name"),
    ("model", "params"),
    ("model", "params", "dim"),
    ("data",),
    ("data", "size"),
    ("data", "seed"),
    ("data", "source"),
    ("topology",),
    ("topology", "kind"),
    ("topology", "nodes"),
    ("nodes",),
    ("faults",),
    ("backend",),
    ("backend", "kind"),
    ("evaluation",),
    ("evaluation", "window"),
    ("limits",),
    ("limits", "node_memory"),
    ("description",),
]
SECONDS = 20
"""The most a hostile file may take to be refused (a few tenths of a second here; the
bound is for a loaded machine)."""

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", " ", "a b", "::1:5", "1e9", "10ms", "-3", "ring", "node", "0"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.text(max_size=10), inner, max_size=5),
    ),
    max_leaves=20,
)


def _replaced(path: tuple[str, ...], value) -> dict:
    raw = yaml.safe_load(yaml.safe_dump(QUICKSTART))  # a deep copy
    at = raw
    for key in path[:-1]:
        if not isinstance(at.get(key), dict):
            at[key] = {}
        at = at[key]
    at[path[-1]] = value
    return raw


@contextmanager
def _within(seconds: int):
    """Fail (instead of hanging for ever) when the block takes longer than ``seconds``."""

    def late(signum, frame):
        raise TimeoutError(f"took more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _read(path) -> None:
    """Load and plan the file; a ConfigError must be one line."""
    try:
        plan(load(str(path)))
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc), repr(str(exc))


FILES = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@FILES
@given(path=st.sampled_from(PATHS), value=values)
def test_any_value_at_any_field_is_read_or_refused_in_one_line(tmp_path, path, value):
    file = tmp_path / "made-up.yaml"
    file.write_text(yaml.safe_dump(_replaced(path, value), allow_unicode=True))
    with _within(SECONDS):
        _read(file)


def _bomb(levels: int, width: int) -> str:
    parts = ["&a0 [" + ", ".join(['"lol"'] * width) + "]"]
    parts += [f"&a{k} [" + ", ".join([f"*a{k - 1}"] * width) + "]" for k in range(1, levels + 1)]
    return "[" + ", ".join(parts) + "]"


hostile = st.one_of(
    st.builds(_bomb, st.integers(6, 12), st.integers(8, 12)),
    st.integers(101, 20_000).map(lambda depth: "[" * depth + "]" * depth),
    st.integers(101, 5_000).map(lambda depth: "{a: " * depth + "1" + "}" * depth),
    st.just("&self [1, *self]"),
    st.just("&self {a: *self}"),
)


@FILES
@given(path=st.sampled_from(PATHS), text=hostile)
def test_hostile_yaml_at_any_field_is_refused_in_one_line_within_seconds(tmp_path, path, text):
    raw = _replaced(path, "PLACEHOLDER")
    file = tmp_path / "hostile.yaml"
    file.write_text(yaml.safe_dump(raw).replace("PLACEHOLDER", text.replace("\n", " "), 1))
    with _within(SECONDS), pytest.raises(ConfigError) as refused:
        plan(load(str(file)))
    assert "\n" not in str(refused.value)
