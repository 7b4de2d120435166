"""The topology's ``migrations`` section: its shape, its defaults and errors naming the field."""

from __future__ import annotations

import textwrap

import pytest

from drsvc.errors import ConfigError, TopologyError
from drsvc.topology import Topology, load_topology_text

BASE = """\
name: t
clusters: {east: {}, west: {}}
applications:
  - {name: orders-service, groups: [g], topics: [orders], preferred: east}
"""


def load(migrations: str) -> Topology:
    return load_topology_text(BASE + textwrap.dedent(migrations), "t.yaml", env={})


def problems(migrations: str) -> list[str]:
    with pytest.raises(TopologyError) as caught:
        load(migrations)
    return caught.value.problems


def test_the_issue_shape_loads() -> None:
    topology = load(
        r"""
        migrations:
          - name: to-west
            source: east
            target: west
            topics: {include: ["mig\\..*"]}
            applications: [orders-service]
            overrides: {replication_factor: 3}
        """
    )
    migration = topology.migration()
    assert migration.name == "to-west"
    assert (migration.source, migration.target) == ("east", "west")
    assert migration.topics.to_filter().matches("mig.orders")
    assert not migration.topics.to_filter().matches("orders")
    assert migration.applications == ("orders-service",)
    assert migration.overrides.replication_factor == 3


def test_defaults_select_every_topic_and_override_nothing() -> None:
    migration = load("migrations: [{name: m, source: east, target: west}]\n").migration("m")
    assert migration.topics.to_filter().matches("anything")
    assert migration.applications == ()
    assert migration.overrides.replication_factor is None


def test_a_topology_without_migrations_has_none() -> None:
    topology = load("")
    assert topology.migrations == ()
    with pytest.raises(ConfigError, match="has 0 migrations"):
        topology.migration()


def test_lookup_by_name_names_the_known_ones() -> None:
    topology = load(
        """
        migrations:
          - {name: a, source: east, target: west}
          - {name: b, source: west, target: east}
        """
    )
    assert topology.migration("b").source == "west"
    with pytest.raises(ConfigError, match=r"has 2 migrations; name one with --migration"):
        topology.migration()
    with pytest.raises(ConfigError, match=r"no migration 'c' \(known: a, b\)"):
        topology.migration("c")


def test_cross_field_problems_name_the_field() -> None:
    found = problems(
        """
        migrations:
          - {name: m, source: east, target: north}
          - {name: m, source: west, target: west, applications: [billing]}
          - {name: n, source: east, target: west, applications: [orders-service, orders-service]}
        """
    )
    assert found == [
        "migrations[0].target: unknown cluster 'north' (known: east, west)",
        "migrations[1].name: migration 'm' is already migrations[0]",
        "migrations[1]: source and target are both 'west'; a migration moves topics from one"
        " cluster to another",
        "migrations[1].applications[0]: unknown application 'billing' (known: orders-service)",
        "migrations[2].applications[1]: 'orders-service' is listed twice",
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "{name: m, source: east, target: west, overrides: {replication_factor: 0}}",
            "migrations[0].overrides.replication_factor",
        ),
        (
            "{name: m, source: east, target: west, overrides: {partitions: 3}}",
            "migrations[0].overrides: unknown key 'partitions'",
        ),
        ("{name: m, source: east, target: west, topics: {include: ['(']}}", "migrations[0].topics"),
        ("{name: 'a b', source: east, target: west}", "migrations[0].name"),
        ("{name: m, source: east}", "migrations[0].target: required, but missing"),
    ],
)
def test_field_problems_name_the_field(body: str, expected: str) -> None:
    found = problems(f"migrations:\n  - {body}\n")
    assert any(line.startswith(expected) for line in found), found
