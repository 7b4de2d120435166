"""The flow's settings reach the librdkafka configs of its worker's clients."""

from __future__ import annotations

from typing import Any

import pytest

from drsvc.kafka.clients import is_protected_setting
from drsvc.runtime.replication.client_configs import (
    FETCH_QUEUE_BACKOFF_MS,
    SYNC_LINGER_MS,
    consumer_config,
    judge_reader_config,
    producer_config,
    progress_reader_config,
    slot_membership_config,
    slot_producer_config,
    slot_source_config,
    sync_producer_config,
)
from drsvc.runtime.replication.settings import WorkerSettings, worker_settings
from drsvc.topology import load_topology_text

TOPOLOGY = """
name: pair
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west%s}
"""


def settings(flow_extra: str = "") -> WorkerSettings:
    topology = load_topology_text(TOPOLOGY % flow_extra)
    return worker_settings(topology, topology.flow("east", "west"), {})


def test_the_target_producer_lingers_5_ms_unless_the_flow_says_otherwise() -> None:
    assert producer_config(settings())["linger.ms"] == 5
    tuned = settings(", linger_ms: 100")
    assert producer_config(tuned)["linger.ms"] == 100
    assert slot_producer_config(tuned, 0)["linger.ms"] == 100


def test_an_explicit_override_wins_over_the_flow() -> None:
    topology = load_topology_text(TOPOLOGY % ", linger_ms: 100")
    overridden = worker_settings(topology, topology.flow("east", "west"), {}, linger_ms=20)
    assert producer_config(overridden)["linger.ms"] == 20


def test_offset_syncs_never_wait_out_a_long_linger_of_the_copies() -> None:
    tuned = settings(", linger_ms: 100")
    syncs = sync_producer_config(tuned)
    assert syncs["linger.ms"] == SYNC_LINGER_MS == 5
    assert syncs["client.id"] == "drsvc-east->west-syncs"
    assert syncs["enable.idempotence"] is True and syncs["acks"] == "all"
    # a flow lingering less than the syncs' own limit keeps its shorter wait for them too
    assert sync_producer_config(settings(", linger_ms: 0"))["linger.ms"] == 0


def test_the_source_consumer_fetches_again_soon_after_its_queue_drains() -> None:
    # librdkafka's default waits a whole second, during which a busy worker runs dry.
    config = consumer_config(settings())
    assert config["fetch.queue.backoff.ms"] == FETCH_QUEUE_BACKOFF_MS <= 50
    # what the queue may hold is unchanged: the backoff never lets the prefetch grow past it
    assert config["max.partition.fetch.bytes"] == 1024 * 1024
    assert config["queued.max.messages.kbytes"] == settings().fetch_queue_kbytes
    assert slot_source_config(settings())["fetch.queue.backoff.ms"] == FETCH_QUEUE_BACKOFF_MS


@pytest.mark.parametrize(
    "overlay",
    [
        consumer_config,
        producer_config,
        sync_producer_config,
        slot_source_config,
        progress_reader_config,
        slot_membership_config,
        judge_reader_config,
        lambda s: slot_producer_config(s, 3),
    ],
)
def test_a_role_gives_only_its_own_settings_never_where_the_cluster_is_or_its_security(
    overlay: Any,
) -> None:
    # The port's factory merges the cluster's bootstrap and security settings and refuses an
    # overlay that sets them: a worker's clients would not start.
    config = overlay(settings())
    assert config and not [key for key in config if is_protected_setting(key)]
