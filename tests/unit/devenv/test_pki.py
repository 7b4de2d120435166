"""The local environment's certificate authority: certificates a TLS handshake accepts, names a
client checks, files only their owner reads, and a second run that keeps what the first made."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from drsvc.devenv.pki import LOCAL_NAMES, ensure_authority, issue
from drsvc.errors import LocalEnvError


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str) -> str:
    """Run one TLS handshake over a socket pair; return the client certificate's common name
    the server saw ('' without one)."""
    left, right = socket.socketpair()
    seen: list[str] = []
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(left, server_side=True) as tls:
                peer = tls.getpeercert()
                subject = dict(x[0] for x in peer["subject"]) if peer else {}
                seen.append(str(subject.get("commonName", "")))
                tls.sendall(b"ok")
        except BaseException as err:
            failures.append(err)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(right, server_hostname=host) as tls:
            assert tls.recv(2) == b"ok"
    finally:
        thread.join(10)
    if failures:
        raise failures[0]
    return seen[0]


def test_a_server_certificate_passes_a_checking_client_and_a_client_certificate_names_its_principal(
    tmp_path: Path,
) -> None:
    ca = ensure_authority(tmp_path)
    broker = issue(ca, tmp_path, "broker", server=True)
    app = issue(ca, tmp_path, "app-orders", server=False)

    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(broker.cert, broker.key)
    server.load_verify_locations(ca.cert)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=str(ca.cert))
    client.load_cert_chain(app.cert, app.key)

    for host in LOCAL_NAMES:
        assert _handshake(server, client, host) == "app-orders"


def test_a_client_refuses_a_name_the_certificate_does_not_carry(tmp_path: Path) -> None:
    ca = ensure_authority(tmp_path)
    broker = issue(ca, tmp_path, "broker", server=True)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(broker.cert, broker.key)
    client = ssl.create_default_context(cafile=str(ca.cert))
    with pytest.raises((ssl.SSLCertVerificationError, ssl.SSLError, ConnectionError, OSError)):
        _handshake(server, client, "broker.example")


def test_the_bundle_holds_the_chain_and_the_key_and_keys_are_private(tmp_path: Path) -> None:
    directory = tmp_path / "secure"
    ca = ensure_authority(directory)
    issued = issue(ca, directory, "drsvc-replicator", server=False)
    bundle = issued.bundle.read_text()
    assert bundle.count("BEGIN CERTIFICATE") == 2
    assert "BEGIN PRIVATE KEY" in bundle  # PKCS#8, what Kafka's PEM key store reads
    for private in (ca.key, issued.key, issued.bundle):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    cert = x509.load_pem_x509_certificate(issued.cert.read_bytes())
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "drsvc-replicator"
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]


def test_a_second_run_keeps_what_the_first_issued_and_new_names_issue_again(
    tmp_path: Path,
) -> None:
    ca = ensure_authority(tmp_path)
    first = issue(ca, tmp_path, "consul", server=True)
    pem = first.cert.read_bytes()
    assert ensure_authority(tmp_path) == ca
    assert issue(ca, tmp_path, "consul", server=True).cert.read_bytes() == pem
    again = issue(ca, tmp_path, "consul", server=True, names=["server.dc1.consul"])
    assert again.cert.read_bytes() != pem
    cert = x509.load_pem_x509_certificate(again.cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(n.value) for n in names} == {*LOCAL_NAMES, "server.dc1.consul"}


def test_a_certificate_of_another_authority_is_issued_again(tmp_path: Path) -> None:
    ca = ensure_authority(tmp_path / "one")
    other = ensure_authority(tmp_path / "two")
    issue(other, tmp_path / "one", "broker", server=True)
    issued = issue(ca, tmp_path / "one", "broker", server=True)
    cert = x509.load_pem_x509_certificate(issued.cert.read_bytes())
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert.read_bytes()))


def test_a_certificate_for_nothing_is_refused(tmp_path: Path) -> None:
    ca = ensure_authority(tmp_path)
    with pytest.raises(LocalEnvError, match="neither a server nor a client"):
        issue(ca, tmp_path, "nobody", server=False, client=False)
