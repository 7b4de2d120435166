"""A migration's flow: the identity flow added to the topology, and the topologies refused."""

from __future__ import annotations

from typing import Any

import pytest

from drsvc.errors import ConfigError
from drsvc.runtime.migration.flow import migration_flow, migration_topology
from drsvc.topology.models import Topology


def _topology(**extra: Any) -> Topology:
    return Topology.model_validate(
        {
            "name": "mig",
            "clusters": {"east": {"bootstrap_servers": "127.0.0.1:1"},
                         "west": {"bootstrap_servers": "127.0.0.1:2"},
                         "south": {"bootstrap_servers": "127.0.0.1:3"}},
            "applications": [{"name": "orders", "groups": ["g"], "topics": ["mig.orders"],
                              "preferred": "east"}],
            "migrations": [{"name": "to-west", "source": "east", "target": "west",
                            "topics": {"include": ["mig\\..*"]}}],
            **extra,
        }
    )  # fmt: skip


def test_the_flow_is_one_way_identity_over_the_migrations_topics() -> None:
    base = _topology()
    migration = base.migration()
    flow = migration_flow(migration)
    assert (flow.source, flow.target, flow.policy, flow.delivery) == (
        "east", "west", "identity", "at-least-once"
    )  # fmt: skip
    assert flow.topics == migration.topics and flow.start.kind == "earliest"
    topology = migration_topology(base, migration)
    assert topology.flow("east", "west") == flow
    assert topology.namespace == base.namespace and topology.applications == base.applications
    assert topology.topic_verdict(flow, "mig.orders").target_topic == "mig.orders"
    assert not topology.topic_verdict(flow, "other").replicate
    assert not base.flows  # the loaded topology is left as it was


def test_the_flow_lingers_as_the_migration_says() -> None:
    assert migration_flow(_topology().migration()).linger_ms == 100
    tuned = _topology(
        migrations=[{"name": "to-west", "source": "east", "target": "west", "linger_ms": 5}]
    )
    assert migration_flow(tuned.migration()).linger_ms == 5


def test_other_flows_stay_and_a_flow_between_the_two_clusters_is_refused() -> None:
    with_south = _topology(flows=[{"source": "south", "target": "east"}])
    assert len(migration_topology(with_south, with_south.migration()).flows) == 2
    clash = _topology(flows=[{"source": "west", "target": "east"}])
    with pytest.raises(ConfigError, match=r"already has flow\(s\) west->east"):
        migration_topology(clash, clash.migration())
