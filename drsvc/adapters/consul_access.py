"""How drsvc reaches Consul: the address, the scheme, the TLS files and the ACL token.

:func:`resolve_consul_access` reads them the way Consul's own CLI and Go API client do, so an
operator who has set up ``consul`` in a shell has set up drsvc too. First given wins:

* token: an explicit token file, an explicit token, ``CONSUL_HTTP_TOKEN_FILE``,
  ``CONSUL_HTTP_TOKEN``, then the topology's ``consul`` block (the role's token, else its
  general one);
* address: an explicit one, ``DRSVC_CONSUL_HTTP_ADDR`` (drsvc's own variable, which has always
  chosen the agent), ``CONSUL_HTTP_ADDR``, then the topology's; each may start with ``http://``
  or ``https://``. None left means the caller's own default (the local environment's agent);
* scheme: https when anything asks for it (the address in use, ``CONSUL_HTTP_ADDR`` when it
  names that same agent, ``CONSUL_HTTP_SSL``, the topology); as in Consul's client, nothing
  turns a request for TLS back into plain http;
* CA file: ``CONSUL_CACERT``, then the topology's; client certificate and key:
  ``CONSUL_CLIENT_CERT`` with ``CONSUL_CLIENT_KEY``, then the topology's pair;
* ``CONSUL_HTTP_SSL_VERIFY=false`` turns certificate checks off, as for Consul, with a warning.

py-consul is not left to read the environment itself: it lets ``CONSUL_HTTP_TOKEN`` override the
token it is given and ignores ``CONSUL_HTTP_TOKEN_FILE``, ``CONSUL_CACERT`` and
``CONSUL_CLIENT_CERT``/``KEY``, so :class:`~drsvc.adapters.consul_client.ConsulClient` hands it
every setting explicitly and sets the token after building it.

Variables Consul knows but drsvc cannot honour (``CONSUL_HTTP_AUTH``, ``CONSUL_CAPATH``,
``CONSUL_TLS_SERVER_NAME``, ``CONSUL_NAMESPACE``, ``CONSUL_PARTITION``) are refused: ignoring
one would reach another namespace, or trust other certificates, than the operator asked for.

The token never appears in a ``repr``, a log line or an error: a :class:`TokenSource` shows and
names where the token comes from (the file, the variable, "the token argument"), not its value.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from drsvc.errors import ConfigError
from drsvc.topology.consul import ConsulConfig, ConsulRole, ConsulScheme, parse_consul_address

__all__ = [
    "ConsulAccess",
    "ConsulEndpoint",
    "TokenSource",
    "consul_endpoint",
    "first_consul_address",
    "resolve_consul_access",
]

log = logging.getLogger(__name__)

DRSVC_ADDR_ENV = "DRSVC_CONSUL_HTTP_ADDR"
ADDR_ENV = "CONSUL_HTTP_ADDR"
TOKEN_ENV = "CONSUL_HTTP_TOKEN"
TOKEN_FILE_ENV = "CONSUL_HTTP_TOKEN_FILE"
SSL_ENV = "CONSUL_HTTP_SSL"
SSL_VERIFY_ENV = "CONSUL_HTTP_SSL_VERIFY"
CACERT_ENV = "CONSUL_CACERT"
CLIENT_CERT_ENV = "CONSUL_CLIENT_CERT"
CLIENT_KEY_ENV = "CONSUL_CLIENT_KEY"

#: Consul's variables that drsvc cannot honour, and what to do instead.
UNSUPPORTED_ENV: Mapping[str, str] = {
    "CONSUL_HTTP_AUTH": "HTTP basic authentication to Consul is not supported; use an ACL token",
    "CONSUL_CAPATH": f"a CA directory is not supported; put the CAs in one file for {CACERT_ENV}",
    "CONSUL_TLS_SERVER_NAME": "a TLS server name other than the address's host is not"
    " supported; reach Consul by a name its certificate carries",
    "CONSUL_NAMESPACE": "Consul Enterprise namespaces are not supported",
    "CONSUL_PARTITION": "Consul Enterprise admin partitions are not supported",
}

# strconv.ParseBool's spellings, which Consul's client accepts for its boolean variables
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class TokenSource:
    """Where the ACL token comes from, able to read it; shows only where, never the token.

    A file is read when asked (:meth:`read`), so a client can pick up a rotated token; a value
    (an argument or a variable's) was taken when the access was resolved.
    """

    __slots__ = ("_file", "_value", "origin")

    def __init__(self, origin: str, *, file: Path | None = None, value: str | None = None) -> None:
        if (file is None) == (value is None):
            raise ValueError("a token source is a file or a value")
        #: where the token comes from, for messages: e.g. "CONSUL_HTTP_TOKEN_FILE (/etc/t)"
        self.origin = origin
        self._file = file
        self._value = value

    @property
    def file(self) -> Path | None:
        """The file the token is read from (None: a value given once)."""
        return self._file

    def read(self) -> str:
        """The token, read now from the file (raises :class:`ConfigError` naming the file)."""
        if self._value is not None:
            return self._value
        assert self._file is not None
        try:
            token = self._file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            reason = (
                err.strerror if isinstance(err, OSError) and err.strerror else type(err).__name__
            )
            # not chained: a decode error quotes a byte of the file, that is of the token
            raise ConfigError(f"Consul ACL token: cannot read {self.origin}: {reason}") from None
        if not token:
            raise ConfigError(f"Consul ACL token: {self.origin} is empty")
        return token

    def __repr__(self) -> str:
        return f"TokenSource({self.origin})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenSource):
            return NotImplemented
        return (self.origin, self._file, self._value) == (other.origin, other._file, other._value)

    def __hash__(self) -> int:
        return hash((self.origin, self._file, self._value))


@dataclass(frozen=True)
class ConsulEndpoint:
    """One agent's HTTP API: ``host:port`` and the scheme to speak."""

    host: str
    port: int
    scheme: ConsulScheme

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"


@dataclass(frozen=True)
class ConsulAccess:
    """Everything but the request itself: where Consul is and how to show who we are."""

    #: ``host:port`` or ``http(s)://host:port`` (None: the caller's default, or an explicit one)
    address: str | None = None
    #: https when anything asked for it (see the module's docstring)
    scheme: ConsulScheme = "http"
    #: CA bundle that signed Consul's certificate (None: the system's)
    ca_file: Path | None = None
    #: client certificate and its key, when Consul verifies clients
    cert_file: Path | None = None
    key_file: Path | None = None
    #: False only when CONSUL_HTTP_SSL_VERIFY said so
    verify: bool = True
    #: where the ACL token is (None: requests carry none)
    token: TokenSource | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError("Consul client certificate and key go together: give both or neither")

    @property
    def has_token(self) -> bool:
        return self.token is not None

    def verify_setting(self) -> bool | str:
        """What the HTTP library's ``verify`` takes: the CA file, or whether to check at all."""
        if not self.verify:
            return False
        return str(self.ca_file) if self.ca_file is not None else True

    def cert_setting(self) -> tuple[str, str] | None:
        """What the HTTP library's ``cert`` takes: (certificate, key) or None."""
        if self.cert_file is None or self.key_file is None:
            return None
        return (str(self.cert_file), str(self.key_file))

    @classmethod
    def from_env(
        cls,
        consul: ConsulConfig | None = None,
        role: ConsulRole | None = None,
        *,
        address: str | None = None,
    ) -> ConsulAccess:
        """Resolved from the process environment over the topology's ``consul`` block, for the
        agent at ``address`` when the caller chose one. Without a block, the one this process's
        command declared its own (:func:`use_topology_consul`) is used, with its role."""
        if consul is None and role is None:
            consul, role = _PROCESS_TOPOLOGY.consul, _PROCESS_TOPOLOGY.role
        return resolve_consul_access(os.environ, address=address, topology=consul, role=role)


@dataclass
class _ProcessTopology:
    consul: ConsulConfig | None = None
    role: ConsulRole | None = None


#: the topology ``consul`` block and role of the command this process runs (set once by it)
_PROCESS_TOPOLOGY = _ProcessTopology()


def use_topology_consul(consul: ConsulConfig | None, role: ConsulRole | None) -> None:
    """Make ``consul`` (a topology's block) and ``role`` the defaults of every Consul client this
    process builds without its own: a command calls it once, after loading its topology, so that
    the topology's address, TLS files and the role's token reach clients built deep in the
    runtime from an address alone. Consul's variables still win over it."""
    _PROCESS_TOPOLOGY.consul, _PROCESS_TOPOLOGY.role = consul, role


def topology_consul_in_use() -> ConsulConfig | None:
    """The block :func:`use_topology_consul` set (None: none)."""
    return _PROCESS_TOPOLOGY.consul


def consul_endpoint(address: str, access: ConsulAccess) -> ConsulEndpoint:
    """Where to send requests: ``address`` (``host:port``, optionally after a scheme), spoken in
    https when either the address or ``access`` asks for it."""
    try:
        scheme, hostport = parse_consul_address(address)
    except ValueError as err:
        raise ConfigError(f"invalid Consul HTTP address: {err}") from None
    host, _, port = hostport.rpartition(":")
    https = "https" in (scheme, access.scheme)
    return ConsulEndpoint(host, int(port), "https" if https else "http")


def resolve_consul_access(
    env: Mapping[str, str],
    *,
    address: str | None = None,
    token: str | None = None,
    token_file: Path | None = None,
    topology: ConsulConfig | None = None,
    role: ConsulRole | None = None,
) -> ConsulAccess:
    """How to reach Consul, from explicit arguments, then ``env``, then the topology's block
    (``role`` picks its token). Pure but for the warnings it logs: files are not read here.

    Raises :class:`ConfigError` naming the variable or field that is wrong (never its value
    when it is a token).
    """
    values = {name: value for name, value in env.items() if value != ""}  # empty is unset
    unsupported = [name for name in UNSUPPORTED_ENV if name in values]
    if unsupported:
        raise ConfigError(
            "Consul settings drsvc cannot honour are set: "
            + "; ".join(f"{name}: {UNSUPPORTED_ENV[name]}" for name in unsupported)
            + ". Unset them for drsvc's processes."
        )
    chosen_address = _address(values, address, topology)
    scheme = _scheme(values, chosen_address, topology)
    ca_file, cert_file, key_file = _tls_files(values, topology)
    verify = True
    if SSL_VERIFY_ENV in values:
        verify = _boolean(values, SSL_VERIFY_ENV)
        if not verify:
            _warn_once(
                f"{SSL_VERIFY_ENV} is false: Consul's certificate is not checked, so anyone on "
                "the path can read and change what drsvc reads and writes"
            )
    if scheme == "http" and (ca_file is not None or cert_file is not None):
        _warn_once(
            "TLS files are set for Consul but it is reached over plain http, where they do "
            f"nothing; set {SSL_ENV}=true or use an https:// address"
        )
    return ConsulAccess(
        address=chosen_address,
        scheme=scheme,
        ca_file=ca_file,
        cert_file=cert_file,
        key_file=key_file,
        verify=verify,
        token=_token(values, token, token_file, topology, role),
    )


def _address(
    values: Mapping[str, str], explicit: str | None, topology: ConsulConfig | None
) -> str | None:
    passed_over = values.get(ADDR_ENV)
    if explicit and passed_over and DRSVC_ADDR_ENV not in values:
        # Commands choose their agent themselves (--consul, else the local environment's); say
        # so rather than leave CONSUL_HTTP_ADDR looking obeyed.
        try:
            differs = parse_consul_address(passed_over)[1] != parse_consul_address(explicit)[1]
        except ValueError:
            differs = True
        if differs:
            _warn_once(
                f"{ADDR_ENV}={passed_over} is not used: this process was given the Consul "
                f"address {explicit}; set {DRSVC_ADDR_ENV} or --consul to choose the agent"
            )
    return first_consul_address(explicit, values, None if topology is None else topology.address)


def first_consul_address(
    explicit: str | None, env: Mapping[str, str], configured: str | None = None
) -> str | None:
    """The Consul address to use, first given wins: ``explicit`` (a command's option, a
    caller's argument), ``DRSVC_CONSUL_HTTP_ADDR``, ``CONSUL_HTTP_ADDR``, then ``configured``
    (a topology's ``consul.address``); None when none is (the caller's own default applies).

    Raises :class:`ConfigError` naming where a malformed address came from."""
    for given, where in (
        (explicit, "the Consul address given"),
        (env.get(DRSVC_ADDR_ENV), DRSVC_ADDR_ENV),
        (env.get(ADDR_ENV), ADDR_ENV),
        (configured, "consul.address of the topology"),
    ):
        if given:
            try:
                parse_consul_address(given)
            except ValueError as err:
                raise ConfigError(f"{where}: {err}") from None
            return given.strip()
    return None


def _scheme(
    values: Mapping[str, str], address: str | None, topology: ConsulConfig | None
) -> ConsulScheme:
    asks: list[ConsulScheme | None] = []
    if address is not None:
        scheme, hostport = parse_consul_address(address)
        asks.append(scheme)
        # CONSUL_HTTP_ADDR's scheme counts for its own agent, however the address was chosen
        named = values.get(ADDR_ENV)
        try:
            named_scheme, named_hostport = parse_consul_address(named or "")
        except ValueError:
            named_scheme, named_hostport = None, None
        if named_hostport == hostport:
            asks.append(named_scheme)
    if SSL_ENV in values and _boolean(values, SSL_ENV):
        asks.append("https")
    if topology is not None and topology.uses_https:
        asks.append("https")
    return "https" if "https" in asks else "http"


def _tls_files(
    values: Mapping[str, str], topology: ConsulConfig | None
) -> tuple[Path | None, Path | None, Path | None]:
    tls = None if topology is None else topology.tls
    ca = values.get(CACERT_ENV)
    ca_file = Path(ca) if ca else (None if tls is None else tls.ca_file)
    cert, key = values.get(CLIENT_CERT_ENV), values.get(CLIENT_KEY_ENV)
    if (cert is None) != (key is None):
        given, missing = (
            (CLIENT_CERT_ENV, CLIENT_KEY_ENV) if cert else (CLIENT_KEY_ENV, CLIENT_CERT_ENV)
        )
        raise ConfigError(f"{given} is set but {missing} is not: give both or neither")
    if cert is not None and key is not None:
        return ca_file, Path(cert), Path(key)
    if tls is not None:
        return ca_file, tls.cert_file, tls.key_file
    return ca_file, None, None


def _token(
    values: Mapping[str, str],
    token: str | None,
    token_file: Path | None,
    topology: ConsulConfig | None,
    role: ConsulRole | None,
) -> TokenSource | None:
    # Consul's order (its api.NewClient): -token-file, -token, CONSUL_HTTP_TOKEN_FILE,
    # CONSUL_HTTP_TOKEN; the topology's are defaults under all of them.
    if token_file is not None:
        return TokenSource(f"token file {token_file}", file=token_file)
    if token:
        return TokenSource("the token argument", value=token)
    if TOKEN_FILE_ENV in values:
        path = Path(values[TOKEN_FILE_ENV])
        return TokenSource(f"{TOKEN_FILE_ENV} ({path})", file=path)
    if TOKEN_ENV in values:
        return TokenSource(TOKEN_ENV, value=values[TOKEN_ENV])
    if topology is None:
        return None
    ref = topology.token_ref(role)
    if ref is None:
        return None
    field = f"consul.tokens.{role}" if role is not None and role in topology.tokens else "consul"
    if ref.token_file is not None:
        return TokenSource(f"{field}.token_file ({ref.token_file})", file=ref.token_file)
    assert ref.token_env is not None
    value = values.get(ref.token_env)
    if value is None:
        raise ConfigError(
            f"Consul ACL token: environment variable {ref.token_env} (named by "
            f"{field}.token_env) is not set"
        )
    return TokenSource(f"{ref.token_env} (named by {field}.token_env)", value=value)


def _boolean(values: Mapping[str, str], name: str) -> bool:
    value = values[name]
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    # Consul's client warns and goes on; a typo here decides whether traffic is encrypted
    raise ConfigError(f"{name} must be true or false (got {value!r})")


@functools.cache
def _warn_once(message: str) -> None:
    """Log ``message`` once per process: clients are built often, the advice does not change."""
    log.warning(message)
