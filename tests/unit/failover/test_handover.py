"""The clean-handover mark in committed progress metadata."""

from __future__ import annotations

import pytest

from failover.handover import decode_synced_to, encode_synced_to


def test_a_mark_reads_back() -> None:
    topic_id = bytes(range(16))
    assert decode_synced_to(encode_synced_to(topic_id, 4711)) == (topic_id, 4711)
    assert decode_synced_to(encode_synced_to(topic_id, 0)) == (topic_id, 0)


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        "",
        "something another tool wrote",
        "drsvc-synced:",
        "drsvc-synced:zz:5",
        "drsvc-synced:0a0b",
        "drsvc-synced::5",
        "drsvc-synced:0a0b:-1",
        "drsvc-synced:0a0b:five",
    ],
)
def test_anything_else_is_no_mark(metadata: str | None) -> None:
    assert decode_synced_to(metadata) is None
