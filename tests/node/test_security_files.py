"""The files that guard a node — TLS certificates and keys, a Control token — as a careless
operator or an attacker hands them over. Each one no handshake or header could use is
refused when read, in one line naming the field and the file (gRPC itself only said it
could not bind, or that every node was unreachable); a key others can read is a warning;
and a peer's identity is the DNS names of its certificate's subjectAltName, never its CN."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path

import pytest

from starling.node.params import ConfigError
from starling.node.security import MAX_TOKEN_CHARS, TlsFiles, identities, read_token
from starling.orchestrator.deploy.certs import init_certs
from starling.orchestrator.execution.access import access_from_section


def craft(
    certs: Path,
    name: str,
    cn: str,
    sans: list[str],
    *,
    days: tuple[float, float] = (-1, 10),
    signer: str = "ca",
) -> TlsFiles:
    """A certificate (``name``.pem/.key in ``certs``) signed by ``signer``'s key there."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    issuer = x509.load_pem_x509_certificate((certs / f"{signer}.pem").read_bytes())
    issuer_key = serialization.load_pem_private_key((certs / f"{signer}.key").read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
        .issuer_name(issuer.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now + datetime.timedelta(days=days[0]))
        .not_valid_after(now + datetime.timedelta(days=days[1]))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if sans:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(s) for s in sans]), critical=False
        )
    cert = builder.sign(issuer_key, hashes.SHA256())  # type: ignore[arg-type]
    (certs / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pkcs8 = serialization.PrivateFormat.PKCS8
    key_pem = key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption())
    (certs / f"{name}.key").write_bytes(key_pem)
    (certs / f"{name}.key").chmod(0o600)
    return files(certs, name)


def files(certs: Path, who: str, ca: str = "ca") -> TlsFiles:
    return TlsFiles(str(certs / f"{ca}.pem"), str(certs / f"{who}.pem"), str(certs / f"{who}.key"))


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("certs")
    init_certs(folder, ["a", "b"])
    (folder / "empty").write_bytes(b"")
    (folder / "garbage").write_bytes(bytes(range(256)) * 2)
    (folder / "dir").mkdir()
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key((folder / "a.key").read_bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    (folder / "encrypted.key").write_bytes(encrypted)
    craft(folder, "expired", "a", ["a"], days=(-10, -1))
    craft(folder, "future", "a", ["a"], days=(1, 10))
    craft(folder, "cn-only", "a", [])
    craft(folder, "a-orchestrator", "a", ["a", "orchestrator"])
    return folder


def _with(tls: TlsFiles, **paths: Path) -> TlsFiles:
    return TlsFiles(**{**vars(tls), **{k: str(v) for k, v in paths.items()}})


NOT_A = "does not name 'a' as a DNS name in its subjectAltName"
# case: (whose files, the field replaced, by which file in the folder, the message after
# "tls.FIELD: 'FOLDER/FILE' ")
CASES = {
    "key of another certificate": ("a", "key", "b.key", "is not the key of tls.cert '{c}/a.pem'"),
    "empty key": ("a", "key", "empty", "holds no PEM private key"),
    "garbage key": ("a", "key", "garbage", "holds no PEM private key"),
    "certificate as key": ("a", "key", "a.pem", "holds no PEM private key"),
    "encrypted key": (
        "a",
        "key",
        "encrypted.key",
        "is encrypted; gRPC takes a key only unencrypted (mode 0600)",
    ),
    "empty certificate": ("a", "cert", "empty", "holds no PEM certificate"),
    "key as certificate": ("a", "cert", "a.key", "holds no PEM certificate"),
    "empty CA": ("a", "ca", "empty", "holds no PEM certificate"),
    "garbage CA": ("a", "ca", "garbage", "holds no PEM certificate"),
    "a node's certificate as CA": (
        "a",
        "ca",
        "b.pem",
        "holds no CA certificate (a node's or the orchestrator's instead",
    ),
    "expired": ("expired", "cert", "expired.pem", "expired on "),
    "not yet valid": ("future", "cert", "future.pem", "is valid only from "),
    "id in the CN only": ("cn-only", "cert", "cn-only.pem", f"{NOT_A} (it names none)"),
    "another node's certificate": ("b", "cert", "b.pem", f"{NOT_A} (it names b, localhost)"),
    "a node's naming the orchestrator too": (
        "a-orchestrator",
        "cert",
        "a-orchestrator.pem",
        "names 'orchestrator' too: with it node 'a' could call Control on every node",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_tls_files_no_handshake_could_use_are_refused_naming_the_field(certs, case):
    who, field, name, message = CASES[case]
    with pytest.raises(ConfigError) as refused:
        _with(files(certs, who), **{field: certs / name}).check("a")
    expected = f"tls.{field}: '{certs}/{name}' {message.format(c=certs)}"
    assert str(refused.value).startswith(expected), refused.value
    assert "BEGIN" not in str(refused.value)


def test_a_key_that_is_a_folder_is_named():
    with pytest.raises(ConfigError, match=r"^tls\.key: cannot read '/' \(Is a directory\)$"):
        TlsFiles("/etc/hostname", "/etc/hostname", "/").check("a")


def test_good_files_pass_and_a_key_others_can_read_is_a_warning(certs, tmp_path):
    assert files(certs, "a").check("a") == []
    bundle = tmp_path / "two-cas.pem"  # a CA bundle: trusting both is what it says
    init_certs(tmp_path / "other", ["a"])
    bundle.write_bytes((certs / "ca.pem").read_bytes() + (tmp_path / "other/ca.pem").read_bytes())
    shutil.copy(certs / "a.key", tmp_path / "open.key")
    (tmp_path / "open.key").chmod(0o644)
    open_key = _with(files(certs, "a"), ca=bundle, key=tmp_path / "open.key")
    assert open_key.check("a") == [
        f"tls.key: {tmp_path}/open.key is open to users other than its owner (mode 0644); "
        "chmod 600 it"
    ]


def test_the_orchestrators_files_are_checked_when_its_access_is_read(certs):
    tls = {k: v for k, v in vars(_with(files(certs, "orchestrator"), key=certs / "a.key")).items()}
    with pytest.raises(ConfigError, match=r"^backend\.tls\.key: .* is not the key of backend"):
        access_from_section({"tls": tls})
    with pytest.raises(ConfigError, match=r"does not name 'orchestrator' as a DNS name"):
        access_from_section({"tls": vars(files(certs, "a"))})
    assert access_from_section({"tls": vars(files(certs, "orchestrator"))}).tls is not None


@pytest.mark.parametrize(
    "content, message",
    [
        ("x" * (MAX_TOKEN_CHARS + 1), f"holds {MAX_TOKEN_CHARS + 1} characters"),
        ("abc\tdef", "holds a character other than printable ASCII"),
        ("café-token", "holds a character other than printable ASCII"),
        ("", "is empty"),
        (" \n\t\n", "is empty"),
    ],
)
def test_tokens_no_grpc_header_can_carry_are_refused(tmp_path, content, message):
    (tmp_path / "token").write_text(content)
    with pytest.raises(ConfigError) as refused:
        read_token(str(tmp_path / "token"), "token_file")
    assert str(refused.value).startswith(f"token_file: '{tmp_path}/token' {message}")
    assert content.strip() == "" or content not in str(refused.value)


def test_a_token_is_stripped_and_may_hold_inner_spaces(tmp_path):
    (tmp_path / "token").write_text("  s3cret token  \n\n")
    assert read_token(str(tmp_path / "token")) == "s3cret token"
    (tmp_path / "token").write_text("y" * MAX_TOKEN_CHARS)
    assert read_token(str(tmp_path / "token")) == "y" * MAX_TOKEN_CHARS


class _Context:
    def __init__(self, auth: dict[str, list[bytes]]):
        self.auth = auth

    def auth_context(self) -> dict[str, list[bytes]]:
        return self.auth


def test_identities_are_the_dns_names_of_the_san_never_the_cn_or_an_ip():
    # What gRPC reports for a certificate with no SAN and CN=orchestrator: its peer
    # identities fall back to the CN; the node must not.
    cn_only = {"x509_common_name": [b"orchestrator"], "transport_security_type": [b"ssl"]}
    assert identities(_Context(cn_only)) == set()  # type: ignore[arg-type]
    san = {
        "x509_common_name": [b"orchestrator"],
        "x509_subject_alternative_name": [b"a", b"127.0.0.1"],
        "peer_dns": [b"a"],
        "peer_ip": [b"127.0.0.1"],
    }
    assert identities(_Context(san)) == {"a"}  # type: ignore[arg-type]
    assert identities(_Context({})) == set()  # type: ignore[arg-type]


def test_a_certificate_of_another_ca_is_refused_at_start(certs, tmp_path):
    """``node serve`` started, and only failed later at every handshake, when its
    certificate was not signed by its --tls-ca: the chain is checked at start now."""
    init_certs(tmp_path / "other", ["a"])
    stranger = files(tmp_path / "other", "a")
    with pytest.raises(ConfigError) as refused:
        _with(stranger, ca=certs / "ca.pem").check("a")
    assert str(refused.value) == (
        f"tls.cert: '{tmp_path}/other/a.pem' does not chain to tls.ca '{certs}/ca.pem' "
        "(OpenSSL: certificate signature failure); was it signed by another CA?"
    )


def test_a_revoked_certificate_or_a_list_of_another_ca_is_refused_at_start(tmp_path):
    from starling.orchestrator.deploy.certs import revoke_certs

    folder, other = tmp_path / "certs", tmp_path / "other"
    init_certs(folder, ["a", "b", "c"])
    init_certs(other, ["x", "y"])
    revoke_certs(folder, ["c"])
    revoke_certs(other, ["y"])
    assert files(folder, "a").check("a") == []  # a list without a: fine
    with_list = TlsFiles(*vars(files(folder, "a")).values())
    assert _with(with_list, crl=folder / "crl.pem").check("a") == []
    shutil.copy(folder / "b.pem", tmp_path / "b-old.pem")
    shutil.copy(folder / "b.key", tmp_path / "b-old.key")
    revoke_certs(folder, ["b"])
    revoked = TlsFiles(
        str(folder / "ca.pem"),
        str(tmp_path / "b-old.pem"),
        str(tmp_path / "b-old.key"),
        str(folder / "crl.pem"),
    )
    with pytest.raises(ConfigError, match=r"^tls\.cert: '.*b-old\.pem' is revoked by tls\.crl$"):
        revoked.check("b")
    with pytest.raises(ConfigError) as refused:
        _with(with_list, crl=other / "crl.pem").check("a")
    assert str(refused.value).startswith(f"tls.crl: '{other}/crl.pem' cannot be used with tls.ca")
    with pytest.raises(ConfigError, match="holds no PEM revocation list"):
        _with(with_list, crl=folder / "a.pem").check("a")


def test_a_clock_in_1970_and_a_certificate_about_to_expire_are_said(certs, monkeypatch):
    soon = craft(certs, "soon", "a", ["a"], days=(-1, 3))
    (warning,) = soon.check("a")
    assert warning.startswith(f"tls.cert: {certs}/soon.pem expires in 3.0 days; renew it")
    import time as clock

    monkeypatch.setattr(clock, "time", lambda: 3600.0)  # a board booted without a clock
    with pytest.raises(ConfigError, match=r"^this machine's clock says 1970-01-01: no certif"):
        files(certs, "a").check("a")


def test_serials_are_read_from_certificates_and_lists_as_the_ca_wrote_them(tmp_path):
    from cryptography import x509

    from starling.node.revocation import certificate_serial, crl_serials
    from starling.orchestrator.deploy.certs import revoke_certs

    init_certs(tmp_path, ["a", "b", "c"])
    serials = {
        who: x509.load_pem_x509_certificate((tmp_path / f"{who}.pem").read_bytes()).serial_number
        for who in ("a", "b", "c")
    }
    for who, serial in serials.items():
        assert certificate_serial((tmp_path / f"{who}.pem").read_bytes()) == serial
    revoke_certs(tmp_path, ["a", "c"])
    assert crl_serials((tmp_path / "crl.pem").read_bytes()) == {serials["a"], serials["c"]}
    with pytest.raises(ValueError):
        crl_serials((tmp_path / "b.pem").read_bytes())
