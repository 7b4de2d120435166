"""A fatal producer error stops the at-least-once worker instead of rewinding forever."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from drsvc.errors import FatalClientError
from drsvc.runtime.replication.at_least_once import AtLeastOnce
from drsvc.runtime.replication.engine import ReplicationEngine
from drsvc.runtime.replication.settings import worker_settings
from drsvc.topology import load_topology_text

PAIR = """
name: pair
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""


def delivery() -> AtLeastOnce:
    topology = load_topology_text(PAIR)
    engine = ReplicationEngine(worker_settings(topology, topology.flow("east", "west"), {}))
    assert isinstance(engine.delivery, AtLeastOnce)
    return engine.delivery


def test_a_fatal_client_error_stops_the_worker_with_a_temporary_error() -> None:
    w = delivery()
    w.raise_if_fatal()  # nothing yet
    w.on_client_error(KafkaError(KafkaError._TRANSPORT, "broker down"))  # not fatal: logged only
    w.raise_if_fatal()

    w.on_client_error(KafkaError(KafkaError._FATAL, "idempotence broke", fatal=True))

    with pytest.raises(FatalClientError, match="east->west hit a fatal error") as raised:
        w.raise_if_fatal()
    assert raised.value.retryable  # the supervisor restarts the role; exit code 1, not 2
