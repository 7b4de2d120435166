"""The API over TLS: certificates issued by the dev environment's authority, one request served
over HTTPS by an in-process server (and one refused without a client certificate when the API
requires one), and every unusable file named before the server starts."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
import requests
import uvicorn

from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.reference import _RoutesOnly
from drsvc.api.service import ApiService
from drsvc.api.tls import TlsFiles, tls_files
from drsvc.devenv.pki import Authority, Issued, ensure_authority, issue
from drsvc.errors import ConfigError


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Authority, Issued, Issued]:
    directory = tmp_path_factory.mktemp("pki")
    authority = ensure_authority(directory / "ca")
    server = issue(authority, directory / "certs", "api", server=True, client=False)
    client = issue(authority, directory / "certs", "oncall", server=False, client=True)
    return authority, server, client


@contextmanager
def serving(files: TlsFiles) -> Iterator[str]:
    """The API (routes only: /healthz touches no service) over HTTPS on a free port."""
    app = create_app(cast(ApiService, _RoutesOnly()), ApiAuth())
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        log_config=None,
        timeout_graceful_shutdown=1,
        **files.uvicorn_options(),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def test_one_request_over_https(pki: tuple[Authority, Issued, Issued]) -> None:
    authority, server, _client = pki
    files = tls_files(server.cert, server.key, None)
    assert files is not None
    with serving(files) as url:
        answer = requests.get(url + "/healthz", verify=str(authority.cert), timeout=10)
    assert answer.json() == {"status": "ok"}


def test_a_required_client_certificate_is_checked(pki: tuple[Authority, Issued, Issued]) -> None:
    authority, server, client = pki
    files = tls_files(server.cert, server.key, authority.cert)
    assert files is not None
    with serving(files) as url:
        with pytest.raises(requests.exceptions.RequestException):
            requests.get(url + "/healthz", verify=str(authority.cert), timeout=10)
        answer = requests.get(
            url + "/healthz",
            verify=str(authority.cert),
            cert=(str(client.cert), str(client.key)),
            timeout=10,
        )
    assert answer.status_code == 200


def test_unusable_files_are_named_before_the_server_starts(
    pki: tuple[Authority, Issued, Issued], tmp_path: Path
) -> None:
    authority, server, client = pki
    cases = [
        ((tmp_path / "nope.crt", server.key, None), f"cannot read the TLS certificate "
         f"(--tls-cert) {tmp_path / 'nope.crt'}"),
        ((server.cert, client.key, None), f"the TLS key {client.key} does not belong to the "
         f"certificate {server.cert}"),
        ((server.key, server.key, None), f"the TLS certificate (--tls-cert) {server.key} holds "
         "no PEM certificate"),
        ((server.cert, server.cert, None), f"the TLS key (--tls-key) {server.cert} holds no PEM "
         "private key"),
        ((server.cert, server.key, server.key), f"the client CA (--tls-client-ca) {server.key} "
         "holds no PEM certificate"),
        ((server.cert, None, None), "--tls-key is missing"),
        ((None, None, authority.cert), "--tls-client-ca needs --tls-cert and --tls-key"),
    ]  # fmt: skip
    for given, message in cases:
        with pytest.raises(ConfigError) as found:
            tls_files(*given)
        assert message in str(found.value), (given, str(found.value))
    assert tls_files(None, None, None) is None
