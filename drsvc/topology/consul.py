"""How drsvc reaches Consul, as a topology states it: the ``consul:`` block.

Everything here is a default: the environment variables Consul's own tools read
(``CONSUL_HTTP_ADDR``, ``CONSUL_HTTP_TOKEN_FILE``, ``CONSUL_CACERT``, ...) and drsvc's
``DRSVC_CONSUL_HTTP_ADDR`` win over it (:mod:`drsvc.adapters.consul_access` resolves them).

As for clusters (:mod:`drsvc.topology.security`), a topology never holds a secret: the ACL token
comes from a file or an environment variable the topology names, read when a client is built, so
a topology can be loaded (and shown) without the token, and a rotated token file is picked up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from drsvc.topology.base import EnvVarName, FrozenModel, resolve_path

ConsulScheme = Literal["http", "https"]

#: The processes that hold a Consul token of their own (the policies they need differ): the
#: replication workers and heartbeats, the checkpoint stream, the failover executor (commands,
#: the API, the controller) and applications on the client library.
ConsulRole = Literal["replicator", "checkpoints", "executor", "application"]

#: Keys that would put a token in the file; refused with a pointer to token_file or token_env
#: rather than pydantic's generic "extra inputs are not permitted".
_INLINE_TOKEN_KEYS = ("token", "secret_id", "acl_token")
_INLINE_REFUSAL = (
    "an inline Consul token is refused (a topology is shown and copied around): name a file "
    "with token_file or an environment variable with token_env"
)


def parse_consul_address(value: str) -> tuple[ConsulScheme | None, str]:
    """``host:port``, ``http://host:port`` or ``https://host:port`` -> (scheme or None,
    ``host:port``). Raises ValueError saying what is wrong, without the rest of the value."""
    scheme: ConsulScheme | None = None
    rest = value.strip()
    if "://" in rest:
        given, _, rest = rest.partition("://")
        if given == "http":
            scheme = "http"
        elif given == "https":
            scheme = "https"
        else:
            # unix:// works for Consul's own CLI; the HTTP library drsvc uses has no such transport
            raise ValueError(f"scheme {given!r} is not supported; use http:// or https://")
    if "/" in rest:
        # Consul's CLI accepts a path prefix for a reverse proxy; py-consul builds its URLs
        # from host and port only, so a prefix would be dropped without a word
        raise ValueError(f"a path after host:port is not supported (got {value!r})")
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"expected host:port, optionally after http:// or https:// (got {value!r})"
        )
    return scheme, f"{host}:{port}"


def _check_address(value: str) -> str:
    parse_consul_address(value)
    return value.strip()


ConsulAddress = Annotated[str, AfterValidator(_check_address)]


def _refuse_inline_token(data: Any) -> Any:
    if isinstance(data, dict):
        inline = [key for key in _INLINE_TOKEN_KEYS if key in data]
        if inline:
            raise ValueError(f"{inline[0]}: {_INLINE_REFUSAL}")
    return data


class _HoldsTokenRef(FrozenModel):
    """A model with ``token_file``/``token_env`` fields: never an inline token, and the file
    relative to the topology file."""

    @model_validator(mode="before")
    @classmethod
    def _no_inline_token(cls, data: Any) -> Any:
        return _refuse_inline_token(data)

    # check_fields=False: the field is declared by each model that holds a token.
    @field_validator("token_file", check_fields=False)
    @classmethod
    def _relative_to_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return resolve_path(value, info)


class ConsulTokenRef(_HoldsTokenRef):
    """Where an ACL token is: a file (re-read when Consul refuses it, so it can be rotated) or
    an environment variable. Never the token itself."""

    token_file: Path | None = Field(
        default=None,
        description="File holding the token (surrounding whitespace ignored); relative to the"
        " topology file.",
    )
    token_env: EnvVarName | None = Field(
        default=None, description="Environment variable holding the token."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> ConsulTokenRef:
        if (self.token_file is None) == (self.token_env is None):
            raise ValueError("give exactly one of token_file or token_env")
        return self


class ConsulTlsConfig(FrozenModel):
    """TLS to Consul's HTTPS API; files are PEM, relative paths relative to the topology file.
    An encrypted key is not supported (the HTTP library cannot be given its password)."""

    ca_file: Path | None = Field(
        default=None,
        description="CA bundle that signed Consul's certificate (default: the system's CAs).",
    )
    cert_file: Path | None = Field(
        default=None,
        description="Client certificate, when Consul verifies clients (with key_file).",
    )
    key_file: Path | None = Field(default=None, description="Unencrypted private key of cert_file.")

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _relative_to_file(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        return resolve_path(value, info)

    @model_validator(mode="after")
    def _cert_and_key_together(self) -> ConsulTlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: give both or neither")
        return self


class ConsulConfig(_HoldsTokenRef):
    """Defaults for reaching Consul; the CONSUL_* environment variables and
    DRSVC_CONSUL_HTTP_ADDR win over each of them."""

    address: ConsulAddress | None = Field(
        default=None,
        description="host:port of the Consul agent, optionally after http:// or https://"
        " (default: DRSVC_CONSUL_HTTP_ADDR, CONSUL_HTTP_ADDR, else the local environment's).",
    )
    scheme: ConsulScheme | None = Field(
        default=None,
        description="http or https (default: the address's scheme, else http). Nothing turns"
        " https back into http.",
    )
    tls: ConsulTlsConfig | None = Field(default=None, description="TLS settings; only with https.")
    token_file: Path | None = Field(
        default=None,
        description="File holding the ACL token of every drsvc process without a token of its"
        " role; relative to the topology file. Never an inline token.",
    )
    token_env: EnvVarName | None = Field(
        default=None, description="Environment variable holding that token, instead of a file."
    )
    tokens: dict[ConsulRole, ConsulTokenRef] = Field(
        default_factory=dict,
        description="Tokens by role (replicator, checkpoints, executor, application), each a"
        " token_file or token_env; a role without one uses token_file or token_env.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ConsulConfig:
        if self.token_file is not None and self.token_env is not None:
            raise ValueError("give at most one of token_file or token_env")
        address_scheme = None if self.address is None else parse_consul_address(self.address)[0]
        if address_scheme is not None and self.scheme is not None and address_scheme != self.scheme:
            raise ValueError(
                f"address says {address_scheme}:// but scheme is {self.scheme}; give one of them"
            )
        if self.tls is not None and not self.uses_https:
            raise ValueError(
                "a tls block is set but Consul is reached over http; set scheme: https"
            )
        return self

    @property
    def uses_https(self) -> bool:
        """True when the file asks for https (by scheme or by the address's)."""
        address_scheme = None if self.address is None else parse_consul_address(self.address)[0]
        return "https" in (self.scheme, address_scheme)

    def token_ref(self, role: ConsulRole | None = None) -> ConsulTokenRef | None:
        """Where ``role``'s token is: its own, else the topology's general one (None: none)."""
        if role is not None and role in self.tokens:
            return self.tokens[role]
        if self.token_file is not None:
            return ConsulTokenRef(token_file=self.token_file)
        if self.token_env is not None:
            return ConsulTokenRef(token_env=self.token_env)
        return None
