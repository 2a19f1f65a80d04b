"""``--log-format``: JSON lines with the documented fields, text by default, and secrets
scrubbed from both (node/logs.py); the node config keys of the operating features."""

from __future__ import annotations

import io
import json
import logging

import pytest

from starling.node import logs
from starling.node.config import load_settings
from starling.node.exporter import parse_metrics_address
from starling.node.params import ConfigError


@pytest.fixture
def capture():
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, dict(logs._context), set(logs._secrets))

    def setup(fmt: str) -> io.StringIO:
        logs.setup(fmt, "DEBUG", stream)
        return stream

    yield setup
    root.handlers[:], root.level = saved[0], saved[1]
    logs._context.clear(), logs._context.update(saved[2])
    logs._secrets.clear(), logs._secrets.update(saved[3])


def test_json_lines_carry_the_fields(capture):
    stream = capture("json")
    logs.set_context(node="a", experiment="exp")
    log = logging.getLogger("starling.test")
    log.info("configured %s", "x", extra={"event": "configured", "round": 3})
    log.warning("link broke\nover two lines", extra={"peer": "b"})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", extra={"event": "round_loop_failed", "round": 4})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3  # a multi-line message and a traceback stay one line each
    first, second, third = (json.loads(line) for line in lines)
    assert first["message"] == "configured x" and first["level"] == "info"
    assert (first["event"], first["node"], first["experiment"], first["round"], first["peer"]) == (
        "configured",
        "a",
        "exp",
        3,
        None,
    )
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert second["event"] == "log" and second["peer"] == "b" and second["level"] == "warning"
    assert "ValueError: boom" in third["exception"] and third["round"] == 4


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_registered_secrets_never_appear(capture, fmt):
    stream = capture(fmt)
    token, secret = "tok-3f9a8e7d6c5b", "Sec_ret-0123456789abcdefghijklmnopqrstuvwxyzAB"
    logs.redact(token)
    logs.redact(secret)
    log = logging.getLogger("starling.test")
    log.info("token %s and secret %s", token, secret, extra={"peer": secret})
    text = stream.getvalue()
    assert token not in text and secret not in text
    assert text.count(logs.REDACTED) >= 2


def test_text_stays_the_default_format(capture):
    stream = capture("text")
    logging.getLogger("starling.test").info("hello")
    line = stream.getvalue().strip()
    assert line.endswith("INFO starling.test: hello")
    with pytest.raises(ValueError, match="log format"):
        logs.setup("yaml")


def test_node_config_keys_for_operating(tmp_path):
    path = tmp_path / "node.yaml"
    path.write_text("metrics: 9464\nreflection: false\nlog_format: json\n")
    settings = load_settings(path)
    assert (settings.metrics, settings.reflection, settings.log_format) == ("9464", False, "json")
    assert load_settings(None).reflection is True and load_settings(None).metrics == ""
    path.write_text("reflection: maybe\n")
    with pytest.raises(ConfigError, match="^reflection: expected true or false"):
        load_settings(path)


def test_metrics_addresses_default_to_loopback():
    assert parse_metrics_address("9464") == ("127.0.0.1", 9464)
    assert parse_metrics_address("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert parse_metrics_address("[::1]:0") == ("::1", 0)
    for bad in ("", "host:", "host:99999", ":80x"):
        with pytest.raises(ConfigError, match="^--metrics: expected HOST:PORT"):
            parse_metrics_address(bad)
