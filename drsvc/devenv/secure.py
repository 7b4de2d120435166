"""What makes a local environment secured (``drsvc dev up --secure``): certificates, principals
and their passwords, and the settings brokers and clients use.

Every broker of a secured site has three listeners and no plaintext one:

* ``SASL_SSL`` (the clients' port, the one ``bootstrap_servers`` names): TLS, then a SCRAM-SHA-512
  login;
* ``SSL`` with client certificates required (mutual TLS): the brokers talk to each other there,
  and so does the environment's own administration (``drsvc-admin``);
* the KRaft controller listener, mutual TLS as well. A plaintext controller listener would have
  to let the anonymous user in as a super user while the authorizer loads (controllers answer
  before the metadata is read), and admin clients can reach controllers.

Authorization is Kafka's ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``:
a principal can do what an ACL grants it and nothing else. Only ``broker`` (the brokers'
certificate) and ``drsvc-admin`` are super users; ``drsvc-admin`` is never handed to a role.

Each principal has a certificate (``CN=<principal>``, so mutual TLS maps it to
``User:<principal>``) and a SCRAM password (random, in a file only the owner reads). The SCRAM
users are set through the admin API once the quorum runs (never on a command line), again at
every ``up``, so a rewritten password file is a rotation.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from drsvc.devenv.pki import Authority, Issued, ensure_authority, issue

#: the SASL mechanism of the clients' listener
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: the brokers' own principal (their certificate): a super user
BROKER_PRINCIPAL = "broker"
#: the environment's administration (SCRAM users, ACLs): a super user, never given to a role
ADMIN_PRINCIPAL = "drsvc-admin"
#: the principals of drsvc's roles, and the verifier's
ROLE_PRINCIPALS = (
    "drsvc-replicator",
    "drsvc-checkpoints",
    "drsvc-executor",
    "drsvc-verifier",
    "drsvc-acl-sync",
    "drsvc-migrator",
)
SUPER_USERS = (BROKER_PRINCIPAL, ADMIN_PRINCIPAL)
#: Kafka's rule from a certificate's subject to a principal: ``CN=x`` is ``User:x``
PRINCIPAL_MAPPING_RULES = "RULE:^CN=([A-Za-z0-9._-]+)$/$1/,DEFAULT"
#: the SCRAM login module the clients' listener uses
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclass(frozen=True)
class SecureFiles:
    """Where a secured environment keeps its certificates and passwords (under its state
    directory, in a directory only the owner reads)."""

    root: Path

    @property
    def tls_dir(self) -> Path:
        return self.root / "tls"

    @property
    def passwords_dir(self) -> Path:
        return self.root / "kafka"

    @property
    def ca_file(self) -> Path:
        return self.tls_dir / "ca.pem"

    def certificate(self, principal: str) -> Issued:
        """The files of ``principal``'s certificate (issued by :func:`prepare`)."""
        tls = self.tls_dir
        return Issued(tls / f"{principal}.crt", tls / f"{principal}.key", tls / f"{principal}.pem")

    def password_file(self, principal: str) -> Path:
        return self.passwords_dir / f"{principal}.password"

    def password(self, principal: str) -> str:
        return self.password_file(principal).read_text().strip()


def secure_files(state_dir: Path) -> SecureFiles:
    return SecureFiles(state_dir / "secure")


def prepare(state_dir: Path, principals: Iterable[str] = ()) -> SecureFiles:
    """Make (or keep) the authority, the brokers' certificate, and a certificate and a password
    for the administration, every role and each of ``principals``."""
    files = secure_files(state_dir)
    files.root.mkdir(parents=True, exist_ok=True)
    files.root.chmod(0o700)
    authority = ensure_authority(files.tls_dir)
    issue(authority, files.tls_dir, BROKER_PRINCIPAL, server=True, client=True)
    for principal in dict.fromkeys([ADMIN_PRINCIPAL, *ROLE_PRINCIPALS, *principals]):
        add_principal(files, authority, principal)
    return files


def add_principal(files: SecureFiles, authority: Authority, principal: str) -> None:
    """A client certificate and a SCRAM password for ``principal`` (kept when they exist)."""
    issue(authority, files.tls_dir, principal, server=False, client=True)
    path = files.password_file(principal)
    if path.is_file() and path.read_text().strip():
        return
    files.passwords_dir.mkdir(parents=True, exist_ok=True)
    files.passwords_dir.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(24) + "\n")


def principals(files: SecureFiles) -> list[str]:
    """Every principal with a password: the SCRAM users each ``up`` sets."""
    if not files.passwords_dir.is_dir():
        return []
    return sorted(p.name.removesuffix(".password") for p in files.passwords_dir.glob("*.password"))


def broker_properties(files: SecureFiles) -> dict[str, str]:
    """The TLS, SASL and authorization settings every broker of a secured site shares (the
    listeners themselves follow from the node's ports)."""
    broker = files.certificate(BROKER_PRINCIPAL)
    return {
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        **listener_login("SASL_SSL"),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker.bundle),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": PRINCIPAL_MAPPING_RULES,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(f"User:{p}" for p in SUPER_USERS),
    }


def listener_login(listener: str) -> dict[str, str]:
    """The SCRAM login setting of a SASL_SSL listener named ``listener``."""
    return {
        f"listener.name.{listener.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": SCRAM_LOGIN
    }


def mtls_settings(files: SecureFiles, principal: str = ADMIN_PRINCIPAL) -> dict[str, str]:
    """librdkafka settings for ``principal`` on the mutual-TLS listener."""
    cert = files.certificate(principal)
    return {
        "security.protocol": "SSL",
        "ssl.ca.location": str(files.ca_file),
        "ssl.certificate.location": str(cert.cert),
        "ssl.key.location": str(cert.key),
    }


def sasl_settings(files: SecureFiles, principal: str) -> dict[str, str]:
    """librdkafka settings for ``principal`` on the clients' SASL_SSL listener (the password is
    read now: these are for the environment's own clients, never written anywhere)."""
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(files.ca_file),
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.username": principal,
        "sasl.password": files.password(principal),
    }


def topology_security(files: SecureFiles, principal: str) -> dict[str, object]:
    """A topology cluster's ``security`` block for ``principal`` on the SASL_SSL listener: the
    password is named by its file, never inline."""
    return {
        "protocol": "SASL_SSL",
        "tls": {"ca_file": str(files.ca_file)},
        "sasl": {
            "mechanism": SCRAM_MECHANISM,
            "username": principal,
            "password_file": str(files.password_file(principal)),
        },
    }
