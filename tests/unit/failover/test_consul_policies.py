"""Consul rules per role: the keys each names, and the HCL they render to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from failover.consul_policies import ConsulRule, consul_rules, render_rules, role_rules
from failover.errors import PolicyError


@dataclass(frozen=True)
class Flow:
    source: str
    target: str


@dataclass(frozen=True)
class App:
    name: str
    sync_group_offsets: bool = False


@dataclass(frozen=True)
class Topo:
    namespace: str
    clusters: Mapping[str, object]
    flows: tuple[Flow, ...]
    applications: tuple[App, ...]


SHOP = Topo(
    namespace="shop",
    clusters={"east": {}, "west": {}},
    flows=(Flow("east", "west"), Flow("west", "east")),
    applications=(App("orders", sync_group_offsets=True), App("billing")),
)


def rules(role: str, application: str | None = None) -> set[tuple[str, str, str]]:
    return {(r.kind, r.name, r.access) for r in consul_rules(SHOP, role, application=application)}


@pytest.mark.parametrize(
    ("role", "application", "expected"),
    [
        (
            "replicator",
            None,
            {
                ("key", "drsvc/shop/flows/east/west/control", "read"),
                ("key", "drsvc/shop/flows/east/west/stale-records", "write"),
                ("key", "drsvc/shop/flows/west/east/control", "read"),
                ("key", "drsvc/shop/flows/west/east/stale-records", "write"),
            },
        ),
        ("checkpoints", None, {("key", "drsvc/shop/apps/orders/active", "read")}),
        ("heartbeats", None, set()),
        ("verifier", None, set()),
        (
            "application",
            "billing",
            {
                ("key", "drsvc/shop/apps/billing/active", "read"),
                ("key_prefix", "drsvc/shop/failovers/", "read"),
            },
        ),
    ],
)
def test_rules_per_role(
    role: str, application: str | None, expected: set[tuple[str, str, str]]
) -> None:
    assert rules(role, application) == expected


@pytest.mark.parametrize("role", ["executor", "controller", "api"])
def test_the_executor_controller_and_api_share_one_policy(role: str) -> None:
    assert rules(role) == {
        ("key_prefix", "drsvc/shop/", "write"),
        ("session_prefix", "", "write"),
        ("service", "kafka-east", "read"),
        ("service", "kafka-west", "read"),
        ("node_prefix", "", "read"),
    }


def test_an_application_writes_nothing_and_reads_no_other_applications_key() -> None:
    for app in SHOP.applications:
        found = consul_rules(SHOP, "application", application=app.name)
        assert all(r.access == "read" for r in found)
        assert not any(r.kind == "session_prefix" for r in found)
        others = [a.name for a in SHOP.applications if a.name != app.name]
        assert not any(f"/apps/{other}/" in r.name for r in found for other in others)


def test_the_policy_text() -> None:
    text = role_rules(SHOP, "application", application="orders")

    assert text == (
        "# drsvc application orders, namespace shop\n"
        "\n"
        "# where the application is active, with its lease\n"
        'key "drsvc/shop/apps/orders/active" {\n'
        '  policy = "read"\n'
        "}\n"
        "\n"
        "# the cut-offs of the failover that made a cluster active\n"
        'key_prefix "drsvc/shop/failovers/" {\n'
        '  policy = "read"\n'
        "}\n"
    )


def test_an_empty_policy_says_so() -> None:
    assert "nothing" in role_rules(SHOP, "heartbeats")


def test_names_are_quoted_for_hcl() -> None:
    text = render_rules([ConsulRule("key", 'a"b\\c${x}', "read")], "t")

    assert 'key "a\\"b\\\\c$${x}" {' in text
    with pytest.raises(PolicyError, match="span lines"):
        render_rules([ConsulRule("key", "a\nb", "read")], "t")


def test_unknown_role_or_application_is_refused() -> None:
    with pytest.raises(PolicyError, match="unknown role 'admin'"):
        consul_rules(SHOP, "admin")
    with pytest.raises(PolicyError, match="needs an application"):
        consul_rules(SHOP, "application")
    with pytest.raises(PolicyError, match="unknown application 'x'"):
        consul_rules(SHOP, "application", application="x")
    with pytest.raises(PolicyError, match="namespace"):
        consul_rules(Topo("..", {}, (), ()), "executor")
