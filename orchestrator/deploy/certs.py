"""``starling certs init DIR --nodes a,b,c``: a testbed PKI for mutual TLS.

Writes ``ca.pem`` (and ``ca.key``, kept for making more certificates later), then for every
node ``ID.pem``/``ID.key`` and for the orchestrator ``orchestrator.pem``/``.key``. Each
certificate's SAN holds its identity as a DNS name (the node id, or ``orchestrator``): that
is what a node checks against the ``sender`` a peer stream claims and what a client checks
when it reaches node ``ID`` (:mod:`starling.node.security`). Extra names make the certificates
usable with other tools too: ``localhost`` and ``127.0.0.1`` by default, or those given with
``--host ID=NAME`` (a compose service name, a device's address). Keys are EC P-256, written
mode 0600; certificates are valid for ``--days`` (default 365).

Real deployments bring their own PKI: any CA works, as long as each node's certificate
names its node id and the orchestrator's names ``orchestrator``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from starling.node.params import ConfigError, plain_name
from starling.node.security import ORCHESTRATOR_ID

__all__ = ["add_commands", "init_certs"]

DEFAULT_HOSTS = ("localhost", "127.0.0.1")


def _name(value: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        return x509.DNSName(value)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    if not private:
        path.write_bytes(data)
        return
    # Created 0600, not chmod-ed after writing: in between, other users could read the key.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(descriptor, 0o600)  # a file that was there keeps its mode otherwise
        file.write(data)


MAX_DAYS = 36_500
"""The longest validity ``--days`` gives: a hundred years (a test bed's CA, not a bank's)."""


def init_certs(
    folder: str | Path,
    nodes: Sequence[str],
    hosts: Mapping[str, Sequence[str]] | None = None,
    days: int = 365,
) -> list[Path]:
    """Make the CA and the certificates; returns the files written."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not nodes:
        raise ConfigError("--nodes: give at least one node id (a,b,c)")
    for k, node in enumerate(nodes):
        if not plain_name(node):  # a blank id (a,,b) or one with a space names no node
            raise ConfigError(
                f"--nodes: expected node ids of letters, digits, '-', '_' and '.', got {node!r}"
            )
        if node in nodes[:k]:
            raise ConfigError(f"--nodes: node id {node!r} is given twice")
    if not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"--days: expected 1 to {MAX_DAYS} days, got {days}")
    if ORCHESTRATOR_ID in nodes:
        raise ConfigError(f"--nodes: {ORCHESTRATOR_ID!r} is the orchestrator's identity")
    hosts = dict(hosts or {})
    identities = {*nodes, ORCHESTRATOR_ID}
    for who in hosts:
        if who not in identities:
            raise ConfigError(f"--host: {who!r} is not one of --nodes (or orchestrator)")
    for who in [*nodes, ORCHESTRATOR_ID]:  # a name in two certificates: both can take it
        for name in hosts.get(who, DEFAULT_HOSTS):
            if name in identities and name != who:
                given = f"--host {who}={name}" if who in hosts else "--nodes"
                default = "" if who in hosts else " (every certificate names it unless --host)"
                raise ConfigError(
                    f"{given}: {name!r} is an identity{default}; {who}'s certificate would "
                    f"let it speak as {name}"
                )
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"certs init: cannot make {out} ({exc.strerror or exc})") from None
    if (out / "ca.pem").exists():
        raise ConfigError(f"certs init: {out / 'ca.pem'} exists; use an empty folder")
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=days)
    pem = serialization.Encoding.PEM
    pkcs8, plain = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "starling testbed CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    written = [out / "ca.pem", out / "ca.key"]
    _write(written[0], ca.public_bytes(pem))
    _write(written[1], ca_key.private_bytes(pem, pkcs8, plain), private=True)

    for who in [*nodes, ORCHESTRATOR_ID]:
        key = ec.generate_private_key(ec.SECP256R1())
        names = [who, *hosts.get(who, DEFAULT_HOSTS)]
        san = x509.SubjectAlternativeName([_name(n) for n in dict.fromkeys(names)])
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, who)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write(out / f"{who}.pem", cert.public_bytes(pem))
        _write(out / f"{who}.key", key.private_bytes(pem, pkcs8, plain), private=True)
        written += [out / f"{who}.pem", out / f"{who}.key"]
    return written


def _hosts(values: Sequence[str]) -> dict[str, list[str]]:
    hosts: dict[str, list[str]] = {}
    for value in values:
        who, sep, name = value.partition("=")
        if not sep or not who or not name:
            raise ConfigError(f"--host {value}: expected ID=NAME (a DNS name or an IP)")
        hosts.setdefault(who, []).append(name)
    return hosts


def cmd_init(args) -> int:
    nodes = [n.strip() for n in args.nodes.split(",")]
    written = init_certs(args.folder, nodes, _hosts(args.host or []), args.days)
    print(f"wrote {len(written)} files to {args.folder}: CA, {len(nodes)} nodes, orchestrator")
    return 0


def add_commands(sub) -> None:
    certs = sub.add_parser("certs", help="make a testbed CA and certificates for mutual TLS")
    actions = certs.add_subparsers(metavar="ACTION")
    init = actions.add_parser("init", help="a CA, one certificate per node, one orchestrator")
    init.add_argument("folder", metavar="DIR", help="where to write (created; must hold no CA)")
    init.add_argument("--nodes", required=True, help="node ids, comma-separated: a,b,c")
    init.add_argument(
        "--host",
        action="append",
        metavar="ID=NAME",
        help="another DNS name or IP for ID's certificate (repeatable; replaces the default "
        "localhost and 127.0.0.1 for that ID)",
    )
    init.add_argument("--days", type=int, default=365, help="validity (default 365)")
    init.set_defaults(handler=cmd_init)
