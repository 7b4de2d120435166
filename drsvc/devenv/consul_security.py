"""What makes the Consul of a secured local environment secured: ACLs that deny by default, TLS
on its HTTP API and between its servers, gossip encryption, and a token per role.

Everything lives under the environment's secure directory (``<state>/secure/consul``, only the
owner reads it):

* ``management.token``: the initial management token, generated here and handed to the servers
  in their configuration file (mode 0600), never on a command line. Only the environment itself
  uses it (registering the clusters' services, creating the roles' policies and tokens);
* ``agent.token``: the servers' own token (registering their node, syncing their services),
  created with a policy that allows only that once the quorum runs;
* ``gossip.key``: the serf encryption key every server shares;
* ``tokens/<role>.token``: the secret of each role's token, and ``tokens/<role>.accessor`` its
  public id (the environment finds the token again by it at every ``up``).

Every value is generated once and kept, so a second ``up`` (a restart) recreates nothing; the
policies are written again at every ``up``, so a changed rule reaches a running environment.
"""

from __future__ import annotations

import base64
import os
import secrets
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import get_args

from drsvc.devenv.pki import Issued, ensure_authority, issue
from drsvc.devenv.secure import SecureFiles
from drsvc.topology.consul import ConsulRole
from failover import naming
from failover.consul_policies import ConsulRule

#: the Consul datacenter of the local environment (Consul's default; server certificates name it)
DATACENTER = "dc1"
#: the name of the servers' certificate, and the name Consul checks on server RPC
SERVER_CERTIFICATE = "consul-server"
SERVER_NAMES = (f"server.{DATACENTER}.consul",)
#: every role that gets a token of its own
ROLES: tuple[ConsulRole, ...] = get_args(ConsulRole)
#: the policy that lets a server agent register its node and sync its services
AGENT_POLICY = "drsvc-dev-agent"


def policy_name(role: ConsulRole) -> str:
    return f"drsvc-dev-{role}"


def dev_role_rules(role: ConsulRole, clusters: Sequence[str] = ()) -> tuple[ConsulRule, ...]:
    """The rules of ``role``'s token in the local environment, for every namespace at once
    (``clusters``: the environment's cluster aliases, whose services the executor reads).

    ``failover.consul_policies`` names the exact keys of one topology; the local environment
    serves many (each test picks its own namespace), and a Consul rule cannot skip a path
    segment, so these widen each role's rules to everything under ``drsvc/`` while keeping
    what matters: who may write. Only the executor writes application keys and opens sessions
    (so only it can move an application or hold a lock); applications and the checkpoint
    stream only read. The replicator writes its flows' stale-records lists, which sit under
    each namespace's prefix: without a namespace to name, that is a write on ``drsvc/``, broader
    than production's exact keys (``drsvc acls plan`` prints those for a topology).
    """
    everything = naming.consul_prefix("")  # "drsvc/": every namespace's prefix starts so
    if role == "executor":
        return (
            ConsulRule("key_prefix", everything, "write", "every namespace's keys"),
            ConsulRule("session_prefix", "", "write", "failover and controller locks"),
            *(
                ConsulRule("service", naming.kafka_service(alias), "read", f"health of {alias}")
                for alias in sorted(clusters)
            ),
            ConsulRule("node_prefix", "", "read", "health answers list the nodes that serve"),
        )
    if role == "replicator":
        return (
            ConsulRule(
                "key_prefix",
                everything,
                "write",
                "flow control (read) and stale-records lists (compare-and-set) of any namespace",
            ),
        )
    # checkpoints and application: reads only; no session, so no lock either
    return (ConsulRule("key_prefix", everything, "read", "active keys and failover records"),)


#: a server agent's own token: register its node, read the services it syncs (Consul's advice)
AGENT_RULES: dict[str, dict[str, dict[str, str]]] = {
    "node_prefix": {"": {"policy": "write"}},
    "service_prefix": {"": {"policy": "read"}},
}


def rules_document(rules: Sequence[ConsulRule]) -> dict[str, dict[str, dict[str, str]]]:
    """``rules`` as a Consul policy in its JSON form (``{"key_prefix": {"drsvc/": {"policy":
    "read"}}}``): Consul's policy language is HCL, which JSON is a form of."""
    document: dict[str, dict[str, dict[str, str]]] = {}
    for rule in rules:
        document.setdefault(rule.kind, {})[rule.name] = {"policy": rule.access}
    return document


@dataclass(frozen=True)
class ConsulSecrets:
    """Where a secured environment keeps what its Consul needs (see the module docstring)."""

    root: Path
    ca_file: Path
    server: Issued

    @property
    def management_token_file(self) -> Path:
        return self.root / "management.token"

    @property
    def agent_token_file(self) -> Path:
        return self.root / "agent.token"

    @property
    def gossip_key_file(self) -> Path:
        return self.root / "gossip.key"

    def token_file(self, role: ConsulRole) -> Path:
        return self.root / "tokens" / f"{role}.token"

    def accessor_file(self, role: ConsulRole) -> Path:
        return self.root / "tokens" / f"{role}.accessor"

    def accessor(self, role: ConsulRole) -> str:
        return self.accessor_file(role).read_text().strip()

    def agent_accessor_file(self) -> Path:
        return self.root / "agent.accessor"

    def read(self, path: Path) -> str:
        return path.read_text().strip()


def consul_secrets(files: SecureFiles) -> ConsulSecrets:
    """The paths of the Consul secrets of the environment whose secure files are ``files``."""
    tls = files.tls_dir
    server = Issued(
        tls / f"{SERVER_CERTIFICATE}.crt",
        tls / f"{SERVER_CERTIFICATE}.key",
        tls / f"{SERVER_CERTIFICATE}.pem",
    )
    return ConsulSecrets(files.root / "consul", files.ca_file, server)


def prepare(files: SecureFiles) -> ConsulSecrets:
    """Make (or keep) the servers' certificate, the management, agent and role tokens and the
    gossip key. ``files`` must exist (:func:`drsvc.devenv.secure.prepare`)."""
    found = consul_secrets(files)
    authority = ensure_authority(files.tls_dir)
    # Servers serve the HTTP API and RPC, and dial each other's RPC as clients: both usages.
    issue(
        authority, files.tls_dir, SERVER_CERTIFICATE, server=True, client=True, names=SERVER_NAMES
    )
    _private_dir(found.root)
    _private_dir(found.root / "tokens")
    _keep_or_write(found.management_token_file, lambda: str(uuid.uuid4()))
    _keep_or_write(found.agent_token_file, lambda: str(uuid.uuid4()))
    _keep_or_write(found.agent_accessor_file(), lambda: str(uuid.uuid4()))
    _keep_or_write(
        found.gossip_key_file, lambda: base64.b64encode(secrets.token_bytes(32)).decode()
    )
    for role in ROLES:
        _keep_or_write(found.token_file(role), lambda: str(uuid.uuid4()))
        _keep_or_write(found.accessor_file(role), lambda: str(uuid.uuid4()))
    return found


def agent_settings(found: ConsulSecrets, https_port: int) -> dict[str, object]:
    """What a secured server agent's configuration adds: ACLs denying by default with the
    management and agent tokens, TLS on HTTP (``https_port``, plain HTTP off) and on server RPC,
    and gossip encryption. Holds secrets: the file it goes into is the owner's alone."""
    return {
        "ports": {"http": -1, "https": https_port},
        "acl": {
            "enabled": True,
            "default_policy": "deny",
            "down_policy": "extend-cache",
            "enable_token_persistence": True,
            "tokens": {
                "initial_management": found.read(found.management_token_file),
                "agent": found.read(found.agent_token_file),
            },
        },
        "tls": {
            "defaults": {
                "ca_file": str(found.ca_file),
                "cert_file": str(found.server.cert),
                "key_file": str(found.server.key),
                "verify_outgoing": True,
            },
            # Servers prove who they are to each other; HTTP clients present no certificate
            # (they authenticate with their token).
            "internal_rpc": {"verify_incoming": True, "verify_server_hostname": True},
            "https": {"verify_incoming": False},
        },
        "encrypt": found.read(found.gossip_key_file),
    }


def role_environment(found: ConsulSecrets, role: ConsulRole, url: str) -> dict[str, str]:
    """Consul's own variables for a process of ``role`` reaching the agent at ``url``."""
    return {
        "CONSUL_HTTP_ADDR": url,
        "CONSUL_HTTP_SSL": "true",
        "CONSUL_CACERT": str(found.ca_file),
        "CONSUL_HTTP_TOKEN_FILE": str(found.token_file(role)),
    }


def role_topology_block(found: ConsulSecrets, role: ConsulRole, url: str) -> dict[str, object]:
    """A topology's ``consul:`` block for a process of ``role`` reaching the agent at ``url``."""
    return {
        "address": url,
        "tls": {"ca_file": str(found.ca_file)},
        "tokens": {role: {"token_file": str(found.token_file(role))}},
    }


def _private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)


def _keep_or_write(path: Path, make: Callable[[], str]) -> None:
    """Write ``make()`` to ``path`` (mode 0600) unless it already holds a value."""
    if path.is_file() and path.read_text().strip():
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(f"{make()}\n")
