"""Revoked certificates: the CA's revocation list a node checks its callers against.

``starling certs revoke`` puts a certificate's serial number on the CA's list, ``crl.pem``
(:mod:`starling.orchestrator.deploy.certs` says why a list and not short-lived certificates). A node
given it (``tls.crl``, ``--tls-crl``) checks at start that its CA signed it
(:meth:`TlsFiles.check <starling.node.security.TlsFiles.check>`, by OpenSSL), then refuses
every call whose client certificate's serial the list holds, the orchestrator's included
(:class:`Revocations`, used by the gate). The list is re-read whenever its file changes, so
a revocation takes effect without a restart once the file reaches the node.

A node has no X.509 library (its footprint is grpcio and numpy): the serial numbers are read
from the DER by hand (:func:`certificate_serial`, :func:`crl_serials`), the few fields of
RFC 5280 they sit behind. A list or certificate that does not parse is refused, never taken
for an empty one.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
from pathlib import Path

from starling.node.params import ConfigError

__all__ = ["Revocations", "certificate_serial", "crl_serials"]

log = logging.getLogger("starling.node")

_PEM = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.+?)-----END \1-----", re.S)

_SEQUENCE, _INTEGER, _UTC_TIME, _GENERALIZED_TIME = 0x30, 0x02, 0x17, 0x18
_VERSION = 0xA0  # a certificate's [0] EXPLICIT version


def _der(pem: bytes, label: str) -> bytes:
    for kind, body in _PEM.findall(pem):
        if kind.decode() == label:
            return base64.b64decode(b"".join(body.split()))
    raise ValueError(f"no {label}")


def _item(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start, end) of the DER item at ``pos``: its content is ``data[start:end]``."""
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if not 0 < count <= 4:
            raise ValueError("a length DER does not allow")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    end = pos + length
    if end > len(data):
        raise ValueError("an item longer than its data")
    return tag, pos, end


def _inside(data: bytes, pos: int, tag: int) -> tuple[int, int]:
    found, start, end = _item(data, pos)
    if found != tag:
        raise ValueError(f"tag {found:#x} where {tag:#x} was expected")
    return start, end


def certificate_serial(pem: bytes) -> int:
    """The serial number of the (first) certificate in ``pem``; ValueError if none."""
    der = _der(pem, "CERTIFICATE")
    start, _ = _inside(der, 0, _SEQUENCE)  # Certificate
    pos, _ = _inside(der, start, _SEQUENCE)  # tbsCertificate
    tag, inner, end = _item(der, pos)
    if tag == _VERSION:
        pos = end
    start, end = _inside(der, pos, _INTEGER)
    return int.from_bytes(der[start:end], "big", signed=True)


def crl_serials(pem: bytes) -> frozenset[int]:
    """The serial numbers a PEM revocation list holds; ValueError if it is none."""
    der = _der(pem, "X509 CRL")
    start, _ = _inside(der, 0, _SEQUENCE)  # CertificateList
    pos, tbs_end = _inside(der, start, _SEQUENCE)  # tbsCertList
    tag, _, end = _item(der, pos)
    if tag == _INTEGER:  # version
        pos = end
    for _ in range(2):  # signature algorithm, issuer
        _, _, pos = _item(der, pos)
    tag, _, pos = _item(der, pos)  # thisUpdate
    if tag not in (_UTC_TIME, _GENERALIZED_TIME):
        raise ValueError("no thisUpdate")
    serials: set[int] = set()
    if pos < tbs_end:
        tag, _, end = _item(der, pos)
        if tag in (_UTC_TIME, _GENERALIZED_TIME):  # nextUpdate
            pos = end
    if pos < tbs_end:
        tag, start, end = _item(der, pos)
        if tag == _SEQUENCE:  # revokedCertificates
            entry = start
            while entry < end:
                inner, entry_end = _inside(der, entry, _SEQUENCE)
                value_start, value_end = _inside(der, inner, _INTEGER)
                serials.add(int.from_bytes(der[value_start:value_end], "big", signed=True))
                entry = entry_end
    return frozenset(serials)


class Revocations:
    """The serials on a node's revocation list, read again whenever its file changes."""

    def __init__(self, path: str, where: str = "tls.crl"):
        self.path = path
        self.where = where
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._serials = self._read()  # a bad list at start: one line, no node

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino)

    def _read(self) -> frozenset[int]:
        try:
            return crl_serials(Path(self.path).read_bytes())
        except OSError as exc:
            raise ConfigError(f"{self.where}: cannot read {self.path!r} ({exc.strerror})") from None
        except (ValueError, IndexError):
            raise ConfigError(f"{self.where}: {self.path!r} holds no PEM revocation list") from None

    def serials(self) -> frozenset[int]:
        stamp = self._stat()
        with self._lock:
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._serials = self._read()
                    log.warning(
                        "%s: %s changed; %d certificates revoked",
                        self.where,
                        self.path,
                        len(self._serials),
                        extra={"event": "crl_changed"},
                    )
                except ConfigError as exc:  # keep the last good list: never fewer revoked
                    log.error(
                        "%s; the last list read stays in force", exc, extra={"event": "crl_broken"}
                    )
            return self._serials

    def revoked(self, pem: bytes) -> bool:
        """Whether the certificate ``pem`` (a caller's) is on the list; an unreadable one
        counts as revoked."""
        try:
            return certificate_serial(pem) in self.serials()
        except (ValueError, IndexError):
            return True
