"""``starling certs init|add|renew|revoke|tokens``: a testbed PKI for mutual TLS, and the
nodes' Control tokens, with a lifecycle.

* ``certs init DIR --nodes a,b,c`` writes ``ca.pem`` and ``ca.key`` (the CA), then for every
  node ``ID.pem``/``ID.key`` and for the orchestrator ``orchestrator.pem``/``.key``. With
  ``--ca-dir CA`` the CA's key is written there instead, and only ``ca.pem`` beside the
  certificates: the folder copied to devices then holds no key that can sign.
* ``certs add DIR --nodes d`` issues certificates for more nodes from the same CA.
* ``certs renew DIR [--nodes a]`` issues new keys and certificates for the named identities
  (all of the folder's by default), with the names (SAN) the old ones had.
* ``certs revoke DIR --nodes a`` puts the current certificates of those identities on the
  CA's revocation list, ``crl.pem`` (signed by the CA), and sets their files aside.
* ``certs tokens DIR --nodes a,b`` writes ``master.token`` (kept if there: the orchestrator's
  ``token_file``) and every node's own token ``ID.token``
  (:func:`starling.node.tokens.node_token`), owner-only.

Each certificate's SAN holds its identity as a DNS name (the node id, or ``orchestrator``):
that is what a node checks against the ``sender`` a peer stream claims and what a client
checks when it reaches node ``ID`` (:mod:`starling.node.security`). Extra names make the
certificates usable with other tools too: ``localhost`` and ``127.0.0.1`` by default, or those
given with ``--host ID=NAME``. Keys are EC P-256; certificates are valid for ``--days``
(default 365, between 1 and 3650), the CA for 3650 days or longer.

**Revocation is a CRL the nodes check**, not short-lived certificates: a testbed's devices
often keep no reliable clock (a board without a real-time clock boots in 1970 until NTP
answers), and short lifetimes would make every such boot a refusal, while a CRL takes
effect when the file reaches the node, whatever its clock. A node given ``tls.crl``
(``--tls-crl``) checks at start that the CA signed it, re-reads it when it changes, and
refuses every caller whose certificate's serial it lists (:mod:`starling.node.revocation`).

Nothing is overwritten and nothing is half written: existing files are refused, or with
``--force`` moved to ``backup-<UTC time>/`` first; every file is written to a temporary
folder beside the target and moved in only once all of them are. Ids are DNS labels (letters,
digits, hyphens; at most 63) and may not be ``ca``, ``crl``, ``master`` or ``orchestrator``,
so no name can replace the CA's files or write outside the folder. Every mistake is one line.

Real deployments bring their own PKI: any CA works, as long as each node's certificate
names its node id and the orchestrator's names ``orchestrator``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from starling.node.params import ConfigError
from starling.node.security import ORCHESTRATOR_ID

__all__ = [
    "add_certs",
    "add_commands",
    "init_certs",
    "renew_certs",
    "revoke_certs",
    "write_tokens",
]

DEFAULT_HOSTS = ("localhost", "127.0.0.1")
MIN_DAYS, MAX_DAYS = 1, 3650
CA_DAYS = 3650
LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
RESERVED = ("ca", "crl", "master", ORCHESTRATOR_ID)
"""Names of the folder's own files (and the orchestrator's identity): no node takes them."""
CA_NAME = "starling testbed CA"


# ---------------------------------------------------------------- checks


def check_ids(ids: Sequence[str], where: str = "--nodes") -> list[str]:
    """The node ids, each a DNS label that names none of the folder's own files."""
    if not ids:
        raise ConfigError(f"{where}: give at least one node id (a,b,c)")
    seen: set[str] = set()
    for node in ids:
        shown = node if len(node) <= 70 else node[:67] + "..."
        if not LABEL.match(node):
            raise ConfigError(
                f"{where}: {shown!r} is not a DNS label (letters, digits and inner hyphens, "
                "1 to 63 of them): a node id names its certificate and its files"
            )
        if node.lower() == ORCHESTRATOR_ID:
            raise ConfigError(f"{where}: {ORCHESTRATOR_ID!r} is the orchestrator's identity")
        if node.lower() in RESERVED:
            raise ConfigError(
                f"{where}: {node!r} names a file of the folder ({node.lower()}.pem/.key/.token)"
            )
        if node.lower() in seen:
            raise ConfigError(f"{where}: {node!r} is given twice")
        seen.add(node.lower())
    return list(ids)


def check_days(days: int) -> int:
    if isinstance(days, bool) or not isinstance(days, int) or not MIN_DAYS <= days <= MAX_DAYS:
        raise ConfigError(
            f"--days: must be a whole number from {MIN_DAYS} to {MAX_DAYS}, got {days!r}"
        )
    return days


def _folder(path: str | Path, what: str, create: bool) -> Path:
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{what}: {folder} is a file, not a folder")
    if not folder.exists():
        if not create:
            raise ConfigError(f"{what}: {folder} does not exist")
        try:
            folder.mkdir(parents=True, mode=0o700)
        except OSError as exc:
            raise ConfigError(f"{what}: cannot make {folder} ({exc.strerror})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{what}: cannot write in {folder} (permission denied)")
    return folder


def _check_hosts(hosts: Mapping[str, Sequence[str]], identities: Iterable[str]) -> None:
    identities = set(identities)
    for who in hosts:
        if who not in identities:
            raise ConfigError(f"--host: {who!r} is not one of --nodes (or orchestrator)")
    for who in identities:
        for name in hosts.get(who, DEFAULT_HOSTS):
            if name in identities and name != who:
                given = f"--host {who}={name}" if who in hosts else "--nodes"
                default = "" if who in hosts else " (every certificate names it unless --host)"
                raise ConfigError(
                    f"{given}: {name!r} is an identity{default}; {who}'s certificate would "
                    f"let it speak as {name}"
                )


# ---------------------------------------------------------------- writing, all or nothing


class _Batch:
    """Files to write into one or more folders, all or none (see module)."""

    def __init__(self, force: bool):
        self.force = force
        self.files: list[tuple[Path, bytes, bool]] = []
        self.set_aside: list[Path] = []
        self.backup: Path | None = None
        """Where what was replaced or set aside went, once written."""

    def add(self, path: Path, data: bytes, private: bool = False) -> None:
        self.files.append((path, data, private))

    def retire(self, path: Path) -> None:
        """Move ``path`` to the backup folder when the batch is written."""
        if path.exists():
            self.set_aside.append(path)

    def write(self) -> list[Path]:
        existing = [path for path, _, _ in self.files if path.exists()]
        if existing and not self.force:
            raise ConfigError(
                f"{existing[0]} exists; nothing was written (--force keeps a backup of "
                "what it replaces)"
            )
        temps: dict[Path, Path] = {}
        staged: list[tuple[Path, Path]] = []
        try:
            for path, data, private in self.files:
                if path.parent not in temps:
                    temps[path.parent] = Path(tempfile.mkdtemp(prefix=".certs-", dir=path.parent))
                target = temps[path.parent] / path.name
                descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "wb") as file:
                    file.write(data)
                if not private:
                    os.chmod(target, 0o644)
                staged.append((target, path))
            self.backup = self._backup([*existing, *self.set_aside])
            for target, path in staged:
                os.replace(target, path)
        except OSError as exc:
            where = exc.filename or self.files[0][0].parent
            raise ConfigError(
                f"cannot write {where} ({exc.strerror}); nothing was written"
            ) from None
        finally:
            for temp in temps.values():
                shutil.rmtree(temp, ignore_errors=True)
        return [path for path, _, _ in self.files]

    @staticmethod
    def _backup(paths: list[Path]) -> Path | None:
        if not paths:
            return None
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        backup = paths[0].parent / f"backup-{stamp}"
        backup.mkdir(mode=0o700, exist_ok=True)
        for path in paths:
            os.replace(path, backup / path.name)
        return backup


# ---------------------------------------------------------------- the CA and its certificates


def _name(value: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(value))
    except ValueError:
        return x509.DNSName(value)


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _pem(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _new_ca(days: int):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    usage = x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=True,
        crl_sign=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=max(days, CA_DAYS)))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _issue(ca, ca_key, who: str, names: Sequence[str], days: int):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    end = min(now + datetime.timedelta(days=days), ca.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([_name(n) for n in dict.fromkeys([who, *names])])
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, who)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
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
    return cert, key


def _load_ca(folder: Path, ca_dir: Path):
    """The CA certificate (the folder's ca.pem) and its key (in ``ca_dir``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert_path, key_path = folder / "ca.pem", ca_dir / "ca.key"
    for path in (cert_path, key_path):
        if not path.is_file():
            raise ConfigError(
                f"{path}: no such file (the CA of 'starling certs init'; --ca-dir names the "
                "folder of its key if it was kept apart)"
            )
    try:
        ca = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), None)
    except (ValueError, TypeError):
        raise ConfigError(f"{key_path}: not the unencrypted PEM key of {cert_path}") from None
    except OSError as exc:
        raise ConfigError(f"{exc.filename}: cannot read it ({exc.strerror})") from None
    if ca.public_key().public_numbers() != key.public_key().public_numbers():  # type: ignore[union-attr]
        raise ConfigError(f"{key_path}: is not the key of {cert_path}")
    return ca, key


def _known_ids(folder: Path) -> list[str]:
    """Identities with a certificate in the folder (the CA's and retired ones aside)."""
    return sorted(p.stem for p in folder.glob("*.pem") if p.stem.lower() not in ("ca", "crl"))


def _hosts_of(path: Path) -> list[str]:
    """The names besides the identity in an existing certificate's SAN."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    names = [str(v) for v in san.get_values_for_type(x509.DNSName)]
    names += [str(v) for v in san.get_values_for_type(x509.IPAddress)]
    return [n for n in names if n != path.stem]


def init_certs(
    folder: str | Path,
    nodes: Sequence[str],
    hosts: Mapping[str, Sequence[str]] | None = None,
    days: int = 365,
    *,
    force: bool = False,
    ca_dir: str | Path | None = None,
) -> list[Path]:
    """Make the CA and the certificates; returns the files written."""
    nodes = check_ids(nodes)
    days = check_days(days)
    hosts = dict(hosts or {})
    _check_hosts(hosts, [*nodes, ORCHESTRATOR_ID])
    out = _folder(folder, "certs init", create=True)
    keys = _folder(ca_dir, "--ca-dir", create=True) if ca_dir else out
    ca, ca_key = _new_ca(days)
    batch = _Batch(force)
    batch.add(out / "ca.pem", _pem(ca))
    batch.add(keys / "ca.key", _pem_key(ca_key), private=True)
    if keys != out:
        batch.add(keys / "ca.pem", _pem(ca))
    for who in [*nodes, ORCHESTRATOR_ID]:
        cert, key = _issue(ca, ca_key, who, hosts.get(who, DEFAULT_HOSTS), days)
        batch.add(out / f"{who}.pem", _pem(cert))
        batch.add(out / f"{who}.key", _pem_key(key), private=True)
    batch.retire(out / "crl.pem")  # a new CA: the old one's list means nothing
    return batch.write()


def add_certs(
    folder: str | Path,
    nodes: Sequence[str],
    hosts: Mapping[str, Sequence[str]] | None = None,
    days: int = 365,
    *,
    force: bool = False,
    ca_dir: str | Path | None = None,
) -> list[Path]:
    """Certificates for more nodes, from the folder's CA; returns the files written."""
    nodes = check_ids(nodes)
    days = check_days(days)
    hosts = dict(hosts or {})
    out = _folder(folder, "certs add", create=False)
    _check_hosts(hosts, {*nodes, *_known_ids(out), ORCHESTRATOR_ID})
    for who in hosts:
        if who not in nodes:
            raise ConfigError(f"--host: {who!r} is not one of --nodes")
    ca, ca_key = _load_ca(out, Path(ca_dir) if ca_dir else out)
    batch = _Batch(force)
    for who in nodes:
        cert, key = _issue(ca, ca_key, who, hosts.get(who, DEFAULT_HOSTS), days)
        batch.add(out / f"{who}.pem", _pem(cert))
        batch.add(out / f"{who}.key", _pem_key(key), private=True)
    return batch.write()


def renew_certs(
    folder: str | Path,
    nodes: Sequence[str] = (),
    days: int = 365,
    *,
    ca_dir: str | Path | None = None,
) -> list[Path]:
    """New keys and certificates (same names) for ``nodes`` (every identity of the folder
    by default, the orchestrator's included); the old ones are kept in a backup folder."""
    days = check_days(days)
    out = _folder(folder, "certs renew", create=False)
    known = _known_ids(out)
    chosen = list(nodes) or known
    for who in chosen:
        if who not in known:
            raise ConfigError(f"--nodes: {who!r} has no certificate in {out} (certs add makes one)")
    ca, ca_key = _load_ca(out, Path(ca_dir) if ca_dir else out)
    batch = _Batch(force=True)
    for who in chosen:
        cert, key = _issue(ca, ca_key, who, _hosts_of(out / f"{who}.pem"), days)
        batch.add(out / f"{who}.pem", _pem(cert))
        batch.add(out / f"{who}.key", _pem_key(key), private=True)
    return batch.write()


def revoke_certs(
    folder: str | Path, nodes: Sequence[str], *, ca_dir: str | Path | None = None
) -> list[Path]:
    """Put the current certificates of ``nodes`` on the CA's list (``crl.pem``) and set
    their files aside; returns the files written."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    out = _folder(folder, "certs revoke", create=False)
    if not nodes:
        raise ConfigError("--nodes: give the ids whose certificates are revoked")
    ca, ca_key = _load_ca(out, Path(ca_dir) if ca_dir else out)
    now = datetime.datetime.now(datetime.timezone.utc)
    revoked: dict[int, datetime.datetime] = {}
    crl_path = out / "crl.pem"
    if crl_path.is_file():
        try:
            old = x509.load_pem_x509_crl(crl_path.read_bytes())
        except ValueError:
            raise ConfigError(f"{crl_path}: not a PEM revocation list") from None
        if not old.is_signature_valid(ca.public_key()):
            raise ConfigError(f"{crl_path}: not signed by this folder's CA")
        revoked.update({entry.serial_number: entry.revocation_date_utc for entry in old})
    batch = _Batch(force=True)
    for who in nodes:
        path = out / f"{who}.pem"
        if not path.is_file():
            raise ConfigError(f"--nodes: {who!r} has no certificate in {out}")
        revoked.setdefault(x509.load_pem_x509_certificate(path.read_bytes()).serial_number, now)
        batch.retire(path)
        batch.retire(out / f"{who}.key")
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca.subject)
        .last_update(now - datetime.timedelta(minutes=5))
        .next_update(ca.not_valid_after_utc)
    )
    for serial, when in sorted(revoked.items()):
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(when).build()
        )
    crl = builder.sign(ca_key, hashes.SHA256())
    batch.add(crl_path, _pem(crl))
    return batch.write()


def write_tokens(folder: str | Path, nodes: Sequence[str], *, force: bool = False) -> list[Path]:
    """``master.token`` (made if absent) and every node's own token, owner-only."""
    from starling.node.tokens import node_token, read_master

    nodes = check_ids(nodes)
    out = _folder(folder, "certs tokens", create=True)
    master_path = out / "master.token"
    batch = _Batch(force)
    if master_path.exists():
        master = read_master(str(master_path), "master.token")
    else:
        master = secrets.token_urlsafe(32)
        batch.add(master_path, (master + "\n").encode(), private=True)
    for who in nodes:
        batch.add(out / f"{who}.token", (node_token(master, who) + "\n").encode(), private=True)
    return batch.write()


# ---------------------------------------------------------------- the command line


def _hosts(values: Sequence[str]) -> dict[str, list[str]]:
    hosts: dict[str, list[str]] = {}
    for value in values:
        who, sep, name = value.partition("=")
        if not sep or not who or not name:
            raise ConfigError(f"--host {value}: expected ID=NAME (a DNS name or an IP)")
        hosts.setdefault(who, []).append(name)
    return hosts


def _ids(text: str | None) -> list[str]:
    """``a,b,c`` as ids; a blank one (``a,,b``) is kept, for :func:`check_ids` to refuse."""
    return [n.strip() for n in (text or "").split(",")] if (text or "").strip() else []


def cmd_init(args: Any) -> int:
    nodes = _ids(args.nodes)
    written = init_certs(
        args.folder, nodes, _hosts(args.host or []), args.days, force=args.force, ca_dir=args.ca_dir
    )
    where = f" (the CA's key in {args.ca_dir})" if args.ca_dir else ""
    print(
        f"wrote {len(written)} files to {args.folder}{where}: CA, {len(nodes)} nodes, orchestrator"
    )
    return 0


def cmd_add(args: Any) -> int:
    written = add_certs(
        args.folder,
        _ids(args.nodes),
        _hosts(args.host or []),
        args.days,
        force=args.force,
        ca_dir=args.ca_dir,
    )
    print(f"wrote {len(written)} files to {args.folder}")
    return 0


def cmd_renew(args: Any) -> int:
    written = renew_certs(args.folder, _ids(args.nodes), args.days, ca_dir=args.ca_dir)
    print(f"renewed {len(written) // 2} certificates in {args.folder}; restart their nodes")
    return 0


def cmd_revoke(args: Any) -> int:
    revoke_certs(args.folder, _ids(args.nodes), ca_dir=args.ca_dir)
    print(
        f"revoked {', '.join(_ids(args.nodes))}: copy {Path(args.folder) / 'crl.pem'} to every "
        "node (tls.crl); nodes re-read it when it changes"
    )
    return 0


def cmd_tokens(args: Any) -> int:
    written = write_tokens(args.folder, _ids(args.nodes), force=args.force)
    print(
        f"wrote {len(written)} files to {args.folder}: give the orchestrator master.token "
        "(token_file), and each node only its own ID.token (--token-file)"
    )
    return 0


def add_commands(sub: Any) -> None:
    certs = sub.add_parser(
        "certs", help="a testbed CA and certificates for mutual TLS, and Control tokens"
    )
    actions = certs.add_subparsers(metavar="ACTION")

    def common(parser: Any, nodes_required: bool = True, force: bool = True) -> None:
        parser.add_argument("folder", metavar="DIR", help="the certificates' folder")
        parser.add_argument(
            "--nodes", required=nodes_required, help="node ids, comma-separated: a,b,c"
        )
        if force:
            parser.add_argument(
                "--force",
                action="store_true",
                help="replace existing files (kept in DIR/backup-<time>/)",
            )

    def ca_dir(parser: Any) -> None:
        parser.add_argument(
            "--ca-dir", metavar="DIR", help="where the CA's key is kept (default: the folder)"
        )

    def days(parser: Any) -> None:
        parser.add_argument(
            "--days",
            type=int,
            default=365,
            help=f"validity, {MIN_DAYS} to {MAX_DAYS} (default 365)",
        )

    def host(parser: Any) -> None:
        parser.add_argument(
            "--host",
            action="append",
            metavar="ID=NAME",
            help="another DNS name or IP for ID's certificate (repeatable; replaces the "
            "default localhost and 127.0.0.1 for that ID)",
        )

    init = actions.add_parser("init", help="a CA, one certificate per node, one orchestrator")
    common(init)
    host(init)
    days(init)
    ca_dir(init)
    init.set_defaults(handler=cmd_init)
    add = actions.add_parser("add", help="certificates for more nodes, from the folder's CA")
    common(add)
    host(add)
    days(add)
    ca_dir(add)
    add.set_defaults(handler=cmd_add)
    renew = actions.add_parser("renew", help="new keys and certificates, same names")
    common(renew, nodes_required=False, force=False)
    days(renew)
    ca_dir(renew)
    renew.set_defaults(handler=cmd_renew)
    revoke = actions.add_parser("revoke", help="put certificates on the CA's list (crl.pem)")
    common(revoke, force=False)
    ca_dir(revoke)
    revoke.set_defaults(handler=cmd_revoke)
    tokens = actions.add_parser("tokens", help="a master token and every node's own token")
    common(tokens)
    tokens.set_defaults(handler=cmd_tokens)
