"""TLS material for tests of client settings: librdkafka and Python's ssl module refuse to build
a client whose CA, certificate or key files they cannot load, so these tests need real ones."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

#: the password that encrypts the client key :func:`make_pems` writes
KEY_PASSWORD = "key-s3cret"


def make_pems(directory: Path) -> Path:
    """Write ``ca.pem`` (a self-signed CA) and ``client.pem`` with ``client.key`` (encrypted by
    :data:`KEY_PASSWORD`) into ``directory`` with the openssl command; skip the test without it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command makes these tests' certificates")
    self_signed = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    encrypted = ["-passout", f"pass:{KEY_PASSWORD}"]
    for command in (
        [*self_signed, "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=test CA"],
        [*self_signed, *encrypted, "-keyout", "client.key", "-out", "client.pem", "-subj", "/CN=c"],
    ):
        subprocess.run(
            [openssl, *command], cwd=directory, check=True, capture_output=True, timeout=60
        )
    return directory
