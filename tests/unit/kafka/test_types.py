"""The port's types are confluent-kafka's very objects, so the hot path pays nothing for them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest

from drsvc.kafka import hot, types

FROM_CLIENT = [
    "OFFSET_BEGINNING",
    "OFFSET_END",
    "OFFSET_INVALID",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "Consumer",
    "ConsumerGroupState",
    "IsolationLevel",
    "KafkaError",
    "Message",
    "Producer",
    "TopicPartition",
]
FROM_ADMIN = ["AdminClient", "ClusterMetadata", "OffsetSpec"]

#: where a fresh interpreter imports this tree's drsvc from
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", FROM_CLIENT)
def test_each_client_name_is_the_very_confluent_object(name: str) -> None:
    assert getattr(types, name) is getattr(confluent_kafka, name)


@pytest.mark.parametrize("name", FROM_ADMIN)
def test_each_admin_name_is_the_very_confluent_object(name: str) -> None:
    assert getattr(types, name) is getattr(confluent_kafka.admin, name)


def test_types_exports_exactly_these_names() -> None:
    assert sorted(types.__all__) == sorted(FROM_CLIENT + FROM_ADMIN)


def test_the_hot_path_exception_is_the_very_confluent_exception() -> None:
    assert hot.KafkaException is confluent_kafka.KafkaException
    assert hot.__all__ == ["KafkaException"]


def test_the_port_loads_no_faust() -> None:
    # Every module of the port but the one that builds faust apps, in a fresh interpreter (this
    # one may have loaded faust for another test): the replication workers and the client
    # library use the port and must not pay for the stream processor.
    script = (
        "import importlib, pkgutil, sys\n"
        "import drsvc.kafka\n"
        "for module in pkgutil.iter_modules(drsvc.kafka.__path__, 'drsvc.kafka.'):\n"
        "    if module.name != 'drsvc.kafka.faust_app':\n"
        "        importlib.import_module(module.name)\n"
        "stream = {'faust', 'aiokafka', 'mode'}\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in stream)))\n"
    )
    assert _fresh_interpreter(script) == ""


def test_the_package_module_imports_nothing() -> None:
    # Importing only the clock must not load the Kafka client library.
    script = "import sys\nimport drsvc.kafka.clock\nprint('confluent_kafka' in sys.modules)\n"
    assert _fresh_interpreter(script) == "False"


def _fresh_interpreter(script: str) -> str:
    """What ``script`` prints in a new interpreter started in the repository."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()
