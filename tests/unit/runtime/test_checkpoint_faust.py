"""The faust side of the checkpoint stream, without a broker: how the apps are configured, and
that reading checkpoints loads no faust."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiokafka
import pytest

from drsvc.cli.main import main
from drsvc.kafka.clients import KafkaClients
from drsvc.runtime.checkpoints.faust_apps import build_app
from drsvc.runtime.checkpoints.settings import CheckpointSettings
from failover.naming import checkpoints_app_id


def test_the_sync_agents_consumer_reads_committed_without_a_static_member_id(
    tmp_path: Path,
) -> None:
    clients = KafkaClients.for_configs({"west": {"bootstrap.servers": "127.0.0.1:1"}})

    async def created_consumer() -> aiokafka.AIOKafkaConsumer:
        settings = CheckpointSettings(data_dir=tmp_path, app_id_suffix=".east-west")
        app = build_app("west", clients, settings)
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
    assert checkpoints_app_id("west") == "drsvc-checkpoints.west"


def test_a_secured_cluster_gets_its_credentials(tmp_path: Path) -> None:
    """Once refused; the mapping itself is tested with the port (tests/unit/kafka)."""
    clients = KafkaClients.for_configs(
        {
            "west": {
                "bootstrap.servers": "127.0.0.1:1",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "drsvc",
                "sasl.password": "s3cret",
            }
        }
    )
    app = build_app("west", clients, CheckpointSettings(data_dir=tmp_path))
    credentials = app.conf.broker_credentials
    assert (credentials.protocol.value, credentials.mechanism.value) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
    )
    assert credentials.username == "drsvc"


@pytest.mark.parametrize(
    "module", ["drsvc.api.service", "drsvc.runtime.checkpoints.flow_checkpoints"]
)
def test_reading_checkpoints_loads_no_faust(module: str) -> None:
    """The API reads checkpoints; faust (and its Kafka client) is the checkpoint stream's own."""
    code = (
        f"import sys, {module}\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & {'faust', 'mode', 'aiokafka'})\n"
        "print(','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == ""


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
