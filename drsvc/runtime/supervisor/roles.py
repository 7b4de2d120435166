"""Which role processes ``drsvc run`` starts for a topology, and with which command lines.

Per flow, ``workers_per_flow`` replication workers (``drsvc replicate --flow <id>``); one
``drsvc heartbeats`` and one ``drsvc checkpoints`` for the whole topology; one DR controller
replica (``drsvc controller``) and one HTTP API (``drsvc api``) when asked for. Each role gets a
name that is also the stem of its log file (``replicate.east-to-west.1``), the topology and the
shared options (``--state-dir``, ``--log-format``, ``-v``); the supervisor adds ``--metrics-port``
when it starts the process, because the port may change between restarts (not to the API, which
serves ``/metrics`` on its own port).

Which kinds run by default (:func:`default_role_kinds`): the replication workers, heartbeats and
checkpoints always; the controller only when an application of the topology opted into automated
failover (``auto_failover: true``), since it would only ever hold otherwise; the ACL sync
(``drsvc acls sync``, every 10 minutes) when a flow sets ``sync_acls``; the API only when
``--roles`` names it, because it takes a fixed port and failover requests over HTTP, which an
operator should decide to offer.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from drsvc.errors import ConfigError
from drsvc.runtime.supervisor.role_environment import BASE_ONLY, role_variables
from drsvc.topology.models import Topology
from failover.role_environment import RoleVariables

REPLICATE = "replicate"
HEARTBEATS = "heartbeats"
CHECKPOINTS = "checkpoints"
CONTROLLER = "controller"
API = "api"
ACL_SYNC = "acl-sync"
ROLE_KINDS = (REPLICATE, HEARTBEATS, CHECKPOINTS, CONTROLLER, API, ACL_SYNC)
#: how often the acl-sync role mirrors the sources' ACLs (MirrorMaker 2's default interval)
ACL_SYNC_INTERVAL_S = 600


def drsvc_command() -> tuple[str, ...]:
    """How to run ``drsvc`` with the Python that runs this process (same venv, same code)."""
    return (sys.executable, "-m", "drsvc.cli.main")


@dataclass(frozen=True)
class RoleSpec:
    """One supervised process: its name, what it does, and how to start it."""

    name: str
    """Unique; the stem of its log file and the value of ``DRSVC_ROLE`` in its environment."""
    kind: str
    """One of :data:`ROLE_KINDS` (or anything else for tests)."""
    command: tuple[str, ...]
    """The command line without ``--metrics-port``."""
    flow: str | None = None
    """The flow a replication worker copies (e.g. ``east->west``)."""
    metrics: bool = True
    """Whether the role accepts ``--metrics-port`` (every role command but ``drsvc api``, which
    serves its metrics on its own port)."""
    variables: RoleVariables = BASE_ONLY
    """The names of the environment variables the role is given (values come from the
    supervisor's environment when it starts; see
    :mod:`~drsvc.runtime.supervisor.role_environment`)."""

    def argv(self, metrics_port: int | None) -> list[str]:
        if not self.metrics or metrics_port is None:
            return list(self.command)
        return [*self.command, "--metrics-port", str(metrics_port)]


def default_role_kinds(topology: Topology) -> tuple[str, ...]:
    """The kinds ``drsvc run`` starts without ``--roles`` (see the module's docstring)."""
    kinds = [REPLICATE, HEARTBEATS, CHECKPOINTS]
    if any(app.auto_failover for app in topology.applications):
        kinds.append(CONTROLLER)
    if any(flow.sync_acls for flow in topology.flows):
        kinds.append(ACL_SYNC)
    return tuple(kinds)


def parse_role_kinds(text: str) -> tuple[str, ...]:
    """``replicate,heartbeats`` -> the kinds, in the order given, each once."""
    kinds = [part.strip() for part in text.split(",") if part.strip()]
    if not kinds:
        raise ConfigError(f"--roles names no role; choose from {', '.join(ROLE_KINDS)}")
    unknown = [kind for kind in kinds if kind not in ROLE_KINDS]
    if unknown:
        raise ConfigError(
            f"--roles: unknown role {unknown[0]!r}; choose from {', '.join(ROLE_KINDS)}"
        )
    return tuple(dict.fromkeys(kinds))


def role_name(kind: str, flow: str | None = None, index: int | None = None) -> str:
    """A file-name-safe role name: ``replicate.east-to-west.1``, ``heartbeats``."""
    parts = [kind]
    if flow is not None:
        parts.append(flow.replace("->", "-to-"))
    if index is not None:
        parts.append(str(index))
    return ".".join(parts)


def plan_roles(
    topology: Topology,
    topology_file: Path,
    kinds: Sequence[str],
    *,
    workers_per_flow: int,
    state_dir: Path,
    log_format: str,
    verbose: bool = False,
    drsvc: Sequence[str] | None = None,
    api_args: Sequence[str] = (),
) -> list[RoleSpec]:
    """The roles to supervise for ``topology``, in start order (workers first, by flow).

    A controller is refused for a topology without applications (it would have nothing to
    watch); checkpoints are left out without flows (nothing to checkpoint). ``api_args`` are
    added to the API's command line (``--tokens-file``, ``--host``, ...)."""
    if workers_per_flow < 1:
        raise ConfigError(f"--workers-per-flow must be at least 1 (got {workers_per_flow})")
    base = tuple(drsvc) if drsvc is not None else drsvc_command()
    shared = ["--topology", str(topology_file), "--state-dir", str(state_dir)]
    shared += ["--log-format", log_format]
    if verbose:
        shared.append("-v")
    roles: list[RoleSpec] = []
    if REPLICATE in kinds:
        for flow in topology.flows:
            for index in range(1, workers_per_flow + 1):
                roles.append(
                    RoleSpec(
                        name=role_name(REPLICATE, flow.id, index),
                        kind=REPLICATE,
                        command=(*base, REPLICATE, *shared, "--flow", flow.id),
                        flow=flow.id,
                        variables=role_variables(topology, topology_file, REPLICATE, flow.id),
                    )
                )
    for kind in (HEARTBEATS, CHECKPOINTS):
        # Checkpoints follow flows: without one there is nothing to checkpoint.
        if kind in kinds and (kind != CHECKPOINTS or topology.flows):
            roles.append(
                RoleSpec(
                    name=kind,
                    kind=kind,
                    command=(*base, kind, *shared),
                    variables=role_variables(topology, topology_file, kind),
                )
            )
    if CONTROLLER in kinds:
        if not topology.applications:
            raise ConfigError(
                f"--roles {CONTROLLER}: topology {topology_file} has no applications, so the "
                "controller would have nothing to fail over"
            )
        roles.append(
            RoleSpec(
                name=CONTROLLER,
                kind=CONTROLLER,
                command=(*base, CONTROLLER, *shared),
                variables=role_variables(topology, topology_file, CONTROLLER),
            )
        )
    if ACL_SYNC in kinds:
        if not any(flow.sync_acls for flow in topology.flows):
            raise ConfigError(
                f"--roles {ACL_SYNC}: no flow of topology {topology_file} sets sync_acls, so the"
                " role would have nothing to mirror"
            )
        roles.append(
            RoleSpec(
                name=ACL_SYNC,
                kind=ACL_SYNC,
                command=(
                    *base,
                    "acls",
                    "sync",
                    *shared,
                    "--interval-s",
                    str(ACL_SYNC_INTERVAL_S),
                ),
                metrics=False,  # one pass every few minutes: its log says what it did
                variables=role_variables(topology, topology_file, ACL_SYNC),
            )
        )
    if API in kinds:
        # It picks and serves its own port (DRSVC_API_PORT, default 8080; docs/api.md).
        roles.append(
            RoleSpec(
                name=API,
                kind=API,
                command=(*base, API, *shared, *api_args),
                metrics=False,
                variables=role_variables(topology, topology_file, API),
            )
        )
    names = [role.name for role in roles]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        # Only aliases built to look like another flow's id (``a-to-b``) can get here.
        raise ConfigError(
            f"topology {topology_file}: flows give the same role name {clashes[0]!r}; "
            "rename a cluster alias"
        )
    if not roles:
        raise ConfigError(
            f"nothing to run: topology {topology_file} has no flows and --roles asks only "
            "for replication workers or checkpoints"
        )
    return roles
