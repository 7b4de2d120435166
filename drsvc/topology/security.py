"""Client security of a cluster: TLS and SASL settings, and the librdkafka settings they give.

A topology never holds a secret: passwords (and, if wanted, user names) come from environment
variables or files named in the topology, and are read by :meth:`SecurityConfig.client_settings`
when a client is built, not when the file is loaded. Loading a topology therefore works on a
machine without the secrets (CI, ``drsvc topology validate``), and a rotated password is picked up
by the next client.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from drsvc.errors import ConfigError
from drsvc.topology.base import EnvVarName, FrozenModel, resolve_path

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class TlsConfig(FrozenModel):
    """TLS client settings; files are PEM. Relative paths are relative to the topology file."""

    ca_file: Path | None = Field(
        default=None, description="CA bundle that signed the brokers' certificates."
    )
    cert_file: Path | None = Field(
        default=None, description="Client certificate, for mutual TLS (with key_file)."
    )
    key_file: Path | None = Field(
        default=None, description="Private key of cert_file, for mutual TLS."
    )
    key_password_env: EnvVarName | None = Field(
        default=None, description="Environment variable holding key_file's password, if any."
    )

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _relative_to_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return resolve_path(value, info)

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: give both or neither")
        if self.key_password_env is not None and self.key_file is None:
            raise ValueError("key_password_env is set but there is no key_file")
        return self


class SaslConfig(FrozenModel):
    """SASL credentials: the username inline or from the environment, the password never inline."""

    mechanism: SaslMechanism = Field(description="SASL mechanism the brokers expect.")
    username: str | None = Field(default=None, description="User name (not a secret).")
    username_env: EnvVarName | None = Field(
        default=None, description="Environment variable holding the user name, instead of username."
    )
    password_env: EnvVarName | None = Field(
        default=None, description="Environment variable holding the password."
    )
    password_file: Path | None = Field(
        default=None, description="File holding the password (trailing newline ignored)."
    )

    @field_validator("password_file")
    @classmethod
    def _relative_to_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return resolve_path(value, info)

    @model_validator(mode="after")
    def _one_source_each(self) -> SaslConfig:
        if (self.username is None) == (self.username_env is None):
            raise ValueError("give exactly one of username or username_env")
        if (self.password_env is None) == (self.password_file is None):
            raise ValueError(
                "give exactly one of password_env or password_file (passwords are never inline)"
            )
        return self


class SecurityConfig(FrozenModel):
    """How clients authenticate to a cluster and encrypt traffic."""

    protocol: SecurityProtocol = Field(
        default="PLAINTEXT", description="Kafka security protocol of the client listener."
    )
    tls: TlsConfig | None = Field(
        default=None, description="TLS settings; only with SSL or SASL_SSL."
    )
    sasl: SaslConfig | None = Field(
        default=None, description="SASL settings; required with SASL_PLAINTEXT or SASL_SSL."
    )

    @model_validator(mode="after")
    def _blocks_match_protocol(self) -> SecurityConfig:
        uses_sasl = self.protocol.startswith("SASL_")
        uses_tls = self.protocol in {"SSL", "SASL_SSL"}
        if uses_sasl and self.sasl is None:
            raise ValueError(f"protocol {self.protocol} needs a sasl block")
        if not uses_sasl and self.sasl is not None:
            raise ValueError(
                f"a sasl block is set but protocol is {self.protocol}; use SASL_SSL or"
                " SASL_PLAINTEXT"
            )
        if not uses_tls and self.tls is not None:
            raise ValueError(
                f"a tls block is set but protocol is {self.protocol}; use SSL or SASL_SSL"
            )
        return self

    def client_settings(self, cluster_alias: str, env: Mapping[str, str]) -> dict[str, str]:
        """librdkafka security settings, secrets read now from ``env`` and files.

        Raises :class:`ConfigError` naming the cluster and the missing variable or file.
        """
        secrets = _SecretReader(cluster_alias, env)
        settings: dict[str, str] = {"security.protocol": self.protocol}
        tls = self.tls
        if tls is not None:
            for key, path, field in (
                ("ssl.ca.location", tls.ca_file, "ca_file"),
                ("ssl.certificate.location", tls.cert_file, "cert_file"),
                ("ssl.key.location", tls.key_file, "key_file"),
            ):
                if path is not None:
                    settings[key] = str(secrets.existing_file(path, f"security.tls.{field}"))
            if tls.key_password_env is not None:
                settings["ssl.key.password"] = secrets.from_env(
                    tls.key_password_env, "security.tls.key_password_env"
                )
        sasl = self.sasl
        if sasl is not None:
            settings["sasl.mechanism"] = sasl.mechanism
            if sasl.username_env is not None:
                settings["sasl.username"] = secrets.from_env(
                    sasl.username_env, "security.sasl.username_env"
                )
            elif sasl.username is not None:
                settings["sasl.username"] = sasl.username
            if sasl.password_env is not None:
                settings["sasl.password"] = secrets.from_env(
                    sasl.password_env, "security.sasl.password_env"
                )
            elif sasl.password_file is not None:
                settings["sasl.password"] = secrets.from_file(
                    sasl.password_file, "security.sasl.password_file"
                )
        return settings


class _SecretReader:
    """Reads secrets for one cluster; every error names the cluster and the field."""

    def __init__(self, cluster_alias: str, env: Mapping[str, str]) -> None:
        self._where = f"cluster '{cluster_alias}'"
        self._env = env

    def from_env(self, name: str, field: str) -> str:
        value = self._env.get(name)
        if not value:
            state = "is empty" if name in self._env else "is not set"
            raise ConfigError(
                f"{self._where}: environment variable {name} (named by {field}) {state}"
            )
        return value

    def existing_file(self, path: Path, field: str) -> Path:
        if not path.is_file():
            raise ConfigError(f"{self._where}: {field}: no such file: {path}")
        return path

    def from_file(self, path: Path, field: str) -> str:
        try:
            value = self.existing_file(path, field).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as err:
            raise ConfigError(f"{self._where}: {field}: cannot read {path}: {err}") from err
        if not value:
            raise ConfigError(f"{self._where}: {field}: {path} is empty")
        return value
