"""The Consul ACL rules each role of drsvc needs, as HCL policy text, without I/O.

:func:`consul_rules` lists the rules of a role (:class:`ConsulRule`, each with why it is
needed); :func:`role_rules` renders them as the text of a Consul policy. Key names come from
:mod:`failover.naming`, so a rule names exactly the keys the role reads or writes:

- ``replicator``: each flow's control document (read every few seconds) and its stale-records
  list (merged by compare-and-set). Nothing else: the workers read no application's key.
- ``heartbeats`` and ``verifier``: nothing in Consul.
- ``checkpoints``: the active key of each application whose group offsets it syncs.
- ``executor`` (also the controller and the API): everything under the namespace's prefix
  (applications' keys, failover records and requests, flow control, the controller's leader
  key, migrations), sessions for its locks, and the health of each cluster's Kafka service
  with the nodes that serve it (a vantage point of the controller and the API's status).
- ``application``: its own active key (a blocking query) and the failover records, from which
  the client reads the cut-offs of the failover that made a cluster active. Consul cannot
  grant "the record the active key names", so every record of the namespace is readable.

A denied read of one key answers 404 under Consul's ACLs, exactly like an absent key: a token
missing a rule here makes a key look absent rather than fail loudly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from failover import naming
from failover.errors import PolicyError

__all__ = [
    "CONSUL_AS",
    "CONSUL_ROLES",
    "ConsulRole",
    "ConsulRule",
    "consul_rules",
    "render_rules",
    "role_rules",
]

ConsulRole = Literal[
    "replicator", "heartbeats", "checkpoints", "executor", "verifier", "application"
]
CONSUL_ROLES: tuple[ConsulRole, ...] = get_args(ConsulRole)

#: roles that run as the executor in Consul: the controller and the API do the executor's work
ROLE_ALIASES: Mapping[str, ConsulRole] = {"controller": "executor", "api": "executor"}
#: roles with Kafka grants of their own whose Consul needs are another role's: a migration's
#: commands keep its state, pause its flow and cut applications over, as the executor does
#: (``drsvc migrate`` reads the executor's token from a topology's ``consul`` block)
CONSUL_AS: Mapping[str, ConsulRole] = {"migrator": "executor"}

RuleKind = Literal["key", "key_prefix", "session_prefix", "service", "node_prefix"]
Access = Literal["read", "write"]


@dataclass(frozen=True, order=True)
class ConsulRule:
    """One rule of a policy: ``kind "name" { policy = "access" }``."""

    kind: RuleKind
    name: str
    access: Access
    why: str = ""


class FlowShape(Protocol):
    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...


class ApplicationShape(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def sync_group_offsets(self) -> bool: ...


class TopologyShape(Protocol):
    """What the rules read of a topology (:class:`drsvc.topology.models.Topology` is one)."""

    @property
    def namespace(self) -> str: ...

    @property
    def clusters(self) -> Mapping[str, object]: ...

    @property
    def flows(self) -> Sequence[FlowShape]: ...

    @property
    def applications(self) -> Sequence[ApplicationShape]: ...


def consul_rules(
    topology: TopologyShape, role: str, *, application: str | None = None
) -> tuple[ConsulRule, ...]:
    """The rules of ``role`` (``controller`` and ``api`` are the executor's), sorted.

    The application role needs ``application``: each application gets a token of its own.
    Raises :class:`PolicyError` for an unknown role or application.
    """
    resolved = ROLE_ALIASES.get(role, CONSUL_AS.get(role, role))
    if resolved not in CONSUL_ROLES:
        known = ", ".join((*CONSUL_ROLES, *ROLE_ALIASES, *CONSUL_AS))
        raise PolicyError(f"unknown role {role!r} (roles: {known})")
    ns = topology.namespace
    naming.check_key_segment("namespace", ns)
    rules: list[ConsulRule] = []
    if resolved == "replicator":
        for flow in topology.flows:
            what = f"flow {flow.source}->{flow.target}"
            rules.append(
                ConsulRule(
                    "key",
                    naming.flow_control_key(ns, flow.source, flow.target),
                    "read",
                    f"{what}: pause, throttle, started topics",
                )
            )
            rules.append(
                ConsulRule(
                    "key",
                    naming.flow_stale_records_key(ns, flow.source, flow.target),
                    "write",
                    f"{what}: records written under a stale epoch (compare-and-set)",
                )
            )
    elif resolved == "checkpoints":
        for app in topology.applications:
            if app.sync_group_offsets:
                rules.append(
                    ConsulRule(
                        "key",
                        naming.app_active_key(ns, app.name),
                        "read",
                        f"group offset sync of {app.name}: never while it is active there",
                    )
                )
    elif resolved == "executor":
        rules.append(
            ConsulRule(
                "key_prefix",
                naming.consul_prefix(ns) + "/",
                "write",
                "applications, failover records and requests, flow control, controller leader,"
                " migrations",
            )
        )
        rules.append(
            ConsulRule(
                "session_prefix",
                "",
                "write",
                "session locks (an application's failover, the controller's leadership); a"
                " session belongs to the node of the agent that creates it, which may be any",
            )
        )
        for alias in sorted(topology.clusters):
            rules.append(
                ConsulRule(
                    "service",
                    naming.kafka_service(alias),
                    "read",
                    f"health checks of {alias}'s brokers",
                )
            )
        rules.append(
            ConsulRule("node_prefix", "", "read", "health answers list the nodes that serve")
        )
    elif resolved == "application":
        if application is None:
            raise PolicyError("the application role needs an application name")
        names = [app.name for app in topology.applications]
        if application not in names:
            known = ", ".join(names) or "none"
            raise PolicyError(f"unknown application {application!r} (known: {known})")
        rules.append(
            ConsulRule(
                "key",
                naming.app_active_key(ns, application),
                "read",
                "where the application is active, with its lease",
            )
        )
        rules.append(
            ConsulRule(
                "key_prefix",
                naming.failovers_prefix(ns),
                "read",
                "the cut-offs of the failover that made a cluster active",
            )
        )
    return tuple(sorted(set(rules)))


def render_rules(rules: Sequence[ConsulRule], title: str) -> str:
    """The HCL text of a Consul policy holding ``rules``, each after a comment saying why."""
    lines = [f"# {_one_line(title)}"]
    if not rules:
        lines.append("# nothing: this role reads and writes nothing in Consul")
    for rule in rules:
        lines.append("")
        if rule.why:
            lines.append(f"# {_one_line(rule.why)}")
        lines.append(f"{rule.kind} {_quoted(rule.name)} {{")
        lines.append(f"  policy = {_quoted(rule.access)}")
        lines.append("}")
    return "\n".join(lines) + "\n"


def role_rules(topology: TopologyShape, role: str, *, application: str | None = None) -> str:
    """The Consul policy (HCL) of ``role`` in ``topology``'s namespace (see
    :func:`consul_rules`)."""
    rules = consul_rules(topology, role, application=application)
    who = role if application is None else f"{role} {application}"
    return render_rules(rules, f"drsvc {who}, namespace {topology.namespace}")


def _quoted(text: str) -> str:
    # HCL strings: backslashes and double quotes are escaped, and "${" / "%{" (which would
    # start a template) are doubled; key segments are checked names, this is defence only.
    if any(c in text for c in "\r\n"):
        raise PolicyError(f"{text!r}: a Consul rule's name cannot span lines")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    escaped = escaped.replace("${", "$${").replace("%{", "%%{")
    return '"' + escaped + '"'


def _one_line(text: str) -> str:
    return " ".join(text.split())
