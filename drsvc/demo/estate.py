"""Where and as whom each of the demo's processes reaches the clusters, Consul and the API.

Without ``--secure`` every process shares one topology (``topology.yaml``), the clusters and
Consul are reached by address alone, and one ``drsvc run`` runs every role, its API over HTTP.

With ``--secure`` (a secured local environment: SASL_SSL with SCRAM, ACLs that allow nothing by
default, Consul with default-deny ACLs over HTTPS) each role gets a topology of its own
(``topology-<role>.yaml``) naming its principal and its Consul token by file
(:mod:`drsvc.devenv.access`); each cluster gets exactly the ACLs
:func:`failover.kafka_acls.role_grants` computes for the roles; each principal's roles run in a
``drsvc run`` of their own; the API serves HTTPS with a certificate of the environment's CA and
takes its token from a tokens file. The demo's application (``orders-service``) runs as its own
principal, whose grants already cover what the demo's producer and consumer do: its topic, its
group and the copies it drains.

No secret is passed on a command line or in a variable: passwords and tokens stay in their files
(mode 600), which topologies and options name.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drsvc.adapters.consul_access import ConsulAccess, resolve_consul_access
from drsvc.demo.service import RunSpec
from drsvc.devenv import secure as secure_env
from drsvc.devenv.access import (
    TOPOLOGY_ROLES,
    TopologyRole,
    consul_role,
    grant_roles,
    principal_of,
    role_topology,
    split_run_roles,
)
from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.pki import ensure_authority, issue
from drsvc.kafka.acls import create_acls
from drsvc.kafka.admin import admin_client
from drsvc.runtime.access.grants import kafka_grants
from drsvc.topology.loader import load_topology

__all__ = ["API_PRINCIPAL", "ApiAccess", "DemoEstate", "plan_runs", "tokens_line"]

#: the API's server certificate (its common name; it names 127.0.0.1 and localhost)
API_PRINCIPAL = "drsvc-api"
#: the name of the demo's operator token in the API's tokens file
API_TOKEN_NAME = "demo"


@dataclass(frozen=True)
class ApiAccess:
    """How the demo (and its user) reach the API: its address, the file holding the operator
    token, and the CA that issued its certificate (None: plain HTTP)."""

    url: str
    token_file: Path
    ca_file: Path | None = None

    @property
    def secured(self) -> bool:
        return self.ca_file is not None


def plan_runs(
    roles: str,
    topologies: Mapping[TopologyRole, Path],
    state_dir: Path,
    *,
    secure: bool,
    role_env: Callable[[TopologyRole], Mapping[str, str]],
    api_env: Mapping[str, str],
    api_args: tuple[str, ...],
) -> list[RunSpec]:
    """The ``drsvc run`` processes of ``roles``: one in ``state_dir`` when not ``secure``; else
    one per principal that holds some of them, the executor's first (in ``state_dir``: the
    demo's commands run as the executor and find its state there), each other in
    ``state_dir/service-<role>``, each with its own topology and ``role_env(role)``. The API's
    variables and options go to the run that holds the API."""
    if not secure:
        return [RunSpec(topologies["executor"], state_dir, roles, dict(api_env), api_args)]
    split = split_run_roles(roles)
    # the executor's first: it serves the API the demo waits for
    ordered = sorted(split, key=lambda role: role != "executor")
    specs: list[RunSpec] = []
    for role in ordered:
        held = split[role]
        with_api = "api" in held.split(",")
        specs.append(
            RunSpec(
                topologies[role],
                state_dir if role == "executor" else state_dir / f"service-{role}",
                held,
                {**role_env(role), **(api_env if with_api else {})},
                api_args if with_api else (),
                # the run's principal (none of these roles is an application's)
                principal_of(role, application=""),
            )
        )
    return specs


def tokens_line(name: str, role: str, secret: str) -> str:
    """A line of the API's tokens file (``name role secret``)."""
    return f"{name} {role} {secret}\n"


class DemoEstate:
    """The demo's topologies, grants, Consul access and API files on environment ``env``."""

    def __init__(self, env: LocalEnvironment, state_dir: Path, application: str) -> None:
        self.env = env
        self.state_dir = state_dir
        self.application = application
        self.secure = env.store.load().secure
        self.topologies: dict[TopologyRole, Path] = {}

    # -- set-up --------------------------------------------------------------------------------

    def prepare(self) -> None:
        """On a secured environment: the application's principal (a certificate and a SCRAM
        password, set on every cluster)."""
        if self.secure:
            self.env.add_principal(principal_of("application", self.application))

    def write_topologies(self, document: Mapping[str, Any], header: str) -> None:
        """``document`` as every role's topology: one file, or on a secured environment one per
        role naming its principal and its Consul access."""
        if not self.secure:
            path = self.state_dir / "topology.yaml"
            path.write_text(header + yaml.safe_dump(dict(document), sort_keys=False))
            self.topologies = dict.fromkeys(TOPOLOGY_ROLES, path)
            return
        for role in TOPOLOGY_ROLES:
            principal = principal_of(role, self.application)
            role_of = consul_role(role)
            rendered = role_topology(
                document,
                self.env.topology_security(principal),
                None if role_of is None else self.env.topology_consul(role_of),
            )
            path = self.state_dir / f"topology-{role}.yaml"
            path.write_text(
                f"{header}# as {principal}\n" + yaml.safe_dump(rendered, sort_keys=False)
            )
            self.topologies[role] = path

    def grant(self) -> int:
        """On a secured environment: each role's ACLs on each cluster, as ``drsvc acls plan``
        computes them, and nothing more. How many bindings were asked for."""
        if not self.secure:
            return 0
        topology = load_topology(self.topologies["executor"])
        created = 0
        for alias in topology.clusters:
            grants = [g for role in grant_roles() for g in kafka_grants(topology, role, alias)]
            created += create_acls(
                admin_client(*self.env.admin_settings(alias)), grants, cluster=alias
            )
        return created

    def admin(self, alias: str) -> tuple[str, dict[str, str]]:
        """Where and how to create the demo's topic on ``alias`` (the environment's super user on
        a secured one)."""
        if not self.secure:
            return self.env.info().clusters[alias], {}
        return self.env.admin_settings(alias)

    # -- processes -----------------------------------------------------------------------------

    def role_env(self, role: TopologyRole) -> dict[str, str]:
        """The Consul variables of a process of ``role`` (none when Consul is not secured)."""
        role_of = consul_role(role)
        return {} if role_of is None else self.env.consul_environment(role_of)

    def consul_access(self, role: TopologyRole) -> ConsulAccess | None:
        """How this process reaches Consul as ``role`` (None: by address alone)."""
        variables = self.role_env(role)
        return resolve_consul_access(variables) if variables else None

    def api(self, port: int) -> tuple[ApiAccess, dict[str, str], tuple[str, ...]]:
        """A fresh operator token in ``api-token`` (mode 600), and how the API is served: over
        HTTP with the token in its variable; on a secured environment over HTTPS with a
        certificate of the environment's CA and the token in a tokens file (``api-tokens``), so
        that it is in no process's environment. Returns the access, the API's variables and its
        ``drsvc run`` options."""
        token = secrets.token_hex(24)
        token_file = self.state_dir / "api-token"
        _write_private(token_file, token + "\n")
        env = {"DRSVC_API_PORT": str(port)}
        if not self.secure:
            access = ApiAccess(f"http://127.0.0.1:{port}", token_file)
            return access, {**env, "DRSVC_API_TOKEN": token}, ()
        files = secure_env.secure_files(self.env.state_dir)
        server = issue(
            ensure_authority(files.tls_dir), files.tls_dir, API_PRINCIPAL, server=True, client=False
        )
        tokens_file = self.state_dir / "api-tokens"
        _write_private(tokens_file, tokens_line(API_TOKEN_NAME, "operator", token))
        args = (
            "--api-tokens-file",
            str(tokens_file),
            "--api-tls-cert",
            str(server.cert),
            "--api-tls-key",
            str(server.key),
        )
        return ApiAccess(f"https://127.0.0.1:{port}", token_file, files.ca_file), env, args

    def principals(self) -> dict[TopologyRole, str]:
        return {role: principal_of(role, self.application) for role in TOPOLOGY_ROLES}


def _write_private(path: Path, text: str) -> None:
    """``text`` in ``path``, readable by its owner only from the first byte on."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)
