"""``drsvc acls``: the Kafka ACLs and the Consul policy a role needs (``docs/security.md``).

``plan`` only prints: one ``kafka-acls.sh`` line per grant, then the Consul policy in HCL, for
an operator's own tooling to apply. It reads the topology and nothing else.

``sync`` mirrors the source's topic READ and DESCRIBE ACLs onto the copies of the flows that set
``sync_acls`` (:mod:`drsvc.runtime.access.acl_sync`): one pass, or a pass every ``--interval-s``
until SIGINT/SIGTERM.
"""

from __future__ import annotations

import json
import logging
import shlex
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from drsvc.cli.common import (
    LogFormatOption,
    StateDirOption,
    TopologyOption,
    configure_logging,
    load_with_bootstraps,
)
from drsvc.errors import ConfigError
from drsvc.kafka.clients import KafkaClients
from drsvc.runtime.access.acl_sync import (
    AclSyncResult,
    run_acl_sync,
    sync_pass,
    synced_flows,
)
from drsvc.runtime.access.grants import consul_policy, kafka_grants
from drsvc.topology.loader import load_topology
from failover.consul_policies import ROLE_ALIASES
from failover.kafka_acls import ROLES, Grant, Permission, Role

#: the role names ``--role`` takes: drsvc's ACL roles, and the controller and the API, which run
#: as the executor
ROLE_NAMES = (*ROLES, *ROLE_ALIASES)
#: roles that never reach Consul: no policy to print
_NO_CONSUL = frozenset({"acl-sync"})

log = logging.getLogger("drsvc.acls")


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
    app.command("sync")(sync)
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

    Nothing is applied. Principals are drsvc's defaults (User:drsvc-<role>; User:app-<name>
    unless the application names its principal).
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
    if acl_role in _NO_CONSUL:
        typer.echo(f"# Consul policy of {role}: none ({role} never reaches Consul)")
        return
    apps = [app_name] if app_name is not None else [a.name for a in topology.applications]
    for name in apps if acl_role == "application" else [None]:
        typer.echo(f"# Consul policy of {role}" + (f" {name}" if name else ""))
        typer.echo(consul_policy(topology, role, name), nl=False)


def sync(
    topology_file: TopologyOption,
    flow_id: Annotated[
        str | None,
        typer.Option(
            "--flow", help="Only this flow (SOURCE->TARGET; default: every flow with sync_acls)."
        ),
    ] = None,
    interval_s: Annotated[
        float | None,
        typer.Option(
            "--interval-s",
            help="Run a pass every N seconds until SIGINT/SIGTERM (default: one pass).",
            min=1.0,
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One pass: one JSON object on stdout.")
    ] = False,
    log_format: LogFormatOption = "text",
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    state_dir: StateDirOption = None,
) -> None:
    """Mirror the sources' topic READ and DESCRIBE ACLs onto the copies of the flows that set
    sync_acls, as MirrorMaker 2 does: never WRITE, never a deletion.

    Runs as the acl-sync role (DESCRIBE on each source's cluster resource, ALTER on each
    target's: 'drsvc acls plan --role acl-sync')."""
    configure_logging(verbose, log_format)
    topology, bootstrap = load_with_bootstraps(topology_file, state_dir)
    flows = synced_flows(topology, flow_id)
    clients = KafkaClients(topology, bootstrap)
    if interval_s is None:
        results = sync_pass(topology, flows, clients)
        if as_json:
            typer.echo(json.dumps({"flows": [_result_json(r) for r in results]}))
        else:
            for result in results:
                typer.echo(
                    f"{result.flow}: created {len(result.created)}, already present"
                    f" {result.present}, skipped {len(result.skipped)}"
                )
                for grant in result.created:
                    typer.echo(f"  + {_binding_text(grant)}")
        return
    if as_json:
        raise ConfigError("--json goes with a single pass (without --interval-s)")
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: stopping", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log.info("ACL sync of %s every %gs", ", ".join(f.id for f in flows), interval_s)
    run_acl_sync(topology, flows, clients, interval_s=interval_s, stop=stop)


def _binding_text(grant: Grant) -> str:
    return (
        f"{grant.permission.value} {grant.operation.value} {grant.principal} host {grant.host}"
        f" on {grant.resource_type.value} {grant.pattern_type.value} {grant.resource_name}"
    )


def _result_json(result: AclSyncResult) -> dict[str, object]:
    return {
        "flow": result.flow,
        "created": [_grant_json(g) for g in result.created],
        "present": result.present,
        "skipped": [{**_grant_json(s.binding), "reason": s.reason} for s in result.skipped],
    }


def _grant_json(grant: Grant) -> dict[str, str]:
    return {
        "resource_type": grant.resource_type.value,
        "pattern_type": grant.pattern_type.value,
        "resource_name": grant.resource_name,
        "operation": grant.operation.value,
        "principal": grant.principal,
        "permission": grant.permission.value,
        "host": grant.host,
    }


def kafka_acls_line(grant: Grant, cluster: str) -> str:
    """The ``kafka-acls.sh`` command that creates ``grant`` on ``cluster`` (its bootstrap
    servers and admin credentials are the operator's: ``$BOOTSTRAP_<ALIAS>`` and a command
    config file)."""
    option = {
        "TOPIC": "--topic",
        "GROUP": "--group",
        "TRANSACTIONAL_ID": "--transactional-id",
    }.get(grant.resource_type.value)
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
    ]
    if option is None:  # the cluster resource: kafka-acls.sh names it by a flag alone
        words.append("--cluster")
    else:
        words += [
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
