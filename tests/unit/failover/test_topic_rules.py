"""Internal topics, include/exclude filters and the loop rule."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.errors import PatternError, PolicyError
from failover.replication_policy import IdentityPolicy, PrefixPolicy, ReplicationPolicy
from failover.topic_rules import (
    InternalTopicNames,
    NameFilter,
    internal_topic_reason,
    is_heartbeats_topic,
    is_internal_topic,
    should_replicate,
    topic_verdict,
)

POLICY = PrefixPolicy.for_aliases(["east", "west", "south"])


@pytest.mark.parametrize(
    ("topic", "internal"),
    [
        ("__consumer_offsets", True),
        ("__transaction_state", True),
        ("__share_group_state", True),
        ("__anything", True),
        (".hidden", True),
        ("_schemas", True),
        ("_confluent-metrics", True),
        ("connect-offsets", True),
        ("connect-configs", True),
        ("connect-status", True),
        ("mm2-offset-syncs.east.internal", True),
        ("mm2-configs.west.internal", True),
        ("east.checkpoints.internal", True),
        ("my-connect-offsets-internal", True),
        ("drsvc.offset-syncs.east", True),
        ("orders-app-store-changelog", True),
        ("orders-app-KSTREAM-AGGREGATE-0000000003-repartition", True),
        ("orders", False),
        ("heartbeats", False),
        ("east.heartbeats", False),
        ("_orders", False),
        ("schemas", False),
        ("connect-offsets-v2", False),
        ("orders.internal.v2", False),
        ("changelog", False),
        ("drsvc.offset-syncs", False),
    ],
)
def test_internal_topics(topic: str, internal: bool) -> None:
    assert is_internal_topic(topic) is internal


def test_copies_of_internal_topics_are_internal_only_with_the_policy() -> None:
    assert not is_internal_topic("east.__consumer_offsets")
    reason = internal_topic_reason("east.__consumer_offsets", policy=POLICY)
    assert reason is not None and "copy of '__consumer_offsets'" in reason


def test_custom_internal_names_are_recognised() -> None:
    names = InternalTopicNames(
        heartbeats="hb", offset_syncs="ops.syncs.{source}", checkpoints="ops.{source}.ckpt"
    )
    assert names.offset_syncs_topic("east") == "ops.syncs.east"
    assert names.checkpoints_topic("east") == "ops.east.ckpt"
    assert is_internal_topic("ops.syncs.east", names)
    assert is_internal_topic("ops.west.ckpt", names)
    assert not is_internal_topic("ops.syncs.east", InternalTopicNames())
    assert is_heartbeats_topic("east.hb", POLICY, names)
    assert not is_heartbeats_topic("east.heartbeats", POLICY, names)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"offset_syncs": "drsvc.offset-syncs"}, "must contain {source} exactly once"),
        ({"checkpoints": "{source}.{source}.ck"}, "must contain {source} exactly once"),
        ({"checkpoints": "{source} ck"}, "does not give a legal name"),
        ({"heartbeats": "__heartbeats"}, "looks like an internal topic"),
        ({"heartbeats": "hb.internal"}, "looks like an internal topic"),
        ({"heartbeats": ""}, "topic name is empty"),
        ({"heartbeats": "sync.east", "offset_syncs": "sync.{source}"}, "collides"),
    ],
)
def test_internal_names_are_validated(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyError, match=message.replace("{", r"\{").replace("}", r"\}")):
        InternalTopicNames(**kwargs)


@pytest.mark.parametrize(
    ("topic", "heartbeats"),
    [
        ("heartbeats", True),
        ("east.heartbeats", True),
        ("west.east.heartbeats", True),
        ("heartbeats2", False),
        ("north.heartbeats", False),
        ("east.heartbeats.v2", False),
    ],
)
def test_heartbeats_topics(topic: str, heartbeats: bool) -> None:
    assert is_heartbeats_topic(topic, POLICY) is heartbeats


@pytest.mark.parametrize(
    ("include", "exclude", "name", "matches"),
    [
        ((".*",), (), "orders", True),
        (("order",), (), "orders", False),  # fullmatch, not search
        (("orders|payments",), (), "payments", True),
        ((".*",), (r"tmp\..*",), "tmp.x", False),
        ((".*",), (r"tmp\..*",), "x.tmp.y", True),
        (("a.*", "b.*"), ("ab",), "ab", False),
        (("a.*", "b.*"), ("ab",), "bc", True),
        ((), (), "orders", False),
    ],
)
def test_name_filter(
    include: tuple[str, ...], exclude: tuple[str, ...], name: str, matches: bool
) -> None:
    assert NameFilter(include=include, exclude=exclude).matches(name) is matches


def test_name_filter_reports_the_matching_patterns() -> None:
    rules = NameFilter(include=("x", "o.*"), exclude=("a", "or.*"))
    assert rules.first_include("orders") == "o.*"
    assert rules.first_exclude("orders") == "or.*"
    assert rules.first_exclude("x") is None


def test_bad_pattern_names_the_pattern_and_the_reason() -> None:
    with pytest.raises(PatternError) as caught:
        NameFilter(exclude=("ok", "(unclosed"))
    assert caught.value.pattern == "(unclosed"
    assert "missing )" in caught.value.reason
    assert "'(unclosed'" in str(caught.value)


@pytest.mark.parametrize(
    ("topic", "source", "target", "replicate", "target_topic", "reason"),
    [
        ("orders", "east", "west", True, "east.orders", "include pattern '.*'"),
        ("heartbeats", "east", "west", True, "east.heartbeats", "heartbeats"),
        ("west.orders", "east", "west", False, None, "came from west"),
        ("west.heartbeats", "east", "west", False, None, "came from west"),
        ("south.west.orders", "east", "west", False, None, "came from west"),
        ("south.orders", "east", "west", True, "east.south.orders", "include"),
        ("east.orders", "east", "west", False, None, "the cluster it is on"),
        ("south.south.orders", "east", "west", False, None, "passes through a cluster twice"),
        ("__consumer_offsets", "east", "west", False, None, "internal topic"),
        ("south.__consumer_offsets", "east", "west", False, None, "internal topic: copy of"),
        ("drsvc.offset-syncs.south", "east", "west", False, None, "drsvc offset syncs"),
        ("tmp.scratch", "east", "west", False, None, r"exclude pattern 'tmp\\..*'"),
        ("x" * 245, "east", "west", False, None, "Kafka allows at most 249"),
    ],
)
def test_verdicts_between_east_and_west(
    topic: str,
    source: str,
    target: str,
    replicate: bool,
    target_topic: str | None,
    reason: str,
) -> None:
    verdict = topic_verdict(topic, source, target, POLICY, topics=NameFilter(exclude=(r"tmp\..*",)))
    assert verdict.replicate is replicate
    assert verdict.target_topic == target_topic
    assert reason in verdict.reason


def test_heartbeats_ignore_filters_but_not_the_loop_rule() -> None:
    nothing = NameFilter(include=("orders",), exclude=(".*heartbeats",))
    assert topic_verdict("heartbeats", "east", "west", POLICY, topics=nothing).replicate
    assert topic_verdict("south.heartbeats", "east", "west", POLICY, topics=nothing).replicate
    assert not topic_verdict("west.heartbeats", "east", "west", POLICY, topics=nothing).replicate
    assert not topic_verdict("payments", "east", "west", POLICY, topics=nothing).replicate


def test_multi_hop_can_be_switched_off() -> None:
    verdict = topic_verdict("south.orders", "east", "west", POLICY, allow_multi_hop=False)
    assert not verdict.replicate
    assert "came from south" in verdict.reason
    assert topic_verdict("orders", "east", "west", POLICY, allow_multi_hop=False).replicate


def test_identity_cannot_see_loops_in_names() -> None:
    # The name-based rule has nothing to go on; the provenance header guards identity flows.
    verdict = topic_verdict("west.orders", "east", "west", IdentityPolicy())
    assert verdict.replicate
    assert verdict.target_topic == "west.orders"


def test_a_flow_needs_two_clusters() -> None:
    with pytest.raises(PolicyError, match="two different clusters"):
        topic_verdict("orders", "east", "east", POLICY)


def test_should_replicate_is_the_verdict() -> None:
    assert should_replicate("orders", "east", "west", POLICY)
    assert not should_replicate("west.orders", "east", "west", POLICY)


# -- properties ---------------------------------------------------------------------------------

ALIAS = st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True)
BASE = st.from_regex(r"[a-z][a-z0-9.-]{0,15}", fullmatch=True)


@st.composite
def flow_and_topic(draw: st.DrawFn) -> tuple[PrefixPolicy, str, str, str, tuple[str, ...]]:
    """A topology's policy, a flow source->target, and a topic with an arbitrary (even looping)
    chain of hops on the source."""
    aliases = draw(st.lists(ALIAS, min_size=2, max_size=5, unique=True))
    policy = PrefixPolicy.for_aliases(aliases)
    source, target = draw(st.permutations(aliases))[:2]
    topic = draw(BASE.filter(lambda t: policy.topic_source(t) is None))
    hops = draw(st.lists(st.sampled_from(aliases), max_size=5))
    for alias in hops:
        topic = policy.format_remote_topic(alias, topic)
    return policy, source, target, topic, tuple(reversed(hops))


@given(flow_and_topic())
def test_a_flow_never_copies_a_topic_back_to_where_it_came_from(
    case: tuple[PrefixPolicy, str, str, str, tuple[str, ...]],
) -> None:
    policy, source, target, topic, chain = case
    verdict = topic_verdict(topic, source, target, policy)
    if target in chain:
        assert not verdict.replicate
    if verdict.replicate:
        assert verdict.target_topic is not None
        produced = policy.source_chain(verdict.target_topic)
        assert produced == (source, *chain)
        assert target not in produced
        assert len(set(produced)) == len(produced)


def _replicate_until_stable(
    policy: ReplicationPolicy, flows: list[tuple[str, str]], topics: dict[str, set[str]]
) -> int:
    """Run every flow over every topic until nothing new appears; return the rounds taken."""
    for round_number in itertools.count(1):
        new = False
        for source, target in flows:
            for topic in sorted(topics[source]):
                verdict = topic_verdict(topic, source, target, policy)
                if verdict.replicate and verdict.target_topic not in topics[target]:
                    assert verdict.target_topic is not None
                    chain = policy.source_chain(verdict.target_topic)
                    assert target not in chain, f"{verdict.target_topic} looped back to {target}"
                    assert len(set(chain)) == len(chain), f"{verdict.target_topic} repeats"
                    topics[target].add(verdict.target_topic)
                    new = True
        if not new:
            return round_number
        # Chains are duplicate-free, so they are at most as long as there are clusters.
        assert round_number <= len(topics) + 1, "replication did not converge: a loop"
    raise AssertionError("unreachable")


@given(
    local_a=st.sets(BASE, max_size=4),
    local_b=st.sets(BASE, max_size=4),
)
def test_active_active_never_loops(local_a: set[str], local_b: set[str]) -> None:
    policy = PrefixPolicy.for_aliases(["a", "b"])
    local_a = {t for t in local_a if policy.topic_source(t) is None}
    local_b = {t for t in local_b if policy.topic_source(t) is None}
    topics = {"a": set(local_a), "b": set(local_b)}
    rounds = _replicate_until_stable(policy, [("a", "b"), ("b", "a")], topics)
    assert rounds <= 2
    for cluster, names in topics.items():
        for name in names:
            chain = policy.source_chain(name)
            assert len(chain) <= 1
            assert cluster not in chain
    assert topics["b"] == local_b | {f"a.{t}" for t in local_a}
    assert topics["a"] == local_a | {f"b.{t}" for t in local_b}


# No deadline: a property of the rules, not a timing; a loaded two-core machine (a test run
# with brokers and Spark beside it) took longer than the default 200 ms for one example.
@settings(deadline=None)
@given(
    aliases=st.lists(ALIAS, min_size=2, max_size=4, unique=True),
    data=st.data(),
)
def test_any_flow_graph_converges_without_repeating_a_cluster(
    aliases: list[str], data: st.DataObject
) -> None:
    policy = PrefixPolicy.for_aliases(aliases)
    pairs = [(s, t) for s in aliases for t in aliases if s != t]
    flows = data.draw(st.lists(st.sampled_from(pairs), min_size=1, unique=True))
    topics = {alias: {"orders", "heartbeats"} for alias in aliases}
    _replicate_until_stable(policy, flows, topics)
    for cluster, names in topics.items():
        for name in names:
            chain = policy.source_chain(name)
            assert cluster not in chain
            assert len(set(chain)) == len(chain)
