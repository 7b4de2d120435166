"""The local environment's own certificate authority, and the certificates it issues.

A secured local environment (``drsvc dev up --secure``) needs TLS for every broker listener,
for Consul and for each client principal that authenticates with a certificate. This module
makes one authority per environment and issues leaf certificates from it, with no tool but
the ``cryptography`` package.

Every file is PEM. For a name ``n`` the directory holds ``n.crt`` (the certificate followed by
the authority's, the chain every TLS stack accepts), ``n.key`` (its private key, PKCS#8,
unencrypted) and ``n.pem`` (chain and key in one file: Kafka's PEM key store reads that).
Private keys are written with mode 0600 and the directory with 0700. Issuing is idempotent: a
certificate that exists, was issued by this authority and has the wanted names is kept, so a
second ``up`` reuses what the first made.

The subject of a leaf is ``CN=<name>`` alone, so brokers map a client certificate to the
principal ``User:<name>`` with one simple rule.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from drsvc.errors import LocalEnvError

#: how long the authority and the certificates are valid (a local environment lives days, not
#: years; long enough never to expire under a test run)
AUTHORITY_DAYS = 3650
LEAF_DAYS = 825
#: the names every server certificate carries: clients connect to 127.0.0.1 and check it
LOCAL_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Authority:
    """The environment's certificate authority: its certificate (what every client trusts) and
    its key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Issued:
    """One issued certificate's files (see the module docstring)."""

    cert: Path
    key: Path
    bundle: Path


def ensure_authority(directory: Path) -> Authority:
    """The authority in ``directory``, made now unless it exists."""
    _private_dir(directory)
    authority = Authority(directory / "ca.pem", directory / "ca.key")
    if authority.cert.is_file() and authority.key.is_file():
        return authority
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "drsvc local environment CA")])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=AUTHORITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write_private(authority.key, _key_pem(key))
    _write_public(authority.cert, cert.public_bytes(serialization.Encoding.PEM))
    return authority


def issue(
    authority: Authority,
    directory: Path,
    name: str,
    *,
    server: bool,
    client: bool = True,
    names: Sequence[str] = (),
) -> Issued:
    """A certificate for ``name`` (its common name), issued by ``authority`` into ``directory``.

    ``server``: it serves TLS (a broker, Consul), so it names ``LOCAL_NAMES`` and ``names`` as
    subject alternative names; ``client``: it authenticates to a server (mutual TLS)."""
    if not server and not client:
        raise LocalEnvError(f"certificate {name!r}: neither a server nor a client certificate")
    _private_dir(directory)
    files = Issued(directory / f"{name}.crt", directory / f"{name}.key", directory / f"{name}.pem")
    alt_names = tuple(dict.fromkeys([*LOCAL_NAMES, *names])) if server else ()
    ca_cert = x509.load_pem_x509_certificate(authority.cert.read_bytes())
    if _still_good(files, ca_cert, alt_names):
        return files
    ca_key = serialization.load_pem_private_key(authority.key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise LocalEnvError(f"the authority's key {authority.key} is not the kind this makes")
    key = ec.generate_private_key(ec.SECP256R1())
    usages = [
        *([ExtendedKeyUsageOID.SERVER_AUTH] if server else []),
        *([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []),
    ]
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=True,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if alt_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in alt_names]), critical=False
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    chain = cert.public_bytes(serialization.Encoding.PEM) + authority.cert.read_bytes()
    key_pem = _key_pem(key)
    _write_private(files.key, key_pem)
    _write_private(files.bundle, chain + key_pem)
    _write_public(files.cert, chain)
    return files


def _still_good(files: Issued, ca_cert: x509.Certificate, alt_names: tuple[str, ...]) -> bool:
    """Does ``files`` hold a certificate of this authority, valid for a while, with these
    names? (Anything else is issued again.)"""
    if not (files.cert.is_file() and files.key.is_file() and files.bundle.is_file()):
        return False
    try:
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    except ValueError:
        return False
    if cert.issuer != ca_cert.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
    except (ValueError, TypeError, InvalidSignature):
        return False
    if cert.not_valid_after_utc - _now() < datetime.timedelta(days=30):
        return False
    try:
        found = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        have = {str(n.value) for n in found}
    except x509.ExtensionNotFound:
        have = set()
    return have == set(alt_names)


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _private_dir(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)


def _write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner may read, never readable by others even for a moment."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def _write_public(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
