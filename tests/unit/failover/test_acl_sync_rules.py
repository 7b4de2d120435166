"""Mirroring a flow's source topic ACLs onto its copies: the rules one by one, and properties
over generated bindings (never WRITE, always a copy of the flow)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topology_shapes import App, Filter, Flow, Topo

from failover.acl_sync import MIRRORED_OPERATIONS, plan_acl_sync
from failover.kafka_acls import (
    Grant,
    Operation,
    PatternType,
    Permission,
    Principals,
    ResourceType,
    role_grants,
)

TOPIC = ResourceType.TOPIC
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
R, D, W = Operation.READ, Operation.DESCRIBE, Operation.WRITE

EAST_WEST = Flow("east", "west", topics=Filter(("orders", "payments\\..*")), sync_acls=True)
TOPO = Topo(
    clusters={"east": {}, "west": {}},
    flows=(EAST_WEST, Flow("west", "east")),
    applications=(App("orders", groups=("g",), topics=("orders",), preferred="east"),),
)


def acl(
    name: str,
    operation: Operation = R,
    principal: str = "User:app-x",
    *,
    pattern: PatternType = LIT,
    permission: Permission = ALLOW,
    host: str = "*",
    resource_type: ResourceType = TOPIC,
) -> Grant:
    return Grant(resource_type, pattern, name, operation, principal, permission, host)


def test_read_on_a_copied_topic_becomes_read_on_its_copy_for_the_same_principal_and_host() -> None:
    result = plan_acl_sync(TOPO, EAST_WEST, [acl("orders", host="10.0.0.1")], [])
    assert result.wanted == (acl("east.orders", host="10.0.0.1"),)
    assert result.missing == result.wanted
    assert "mirrors ALLOW READ on LITERAL 'orders' of east" in result.wanted[0].why


def test_all_becomes_read_and_describe_stays_describe() -> None:
    result = plan_acl_sync(TOPO, EAST_WEST, [acl("orders", Operation.ALL), acl("orders", D)], [])
    assert set(result.wanted) == {acl("east.orders"), acl("east.orders", D)}


@pytest.mark.parametrize(
    "operation",
    [W, Operation.CREATE, Operation.DELETE, Operation.ALTER, Operation.ALTER_CONFIGS],
)
def test_write_and_other_operations_are_never_mirrored(operation: Operation) -> None:
    result = plan_acl_sync(TOPO, EAST_WEST, [acl("orders", operation)], [])
    assert result.wanted == ()
    assert "never mirrored" in result.skipped[0].reason


def test_a_deny_of_read_is_mirrored_a_deny_of_all_as_read_and_describe() -> None:
    result = plan_acl_sync(
        TOPO,
        EAST_WEST,
        [acl("orders", permission=DENY), acl("payments.eu", Operation.ALL, permission=DENY)],
        [],
    )
    assert set(result.wanted) == {
        acl("east.orders", permission=DENY),
        acl("east.payments.eu", permission=DENY),
        acl("east.payments.eu", D, permission=DENY),
    }


def test_a_deny_for_every_principal_is_skipped() -> None:
    result = plan_acl_sync(
        TOPO, EAST_WEST, [acl("orders", principal="User:*", permission=DENY)], []
    )
    assert result.wanted == ()
    assert "every principal" in result.skipped[0].reason
    allowed = plan_acl_sync(TOPO, EAST_WEST, [acl("orders", principal="User:*")], [])
    assert allowed.wanted == (acl("east.orders", principal="User:*"),)


def test_drsvcs_own_principals_get_nothing() -> None:
    bindings = [acl("orders", principal=p) for p in sorted(Principals().services())]
    result = plan_acl_sync(TOPO, EAST_WEST, bindings, [])
    assert result.wanted == ()
    assert all("drsvc's own principals" in s.reason for s in result.skipped)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("invoices", "does not copy"),  # not included
        ("heartbeats", "heartbeats"),
        ("__consumer_offsets", "does not copy"),
        ("west.orders", "does not copy"),  # came from the target: a loop
        ("*", "wildcard"),
    ],
)
def test_literal_names_the_flow_does_not_copy_are_skipped(name: str, why: str) -> None:
    result = plan_acl_sync(TOPO, EAST_WEST, [acl(name)], [])
    assert result.wanted == ()
    assert why in result.skipped[0].reason


def test_a_prefix_becomes_the_prefix_of_its_copies() -> None:
    result = plan_acl_sync(TOPO, EAST_WEST, [acl("payments.", pattern=PRE)], [])
    assert result.wanted == (acl("east.payments.", pattern=PRE),)
    covering = plan_acl_sync(TOPO, EAST_WEST, [acl("pay", pattern=PRE)], [])
    assert covering.wanted == (acl("east.pay", pattern=PRE),)


def test_a_prefix_is_skipped_when_nothing_under_it_is_copied_or_it_reaches_internal_topics() -> (
    None
):
    none = plan_acl_sync(TOPO, EAST_WEST, [acl("inv", pattern=PRE)], [])
    assert none.wanted == () and "copies no topic under 'inv'" in none.skipped[0].reason
    everything = replace(EAST_WEST, topics=Filter((".*",)))
    internal = plan_acl_sync(TOPO, everything, [acl("check", pattern=PRE)], [])
    assert internal.wanted == ()
    assert "east.checkpoints.internal" in internal.skipped[0].reason


def test_identity_flows_mirror_literal_names_and_skip_prefixes() -> None:
    flow = Flow("east", "west", policy="identity", topics=Filter(("orders",)), sync_acls=True)
    result = plan_acl_sync(TOPO, flow, [acl("orders"), acl("ord", pattern=PRE)], [])
    assert result.wanted == (acl("orders"),)
    assert "identity" in result.skipped[0].reason


def test_only_missing_bindings_are_created_and_nothing_is_deleted() -> None:
    existing = (acl("east.orders"), acl("east.other", principal="User:someone"))
    result = plan_acl_sync(TOPO, EAST_WEST, [acl("orders"), acl("orders", D)], existing)
    assert result.missing == (acl("east.orders", D),)
    again = plan_acl_sync(TOPO, EAST_WEST, [acl("orders"), acl("orders", D)], result.wanted)
    assert again.missing == ()


def test_a_flow_without_the_option_wants_nothing() -> None:
    result = plan_acl_sync(TOPO, replace(EAST_WEST, sync_acls=False), [acl("orders")], [])
    assert (result.wanted, result.missing, result.skipped) == ((), (), ())


def test_the_acl_sync_role_only_for_flows_that_opt_in() -> None:
    grants = {c: role_grants(TOPO, "acl-sync", c) for c in ("east", "west")}
    assert [(g.resource_type, g.operation) for g in grants["east"]] == [
        (ResourceType.CLUSTER, Operation.DESCRIBE)
    ]
    assert [(g.resource_type, g.operation) for g in grants["west"]] == [
        (ResourceType.CLUSTER, Operation.ALTER)
    ]
    assert {g.principal for g in grants["east"] + grants["west"]} == {"User:drsvc-acl-sync"}
    off = replace(TOPO, flows=(replace(EAST_WEST, sync_acls=False),))
    assert role_grants(off, "acl-sync", "east") == ()


_NAMES = st.sampled_from(
    ["orders", "payments.eu", "pay", "heartbeats", "west.orders", "east.orders", "*", "check", "x"]
)
_BINDINGS = st.builds(
    acl,
    _NAMES,
    st.sampled_from(list(Operation)),
    st.sampled_from(["User:app-x", "User:*", "User:drsvc-replicator", "Group:ops"]),
    pattern=st.sampled_from([LIT, PRE]),
    permission=st.sampled_from([ALLOW, DENY]),
    host=st.sampled_from(["*", "10.1.1.1"]),
)
_FLOWS = st.builds(
    Flow,
    st.just("east"),
    st.just("west"),
    policy=st.sampled_from(["prefix", "identity"]),
    topics=st.sampled_from(
        [Filter((".*",)), Filter(("orders",)), Filter(("pay.*",), ("payments\\..*",))]
    ),
    multi_hop=st.booleans(),
    sync_acls=st.just(True),
)


@settings(max_examples=200, deadline=None)
@given(_FLOWS, st.lists(_BINDINGS, max_size=8))
def test_never_write_always_a_copy_of_the_flow_same_principal(
    flow: Flow, bindings: list[Grant]
) -> None:
    topo = replace(TOPO, flows=(flow,))
    result = plan_acl_sync(topo, flow, bindings, [])
    sources = {(b.principal, b.host) for b in bindings}
    for grant in result.wanted:
        assert grant.operation in MIRRORED_OPERATIONS
        assert grant.resource_type is TOPIC
        assert grant.principal not in Principals().services()
        assert (grant.principal, grant.host) in sources
        if flow.policy == "prefix":
            assert grant.resource_name.startswith("east.")
            assert not grant.resource_name.startswith("east.checkpoints")
        else:
            assert grant.pattern_type is LIT
        assert grant.resource_name != "*"
    assert len(result.wanted) + len(result.skipped) >= len(set(bindings)) or not bindings
    assert plan_acl_sync(topo, flow, bindings, result.wanted).missing == ()
