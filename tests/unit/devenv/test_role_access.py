"""Who each process is on a secured local environment: its principal, its topology, the
``drsvc run`` of its principal (drsvc.devenv.access, shared by the demo and the chaos suite)."""

from __future__ import annotations

import pytest

from drsvc.devenv.access import (
    TOPOLOGY_ROLES,
    consul_role,
    principal_of,
    role_topology,
    split_run_roles,
)

#: every role of one ``drsvc run`` but the API (the chaos suite's default, the demo's without it)
ROLES = "replicate,heartbeats,checkpoints,controller"

DOCUMENT = {
    "name": "t",
    "clusters": {"east": {"bootstrap_servers": "h:1"}, "west": {"bootstrap_servers": "h:2"}},
    "flows": [{"source": "east", "target": "west"}],
}


def test_each_role_runs_as_its_own_principal() -> None:
    assert {r: principal_of(r, "app") for r in TOPOLOGY_ROLES} == {
        "replicator": "drsvc-replicator",
        "checkpoints": "drsvc-checkpoints",
        "executor": "drsvc-executor",
        "application": "app-app",
        "verifier": "drsvc-verifier",
    }


def test_every_role_of_drsvc_run_goes_to_the_principal_that_holds_it() -> None:
    assert split_run_roles(ROLES) == {
        "replicator": "replicate,heartbeats",
        "checkpoints": "checkpoints",
        "executor": "controller",
    }
    assert split_run_roles(f"{ROLES},api")["executor"] == "controller,api"


def test_a_role_no_principal_runs_is_refused() -> None:
    with pytest.raises(ValueError, match="no principal runs the role 'gossip'"):
        split_run_roles("replicate,gossip")


def test_the_role_topology_gives_every_cluster_the_security_block() -> None:
    security = {"protocol": "SASL_SSL", "sasl": {"username": "drsvc-executor"}}
    consul = {"address": "https://127.0.0.1:8501"}

    rendered = role_topology(DOCUMENT, security, consul)

    assert rendered["clusters"] == {
        "east": {"bootstrap_servers": "h:1", "security": security},
        "west": {"bootstrap_servers": "h:2", "security": security},
    }
    assert rendered["consul"] == consul
    assert rendered["flows"] == DOCUMENT["flows"]
    assert "security" not in DOCUMENT["clusters"]["east"]  # type: ignore[index]


def test_without_blocks_the_topology_is_unchanged() -> None:
    assert role_topology(DOCUMENT, None, None) == DOCUMENT


def test_every_role_but_the_verifier_reaches_consul_with_its_own_token() -> None:
    assert {r: consul_role(r) for r in TOPOLOGY_ROLES} == {
        "replicator": "replicator",
        "checkpoints": "checkpoints",
        "executor": "executor",
        "application": "application",
        "verifier": None,
    }
