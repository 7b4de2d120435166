"""An application may name its principal and fence its writes; a flow may mirror ACLs. Both are
opt-in, and bad values are refused naming the application."""

from __future__ import annotations

import pytest

from drsvc.errors import TopologyError
from drsvc.topology import load_topology_text
from failover.kafka_acls import Operation, ResourceType, role_grants


def topology(app_fields: str = "", flow_fields: str = "") -> str:
    return f"""
name: aa
clusters:
  east: {{bootstrap_servers: "127.0.0.1:1"}}
  west: {{bootstrap_servers: "127.0.0.1:2"}}
flows:
  - {{source: east, target: west{flow_fields}}}
  - {{source: west, target: east}}
applications:
  - name: orders
    groups: [orders-consumer]
    topics: [orders]
    preferred: east{app_fields}
"""


def test_off_by_default() -> None:
    loaded = load_topology_text(topology())
    app = loaded.application("orders")
    assert (app.principal, app.fence_writes) == (None, False)
    assert not any(f.sync_acls for f in loaded.flows)


def test_a_named_principal_is_the_one_its_grants_name_and_fencing_gives_the_executor_alter() -> (
    None
):
    loaded = load_topology_text(
        topology("\n    principal: User:orders-service\n    fence_writes: true")
    )
    grants = role_grants(loaded, "application", "east")
    assert {g.principal for g in grants} == {"User:orders-service"}
    executor = role_grants(loaded, "executor", "west")
    assert any(
        g.resource_type is ResourceType.CLUSTER and g.operation is Operation.ALTER for g in executor
    )
    plain = role_grants(load_topology_text(topology()), "executor", "west")
    assert not any(g.resource_type is ResourceType.CLUSTER for g in plain)


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ("\n    fence_writes: true", "fence_writes needs principal"),
        ("\n    principal: orders-service", "of the form Type:name"),
        ("\n    principal: 'User:*'", "of the form Type:name"),
        ("\n    principal: User:drsvc-executor", "is one of drsvc's own"),
    ],
)
def test_bad_values_are_refused_naming_the_application(fields: str, complaint: str) -> None:
    with pytest.raises(TopologyError, match=complaint):
        load_topology_text(topology(fields))


def test_a_flow_opts_in_to_acl_sync() -> None:
    loaded = load_topology_text(topology(flow_fields=", sync_acls: true"))
    assert [f.id for f in loaded.flows if f.sync_acls] == ["east->west"]
