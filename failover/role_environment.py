"""Which environment variables each role process of ``drsvc run`` gets, without I/O.

A role process is given a minimal environment, not its supervisor's: whatever else the
supervisor's environment holds (another role's credentials, a cloud key of the shell that
started it, the API's token) stays out of every role that does not use it, so a role that is
compromised, or that dumps its environment into a crash report, gives away only its own.

:func:`role_variables` names them for one role; the service picks their values:

- everyone: :data:`BASE_VARIABLES` and the names starting with :data:`BASE_PREFIXES` (the
  interpreter, the locale, the time zone, temporary files, the system's CA bundles), the
  service's non-secret settings (given by the caller, which knows them) and the variables the
  topology file interpolates (``${VAR}``: every role loads the whole file);
- the credentials of the clusters the role talks to: the ``*_env`` fields of their ``security``
  blocks (a replication worker talks to its flow's source and target, every other role to every
  cluster). These are **required**: a role cannot connect without them;
- the role's Consul token variable (``token_env`` of its entry in the topology's ``consul:``
  block, else the block's general one) and Consul's own ``CONSUL_*`` variables, for the roles
  that use Consul (all but the heartbeat emitters). The token variable is required unless
  ``CONSUL_HTTP_TOKEN`` or ``CONSUL_HTTP_TOKEN_FILE`` is set, which win over the topology's
  (:attr:`RoleVariables.consul_token_file` names the role's token file when it has one);
- the API alone: its token (``DRSVC_API_TOKEN``) and port; the failover executors (controller
  and API) the executor's fault-injection hook used by tests.

Values never pass through here: only names, so nothing this module returns can leak a secret.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Protocol

from failover.errors import PolicyError

__all__ = [
    "BASE_PREFIXES",
    "BASE_VARIABLES",
    "CONSUL_ROLE_OF",
    "CONSUL_TOKEN_OVERRIDES",
    "CONSUL_VARIABLES",
    "PROCESS_KINDS",
    "RequiredVariable",
    "RoleVariables",
    "missing_variables",
    "role_variables",
]

#: the role kinds ``drsvc run`` starts
PROCESS_KINDS = ("replicate", "heartbeats", "checkpoints", "controller", "api", "acl-sync")

#: what every process needs to run at all; none of them is a credential
BASE_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "JAVA_HOME",
        "VIRTUAL_ENV",
        # the system's trust store, where a site keeps its own CAs
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        # a proxy setting decides whether Consul is reached at all; they are addresses
        "NO_PROXY",
        "no_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
    }
)
#: families of variables every process gets: the locale and the interpreter's own settings
BASE_PREFIXES = ("LC_", "PYTHON")

#: which Consul token each kind of process uses (the heartbeat emitters use no Consul)
CONSUL_ROLE_OF: Mapping[str, str] = {
    "replicate": "replicator",
    "checkpoints": "checkpoints",
    "controller": "executor",
    "api": "executor",
}
#: Consul's own variables (address, TLS, a token that wins over the topology's), for the
#: processes that use Consul
CONSUL_VARIABLES = frozenset(
    {
        "DRSVC_CONSUL_HTTP_ADDR",
        "CONSUL_HTTP_ADDR",
        "CONSUL_HTTP_TOKEN",
        "CONSUL_HTTP_TOKEN_FILE",
        "CONSUL_HTTP_SSL",
        "CONSUL_HTTP_SSL_VERIFY",
        "CONSUL_CACERT",
        "CONSUL_CLIENT_CERT",
        "CONSUL_CLIENT_KEY",
        # refused by drsvc when set: passed on so that the role says so, rather than
        # silently reaching another namespace than the operator asked for
        "CONSUL_HTTP_AUTH",
        "CONSUL_CAPATH",
        "CONSUL_TLS_SERVER_NAME",
        "CONSUL_NAMESPACE",
        "CONSUL_PARTITION",
    }
)
#: set in the environment, either wins over the topology's Consul token
CONSUL_TOKEN_OVERRIDES = ("CONSUL_HTTP_TOKEN", "CONSUL_HTTP_TOKEN_FILE")

#: the API's own variables: its operator token and its port
API_VARIABLES = frozenset({"DRSVC_API_TOKEN", "DRSVC_API_PORT"})
#: the failover executor's fault-injection hook (tests kill it at a named step)
EXECUTOR_VARIABLES = frozenset({"DRSVC_FAILPOINT"})


class TlsShape(Protocol):
    @property
    def key_password_env(self) -> str | None: ...


class SaslShape(Protocol):
    @property
    def username_env(self) -> str | None: ...

    @property
    def password_env(self) -> str | None: ...


class SecurityShape(Protocol):
    @property
    def tls(self) -> TlsShape | None: ...

    @property
    def sasl(self) -> SaslShape | None: ...


class ClusterShape(Protocol):
    @property
    def security(self) -> SecurityShape: ...


class FlowShape(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...


class TokenRefShape(Protocol):
    @property
    def token_env(self) -> str | None: ...

    @property
    def token_file(self) -> PathLike[str] | None: ...


class ConsulShape(Protocol):
    @property
    def token_env(self) -> str | None: ...

    @property
    def token_file(self) -> PathLike[str] | None: ...

    # Any: the service's model keys its tokens by a Literal of role names
    @property
    def tokens(self) -> Mapping[Any, TokenRefShape]: ...


class TopologyShape(Protocol):
    """What is read of a topology (:class:`drsvc.topology.models.Topology` is one)."""

    @property
    def clusters(self) -> Mapping[str, ClusterShape]: ...

    @property
    def flows(self) -> Sequence[FlowShape]: ...

    @property
    def consul(self) -> ConsulShape | None: ...


@dataclass(frozen=True, order=True)
class RequiredVariable:
    """A variable a role cannot work without, and which field of the topology names it."""

    name: str
    why: str


@dataclass(frozen=True)
class RoleVariables:
    """The names of the variables one role process gets (never their values)."""

    required: tuple[RequiredVariable, ...] = ()
    """Credentials the topology names for this role's clusters: it fails without them."""
    consul_token: RequiredVariable | None = None
    """The role's Consul token variable, required unless one of :data:`CONSUL_TOKEN_OVERRIDES`
    is set (they win over the topology's token)."""
    consul_token_file: str | None = None
    """The file holding the role's Consul token, when the topology names one (a path, not a
    secret)."""
    optional: frozenset[str] = frozenset()
    """Passed on when set."""
    prefixes: tuple[str, ...] = BASE_PREFIXES
    """Every variable whose name starts with one of these is passed on when set."""

    def wants(self, name: str) -> bool:
        """Whether a variable called ``name`` is passed on to the role (when set)."""
        return (
            name in self.optional
            or any(v.name == name for v in self.required)
            or (self.consul_token is not None and self.consul_token.name == name)
            or name.startswith(self.prefixes)
        )


def _cluster_variables(alias: str, cluster: ClusterShape) -> list[RequiredVariable]:
    where = f"clusters.{alias}.security"
    found: list[RequiredVariable] = []
    tls = cluster.security.tls
    if tls is not None and tls.key_password_env is not None:
        found.append(RequiredVariable(tls.key_password_env, f"{where}.tls.key_password_env"))
    sasl = cluster.security.sasl
    if sasl is not None:
        if sasl.username_env is not None:
            found.append(RequiredVariable(sasl.username_env, f"{where}.sasl.username_env"))
        if sasl.password_env is not None:
            found.append(RequiredVariable(sasl.password_env, f"{where}.sasl.password_env"))
    return found


def role_clusters(topology: TopologyShape, kind: str, flow: str | None) -> tuple[str, ...]:
    """The clusters a process of ``kind`` talks to: a replication worker its flow's source and
    target, every other role every cluster. Raises :class:`PolicyError` for an unknown flow."""
    if kind != "replicate":
        return tuple(sorted(topology.clusters))
    for candidate in topology.flows:
        if candidate.id == flow:
            return tuple(sorted({candidate.source, candidate.target}))
    known = ", ".join(f.id for f in topology.flows) or "none"
    raise PolicyError(f"a replication worker needs a flow of the topology (got {flow!r}; {known})")


def role_variables(
    topology: TopologyShape,
    kind: str,
    *,
    flow: str | None = None,
    settings: Iterable[str] = (),
    interpolated: Iterable[str] = (),
) -> RoleVariables:
    """The variables a process of ``kind`` (one of :data:`PROCESS_KINDS`) gets for
    ``topology`` (see the module's docstring). ``settings`` names the service's non-secret
    settings variables, ``interpolated`` the variables the topology file refers to.

    Raises :class:`PolicyError` for an unknown kind or flow.
    """
    if kind not in PROCESS_KINDS:
        raise PolicyError(f"unknown role kind {kind!r} (kinds: {', '.join(PROCESS_KINDS)})")
    required: list[RequiredVariable] = []
    for alias in role_clusters(topology, kind, flow):
        required += _cluster_variables(alias, topology.clusters[alias])
    optional = set(BASE_VARIABLES) | set(settings) | set(interpolated)
    consul_token = consul_token_file = None
    consul_role = CONSUL_ROLE_OF.get(kind)
    if consul_role is not None:
        optional |= CONSUL_VARIABLES
        consul_token = _consul_token_variable(topology.consul, consul_role)
        consul_token_file = _consul_token_file(topology.consul, consul_role)
    if kind == "api":
        optional |= API_VARIABLES
    if kind in ("controller", "api"):
        optional |= EXECUTOR_VARIABLES
    # one entry per name, the first reason kept (two clusters may share a variable)
    unique = {v.name: v for v in reversed(required)}
    return RoleVariables(
        required=tuple(sorted(unique.values())),
        optional=frozenset(optional - unique.keys()),
        consul_token=consul_token,
        consul_token_file=consul_token_file,
    )


def _consul_token_variable(consul: ConsulShape | None, role: str) -> RequiredVariable | None:
    """The variable holding ``role``'s Consul token: its own entry's, else the block's general
    one (a role with a token file of its own has no variable, whatever the general one is)."""
    if consul is None:
        return None
    own = consul.tokens.get(role)
    if own is not None:
        name = own.token_env
        return None if name is None else RequiredVariable(name, f"consul.tokens.{role}.token_env")
    if consul.token_env is not None:
        return RequiredVariable(consul.token_env, "consul.token_env")
    return None


def _consul_token_file(consul: ConsulShape | None, role: str) -> str | None:
    """The file holding ``role``'s Consul token, chosen as :func:`_consul_token_variable`
    chooses its variable."""
    if consul is None:
        return None
    own = consul.tokens.get(role)
    where = own.token_file if own is not None else consul.token_file
    return None if where is None else str(where)


def missing_variables(
    variables: RoleVariables, present: Collection[str]
) -> tuple[RequiredVariable, ...]:
    """The required variables not in ``present`` (the names of set, non-empty variables). The
    Consul token's is not missing when Consul's own token variable (or file) is set."""
    missing = [v for v in variables.required if v.name not in present]
    token = variables.consul_token
    if (
        token is not None
        and token.name not in present
        and not any(name in present for name in CONSUL_TOKEN_OVERRIDES)
    ):
        missing.append(token)
    return tuple(missing)
