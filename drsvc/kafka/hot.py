"""The raw ``KafkaException``, for the few hot-path sites that must catch it.

Everywhere else a Kafka failure reaches the caller as a :mod:`drsvc.errors` error, mapped by
:mod:`drsvc.kafka.errors`. Two kinds of code catch the library's exception themselves: the
replication engine around its produce call, where a mapping would cost time per record, and
the client library that applications embed, whose offset store and commit calls log and carry
on where the failure happens. This module is how they name the exception without importing the
library.
"""

from __future__ import annotations

from confluent_kafka import KafkaException

__all__ = ["KafkaException"]
