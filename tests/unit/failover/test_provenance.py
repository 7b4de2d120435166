"""The provenance header: its byte format, its rejections, and reading the hops of a record."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from failover.provenance import (
    PROVENANCE_HEADER,
    PROVENANCE_VERSION,
    Provenance,
    ProvenanceFormatError,
    chain,
    decode,
    encode,
    header_prefix,
    visited,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
KAFKA_NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
aliases = st.text(KAFKA_NAME_CHARS, min_size=1, max_size=255)
topics = st.text(KAFKA_NAME_CHARS, min_size=1, max_size=249)
hops = st.builds(Provenance, aliases, topics, INT32, INT64)

# Any text the format can hold: multi-byte UTF-8 as well, within the length fields.
unicode_aliases = st.text(min_size=1, max_size=63)  # at most 4 bytes a character: <= 252 bytes
unicode_topics = st.text(max_size=300)


def wire(alias: bytes, topic: bytes, partition: int, offset: int, version: int = 1) -> bytes:
    """The documented layout, written out independently of the module."""
    return (
        bytes([version, len(alias)])
        + alias
        + struct.pack(">H", len(topic))
        + topic
        + struct.pack(">iq", partition, offset)
    )


# -- the format ---------------------------------------------------------------------------------


@given(hops)
def test_round_trip_of_kafka_names(hop: Provenance) -> None:
    assert decode(encode(hop)) == hop


@given(unicode_aliases, unicode_topics, INT32, INT64)
def test_round_trip_of_any_unicode_text(
    alias: str, topic: str, partition: int, offset: int
) -> None:
    hop = Provenance(alias, topic, partition, offset)
    assert decode(encode(hop)) == hop


@given(hops)
def test_encoding_follows_the_documented_layout(hop: Provenance) -> None:
    expected = wire(hop.cluster.encode(), hop.topic.encode(), hop.partition, hop.offset)
    assert encode(hop) == expected
    assert expected[0] == PROVENANCE_VERSION


@given(hops)
def test_prefix_plus_the_offset_bytes_is_the_header(hop: Provenance) -> None:
    prefix = header_prefix(hop.cluster, hop.topic, hop.partition)
    # What the hot path appends to the prefix for each record:
    assert prefix + hop.offset.to_bytes(8, "big", signed=True) == encode(hop)
    assert prefix + struct.pack(">q", hop.offset) == encode(hop)


def test_a_known_value_byte_for_byte() -> None:
    value = encode(Provenance("east", "orders", 3, 258))
    assert value == (
        b"\x01"  # version
        + b"\x04east"
        + b"\x00\x06orders"
        + b"\x00\x00\x00\x03"
        + b"\x00\x00\x00\x00\x00\x00\x01\x02"
    )


@pytest.mark.parametrize(
    ("partition", "offset"),
    [(0, 0), (2**31 - 1, 2**63 - 1), (-1, -1), (-(2**31), -(2**63))],
)
def test_integer_limits_round_trip(partition: int, offset: int) -> None:
    hop = Provenance("west", "t", partition, offset)
    assert decode(encode(hop)) == hop


def test_longest_alias_and_topic_fit() -> None:
    hop = Provenance("a" * 255, "t" * 0xFFFF, 1, 2)
    assert decode(encode(hop)) == hop


@pytest.mark.parametrize(
    ("cluster", "topic", "message"),
    [
        ("", "orders", "must be 1-255 bytes"),
        ("a" * 256, "orders", "must be 1-255 bytes"),
        ("é" * 128, "orders", "must be 1-255 bytes"),  # 128 characters, 256 bytes
        ("east", "t" * 0x10000, "too long"),
        ("east", "€" * 21846, "too long"),  # 21846 characters, 65538 bytes
    ],
)
def test_names_that_do_not_fit_are_refused(cluster: str, topic: str, message: str) -> None:
    with pytest.raises(ProvenanceFormatError, match=message):
        header_prefix(cluster, topic, 0)
    with pytest.raises(ProvenanceFormatError, match=message):
        encode(Provenance(cluster, topic, 0, 0))


def test_the_format_error_is_a_value_error() -> None:
    assert issubclass(ProvenanceFormatError, ValueError)


# -- rejections ---------------------------------------------------------------------------------

REJECTIONS = (
    "truncated",
    "wrong length",
    "not supported",
    "not UTF-8",
)


@settings(max_examples=200)
@given(hops, st.data())
def test_every_truncation_is_refused(hop: Provenance, data: st.DataObject) -> None:
    value = encode(hop)
    cut = data.draw(st.integers(0, len(value) - 1), label="length kept")
    with pytest.raises(ProvenanceFormatError, match=r"truncated|wrong length"):
        decode(value[:cut])


@given(hops, st.binary(min_size=1, max_size=16))
def test_trailing_bytes_are_refused(hop: Provenance, extra: bytes) -> None:
    with pytest.raises(ProvenanceFormatError, match="wrong length"):
        decode(encode(hop) + extra)


@given(hops, st.integers(0, 255).filter(lambda v: v != PROVENANCE_VERSION))
def test_unknown_versions_are_refused(hop: Provenance, version: int) -> None:
    value = bytes([version]) + encode(hop)[1:]
    with pytest.raises(ProvenanceFormatError, match=f"version {version} is not supported"):
        decode(value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "truncated"),
        (b"\x01", "truncated"),
        (b"\x02", "truncated"),  # too short to say more than that
        (b"\x00" + encode(Provenance("east", "t", 0, 0))[1:], "version 0 is not supported"),
        (b"\x01\x05ab", "truncated in the alias"),
        (b"\x01\x04east\x00", "truncated in the alias"),
        (wire(b"east", b"orders", 0, 0)[:-1], "wrong length"),
        (wire(b"east", b"orders", 0, 0) + b"\x00", "wrong length"),
        # A topic length that runs past the value.
        (b"\x01\x04east\xff\xff" + b"o" * 6 + bytes(12), "wrong length"),
        (wire(b"\xff\xfe", b"orders", 0, 0), "not UTF-8"),
        (wire(b"east", b"ord\xc3", 0, 0), "not UTF-8"),
    ],
)
def test_malformed_values_name_the_problem(value: bytes, message: str) -> None:
    with pytest.raises(ProvenanceFormatError, match=message):
        decode(value)


@given(st.binary(max_size=64) | hops.map(lambda hop: encode(hop)[:-1] + b"\x00"))
def test_any_bytes_decode_exactly_or_raise_a_format_error(value: bytes) -> None:
    try:
        hop = decode(value)
    except ProvenanceFormatError as err:
        assert any(reason in str(err) for reason in REJECTIONS), str(err)
    else:
        assert wire(hop.cluster.encode(), hop.topic.encode(), hop.partition, hop.offset) == value


# -- the hops of a record -----------------------------------------------------------------------


def header(hop: Provenance) -> tuple[str, bytes]:
    return (PROVENANCE_HEADER, encode(hop))


EAST = Provenance("east", "orders", 0, 10)
WEST = Provenance("west", "east.orders", 0, 20)
SOUTH = Provenance("south", "west.east.orders", 2, 30)


def test_chain_lists_the_hops_oldest_first_among_other_headers() -> None:
    headers: list[tuple[str, bytes | None]] = [
        ("trace-id", b"abc"),
        header(EAST),
        ("empty", None),
        ("trace-id", b""),
        header(WEST),
        (PROVENANCE_HEADER + ".other", b"not ours"),
        header(SOUTH),
        ("after", None),
    ]
    assert chain(headers) == [EAST, WEST, SOUTH]


other_headers = st.tuples(
    st.text(max_size=20).filter(lambda key: key != PROVENANCE_HEADER), st.none() | st.binary()
)


@given(st.lists(hops | other_headers, max_size=12))
def test_chain_keeps_the_order_of_the_hops_wherever_other_headers_are(
    items: list[Provenance | tuple[str, bytes | None]],
) -> None:
    headers = [header(item) if isinstance(item, Provenance) else item for item in items]
    assert chain(headers) == [item for item in items if isinstance(item, Provenance)]


def test_a_provenance_key_without_a_value_is_not_a_hop() -> None:
    assert chain([(PROVENANCE_HEADER, None), header(EAST)]) == [EAST]


@pytest.mark.parametrize("headers", [None, []])
def test_no_headers_no_hops(headers: list[tuple[str, bytes | None]] | None) -> None:
    assert chain(headers) == []
    assert not visited(headers, "east")


def test_chain_refuses_a_malformed_hop() -> None:
    with pytest.raises(ProvenanceFormatError):
        chain([header(EAST), (PROVENANCE_HEADER, b"\x01")])


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ("east", True),
        ("west", True),
        ("south", False),  # west -> south is the flow this record is about to take
        ("eas", False),
        ("east-1", False),
        ("orders", False),  # a topic name is not a cluster
        ("EAST", False),
    ],
)
def test_visited_names_only_clusters_a_copy_was_made_from(cluster: str, expected: bool) -> None:
    headers: list[tuple[str, bytes | None]] = [("k", None), header(EAST), header(WEST), ("k", b"")]
    assert visited(headers, cluster) is expected


def test_visited_is_false_for_records_without_provenance() -> None:
    assert not visited([("east", b"east"), ("trace-id", None)], "east")


def test_an_unreadable_provenance_header_does_not_stop_the_loop_check() -> None:
    future = bytes([9]) + b"anything a newer version writes"
    mine = encode(Provenance("west", "orders", 0, 7))
    headers: list[tuple[str, bytes | None]] = [
        (PROVENANCE_HEADER, future),
        (PROVENANCE_HEADER, mine),
    ]
    assert visited(headers, "west")
    assert not visited([(PROVENANCE_HEADER, future)], "west")


def test_an_empty_alias_is_refused_when_decoding_as_when_encoding() -> None:
    value = bytes([PROVENANCE_VERSION, 0]) + (0).to_bytes(2, "big") + bytes(12)
    with pytest.raises(ProvenanceFormatError, match="empty cluster alias"):
        decode(value)
