"""The import contracts cover what they mean to: every module of drsvc but the port itself is a
source of the ``kafka-port`` contract, so a new package cannot talk to Kafka unnoticed (a
forbidden contract checks only the sources it lists)."""

from __future__ import annotations

import configparser
import pkgutil
from pathlib import Path

import drsvc

ROOT = Path(__file__).resolve().parents[2]


def _contract(name: str) -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config[f"importlinter:contract:{name}"]


def _listed(section: configparser.SectionProxy, field: str) -> set[str]:
    return {line.strip() for line in section[field].splitlines() if line.strip()}


def test_every_drsvc_module_but_the_port_is_a_source_of_the_kafka_port_contract() -> None:
    modules = {f"drsvc.{info.name}" for info in pkgutil.iter_modules(drsvc.__path__)}
    sources = _listed(_contract("kafka-port"), "source_modules")
    assert sources == modules - {"drsvc.kafka"}


def test_the_kafka_port_contract_forbids_every_kafka_client_library() -> None:
    forbidden = _listed(_contract("kafka-port"), "forbidden_modules")
    assert {"confluent_kafka", "aiokafka", "faust", "mode"} <= forbidden
