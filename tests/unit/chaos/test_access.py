"""Who each process of a scenario is on secured clusters (chaos.access)."""

from __future__ import annotations

import json

import pytest

from chaos.access import (
    TOPOLOGY_ROLES,
    principal_of,
    role_topology,
    split_run_roles,
    workload_grants,
)
from chaos.runner import APP, _topology_document
from chaos.scenarios import find
from chaos.service import ROLES
from drsvc.topology import load_topology_text
from failover.kafka_acls import Operation, PatternType, ResourceType

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


def test_the_workload_may_write_and_read_the_scenario_s_names_only() -> None:
    grants = workload_grants("app-app", "tag-")

    assert {(g.resource_type, g.pattern_type, g.resource_name, g.operation) for g in grants} == {
        (ResourceType.TOPIC, PatternType.PREFIXED, "tag-", Operation.WRITE),
        (ResourceType.TOPIC, PatternType.PREFIXED, "tag-", Operation.READ),
        (ResourceType.GROUP, PatternType.PREFIXED, "tag-", Operation.READ),
        (ResourceType.TRANSACTIONAL_ID, PatternType.PREFIXED, "chaos-", Operation.WRITE),
    }
    assert {g.principal for g in grants} == {"User:app-app"}


def test_a_scenario_s_topology_rendered_for_each_role_loads_and_names_its_principal() -> None:
    document = _topology_document(
        "t", find("site-loss-failback-alo"), {"east": "h:1", "west": "h:2"}
    )
    for role in TOPOLOGY_ROLES:
        principal = principal_of(role, APP)
        security = {
            "protocol": "SASL_SSL",
            "tls": {"ca_file": "ca.pem"},
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "username": principal,
                "password_file": f"{principal}.password",
            },
        }

        topology = load_topology_text(json.dumps(role_topology(document, security, None)))

        for cluster in topology.clusters.values():
            assert cluster.security.sasl is not None
            assert cluster.security.sasl.username == principal
        assert [a.name for a in topology.applications] == [APP]
