"""The faust side of the checkpoint stream, without a broker: how the apps are configured."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import aiokafka
import pytest

from drsvc.cli.main import main
from drsvc.errors import ConfigError
from drsvc.runtime.checkpoints.faust_apps import broker_urls, build_app
from drsvc.runtime.checkpoints.settings import CheckpointSettings
from failover.naming import checkpoints_app_id


def test_the_sync_agents_consumer_reads_committed_without_a_static_member_id(
    tmp_path: Path,
) -> None:
    async def created_consumer() -> aiokafka.AIOKafkaConsumer:
        settings = CheckpointSettings(data_dir=tmp_path, app_id_suffix=".east-west")
        app = build_app("west", {"bootstrap.servers": "127.0.0.1:1"}, settings)
        assert app.conf.id == "drsvc-checkpoints.west.east-west"
        assert app.conf.topic_disable_leader  # no faust leader topic on the cluster
        thread = app.consumer._thread
        consumer: aiokafka.AIOKafkaConsumer = thread._create_worker_consumer(app.transport)
        return consumer

    consumer = asyncio.run(created_consumer())
    # Syncs of exactly-once flows are transactional: aborted ones must never reach the index.
    assert consumer._isolation_level == "read_committed"
    # A static member id would make aiokafka miss sync topics that appear later.
    assert consumer._group_instance_id is None
    # aiokafka hands the attribute to its fetcher when it starts: if a new version stops doing
    # so, the transport's override silently does nothing, so fail here instead.
    assert "isolation_level=self._isolation_level" in inspect.getsource(
        aiokafka.AIOKafkaConsumer.start
    )


def test_broker_urls() -> None:
    assert broker_urls("west", {"bootstrap.servers": "a:1, PLAINTEXT://b:2"}) == [
        "kafka://a:1",
        "kafka://b:2",
    ]
    assert checkpoints_app_id("west") == "drsvc-checkpoints.west"


def test_security_settings_faust_is_not_given_are_refused() -> None:
    with pytest.raises(ConfigError, match="cluster 'west': the checkpoint agents do not pass"):
        broker_urls("west", {"bootstrap.servers": "a:1", "security.protocol": "SASL_SSL"})


def test_json_without_once_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text(
        "name: t\nclusters:\n  east: {bootstrap_servers: '127.0.0.1:1'}\n"
        "  west: {bootstrap_servers: '127.0.0.1:2'}\nflows:\n  - {source: east, target: west}\n"
    )
    with pytest.raises(SystemExit) as exit_info:
        main(["checkpoints", "-t", str(topology), "--json"])
    assert exit_info.value.code == 2
    assert "--json goes with --once" in capsys.readouterr().err
