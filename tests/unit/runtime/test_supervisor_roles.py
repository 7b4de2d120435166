"""Which roles ``drsvc run`` plans for a topology, and their command lines."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from drsvc.errors import ConfigError
from drsvc.runtime.supervisor.roles import (
    ROLE_KINDS,
    RoleSpec,
    default_role_kinds,
    parse_role_kinds,
    plan_roles,
    role_name,
)
from drsvc.topology import load_topology_text
from drsvc.topology.models import Topology

TOPOLOGY = """
name: aa
clusters:
  east: {bootstrap_servers: "127.0.0.1:19092"}
  west: {bootstrap_servers: "127.0.0.1:19093"}
flows:
  - {source: east, target: west}
  - {source: west, target: east}
"""

DRSVC = ("/venv/python", "-m", "drsvc.cli.main")
SHARED = ["--topology", "/t/aa.yaml", "--state-dir", "/state", "--log-format", "json"]


def with_applications(*auto_failover: bool) -> Topology:
    """TOPOLOGY with one application per flag, each with that ``auto_failover``."""
    apps = "".join(
        f"  - {{name: app{i}, groups: [g{i}], topics: [t{i}], preferred: east,"
        f" auto_failover: {str(auto).lower()}}}\n"
        for i, auto in enumerate(auto_failover)
    )
    return load_topology_text(TOPOLOGY + ("applications:\n" + apps if apps else ""))


def plan(
    kinds: tuple[str, ...] | None = None, topology: Topology | None = None, **kwargs: object
) -> list[RoleSpec]:
    """The roles of ``topology`` (default TOPOLOGY), of ``kinds`` (default: its default kinds)."""
    topology = topology or load_topology_text(TOPOLOGY)
    options: dict[str, object] = {
        "workers_per_flow": 1,
        "state_dir": Path("/state"),
        "log_format": "json",
        "drsvc": DRSVC,
    }
    options.update(kwargs)
    return plan_roles(
        topology,
        Path("/t/aa.yaml"),
        default_role_kinds(topology) if kinds is None else kinds,
        **options,  # type: ignore[arg-type]
    )


def test_every_role_of_the_topology_with_the_shared_options() -> None:
    roles = plan()
    assert [r.name for r in roles] == [
        "replicate.east-to-west.1",
        "replicate.west-to-east.1",
        "heartbeats",
        "checkpoints",
    ]
    shared = ["--topology", "/t/aa.yaml", "--state-dir", "/state", "--log-format", "json"]
    assert roles[0].argv(None) == [*DRSVC, "replicate", *shared, "--flow", "east->west"]
    assert roles[0].flow == "east->west" and roles[0].kind == "replicate"
    assert roles[2].argv(4321) == [*DRSVC, "heartbeats", *shared, "--metrics-port", "4321"]
    assert roles[3].argv(None) == [*DRSVC, "checkpoints", *shared]
    assert roles[3].flow is None


def test_workers_per_flow_and_a_role_subset() -> None:
    roles = plan(("replicate",), workers_per_flow=3, verbose=True)
    assert [r.name for r in roles] == [
        *(f"replicate.east-to-west.{i}" for i in (1, 2, 3)),
        *(f"replicate.west-to-east.{i}" for i in (1, 2, 3)),
    ]
    assert all(r.command[-3] == "-v" for r in roles)


def test_the_default_command_is_this_python() -> None:
    roles = plan(("heartbeats",), drsvc=None)
    assert roles[0].command[:3] == (sys.executable, "-m", "drsvc.cli.main")


def test_zero_workers_is_refused() -> None:
    with pytest.raises(ConfigError, match="--workers-per-flow must be at least 1"):
        plan(workers_per_flow=0)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("replicate", ("replicate",)),
        (" heartbeats , replicate,heartbeats", ("heartbeats", "replicate")),
        ("replicate,heartbeats,checkpoints", ("replicate", "heartbeats", "checkpoints")),
        ("api,controller", ("api", "controller")),
    ],
)
def test_parse_role_kinds(text: str, kinds: tuple[str, ...]) -> None:
    assert parse_role_kinds(text) == kinds


@pytest.mark.parametrize(("text", "message"), [("", "names no role"), ("replicat", "'replicat'")])
def test_unknown_or_no_roles_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_role_kinds(text)


def test_role_names_are_file_names() -> None:
    assert role_name("replicate", "a.b->c_d", 2) == "replicate.a.b-to-c_d.2"
    assert "/" not in role_name("replicate", "east->west", 1)


def test_clashing_role_names_are_refused() -> None:
    topology = load_topology_text(
        """
name: odd
clusters:
  a-to-b: {bootstrap_servers: "127.0.0.1:1"}
  c: {bootstrap_servers: "127.0.0.1:2"}
  a: {bootstrap_servers: "127.0.0.1:3"}
  b-to-c: {bootstrap_servers: "127.0.0.1:4"}
flows:
  - {source: a-to-b, target: c}
  - {source: a, target: b-to-c}
"""
    )
    with pytest.raises(ConfigError, match=re.escape("same role name 'replicate.a-to-b-to-c.1'")):
        plan_roles(
            topology,
            Path("odd.yaml"),
            ("replicate",),
            workers_per_flow=1,
            state_dir=Path("/s"),
            log_format="text",
        )


def test_the_default_kinds_without_applications_are_the_copying_roles() -> None:
    assert default_role_kinds(load_topology_text(TOPOLOGY)) == (
        "replicate", "heartbeats", "checkpoints",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("auto_failover", "controller"),
    [((), False), ((False,), False), ((False, False), False), ((False, True), True)],
)
def test_the_controller_runs_by_default_only_for_an_opted_in_application(
    auto_failover: tuple[bool, ...], controller: bool
) -> None:
    kinds = default_role_kinds(with_applications(*auto_failover))
    assert kinds[:3] == ("replicate", "heartbeats", "checkpoints")
    assert ("controller" in kinds) is controller
    assert "api" not in kinds  # only when asked for


def test_every_kind_can_be_asked_for() -> None:
    assert set(ROLE_KINDS) == {
        "replicate", "heartbeats", "checkpoints", "controller", "api", "acl-sync",
    }  # fmt: skip
    assert parse_role_kinds(",".join(ROLE_KINDS)) == ROLE_KINDS


def test_the_controller_and_api_command_lines() -> None:
    roles = plan(topology=with_applications(True), verbose=True)
    assert [r.name for r in roles][-1] == "controller"
    controller = roles[-1]
    assert controller.kind == "controller" and controller.flow is None and controller.metrics
    assert controller.argv(4321) == [
        *DRSVC, "controller", *SHARED, "-v", "--metrics-port", "4321",
    ]  # fmt: skip
    api = plan(("api",), topology=with_applications(False))
    assert [r.name for r in api] == ["api"]
    assert api[0].kind == "api" and not api[0].metrics
    # The API serves /metrics on its own port: no --metrics-port, whatever the supervisor picks.
    assert api[0].argv(4321) == [*DRSVC, "api", *SHARED]


def test_the_api_runs_without_applications_or_flows() -> None:
    bare = load_topology_text('name: bare\nclusters:\n  east: {bootstrap_servers: "127.0.0.1:1"}\n')
    assert [r.name for r in plan(("api", "checkpoints"), topology=bare)] == ["api"]


def test_a_controller_without_applications_is_refused() -> None:
    with pytest.raises(ConfigError, match="has no applications"):
        plan(("replicate", "controller"))


def test_a_controller_asked_for_runs_even_without_an_opted_in_application() -> None:
    roles = plan(("controller",), topology=with_applications(False))
    assert [r.name for r in roles] == ["controller"]


def _synced(topology: Topology) -> Topology:
    """``topology`` with ACL sync on for the flow east->west."""
    flows = [
        flow.model_copy(update={"sync_acls": flow.id == "east->west"}) for flow in topology.flows
    ]
    return topology.model_copy(update={"flows": flows})


def test_every_kind_in_start_order() -> None:
    roles = plan(ROLE_KINDS[::-1], topology=_synced(with_applications(True)))
    assert [r.name for r in roles] == [
        "replicate.east-to-west.1",
        "replicate.west-to-east.1",
        "heartbeats",
        "checkpoints",
        "controller",
        "acl-sync",
        "api",
    ]


def test_acl_sync_runs_by_default_only_when_a_flow_asks_for_it() -> None:
    assert "acl-sync" not in default_role_kinds(load_topology_text(TOPOLOGY))
    synced = _synced(load_topology_text(TOPOLOGY))
    assert default_role_kinds(synced)[-1] == "acl-sync"
    (acl_sync,) = [r for r in plan(topology=synced) if r.kind == "acl-sync"]
    # drsvc acls sync has no metrics port; one pass every 10 minutes, as MirrorMaker 2 does
    assert not acl_sync.metrics
    assert acl_sync.argv(4321) == [*DRSVC, "acls", "sync", *SHARED, "--interval-s", "600"]
    with pytest.raises(ConfigError, match=r"no flow of topology .* sets sync_acls"):
        plan(("acl-sync",))
