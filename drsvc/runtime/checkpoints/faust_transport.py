"""A faust transport whose consumer reads ``read_committed``.

faust's aiokafka driver reads ``read_uncommitted`` unless the app itself processes exactly once.
Offset syncs of an exactly-once flow are written in the replicator's transactions: an agent reading
them uncommitted would index copies of aborted transactions. The driver offers no setting for it,
so the consumer thread is subclassed and the isolation level set on the aiokafka consumer before it
starts (aiokafka reads the attribute in ``start()``). Checked against faust 0.15.3 and aiokafka
0.14.0 (the pinned versions); ``tests/unit/runtime/test_checkpoint_faust.py`` fails if a new
version moves it.
"""

from __future__ import annotations

from typing import Any

from faust.transport.drivers import aiokafka as faust_aiokafka

__all__ = ["READ_COMMITTED", "ReadCommittedTransport"]

READ_COMMITTED = "read_committed"


class _ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._isolation_level = READ_COMMITTED
        return consumer


class _ReadCommittedConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class ReadCommittedTransport(faust_aiokafka.Transport):
    """The aiokafka transport with a ``read_committed`` consumer; set it as ``app.transport``
    right after creating the app (before any topic is declared)."""

    Consumer = _ReadCommittedConsumer
