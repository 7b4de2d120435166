"""Where a record read by a client was first written."""

from __future__ import annotations

from typing import Any

from drsvc.kafka.types import Message
from failover.logical_topics import Origin, origin

__all__ = ["origin_of"]


def origin_of(message: Message, cluster: str | None = None) -> Origin:
    """Where ``message`` was first written: from its provenance header when it is a copy, else
    where it was read (``cluster``, when the caller says which; a
    :meth:`~drsvc.client.FailoverConsumer.origin_of` knows)."""
    headers: Any = message.headers()
    return origin(
        cluster,
        message.topic() or "",
        message.partition() or 0,
        message.offset() or 0,
        headers,
    )
