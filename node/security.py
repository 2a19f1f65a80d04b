"""Who may talk to a node, and how the node proves who it is.

Three mechanisms, each for one channel:

* **TLS files** (:class:`TlsFiles`): a CA, a certificate and its key, and optionally the
  CA's revocation list, named in the node's config (``tls: {ca, cert, key, crl}``), in an
  inventory or in the experiment's backend section. With them every channel is mutual TLS:
  the server asks for a client certificate signed by the same CA, and a client checks that
  the server's certificate names the node id it meant to reach (the id is a DNS name in the
  certificate's SAN, and channels override the target name with it, so addresses can be
  anything: IPs, compose service names). At start a node checks that its certificate chains
  to its CA, matches its key and is valid now (:meth:`TlsFiles.check`); it takes renewed
  files for new handshakes without a restart (:func:`server_credentials`).
* **A control token** (``--token-file``): Control calls carry
  ``authorization: Bearer <token>`` (with TLS too, if one is given), each node its own
  (:mod:`starling.node.tokens`); compared with :func:`hmac.compare_digest`.
* **A link secret**: every ``Peer.Exchange`` stream proves the secret of its link, which the
  orchestrator handed both ends in ``Configure`` over the authenticated Control channel
  (:mod:`starling.node.runtime.peer_secrets`), by answering a challenge
  (:mod:`starling.node.runtime.link_proof`): the secret itself never crosses the wire.

Nothing here logs a key, a token or a secret.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starling.node.params import ConfigError

log = logging.getLogger("starling.node")

if TYPE_CHECKING:
    import grpc

__all__ = [
    "ORCHESTRATOR_ID",
    "check_header_value",
    "SENDER_KEY",
    "TlsFiles",
    "channel_credentials",
    "is_loopback",
    "others_can_read",
    "read_token",
    "same_secret",
    "server_credentials",
    "target_override",
]

ORCHESTRATOR_ID = "orchestrator"
"""The identity (DNS SAN) of the orchestrator's certificate; no node may take this id."""

SENDER_KEY = "starling-sender"
"""Peer stream metadata: the node id the stream's messages come from."""

TOKEN_KEY = "authorization"

MAX_TOKEN_CHARS = 4096
"""The longest Control token: gRPC refuses headers of 8 KiB (all of a call's together)."""


SANE_CLOCK = 1_704_067_200
"""2024-01-01 UTC: a clock earlier than this is wrong (a device without a real-time clock
boots in 1970 until NTP sets it), and no certificate can be checked against it."""

RENEW_WITHIN_DAYS = 14
"""A certificate that expires sooner than this is a warning at start."""


@dataclass(frozen=True)
class TlsFiles:
    """Paths of a CA certificate, this party's certificate and its private key (PEM), and
    optionally the CA's revocation list (``crl``, :mod:`starling.node.revocation`)."""

    ca: str
    cert: str
    key: str
    crl: str = ""

    def stamp(self) -> tuple[tuple[int, int, int] | None, ...]:
        """The files' (time, size, inode): what changes when they are renewed."""
        out: list[tuple[int, int, int] | None] = []
        for path in (self.ca, self.cert, self.key):
            try:
                info = os.stat(path)
                out.append((info.st_mtime_ns, info.st_size, info.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def read(self, where: str = "tls") -> tuple[bytes, bytes, bytes]:
        """(ca, cert, key) bytes; a missing or unreadable file is one line naming it."""
        out = []
        for name in ("ca", "cert", "key"):
            path = getattr(self, name)
            try:
                out.append(Path(path).read_bytes())
            except OSError as exc:
                raise ConfigError(
                    f"{where}.{name}: cannot read {path!r} ({exc.strerror})"
                ) from None
        return out[0], out[1], out[2]

    def check(self, identity: str = "", where: str = "tls") -> list[str]:
        """Refuse, in one line naming the field, files no handshake could use — gRPC itself
        only says it cannot bind, or that a node is unreachable: a CA file without a CA, a
        certificate or key that is no PEM one, a key of another certificate or encrypted,
        a certificate out of its validity, not naming ``identity`` (a node's naming the
        orchestrator's too), not signed by the CA or revoked, a revocation list the CA did
        not sign. Returns warnings: a key others can read, a certificate about to expire."""
        import ssl

        self.read(where)
        now = time.time()
        if now < SANE_CLOCK:
            raise ConfigError(
                f"this machine's clock says {time.strftime('%Y-%m-%d', time.gmtime(now))}: no "
                "certificate can be checked against it (a device without a real-time clock "
                "boots in 1970; set the clock, e.g. wait for NTP, then start the node)"
            )
        trust = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            trust.load_verify_locations(cafile=self.ca)
        except ssl.SSLError:
            raise ConfigError(f"{where}.ca: {self.ca!r} holds no PEM certificate") from None
        if not trust.get_ca_certs():
            raise ConfigError(
                f"{where}.ca: {self.ca!r} holds no CA certificate (a node's or the "
                "orchestrator's instead of the CA's?)"
            )
        _check_certificate(self.cert, identity, f"{where}.cert")
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
                self.cert, self.key, password=_no_password
            )
        except _Encrypted:
            raise ConfigError(
                f"{where}.key: {self.key!r} is encrypted; gRPC takes a key "
                "only unencrypted (mode 0600)"
            ) from None
        except ssl.SSLError as exc:
            if exc.reason == "KEY_VALUES_MISMATCH":
                raise ConfigError(
                    f"{where}.key: {self.key!r} is not the key of {where}.cert {self.cert!r}"
                ) from None
            raise ConfigError(f"{where}.key: {self.key!r} holds no PEM private key") from None
        _check_chain(self, where)
        warnings = [others_can_read(self.key, f"{where}.key"), _expiring(self.cert, where)]
        return [w for w in warnings if w]


class _Encrypted(Exception):
    pass


def _no_password() -> bytes:
    raise _Encrypted  # asked for a password: the key is encrypted (and gRPC takes none)


def _check_certificate(path: str, identity: str, where: str) -> None:
    """A PEM certificate, valid now, whose subjectAltName names ``identity`` as a DNS name
    (what peers and the orchestrator check; a CN does not count)."""
    import ssl
    import time

    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=path)
    except ssl.SSLError:
        raise ConfigError(f"{where}: {path!r} holds no PEM certificate") from None
    decode = getattr(ssl._ssl, "_test_decode_cert", None)  # type: ignore[attr-defined]
    if decode is None:  # pragma: no cover - CPython has it; gRPC's handshake still checks
        return
    fields = decode(path)
    now = time.time()
    if ssl.cert_time_to_seconds(fields["notAfter"]) < now:
        raise ConfigError(f"{where}: {path!r} expired on {fields['notAfter']}")
    if ssl.cert_time_to_seconds(fields["notBefore"]) > now:
        raise ConfigError(
            f"{where}: {path!r} is valid only from {fields['notBefore']} "
            "(is this machine's clock right?)"
        )
    names = [value for kind, value in fields.get("subjectAltName", ()) if kind == "DNS"]
    if identity and identity not in names:
        named = ", ".join(names) or "none"
        raise ConfigError(
            f"{where}: {path!r} does not name {identity!r} as a DNS name in "
            f"its subjectAltName (it names {named})"
        )
    if identity and identity != ORCHESTRATOR_ID and ORCHESTRATOR_ID in names:
        raise ConfigError(
            f"{where}: {path!r} names {ORCHESTRATOR_ID!r} too: with it node "
            f"{identity!r} could call Control on every node"
        )


def _check_chain(tls: TlsFiles, where: str) -> None:
    """The certificate chains to the CA (and is on no revocation list the CA signed):
    one TLS handshake in memory, this party's certificate and key against a client that
    trusts only the CA, as every peer's will."""
    import ssl

    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tls.cert, tls.key, password=_no_password)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.load_verify_locations(cafile=tls.ca)
    if tls.crl:
        from starling.node.revocation import Revocations

        Revocations(tls.crl, f"{where}.crl")  # readable, and a list at all
        try:
            client.load_verify_locations(cafile=tls.crl)
        except ssl.SSLError:
            raise ConfigError(f"{where}.crl: {tls.crl!r} holds no PEM revocation list") from None
        client.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    ours = client.wrap_bio(to_client, to_server)
    theirs = server.wrap_bio(to_server, to_client, server_side=True)
    try:
        for _ in range(8):
            done = 0
            for side in (ours, theirs):
                try:
                    side.do_handshake()
                    done += 1
                except ssl.SSLWantReadError:
                    pass
            if done == 2:
                return
    except ssl.SSLCertVerificationError as exc:
        reason = exc.verify_message or str(exc)
        if "CRL" in reason:
            raise ConfigError(
                f"{where}.crl: {tls.crl!r} cannot be used with {where}.ca {tls.ca!r} "
                f"(OpenSSL: {reason})"
            ) from None
        if "revoked" in reason:
            raise ConfigError(f"{where}.cert: {tls.cert!r} is revoked by {where}.crl") from None
        raise ConfigError(
            f"{where}.cert: {tls.cert!r} does not chain to {where}.ca {tls.ca!r} "
            f"(OpenSSL: {reason}); was it signed by another CA?"
        ) from None
    except ssl.SSLError as exc:  # pragma: no cover - a handshake failing for another cause
        raise ConfigError(f"{where}: the files make no TLS handshake ({exc.reason})") from None


def _expiring(path: str, where: str) -> str | None:
    import ssl

    decode = getattr(ssl._ssl, "_test_decode_cert", None)  # type: ignore[attr-defined]
    if decode is None:  # pragma: no cover - CPython has it
        return None
    ends = ssl.cert_time_to_seconds(decode(path)["notAfter"])
    days = (ends - time.time()) / 86400
    if days >= RENEW_WITHIN_DAYS:
        return None
    return (
        f"{where}.cert: {path} expires in {days:.1f} days; renew it (starling certs renew) "
        "and the node takes it for new connections without a restart"
    )


def others_can_read(path: str, where: str) -> str | None:
    """A warning if a secret's file (a key, a token) is open to its group or other users."""
    try:
        mode = os.stat(path).st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return f"{where}: {path} is open to users other than its owner (mode {mode:04o}); chmod 600 it"


def tls_files(raw: object, where: str = "tls") -> TlsFiles | None:
    """A ``tls`` section (``{ca, cert, key}``), or None when absent or empty."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with ca, cert and key, got {raw!r}")
    unknown = sorted(set(raw) - {"ca", "cert", "key", "crl"})
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown field (known: ca, cert, key, crl)")
    for name in ("ca", "cert", "key"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise ConfigError(f"{where}.{name}: required, the path of a PEM file")
    crl = raw.get("crl") or ""
    if not isinstance(crl, str):
        raise ConfigError(f"{where}.crl: the path of the CA's PEM revocation list")
    return TlsFiles(raw["ca"], raw["cert"], raw["key"], crl)


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """Mutual TLS on the server side: clients must present a certificate of ``tls.ca``.
    Renewed files (``starling certs renew``, a new CA bundle) are taken for the handshakes
    after they change, once they form a usable pair; never a half-written one."""
    import ssl

    import grpc  # here: reading settings loads no grpc

    def configuration() -> Any:
        ca, cert, key = tls.read()
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    seen = [tls.stamp()]

    def renewed() -> Any:
        stamp = tls.stamp()
        if stamp == seen[0]:
            return None
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(
                tls.cert, tls.key, password=_no_password
            )
            changed = configuration()
        except (ssl.SSLError, OSError, ConfigError, _Encrypted):
            return None  # mid-renewal, or broken: the files in use stay; tried again later
        seen[0] = stamp
        log.warning("tls: the certificate files changed; new handshakes use them")
        return changed

    return grpc.dynamic_ssl_server_credentials(
        configuration(), renewed, require_client_authentication=True
    )


def channel_credentials(tls: TlsFiles) -> grpc.ChannelCredentials:
    """Mutual TLS on the client side: our certificate, and ``tls.ca`` to check the server's."""
    import grpc

    ca, cert, key = tls.read()
    return grpc.ssl_channel_credentials(
        root_certificates=ca, private_key=key, certificate_chain=cert
    )


def target_override(node_id: str) -> list[tuple[str, str]]:
    """Channel options that make TLS check the server's certificate against ``node_id``
    (not the address's host name)."""
    return [("grpc.ssl_target_name_override", node_id)] if node_id else []


def read_token(path: str, where: str = "--token-file") -> str:
    """The bearer token in ``path`` (surrounding whitespace stripped); never echoed."""
    try:
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path!r} ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {path!r} is not text") from None
    if not token:
        raise ConfigError(f"{where}: {path!r} is empty")
    check_header_value(token, f"{where}: {path!r} holds")
    return token


def check_header_value(value: str, where: str) -> None:
    """Refuse, as ``"<where> ..."``, a secret no gRPC header carries: one accepted anyway
    failed every call (INTERNAL 'Invalid metadata', or a metadata size error) on the
    sending side. Never echoes the value."""
    if len(value) > MAX_TOKEN_CHARS:
        raise ConfigError(
            f"{where} {len(value)} characters; at most {MAX_TOKEN_CHARS} fit a gRPC header"
        )
    if not all(" " <= char <= "~" for char in value):
        raise ConfigError(
            f"{where} a character other than printable ASCII, which no gRPC header carries"
        )


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time comparison (an attacker learns nothing from the time taken)."""
    return hmac.compare_digest((given or "").encode(), expected.encode())


def identities(context: grpc.ServicerContext) -> set[str]:
    """The DNS names in the subjectAltName of the client's verified certificate (empty
    without TLS). Only those: gRPC's own peer identities fall back to the subject's CN when
    a certificate has no SAN, so any certificate of the CA with ``CN=orchestrator`` passed as
    the orchestrator's; and an IP address in a SAN is no node id."""
    names = context.auth_context().get("peer_dns", [])
    return {name.decode(errors="replace") for name in names}


def metadata(context: grpc.ServicerContext) -> dict[str, str]:
    return {k: v for k, v in context.invocation_metadata() if isinstance(v, str)}


def bearer(token: str) -> tuple[tuple[str, str], ...]:
    return ((TOKEN_KEY, f"Bearer {token}"),)


def token_given(context: grpc.ServicerContext) -> str:
    """The token of an ``authorization: Bearer <token>`` header (the scheme in any case, as
    HTTP has it); empty for a header of another scheme or none."""
    scheme, _, token = metadata(context).get(TOKEN_KEY, "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (from HOST:PORT) is a loopback address or ``localhost``."""
    import ipaddress

    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
