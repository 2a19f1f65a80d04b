"""``starling certs init`` as a careless operator runs it: keys private from their first
byte, and no --host name that would let one party's certificate speak as another."""

from __future__ import annotations

import os
import stat

import pytest

from starling.node.params import ConfigError
from starling.orchestrator.deploy import certs as certs_module
from starling.orchestrator.deploy.certs import init_certs


@pytest.mark.parametrize(
    "host, who",
    [("a=orchestrator", "a"), ("a=b", "a"), ("orchestrator=a", "orchestrator")],
)
def test_a_host_name_that_is_an_identity_is_refused(tmp_path, host, who):
    """--host a=orchestrator put 'orchestrator' in a's certificate: node a could call
    Control on every node; --host a=b let a open Peer streams as b."""
    name = host.partition("=")[2]
    with pytest.raises(ConfigError) as refused:
        init_certs(tmp_path, ["a", "b"], certs_module._hosts([host]))
    assert str(refused.value) == (
        f"--host {host}: {name!r} is an identity; {who}'s certificate would let it speak as {name}"
    )
    assert not (tmp_path / "ca.pem").exists()
    init_certs(tmp_path, ["a", "b"], certs_module._hosts(["a=node-a", "a=a"]))


def test_a_node_named_like_a_default_host_is_refused(tmp_path):
    """Every certificate names localhost unless --host replaces it: any party could open
    Peer streams as a node called localhost."""
    with pytest.raises(ConfigError) as refused:
        init_certs(tmp_path, ["localhost", "b"])
    assert str(refused.value).startswith(
        "--nodes: 'localhost' is an identity (every certificate names it unless --host); "
    )
    everyone = {who: ["127.0.0.1", f"{who}.lab"] for who in ("localhost", "b", "orchestrator")}
    init_certs(tmp_path, ["localhost", "b"], everyone)


def test_keys_are_created_private_never_made_private_after(tmp_path, monkeypatch):
    """A key written with the umask's mode and chmod-ed after could be read in between."""
    opened: list[str] = []
    chmod = os.chmod

    def watching(path, mode, *args, **kwargs):
        if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
            opened.append(os.fspath(path))
        return chmod(path, mode, *args, **kwargs)

    (tmp_path / "a.key").write_text("an old file, readable by all")
    (tmp_path / "a.key").chmod(0o644)
    monkeypatch.setattr(os, "chmod", watching)
    previous = os.umask(0o022)
    try:
        written = init_certs(tmp_path, ["a"])
    finally:
        os.umask(previous)
    assert opened == []
    for path in written:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if path.suffix == ".key" else 0o644), (path, oct(mode))
