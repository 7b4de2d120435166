"""``drsvc acls``: the Kafka ACLs and the Consul policy a role needs (``docs/security.md``).

``plan`` only prints: one ``kafka-acls.sh`` line per grant, then the Consul policy in HCL, for
an operator's own tooling to apply. It reads the topology and nothing else.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from drsvc.errors import ConfigError
from drsvc.runtime.access.grants import consul_policy, kafka_grants
from drsvc.topology.loader import load_topology
from failover.consul_policies import ROLE_ALIASES
from failover.kafka_acls import ROLES, Grant, Permission, Role

#: the role names ``--role`` takes: drsvc's ACL roles, and the controller and the API, which run
#: as the executor
ROLE_NAMES = (*ROLES, *ROLE_ALIASES)


def build_app() -> typer.Typer:
    """The ``acls`` sub-app (built on call, never at import time)."""
    app = typer.Typer(
        name="acls",
        help="The Kafka ACLs and the Consul policy each role needs.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.command("plan")(plan)
    return app


def plan(
    role: Annotated[
        str,
        typer.Option("--role", "-r", help=f"One of {', '.join(ROLE_NAMES)}.", show_default=False),
    ],
    topology_file: Annotated[
        Path, typer.Option("--topology", "-t", help="Topology file (YAML).", show_default=False)
    ],
    cluster: Annotated[
        str | None,
        typer.Option("--cluster", "-c", help="Only this cluster (default: every cluster)."),
    ] = None,
    app_name: Annotated[
        str | None,
        typer.Option(
            "--app", help="The application role: only this application (default: every one)."
        ),
    ] = None,
) -> None:
    """Print the kafka-acls.sh lines of ROLE's grants on each cluster, then its Consul policy.

    Nothing is applied. Principals are drsvc's defaults (User:drsvc-<role>, User:app-<name>).
    """
    topology = load_topology(topology_file)
    acl_role = _acl_role(role)
    if app_name is not None and acl_role != "application":
        raise ConfigError("--app goes with --role application")
    if cluster is not None:
        topology.cluster(cluster)  # an unknown alias is a ConfigError naming the known ones
    clusters = [cluster] if cluster is not None else sorted(topology.clusters)
    for alias in clusters:
        grants = kafka_grants(topology, acl_role, alias, app_name)
        typer.echo(f"# Kafka ACLs of {role} on cluster {alias} ({len(grants)} grants)")
        for grant in grants:
            typer.echo(kafka_acls_line(grant, alias))
        typer.echo("")
    apps = [app_name] if app_name is not None else [a.name for a in topology.applications]
    for name in apps if acl_role == "application" else [None]:
        typer.echo(f"# Consul policy of {role}" + (f" {name}" if name else ""))
        typer.echo(consul_policy(topology, role, name), nl=False)


def kafka_acls_line(grant: Grant, cluster: str) -> str:
    """The ``kafka-acls.sh`` command that creates ``grant`` on ``cluster`` (its bootstrap
    servers and admin credentials are the operator's: ``$BOOTSTRAP_<ALIAS>`` and a command
    config file)."""
    option = {
        "TOPIC": "--topic",
        "GROUP": "--group",
        "TRANSACTIONAL_ID": "--transactional-id",
    }[grant.resource_type.value]
    who = "--allow-principal" if grant.permission is Permission.ALLOW else "--deny-principal"
    host = "--allow-host" if grant.permission is Permission.ALLOW else "--deny-host"
    variable = "BOOTSTRAP_" + "".join(c if c.isalnum() else "_" for c in cluster.upper())
    words = [
        "kafka-acls.sh",
        "--bootstrap-server",
        f'"${variable}"',
        "--command-config",
        '"$ADMIN_CONFIG"',
        "--add",
        who,
        shlex.quote(grant.principal),
        host,
        shlex.quote(grant.host),
        "--operation",
        _operation_word(grant.operation.value),
        option,
        shlex.quote(grant.resource_name),
        "--resource-pattern-type",
        grant.pattern_type.value.lower(),
    ]
    line = " ".join(words)
    return f"{line}  # {grant.why}" if grant.why else line


def _operation_word(operation: str) -> str:
    # kafka-acls.sh spells operations in CamelCase: AlterConfigs, DescribeConfigs ...
    return "".join(part.capitalize() for part in operation.split("_"))


def _acl_role(role: str) -> Role:
    name = ROLE_ALIASES.get(role, role)
    for known in ROLES:
        if known == name:
            return known
    raise ConfigError(f"unknown role {role!r} (roles: {', '.join(ROLE_NAMES)})")
