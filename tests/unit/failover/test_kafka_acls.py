"""Kafka grants per role: tables on small topologies (active/passive with identity, active/active
with prefix, exactly once and at least once), and properties over generated ones."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from topology_shapes import App, Filter, Flow, Migration, Topo

from failover.errors import PolicyError
from failover.kafka_acls import (
    ROLES,
    Grant,
    Operation,
    PatternType,
    Permission,
    Principals,
    Resource,
    ResourceType,
    application_clusters,
    heartbeats_topics,
    pattern_resources,
    role_grants,
)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
TXN = ResourceType.TRANSACTIONAL_ID
R, W, C = Operation.READ, Operation.WRITE, Operation.CREATE


ORDERS = App(
    "orders",
    groups=("orders-consumer",),
    topics=("orders",),
    preferred="east",
    transactional_ids=("orders-tx",),
    sync_group_offsets=True,
)

#: active/active, prefix policy, at least once east->west and exactly once west->east
ACTIVE_ACTIVE = Topo(
    clusters={"east": {}, "west": {}},
    flows=(
        Flow("east", "west", topics=Filter(("orders", "payments\\..*"))),
        Flow("west", "east", delivery="exactly-once"),
    ),
    applications=(ORDERS,),
)

#: active/passive, identity both ways, the way back standby
ACTIVE_PASSIVE = Topo(
    clusters={"east": {}, "west": {}},
    flows=(
        Flow("east", "west", policy="identity", topics=Filter(("orders", "invoices"))),
        Flow("west", "east", policy="identity", standby=True),
    ),
    applications=(ORDERS,),
)


def binding(
    grant: Grant,
) -> tuple[str, str, str, str, str]:
    return (
        grant.permission.value,
        grant.operation.value,
        grant.resource_type.value,
        grant.pattern_type.value,
        grant.resource_name,
    )


def bindings(grants: tuple[Grant, ...]) -> set[tuple[str, str, str, str, str]]:
    return {binding(g) for g in grants}


def allowed(grants: tuple[Grant, ...], op: Operation, rtype: ResourceType, name: str) -> bool:
    denied = any(
        g.permission is Permission.DENY
        and g.operation is op
        and g.resource_type is rtype
        and g.resource.covers(name)
        for g in grants
    )
    return not denied and any(g.allows(op, rtype, name) for g in grants)


# -- regular expressions as resources ----------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("orders", [("LITERAL", "orders")]),
        ("^orders$", [("LITERAL", "orders")]),
        ("orders\\.v2", [("LITERAL", "orders.v2")]),
        ("orders\\..*", [("PREFIXED", "orders.")]),
        ("orders.*", [("PREFIXED", "orders")]),
        ("orders-?x", [("PREFIXED", "orders")]),
        ("ordersx+", [("PREFIXED", "ordersx")]),
        ("orders\\d+", [("PREFIXED", "orders")]),
        ("orders|payments\\..*", [("LITERAL", "orders"), ("PREFIXED", "payments.")]),
        (".*", [("LITERAL", "*")]),
        ("[a-z]+", [("LITERAL", "*")]),
        ("(orders|payments)", [("LITERAL", "*")]),
        ("(?i)orders", [("LITERAL", "*")]),
        ("orders|.*", [("LITERAL", "*")]),
    ],
)
def test_a_pattern_becomes_the_narrowest_covering_resources(
    pattern: str, expected: list[tuple[str, str]]
) -> None:
    found = pattern_resources(pattern, TOPIC)

    assert [(r.pattern.value, r.name) for r in found] == expected


_ATOMS = st.sampled_from(["a", "b", ".", "-", "\\.", ".", "x*", "y?", "z+", "[ab]", "\\d", "|"])
_NAMES = st.text(alphabet="abxyz.-0129", min_size=0, max_size=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ATOMS, min_size=1, max_size=6), st.lists(_NAMES, min_size=1, max_size=20))
def test_the_resources_of_a_pattern_cover_every_name_it_matches(
    atoms: list[str], names: list[str]
) -> None:
    pattern = "".join(atoms)
    try:
        compiled = re.compile(pattern)
    except re.error:
        return
    resources = pattern_resources(pattern, TOPIC)
    for name in names:
        if compiled.fullmatch(name):
            assert any(r.covers(name) for r in resources), (pattern, name, resources)


# -- tables per role ----------------------------------------------------------------------------


def test_the_replicator_of_a_prefix_flow_at_least_once() -> None:
    east = bindings(role_grants(ACTIVE_ACTIVE, "replicator", "east"))
    west_grants = role_grants(ACTIVE_ACTIVE, "replicator", "west")
    west = bindings(west_grants)

    # source side of east->west: the included topics only, its groups
    assert {
        ("ALLOW", "READ", "TOPIC", "LITERAL", "orders"),
        ("ALLOW", "DESCRIBE_CONFIGS", "TOPIC", "LITERAL", "orders"),
        ("ALLOW", "READ", "TOPIC", "PREFIXED", "payments."),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "heartbeats"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-replicator.east-west"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-replicator.east-west.judge"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-heartbeats.east-west"),
    } <= east
    # target side: the copies, the syncs, no transactions
    for op in ("CREATE", "WRITE", "ALTER", "ALTER_CONFIGS"):
        assert ("ALLOW", op, "TOPIC", "LITERAL", "east.orders") in west
        assert ("ALLOW", op, "TOPIC", "PREFIXED", "east.payments.") in west
    # READ of the copies (the repair scan) is covered by west->east's READ on every topic
    assert allowed(west_grants, R, TOPIC, "east.orders")
    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "east.orders") not in west
    assert {
        ("ALLOW", "CREATE", "TOPIC", "LITERAL", "east.heartbeats"),
        ("ALLOW", "WRITE", "TOPIC", "LITERAL", "east.heartbeats"),
        ("ALLOW", "WRITE", "TOPIC", "LITERAL", "drsvc.offset-syncs.east"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-sync-repair"),
    } <= west
    assert not any(b[2] == "TRANSACTIONAL_ID" and "east-west" in b[4] for b in west)
    assert ("ALLOW", "WRITE", "TOPIC", "PREFIXED", "east.") not in west


def test_the_replicator_of_an_exactly_once_flow_gets_slots_and_transactional_ids() -> None:
    east = bindings(role_grants(ACTIVE_ACTIVE, "replicator", "east"))
    west = bindings(role_grants(ACTIVE_ACTIVE, "replicator", "west"))

    # west->east is exactly once: target east
    assert {
        ("ALLOW", "WRITE", "TRANSACTIONAL_ID", "PREFIXED", "drsvc.west-east."),
        ("ALLOW", "CREATE", "TOPIC", "LITERAL", "drsvc.slots.west-east.internal"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "drsvc.slots.west-east.internal"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-replicator.west-east"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-slots.west-east"),
        # include .* copies everything: the prefix, and the checkpoint topic under it denied
        ("ALLOW", "WRITE", "TOPIC", "PREFIXED", "west."),
        ("DENY", "WRITE", "TOPIC", "LITERAL", "west.checkpoints.internal"),
    } <= east
    # its source west: read everything (include .*), the slots' reader group, no commit group
    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "*") in west
    assert ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-replicator.west-east.reader") in west
    assert ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-replicator.west-east") not in west


def test_the_replicator_of_an_identity_pair() -> None:
    west = bindings(role_grants(ACTIVE_PASSIVE, "replicator", "west"))
    east = bindings(role_grants(ACTIVE_PASSIVE, "replicator", "east"))

    # east->west copies orders and invoices under their own names, heartbeats into west's own
    for name in ("orders", "invoices", "heartbeats"):
        assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", name) in west
    # the standby way back copies only applications' topics, though its include is .*
    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "orders") in east
    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "*") not in east
    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "invoices") not in east
    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "orders") in west  # standby's source


def test_heartbeats_fold_into_the_replicator_when_they_share_its_principal() -> None:
    together = bindings(role_grants(ACTIVE_ACTIVE, "replicator", "west"))
    apart = Principals(heartbeats="User:drsvc-heartbeats")
    alone = role_grants(ACTIVE_ACTIVE, "heartbeats", "west", principals=apart)
    without = bindings(role_grants(ACTIVE_ACTIVE, "replicator", "west", principals=apart))

    emitter = ("ALLOW", "WRITE", "TOPIC", "LITERAL", "heartbeats")
    assert emitter in together and emitter not in without
    assert bindings(alone) == {
        ("ALLOW", "CREATE", "TOPIC", "LITERAL", "heartbeats"),
        ("ALLOW", "WRITE", "TOPIC", "LITERAL", "heartbeats"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "heartbeats"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "east.heartbeats"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-heartbeat-observer.west"),
    }
    assert {g.principal for g in alone} == {"User:drsvc-heartbeats"}


def test_the_checkpoint_stream() -> None:
    east = bindings(role_grants(ACTIVE_ACTIVE, "checkpoints", "east"))
    west = bindings(role_grants(ACTIVE_ACTIVE, "checkpoints", "west"))

    assert {
        ("ALLOW", "DESCRIBE", "GROUP", "LITERAL", "*"),  # group include .*: a wildcard
        ("ALLOW", "DESCRIBE", "TOPIC", "LITERAL", "orders"),
    } <= east
    assert {
        ("ALLOW", "READ", "TOPIC", "LITERAL", "drsvc.offset-syncs.east"),
        ("ALLOW", "CREATE", "TOPIC", "LITERAL", "east.checkpoints.internal"),
        ("ALLOW", "WRITE", "TOPIC", "LITERAL", "east.checkpoints.internal"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-checkpoints.west"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-checkpoints.west.east-west"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-checkpoints-reader"),
        # orders opted in to the group offset sync
        ("ALLOW", "READ", "GROUP", "LITERAL", "orders-consumer"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "east.orders"),
        # a group synced back commits on the original topic: a commit needs READ
        ("ALLOW", "READ", "TOPIC", "LITERAL", "orders"),
    } <= west
    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "orders") in east
    assert not any(b[1] == "WRITE" and b[4] != "east.checkpoints.internal" for b in west)


def test_the_executor() -> None:
    west = bindings(role_grants(ACTIVE_ACTIVE, "executor", "west"))

    assert {
        ("ALLOW", "READ", "TOPIC", "LITERAL", "drsvc.offset-syncs.east"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "east.checkpoints.internal"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "orders"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "east.orders"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "orders-consumer"),
        ("ALLOW", "WRITE", "TRANSACTIONAL_ID", "LITERAL", "orders-tx"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-translate"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "drsvc-replay-reader"),
    } <= west
    # status reads each flow's progress group where it lives: the source at least once (east
    # for east->west), the target exactly once (east for west->east)
    east = bindings(role_grants(ACTIVE_ACTIVE, "executor", "east"))
    for group in ("drsvc-replicator.east-west", "drsvc-replicator.west-east"):
        assert ("ALLOW", "DESCRIBE", "GROUP", "LITERAL", group) in east
        assert ("ALLOW", "DESCRIBE", "GROUP", "LITERAL", group) not in west
    # quarantine: the executor writes no application topic
    assert not any(b[1] == "WRITE" and b[2] == "TOPIC" for b in west)


def test_the_executor_writes_an_application_topic_only_to_replay_it() -> None:
    replaying = Topo(
        clusters=ACTIVE_ACTIVE.clusters,
        flows=ACTIVE_ACTIVE.flows,
        applications=(App("orders", ("g",), ("orders",), "east", on_recovery="replay"),),
    )
    west = bindings(role_grants(replaying, "executor", "west"))

    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "orders") in west
    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "east.orders") not in west


def test_the_verifier_reads_only() -> None:
    for cluster in ("east", "west"):
        grants = role_grants(ACTIVE_ACTIVE, "verifier", cluster)
        assert {g.operation for g in grants} == {R}
        assert ("ALLOW", "READ", "GROUP", "PREFIXED", "drsvc-verify-") in bindings(grants)


def test_an_application_reads_the_copies_and_writes_only_its_own_topics() -> None:
    west = role_grants(ACTIVE_ACTIVE, "application", "west")

    assert bindings(west) == {
        ("ALLOW", "READ", "TOPIC", "LITERAL", "orders"),
        ("ALLOW", "WRITE", "TOPIC", "LITERAL", "orders"),
        ("ALLOW", "READ", "TOPIC", "LITERAL", "east.orders"),
        ("ALLOW", "READ", "GROUP", "LITERAL", "orders-consumer"),
        ("ALLOW", "WRITE", "TRANSACTIONAL_ID", "LITERAL", "orders-tx"),
        ("DENY", "WRITE", "TOPIC", "PREFIXED", "east."),
    }
    assert {g.principal for g in west} == {"User:app-orders"}


def test_an_application_topic_named_like_a_copy_is_read_only() -> None:
    reader = App("audit", ("audit",), ("east.orders",), "west")
    topo = Topo(clusters=ACTIVE_ACTIVE.clusters, flows=ACTIVE_ACTIVE.flows, applications=(reader,))

    west = bindings(role_grants(topo, "application", "west", application="audit"))

    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "east.orders") in west
    assert not any(b[0] == "ALLOW" and b[1] == "WRITE" and b[2] == "TOPIC" for b in west)


def test_identity_clusters_need_no_deny_for_applications() -> None:
    west = bindings(role_grants(ACTIVE_PASSIVE, "application", "west"))

    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "orders") in west  # after a failover
    assert not any(b[0] == "DENY" for b in west)


def test_an_application_is_granted_only_where_it_may_run() -> None:
    one_way = Topo(clusters={"east": {}, "west": {}, "north": {}}, flows=(Flow("east", "west"),))
    app = App("a", ("g",), ("t",), "west")

    assert application_clusters(one_way, app) == ("west",)
    assert application_clusters(one_way, ORDERS) == ("east", "west")
    topo = Topo(clusters=one_way.clusters, flows=one_way.flows, applications=(app,))
    assert role_grants(topo, "application", "east") == ()


def test_heartbeats_topics_follow_multi_hop_chains() -> None:
    chain = Topo(
        clusters={"a": {}, "b": {}, "c": {}},
        flows=(Flow("a", "b"), Flow("b", "c"), Flow("b", "a")),
    )

    assert heartbeats_topics(chain, "c") == ("b.a.heartbeats", "b.heartbeats", "heartbeats")
    assert heartbeats_topics(chain, "a") == ("b.heartbeats", "heartbeats")


def test_unknown_role_cluster_or_application_is_refused() -> None:
    with pytest.raises(PolicyError, match="unknown role"):
        role_grants(ACTIVE_ACTIVE, "admin", "east")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="unknown cluster 'south'"):
        role_grants(ACTIVE_ACTIVE, "executor", "south")
    with pytest.raises(PolicyError, match="unknown application 'x'"):
        role_grants(ACTIVE_ACTIVE, "application", "east", application="x")
    with pytest.raises(PolicyError, match="Type:name"):
        Principals(executor="drsvc-executor")


def test_a_prefixed_resource_covers_what_starts_with_it() -> None:
    prefixed = Resource(TOPIC, PatternType.PREFIXED, "east.")

    assert prefixed.covers("east.orders") and not prefixed.covers("west.orders")
    assert prefixed.covers_resource(Resource(TOPIC, PatternType.LITERAL, "east.orders"))
    assert not prefixed.covers_resource(Resource(TOPIC, PatternType.LITERAL, "*"))
    assert Resource(TOPIC, PatternType.LITERAL, "*").covers_resource(prefixed)


# -- properties over generated topologies -------------------------------------------------------

_ALIASES = ("east", "west", "north")
_PATTERNS = st.sampled_from([".*", "orders", "orders|payments", "pay.*", "[a-z]+", "tmp\\..*"])


@st.composite
def topologies(draw: st.DrawFn) -> Topo:
    pairs = draw(
        st.lists(
            st.sampled_from([(s, t) for s in _ALIASES for t in _ALIASES if s != t]),
            min_size=1,
            max_size=4,
            unique=True,
        )
    )
    flows = []
    for source, target in pairs:
        # identity only one way, as the topology rules require
        identity = (target, source) not in pairs and draw(st.booleans())
        flows.append(
            Flow(
                source,
                target,
                policy="identity" if identity else "prefix",
                delivery=draw(st.sampled_from(["at-least-once", "exactly-once"])),
                topics=Filter((draw(_PATTERNS),)),
                multi_hop=draw(st.booleans()),
            )
        )
    apps = tuple(
        App(
            f"app{i}",
            groups=(f"g{i}",),
            topics=tuple(
                draw(
                    st.lists(
                        st.sampled_from(["orders", "payments", "east.orders"]),
                        min_size=1,
                        max_size=2,
                        unique=True,
                    )
                )
            ),
            preferred=draw(st.sampled_from(_ALIASES)),
            transactional_ids=(f"tx{i}",),
            sync_group_offsets=draw(st.booleans()),
            on_recovery=draw(st.sampled_from(["quarantine", "replay"])),
        )
        for i in range(draw(st.integers(1, 2)))
    )
    return Topo(clusters={alias: {} for alias in _ALIASES}, flows=tuple(flows), applications=apps)


def _copy_names(topo: Topo, cluster: str) -> set[str]:
    """Names under which a prefix flow writes copies on ``cluster``, for a few topics."""
    return {
        f"{flow.source}.{topic}"
        for flow in topo.flows
        if flow.target == cluster and flow.policy == "prefix"
        for topic in ("orders", "payments", "heartbeats", "x")
    }


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_no_application_may_write_a_copy(topo: Topo) -> None:
    for cluster in _ALIASES:
        grants = role_grants(topo, "application", cluster)
        for app in topo.applications:
            own = tuple(g for g in grants if g.principal == f"User:app-{app.name}")
            for name in _copy_names(topo, cluster):
                assert not allowed(own, W, TOPIC, name), (cluster, app.name, name)


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_every_grant_is_the_roles_principal(topo: Topo) -> None:
    principals = Principals()
    for cluster in _ALIASES:
        for role in ROLES:
            grants = role_grants(topo, role, cluster, principals=principals)
            if role == "application":
                names = {f"User:app-{a.name}" for a in topo.applications}
                assert {g.principal for g in grants} <= names
            else:
                assert {g.principal for g in grants} <= {principals.of(role)}
            assert all(g.host == "*" for g in grants)


@settings(max_examples=150, deadline=None)
@given(topologies())
def test_the_replicator_never_writes_a_flows_source_topics(topo: Topo) -> None:
    for cluster in _ALIASES:
        grants = role_grants(topo, "replicator", cluster)
        sources = {"orders", "payments"} - {
            # an identity flow into this cluster writes these very names
            t
            for flow in topo.flows
            if flow.target == cluster and flow.policy == "identity"
            for t in ("orders", "payments")
        }
        if not any(flow.source == cluster for flow in topo.flows):
            continue
        for name in sources:
            assert not allowed(grants, W, TOPIC, name), (cluster, name)


@settings(max_examples=100, deadline=None)
@given(topologies())
def test_the_verifier_only_reads(topo: Topo) -> None:
    for cluster in _ALIASES:
        assert {g.operation for g in role_grants(topo, "verifier", cluster)} <= {R}


@settings(max_examples=100, deadline=None)
@given(topologies())
def test_grants_are_sorted_without_duplicates(topo: Topo) -> None:
    for cluster in _ALIASES:
        for role in ROLES:
            grants = role_grants(topo, role, cluster)
            assert list(grants) == sorted(set(grants))


#: a migration from an old cluster to a new one, cutting one application over
MIGRATION_TOPOLOGY = Topo(
    clusters={"old": {}, "new": {}, "dr": {}},
    flows=(Flow("old", "dr"),),
    applications=(
        App("orders", groups=("orders-consumer",), topics=("mig.orders",), preferred="old"),
        App("billing", groups=("billing-consumer",), topics=("billing",), preferred="old"),
    ),
    migrations=(
        Migration(
            "to-new",
            "old",
            "new",
            topics=Filter(("mig\\..*",), ("mig\\.tmp\\..*",)),
            applications=("orders",),
        ),
    ),
)


def test_the_migrator_copies_reports_and_cuts_over_only_its_migration() -> None:
    migrator = "User:drsvc-migrator"
    source = role_grants(MIGRATION_TOPOLOGY, "migrator", "old")
    target = role_grants(MIGRATION_TOPOLOGY, "migrator", "new")
    assert {g.principal for g in (*source, *target)} == {migrator}
    assert all(g.why.startswith("migration to-new: ") for g in (*source, *target))
    src, tgt = bindings(source), bindings(target)
    # the copier reads the migration's topics (and their configs) at the source ...
    assert ("ALLOW", "READ", "TOPIC", "PREFIXED", "mig.") in src
    assert ("ALLOW", "DESCRIBE_CONFIGS", "TOPIC", "PREFIXED", "mig.") in src
    # ... and creates, configures and writes them under the same names at the target
    for op in ("CREATE", "WRITE", "ALTER_CONFIGS", "READ"):
        assert ("ALLOW", op, "TOPIC", "PREFIXED", "mig.") in tgt
    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "drsvc.offset-syncs.old") in tgt
    # cutover: the application it moves, not the one it does not
    assert ("ALLOW", "READ", "GROUP", "LITERAL", "orders-consumer") in tgt
    assert not any("billing" in name for *_, name in src | tgt)
    # the takeover from MirrorMaker 2 reads its topics and describes its workers' group
    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "mm2-offset-syncs.new.internal") in src
    assert ("ALLOW", "READ", "TOPIC", "LITERAL", "mm2-offsets.old.internal") in tgt
    assert ("ALLOW", "DESCRIBE", "GROUP", "LITERAL", "old-mm2") in tgt
    # nothing of the topology's own flow, and nothing on a cluster the migration does not touch
    assert not any("dr" in name.split(".") for *_, name in src | tgt)
    assert role_grants(MIGRATION_TOPOLOGY, "migrator", "dr") == ()


def test_a_topology_without_migrations_gives_the_migrator_nothing() -> None:
    assert role_grants(ACTIVE_ACTIVE, "migrator", "east") == ()
    assert "User:drsvc-migrator" in Principals().services()


def test_an_application_a_migration_cuts_over_may_run_on_its_target() -> None:
    orders, billing = MIGRATION_TOPOLOGY.applications
    assert application_clusters(MIGRATION_TOPOLOGY, orders) == ("dr", "new", "old")
    assert application_clusters(MIGRATION_TOPOLOGY, billing) == ("dr", "old")
    on_new = bindings(role_grants(MIGRATION_TOPOLOGY, "application", "new"))
    assert ("ALLOW", "READ", "GROUP", "LITERAL", "orders-consumer") in on_new
    assert ("ALLOW", "WRITE", "TOPIC", "LITERAL", "mig.orders") in on_new
