"""Serving the API over TLS itself (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``).

The files are checked before the server starts, so a wrong path, an unreadable file, a key that
does not belong to the certificate or a client CA that is not a certificate is an error naming
that file, instead of a server that starts and then fails every handshake.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drsvc.errors import ConfigError

__all__ = ["TlsFiles", "tls_files"]

#: what a PEM file of each kind holds, and how an error names it
_PEM_CERT = (b"-----BEGIN CERTIFICATE-----", "certificate")
_PEM_KEY = (b"PRIVATE KEY-----", "private key")


@dataclass(frozen=True)
class TlsFiles:
    """The server's certificate (chain) and key, and optionally the authority whose client
    certificates it requires (mutual TLS)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def check(self) -> ssl.SSLContext:
        """The server context these files make; :class:`ConfigError` naming the file that
        cannot be used, and why."""
        _pem(self.cert, _PEM_CERT, "TLS certificate (--tls-cert)")
        _pem(self.key, _PEM_KEY, "TLS key (--tls-key)")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as err:
            if "KEY_VALUES_MISMATCH" in str(err):
                raise ConfigError(
                    f"the TLS key {self.key} does not belong to the certificate {self.cert}"
                ) from err
            raise ConfigError(
                f"the TLS certificate {self.cert} and key {self.key} cannot be used: "
                f"{err.reason or err}"
            ) from err
        if self.client_ca is not None:
            _pem(self.client_ca, _PEM_CERT, "client CA (--tls-client-ca)")
            try:
                context.load_verify_locations(cafile=self.client_ca)
            except ssl.SSLError as err:
                raise ConfigError(
                    f"the client CA {self.client_ca} cannot be used: {err.reason or err}"
                ) from err
        return context

    def uvicorn_options(self) -> dict[str, Any]:
        """The ``uvicorn.Config`` settings that serve these files."""
        options: dict[str, Any] = {"ssl_certfile": str(self.cert), "ssl_keyfile": str(self.key)}
        if self.client_ca is not None:
            options["ssl_ca_certs"] = str(self.client_ca)
            options["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        return options


def tls_files(cert: Path | None, key: Path | None, client_ca: Path | None) -> TlsFiles | None:
    """The TLS files given on the command line (None: plain HTTP); both a certificate and a
    key, or neither."""
    if cert is None and key is None:
        if client_ca is not None:
            raise ConfigError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if cert is None or key is None:
        missing = "--tls-cert" if cert is None else "--tls-key"
        raise ConfigError(f"TLS needs both --tls-cert and --tls-key: {missing} is missing")
    files = TlsFiles(cert, key, client_ca)
    files.check()
    return files


def _pem(path: Path, kind: tuple[bytes, str], what: str) -> None:
    marker, noun = kind
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"cannot read the {what} {path}: {err.strerror}") from err
    if marker not in data:
        raise ConfigError(f"the {what} {path} holds no PEM {noun}")
