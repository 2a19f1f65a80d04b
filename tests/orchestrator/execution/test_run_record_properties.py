"""Run records and journals made up by the thousand (Hypothesis): whatever ``run.json`` or
``live-events.jsonl`` holds — hand-edited, half-written, another program's — the live
commands read it as a run or refuse it in one line naming the file and the field, and
replay a journal without a traceback. Before, a field of another type (``"addresses":
["a"]``, ``"access": {"tls": 5}``, a pid as text) was a TypeError or AttributeError out of
``starling status``.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starling.node.params import ConfigError
from starling.orchestrator.execution import live
from starling.orchestrator.execution.access import access_from_section
from starling.orchestrator.results.link_books import link_summary, summed_books

json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from(["127.0.0.1:5", "::1:5", "a b:1", "", "x", "[::1]:50051"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
VALID = {
    "name": "watched",
    "out_dir": "/tmp/nowhere",
    "orchestrator_pid": 12345,
    "addresses": {"a": "127.0.0.1:50051", "b": "[::1]:50052"},
    "pids": {"a": 1, "b": None},
    "link_delay_ms": 10.0,
    "access": {},
}
records = st.one_of(
    json_values,
    st.builds(
        lambda key, value: {**VALID, key: value},
        st.sampled_from([*VALID, "extra"]),
        json_values,
    ),
    st.builds(
        lambda key: {k: v for k, v in VALID.items() if k != key}, st.sampled_from(list(VALID))
    ),
)
RECORDS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@RECORDS
@given(raw=records)
def test_any_run_record_is_read_or_refused_in_one_line(tmp_path, raw):
    (tmp_path / "run.json").write_text(json.dumps(raw))
    try:
        record = live.find_run(str(tmp_path))
    except ConfigError as exc:
        assert "\n" not in str(exc) and "run.json" in str(exc), str(exc)
        return
    assert isinstance(record.addresses, dict) and record.orchestrator_pid > 0
    try:
        access_from_section(record.access, "run record")
    except ConfigError as exc:
        assert "\n" not in str(exc)


events = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"kind": st.sampled_from(["link", "carried"])},
        optional={
            "node": json_values,
            "books": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {"outbound": st.dictionaries(st.text(max_size=3), json_values, max_size=3)}
                ),
            ),
            "sender": json_values,
            "receiver": json_values,
            "up": json_values,
            "drop": json_values,
            "delay_ms": json_values,
        },
    ),
)


@RECORDS
@given(lines=st.lists(events, max_size=8), garbage=st.binary(max_size=40))
def test_any_journal_is_replayed_without_a_traceback(tmp_path, lines, garbage):
    text = "".join(json.dumps(line) + "\n" for line in lines).encode() + garbage + b"\n"
    (tmp_path / live.JOURNAL).write_bytes(text)
    read, _ = live.read_events(tmp_path)
    states = live.link_states(read)
    for state in states.values():
        assert isinstance(state.get("up", True), bool)
        f"{state.get('drop', 0):g} {state.get('delay_ms', 0):g}"  # as the views format them
    carried = live.carried_books(read)
    books = {node: summed_books(book, None) for node, book in carried.items()}
    link_summary(books)
