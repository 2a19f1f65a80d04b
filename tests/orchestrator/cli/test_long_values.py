"""A long user value is echoed cut, whatever the mistake: every error line stays short.

A 10 kB string as a node id, a role, an algorithm's name; a hyperparameter that is a list of
10,000 numbers or 5,000 digits of text: each mistake is still one line naming the field,
with the value cut in the middle and its full length given (node/shown.py), never the value
in full. The rows run the real command line in-process on real files.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from starling.node.shown import MAX_SHOWN, one_line, shorten, shown
from starling.orchestrator.cli.main import main
from tests.conftest import ROOT

QUICKSTART = yaml.safe_load((ROOT / "examples" / "quickstart.yaml").read_text())
LONG = "x" * 10_000
LINE = 400
"""No error line, field and words included, may be longer than this."""


def _q(**changes: Any) -> dict:
    out = dict(QUICKSTART)
    for key, value in changes.items():
        out[key] = {**out.get(key, {}), **value} if isinstance(value, dict) else value
    return out


# (case, file content, the field the line must name)
# fmt: off
CASES = [
    ("node id", _q(nodes=[{"id": LONG}], topology={"kind": "none", "nodes": 1}), "nodes[0].id"),
    ("role", _q(nodes=[{"id": "a", "role": LONG}]), "nodes[0].role"),
    ("algorithm", _q(algorithm=LONG), "algorithm"),
    ("experiment name", _q(name=LONG), "name"),
    ("model name", _q(model={"name": LONG}), "model.name"),
    ("data source", _q(data={"source": LONG}), "data.source"),
    ("backend kind", _q(backend={"kind": LONG}), "backend.kind"),
    ("hyperparameter text", _q(hyperparameters={"rho": LONG}), "hyperparameters.rho"),
    ("hyperparameter digits", _q(hyperparameters={"rho": "1" * 5000}), "hyperparameters.rho"),
    ("hyperparameter list", _q(hyperparameters={"rho": list(range(10_000))}),
     "hyperparameters.rho"),
    ("rounds as a list", _q(rounds=list(range(10_000))), "rounds"),
    ("fault on a stranger", _q(faults=[{"node": LONG, "kill_at_round": 3}]), "faults[0].node"),
    ("link to a stranger", _q(faults=[{"link": ["0", LONG]}]), "faults[0].link"),
    ("unknown key", _q(data={LONG: 1}), "data."),
    ("memory limit", _q(limits={"node_memory": LONG}), "limits.node_memory"),
    ("link delay", _q(link_delay=LONG), "link_delay"),
]
# fmt: on


@pytest.mark.parametrize(("content", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_long_value_is_echoed_cut(tmp_path, capsys, starling_home, content, field):
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(content, width=10**9))
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(f"starling: {field}"), line[:300]
    assert len(line) <= LINE, f"{len(line)} characters: {line[:300]}"


def test_shown_keeps_short_values_whole_and_says_how_long_a_long_one_was():
    assert shown("five") == "'five'"
    name = "n" * MAX_SHOWN  # the longest valid name is shown in full
    assert shown(name) == repr(name)
    cut = shown(LONG)
    assert cut.startswith("'xxx") and cut.endswith("xxx' (10,000 characters)")
    assert "…" in cut and len(cut) < 120
    # A container is shown by its first items and its size, never walked whole (a YAML
    # alias bomb is a few lists shared a billion times over).
    assert shown(list(range(10_000))) == "[0, 1, 2, 3, 4, 5, 6, 7, ...] (10,000 items)"
    bomb: list = ["lol"] * 9
    for _ in range(9):
        bomb = [bomb] * 9
    assert len(shown(bomb)) < 130 and shown(bomb).endswith("(9 items)")


def test_shorten_cuts_quoted_values_and_long_runs_but_no_prose():
    said = f"nodes[0].id: {LONG!r} is not a node; the node's config says {LONG!r}"
    short = shorten(said)
    assert short.startswith("nodes[0].id: 'xxx") and short.count("(10,000 characters)") == 2
    assert "the node's config says 'xxx" in short  # an apostrophe opens no value
    assert shorten(short) == short  # cutting twice changes nothing
    assert len(shorten("got " + "1" * 5000)) < 120
    plain = "topology.nodes: says 5 but nodes lists 3 " * 5  # long, but nothing to cut
    assert shorten(plain) == plain


# (case, file content, the field the line must name): a key or value holding a line break or
# a terminal control sequence is echoed escaped, so the error is still one line.
# fmt: off
BROKEN = [
    ("newline key in params", _q(model={"params": {"\n": None}}), "model.params."),
    ("escape sequence key", _q(data={"\x1b[2Jx": 1}), "data."),
    ("line separator in a name", _q(name="a\u2028b"), "name"),
    ("carriage return in a kind", _q(topology={"kind": "ring\rx"}), "topology.kind"),
]
# fmt: on


@pytest.mark.parametrize(("content", "field"), [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN])
def test_a_line_break_in_a_key_or_value_is_echoed_escaped(tmp_path, capsys, content, field):
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(content, width=10**9, allow_unicode=False))
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, repr(err)
    assert err.startswith(f"starling: {field}") and "\x1b" not in err, repr(err)


def test_one_line_escapes_breaks_and_controls_but_keeps_prose_and_tabs():
    assert one_line("a\nb\r\x1b[31mc\u2028d\x85e") == "a\\nb\\r\\x1b[31mc\\u2028d\\x85e"
    assert one_line("plain words\tand a tab, ünïcode") == "plain words\tand a tab, ünïcode"
