"""Replication policies: naming remote topics and reading provenance back from names."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from failover.errors import PolicyError
from failover.replication_policy import (
    MAX_TOPIC_LENGTH,
    IdentityPolicy,
    PrefixPolicy,
    ReplicationPolicy,
    check_alias,
    topic_name_problem,
)

EAST_WEST = PrefixPolicy.for_aliases(["east", "west", "south"])


@pytest.mark.parametrize(
    ("alias", "topic", "expected"),
    [
        ("east", "orders", "east.orders"),
        ("east", "orders.v2", "east.orders.v2"),
        ("west", "east.orders", "west.east.orders"),
        ("east", "heartbeats", "east.heartbeats"),
        ("south", "a-b_c", "south.a-b_c"),
    ],
)
def test_prefix_formats_alias_dot_topic(alias: str, topic: str, expected: str) -> None:
    assert EAST_WEST.format_remote_topic(alias, topic) == expected


@pytest.mark.parametrize(
    ("topic", "source", "upstream"),
    [
        ("east.orders", "east", "orders"),
        ("west.east.orders", "west", "east.orders"),
        ("orders", None, None),
        # A dot inside a local name is not a hop unless the prefix is a known alias.
        ("orders.v2", None, None),
        ("north.orders", None, None),
        ("East.orders", None, None),
        # A prefix followed by nothing, or by a name Kafka reserves, is not a remote topic.
        ("east.", None, None),
        ("east..", None, None),
        ("east...x", "east", "..x"),
        ("east", None, None),
    ],
)
def test_prefix_reads_source_and_upstream(
    topic: str, source: str | None, upstream: str | None
) -> None:
    assert EAST_WEST.topic_source(topic) == source
    assert EAST_WEST.upstream_topic(topic) == upstream
    assert EAST_WEST.is_remote(topic) is (source is not None)


@pytest.mark.parametrize(
    ("topic", "original", "chain"),
    [
        ("orders", "orders", ()),
        ("east.orders", "orders", ("east",)),
        ("west.east.orders", "orders", ("west", "east")),
        ("south.west.east.orders.v2", "orders.v2", ("south", "west", "east")),
        ("west.north.orders", "north.orders", ("west",)),
        ("east.heartbeats", "heartbeats", ("east",)),
    ],
)
def test_prefix_original_topic_and_chain(topic: str, original: str, chain: tuple[str, ...]) -> None:
    assert EAST_WEST.original_topic(topic) == original
    assert EAST_WEST.source_chain(topic) == chain


def test_custom_separator() -> None:
    policy = PrefixPolicy.for_aliases(["east", "west"], separator="_")
    assert policy.format_remote_topic("east", "orders.v2") == "east_orders.v2"
    assert policy.source_chain("west_east_orders") == ("west", "east")
    assert policy.topic_source("east.orders") is None


def test_multi_character_separator_round_trips() -> None:
    policy = PrefixPolicy.for_aliases(["a", "b"], separator="__")
    remote = policy.format_remote_topic("a", "_x")
    assert remote == "a___x"
    assert policy.topic_source(remote) == "a"
    assert policy.upstream_topic(remote) == "_x"


@pytest.mark.parametrize(
    ("aliases", "separator", "message"),
    [
        (frozenset(), ".", "needs the topology's cluster aliases"),
        (frozenset({"us.east", "west"}), ".", "'us.east' contains the separator '.'"),
        (frozenset({"east west"}), ".", "characters Kafka does not allow"),
        (frozenset({""}), ".", "alias is empty"),
        (frozenset({"a_", "b"}), "__", "ends with the start of the separator"),
        (frozenset({"east"}), "", "separator is empty"),
        (frozenset({"east"}), "/", "separator '/'"),
    ],
)
def test_prefix_rejects_bad_aliases_and_separators(
    aliases: frozenset[str], separator: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message.replace(".", r"\.")):
        PrefixPolicy(aliases=aliases, separator=separator)


@pytest.mark.parametrize(
    ("alias", "topic", "message"),
    [
        ("north", "orders", "unknown cluster alias 'north' \\(known: east, south, west\\)"),
        ("east", "", "topic name is empty"),
        ("east", "or ders", "characters Kafka does not allow \\(' '\\)"),
        ("east", "x" * (MAX_TOPIC_LENGTH - len("east.") + 1), "remote topic name is 250"),
        ("east", ".", "reserved by Kafka"),
    ],
)
def test_prefix_refuses_illegal_remote_names(alias: str, topic: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        EAST_WEST.format_remote_topic(alias, topic)


def test_longest_legal_remote_name_is_accepted() -> None:
    topic = "x" * (MAX_TOPIC_LENGTH - len("east."))
    assert len(EAST_WEST.format_remote_topic("east", topic)) == MAX_TOPIC_LENGTH


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("orders", None),
        ("a" * MAX_TOPIC_LENGTH, None),
        ("a" * (MAX_TOPIC_LENGTH + 1), "at most 249"),
        ("..", "reserved"),
        ("caf\u00e9", "characters Kafka does not allow"),
    ],
)
def test_topic_name_problem(name: str, problem: str | None) -> None:
    found = topic_name_problem(name)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_identity_keeps_names_and_cannot_tell_provenance() -> None:
    policy = IdentityPolicy()
    assert policy.format_remote_topic("east", "orders") == "orders"
    assert policy.topic_source("east.orders") is None
    assert policy.upstream_topic("east.orders") is None
    assert policy.original_topic("east.orders") == "east.orders"
    assert policy.source_chain("west.east.orders") == ()
    with pytest.raises(PolicyError, match="characters Kafka does not allow"):
        policy.format_remote_topic("east", "bad/topic")


def test_a_policy_that_does_not_shorten_names_is_refused() -> None:
    class Broken(ReplicationPolicy):
        def format_remote_topic(self, source_alias: str, topic: str) -> str:
            return topic

        def topic_source(self, topic: str) -> str | None:
            return "x"

        def upstream_topic(self, topic: str) -> str | None:
            return topic

    with pytest.raises(PolicyError, match="not shorter"):
        Broken().original_topic("orders")


def test_policies_are_frozen() -> None:
    with pytest.raises(AttributeError):
        EAST_WEST.separator = "_"  # type: ignore[misc]


# -- properties ---------------------------------------------------------------------------------

ALIAS = st.from_regex(r"[a-z][a-z0-9_-]{0,7}", fullmatch=True)
ALIASES = st.frozensets(ALIAS, min_size=1, max_size=5)
# Topics deliberately contain the separator ('.') and alias-looking words.
TOPIC = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True).filter(
    lambda t: t not in {".", ".."}
)


@given(aliases=ALIASES, data=st.data(), topic=TOPIC)
def test_round_trip_one_hop(aliases: frozenset[str], data: st.DataObject, topic: str) -> None:
    policy = PrefixPolicy(aliases=aliases)
    alias = data.draw(st.sampled_from(sorted(aliases)))
    remote = policy.format_remote_topic(alias, topic)
    assert policy.topic_source(remote) == alias
    assert policy.upstream_topic(remote) == topic
    assert policy.is_remote(remote)


@given(aliases=ALIASES, data=st.data(), base=TOPIC)
def test_original_topic_strips_every_hop(
    aliases: frozenset[str], data: st.DataObject, base: str
) -> None:
    policy = PrefixPolicy(aliases=aliases)
    assume(policy.topic_source(base) is None)
    hops = data.draw(st.lists(st.sampled_from(sorted(aliases)), max_size=6))
    topic = base
    for alias in hops:
        topic = policy.format_remote_topic(alias, topic)
    assert policy.original_topic(topic) == base
    assert policy.source_chain(topic) == tuple(reversed(hops))


@given(aliases=ALIASES, word=ALIAS, rest=TOPIC)
def test_unknown_prefixes_are_local(aliases: frozenset[str], word: str, rest: str) -> None:
    assume(word not in aliases)
    policy = PrefixPolicy(aliases=aliases)
    topic = f"{word}.{rest}"
    assert policy.topic_source(topic) is None
    assert policy.original_topic(topic) == topic


@given(
    separator=st.sampled_from(["_", "-", "__", "--", ".", "xx"]),
    aliases=st.frozensets(st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True), min_size=1),
    data=st.data(),
    topic=TOPIC,
)
def test_round_trip_with_any_valid_separator(
    separator: str, aliases: frozenset[str], data: st.DataObject, topic: str
) -> None:
    valid = frozenset(a for a in aliases if _alias_ok(a, separator))
    assume(valid)
    policy = PrefixPolicy(aliases=valid, separator=separator)
    alias = data.draw(st.sampled_from(sorted(valid)))
    remote = policy.format_remote_topic(alias, topic)
    assert policy.topic_source(remote) == alias
    assert policy.upstream_topic(remote) == topic


def _alias_ok(alias: str, separator: str) -> bool:
    try:
        check_alias(alias, separator)
    except PolicyError:
        return False
    return True
