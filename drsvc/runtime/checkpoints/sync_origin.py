"""What a group offset on the target was translated from, kept in the commit's own metadata.

Group offset sync (:mod:`~drsvc.runtime.checkpoints.group_sync`) commits each translated position
to the target with a small versioned JSON document as the commit's metadata string::

    {"drsvc-group-sync":1,"flow":"east->west","source_topic":"orders","source_offset":1009,
     "source_topic_id":"0123...ef","target_topic_id":"fedc...10"}

(ids as 32 hex digits, or null when unknown). The note travels with the offset it describes: it is
written by the same commit, so the two never disagree, and it survives restarts of the checkpoint
agent and even the loss of the checkpoints topic. It lets a later sync tell a target offset that
is ahead because the source group went back since (or a topic was recreated) from one that is
ahead for any other reason (a consumer on the target committed it): only the first may be moved
back (:func:`~drsvc.runtime.checkpoints.group_sync.decide_partition`).

A commit whose metadata is not such a document (empty, a consumer's own, damaged, or a version
this build does not know) has no origin: it was not written by this build's group sync.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["MARKER", "VERSION", "SyncOrigin", "decode_origin", "encode_origin"]

MARKER = "drsvc-group-sync"
"""The key naming the document, with its format version as value."""
VERSION = 1

_ID_HEX_DIGITS = 32


@dataclass(frozen=True)
class SyncOrigin:
    """The source position a target offset was translated from.

    ``flow`` is the flow id (``east->west``); ``source_topic`` the topic the group reads on the
    flow's source and ``source_offset`` its committed offset there; the ids (16 bytes, None when
    unknown) name the incarnations of the source topic and of the topic on the target.
    """

    flow: str
    source_topic: str
    source_offset: int
    source_topic_id: bytes | None = None
    target_topic_id: bytes | None = None


def encode_origin(origin: SyncOrigin) -> str:
    """The commit metadata string of ``origin`` (compact JSON, well under Kafka's 4096 bytes for
    any topic name Kafka allows)."""
    document = {
        MARKER: VERSION,
        "flow": origin.flow,
        "source_topic": origin.source_topic,
        "source_offset": origin.source_offset,
        "source_topic_id": _hex(origin.source_topic_id),
        "target_topic_id": _hex(origin.target_topic_id),
    }
    return json.dumps(document, separators=(",", ":"))


def decode_origin(metadata: str | None) -> SyncOrigin | None:
    """The origin recorded in a commit's ``metadata``, or None when it holds none this build reads.

    Never raises: metadata is whatever the last committer wrote, and anything that is not a
    document of a known version counts as "not written by drsvc's group sync".
    """
    if not metadata or not metadata.startswith("{"):
        return None
    try:
        document: Any = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(document, dict) or document.get(MARKER) != VERSION:
        return None
    flow, topic, offset = (document.get(k) for k in ("flow", "source_topic", "source_offset"))
    if not isinstance(flow, str) or not isinstance(topic, str):
        return None
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        return None
    try:
        source_id = _unhex(document.get("source_topic_id"))
        target_id = _unhex(document.get("target_topic_id"))
    except ValueError:
        return None
    return SyncOrigin(flow, topic, offset, source_id, target_id)


def _hex(topic_id: bytes | None) -> str | None:
    return None if topic_id is None else topic_id.hex()


def _unhex(value: object) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != _ID_HEX_DIGITS:
        raise ValueError(f"not a topic id: {value!r}")
    return bytes.fromhex(value)
