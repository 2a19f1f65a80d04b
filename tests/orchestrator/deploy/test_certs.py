"""``starling certs`` as a careless operator runs it: keys private from their first byte, no
--host name that would let one party's certificate speak as another, nothing overwritten or
half written, no name that replaces the CA or leaves the folder, every mistake one line;
and the lifecycle: a CA key kept apart, nodes added, certificates renewed and revoked,
Control tokens per node."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cryptography import x509

from starling.node.params import ConfigError
from starling.node.tokens import node_token
from starling.orchestrator.deploy import certs as certs_module
from starling.orchestrator.deploy.certs import (
    add_certs,
    init_certs,
    renew_certs,
    revoke_certs,
    write_tokens,
)


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
        written = init_certs(tmp_path, ["a"], force=True)
    finally:
        os.umask(previous)
    assert opened == []
    for path in written:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if path.suffix == ".key" else 0o644), (path, oct(mode))
    (backup,) = tmp_path.glob("backup-*")
    assert (backup / "a.key").read_text() == "an old file, readable by all"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_init_never_overwrites_and_force_keeps_a_backup(tmp_path):
    """``certs init`` over a folder that holds certificates overwrote every key: one line
    now, and nothing written; with --force the old files are kept in backup-<time>/."""
    init_certs(tmp_path, ["a", "b"])
    before = _tree(tmp_path)
    with pytest.raises(ConfigError) as refused:
        init_certs(tmp_path, ["a", "c"])
    assert str(refused.value) == (
        f"{tmp_path}/ca.pem exists; nothing was written (--force keeps a backup of what it "
        "replaces)"
    )
    assert _tree(tmp_path) == before
    init_certs(tmp_path, ["a", "c"], force=True)
    (backup,) = tmp_path.glob("backup-*")
    assert {p.name for p in backup.iterdir()} == {
        "ca.pem",
        "ca.key",
        "a.pem",
        "a.key",
        "orchestrator.pem",
        "orchestrator.key",
    }
    assert (backup / "ca.key").read_bytes() == before["ca.key"]
    assert (tmp_path / "b.pem").read_bytes() == before["b.pem"]  # not part of the new set
    assert stat.S_IMODE(backup.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("nodes", "message"),
    [
        (["ca"], "--nodes: 'ca' names a file of the folder (ca.pem/.key/.token)"),
        (["CA"], "--nodes: 'CA' names a file of the folder (ca.pem/.key/.token)"),
        (["crl"], "--nodes: 'crl' names a file of the folder"),
        (["master"], "--nodes: 'master' names a file of the folder"),
        (["Orchestrator"], "--nodes: 'orchestrator' is the orchestrator's identity"),
        (["../evil"], "--nodes: '../evil' is not a DNS label"),
        (["a/b"], "--nodes: 'a/b' is not a DNS label"),
        (["/tmp/x"], "--nodes: '/tmp/x' is not a DNS label"),
        (["a_b"], "--nodes: 'a_b' is not a DNS label"),
        (["-a"], "--nodes: '-a' is not a DNS label"),
        (["n" * 64], "--nodes: '" + "n" * 64 + "' is not a DNS label"),
        (["a", "A"], "--nodes: 'A' is given twice"),
        ([], "--nodes: give at least one node id"),
    ],
)
def test_node_ids_are_dns_labels_that_name_no_file_of_the_folder(tmp_path, nodes, message):
    with pytest.raises(ConfigError) as refused:
        init_certs(tmp_path / "certs", nodes)
    assert str(refused.value).startswith(message), refused.value
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "certs").exists() or not any((tmp_path / "certs").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["certs"])


@pytest.mark.parametrize("days", [0, -1, 3651, 10**9])
def test_days_outside_a_sane_range_are_refused(tmp_path, days):
    """--days 0 exited 0 with certificates already expired; huge ones overflowed."""
    with pytest.raises(
        ConfigError, match=rf"^--days: must be a whole number from 1 to 3650, got {days}$"
    ):
        init_certs(tmp_path, ["a"], days=days)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_ordinary_slips_are_one_line_from_the_command(tmp_path, starling_home):
    from tests.conftest import run_cli

    (tmp_path / "file").write_text("x")
    cases = [
        (
            ["init", str(tmp_path / "file"), "--nodes", "a"],
            f"certs init: {tmp_path}/file is a file, not a folder",
        ),
        (
            ["init", str(tmp_path / "c"), "--nodes", "a", "--days", "-5"],
            "--days: must be a whole number",
        ),
        (
            ["init", str(tmp_path / "c"), "--nodes", "a/../../x"],
            "--nodes: 'a/../../x' is not a DNS label",
        ),
        (
            ["add", str(tmp_path / "none"), "--nodes", "a"],
            f"certs add: {tmp_path}/none does not exist",
        ),
        (["renew", str(tmp_path)], f"{tmp_path}/ca.pem: no such file"),
    ]
    for argv, message in cases:
        done = run_cli("certs", *argv, env_home=starling_home, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (argv, done.stderr)
        assert lines[0].startswith(f"starling: {message}"), (argv, lines)
        assert "Traceback" not in done.stderr


def _verify(folder: Path, who: str, ca: Path | None = None) -> x509.Certificate:
    """``who``'s certificate, checked to be signed by the folder's CA."""
    authority = x509.load_pem_x509_certificate((ca or folder / "ca.pem").read_bytes())
    cert = x509.load_pem_x509_certificate((folder / f"{who}.pem").read_bytes())
    cert.verify_directly_issued_by(authority)
    return cert


def test_the_ca_key_kept_apart_and_nodes_added_renewed_and_revoked(tmp_path):
    certs, vault = tmp_path / "certs", tmp_path / "vault"
    init_certs(certs, ["a", "b"], {"a": ["node-a"]}, ca_dir=vault)
    assert not (certs / "ca.key").exists() and (vault / "ca.key").is_file()
    assert stat.S_IMODE((vault / "ca.key").stat().st_mode) == 0o600
    # Without the CA's key nothing can be issued from the folder alone.
    with pytest.raises(ConfigError, match=r"ca\.key: no such file .*--ca-dir"):
        add_certs(certs, ["c"])
    add_certs(certs, ["c"], ca_dir=vault)
    _verify(certs, "c")
    with pytest.raises(ConfigError, match=r"c\.pem exists; nothing was written"):
        add_certs(certs, ["c"], ca_dir=vault)

    old = _verify(certs, "a")
    renew_certs(certs, ["a"], days=30, ca_dir=vault)
    new = _verify(certs, "a")
    assert new.serial_number != old.serial_number
    names = new.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["a", "node-a"]  # the old names
    (backup,) = certs.glob("backup-*")
    assert x509.load_pem_x509_certificate((backup / "a.pem").read_bytes()) == old
    with pytest.raises(ConfigError, match="--nodes: 'z' has no certificate"):
        renew_certs(certs, ["z"], ca_dir=vault)

    revoked = _verify(certs, "b").serial_number
    revoke_certs(certs, ["b"], ca_dir=vault)
    crl = x509.load_pem_x509_crl((certs / "crl.pem").read_bytes())
    authority = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    assert crl.is_signature_valid(authority.public_key())
    assert [entry.serial_number for entry in crl] == [revoked]
    assert not (certs / "b.pem").exists() and not (certs / "b.key").exists()
    revoke_certs(certs, ["c"], ca_dir=vault)  # the list grows, the first stays
    crl = x509.load_pem_x509_crl((certs / "crl.pem").read_bytes())
    assert len(list(crl)) == 2 and crl.get_revoked_certificate_by_serial_number(revoked)


def test_tokens_one_per_node_from_a_master_that_is_kept(tmp_path):
    written = write_tokens(tmp_path, ["a", "b"])
    assert sorted(p.name for p in written) == ["a.token", "b.token", "master.token"]
    master = (tmp_path / "master.token").read_text().strip()
    for node in ("a", "b"):
        assert (tmp_path / f"{node}.token").read_text().strip() == node_token(master, node)
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(ConfigError, match=r"a\.token exists"):
        write_tokens(tmp_path, ["a", "c"])
    write_tokens(tmp_path, ["c"])  # a node more: the master is kept
    assert (tmp_path / "master.token").read_text().strip() == master
    assert (tmp_path / "c.token").read_text().strip() == node_token(master, "c")
