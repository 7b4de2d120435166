"""Where the workload's Kafka clients log: librdkafka's own lines (a broker the scenario killed,
a refused connection) go through Python logging to the run's ``chaos.log``, never to the
terminal, where they would bury the scenario's progress."""

from __future__ import annotations

import logging

WORKLOAD_CLIENT_LOGGER = "chaos.kafka.workload"


def client_logger() -> logging.Logger:
    """The logger given to every workload producer and consumer (their ``logger`` setting)."""
    return logging.getLogger(WORKLOAD_CLIENT_LOGGER)
