"""confluent-kafka's data types and constants, re-exported as the very same objects.

Nothing here is wrapped: the replication hot path spends about a microsecond per record, and a
wrapper object or an extra attribute lookup per record would show in it. Code that names these
types imports them from here instead of from the client library, so that the library is named in
one package.

The names are those the runtime uses in several roles. Admin request and config types
(``NewTopic``, ``ConfigResource``...) are not here: they belong behind the port's admin
operations, not in the roles.
"""

from __future__ import annotations

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    ConsumerGroupState,
    IsolationLevel,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

# the admin package imports these from its private modules without marking them re-exported
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ClusterMetadata,
    OffsetSpec,
)

__all__ = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "AdminClient",
    "ClusterMetadata",
    "Consumer",
    "ConsumerGroupState",
    "IsolationLevel",
    "KafkaError",
    "Message",
    "OffsetSpec",
    "Producer",
    "TopicPartition",
]
