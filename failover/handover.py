"""The mark a worker leaves with the progress it commits when it gives a partition up cleanly.

Before copying a partition it takes over, a worker maps the copies its previous owner may have
left without offset syncs (a crash between a copy and its sync) by reading the remote partition's
tail. That read costs about a second per partition, and a rebalance moves many partitions at
once. A worker that gives a partition up cleanly (nothing in flight, every copy's sync
acknowledged) says so in the commit's metadata, with the end of its copies on the target: the
next owner then reads only what lies past that end, which is nothing unless some other writer
(a worker that lost the partition but still had records in flight) added copies after it.
"""

from __future__ import annotations

PREFIX = "drsvc-synced:"


def encode_synced_to(target_topic_id: bytes, end: int) -> str:
    """Every copy of the partition below target offset ``end`` of the remote topic
    ``target_topic_id`` is mapped by an acknowledged offset sync."""
    return f"{PREFIX}{target_topic_id.hex()}:{end}"


def decode_synced_to(metadata: str | None) -> tuple[bytes, int] | None:
    """The remote topic id and target end of a clean handover, or None when ``metadata`` is not
    such a mark (an ordinary commit, another tool's metadata, a damaged value)."""
    if not metadata or not metadata.startswith(PREFIX):
        return None
    topic_hex, sep, end_text = metadata[len(PREFIX) :].partition(":")
    try:
        topic_id, end = bytes.fromhex(topic_hex), int(end_text)
    except ValueError:
        return None
    if not sep or not topic_id or end < 0:
        return None
    return topic_id, end
