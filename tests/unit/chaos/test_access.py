"""What the chaos workload may do on secured clusters, and a scenario's topology rendered for
each role (chaos.access; the roles' principals and topologies are tested in
tests/unit/devenv/test_role_access.py)."""

from __future__ import annotations

import json

from chaos.access import TOPOLOGY_ROLES, principal_of, role_topology, workload_grants
from chaos.runner import APP, _topology_document
from chaos.scenarios import find
from drsvc.topology import load_topology_text
from failover.kafka_acls import Operation, PatternType, ResourceType


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
