"""``drsvc acls sync`` on secured clusters: the source's topic READ ACLs reach the copies of a
flow that sets ``sync_acls``, as MirrorMaker 2 users know it, and nothing else does. And the
write fence of a failover (its ``fence-writes`` step, run here on its own under the executor's
principal and grants): the application's WRITE is denied on the cluster it leaves and given
back on the one it moves to.

One secured environment (east and west, its own state directory) serves the file. The flow
east->west opts in, west->east does not. The sync runs as its own principal with only the
``acl-sync`` role's grants (DESCRIBE on east's cluster resource, ALTER on west's). The copy on
west is filled by an administrator here: what is under test is who may read and write it, not
the replication.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from failover_support import run_cli, wait_until
from replication_support import create

from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.acls import create_acls, describe_acls
from drsvc.kafka.admin import admin_client
from drsvc.runtime.access.grants import kafka_grants
from drsvc.runtime.failover.write_fence import KafkaWriteFenceAcls, fence_writes
from drsvc.settings import Settings
from drsvc.topology import load_topology_text
from failover.failover_plan import (
    FailoverKind,
    FailoverPlan,
    OnFailure,
    Outcome,
    Step,
    StepName,
)
from failover.kafka_acls import Grant, Operation, PatternType, Permission, ResourceType
from failover.write_fence import with_write_fence

pytestmark = [pytest.mark.timeout(600), pytest.mark.secured_matrix]

SITES = ("east", "west")
SYNC_PRINCIPAL = "drsvc-acl-sync"
READER = "app-reader"
GROUP = "reader-group"


@dataclass
class Estate:
    env: LocalEnvironment
    topic: str
    bootstraps: dict[str, str]
    topology: Path

    def admin(self, alias: str) -> Any:
        bootstrap, settings = self.env.admin_settings(alias)
        return admin_client(bootstrap, settings)

    def sync(self, *args: str) -> tuple[int, dict[str, Any], str]:
        code, doc, err = run_cli("acls", "sync", "-t", str(self.topology), "--json", *args)
        return code, doc or {}, err

    def reader_settings(self) -> dict[str, str]:
        return self.env.client_settings(f"{READER}")


def _grant(name: str, operation: Operation, resource: ResourceType = ResourceType.TOPIC) -> Grant:
    return Grant(resource, PatternType.LITERAL, name, operation, f"User:{READER}")


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Estate]:
    state_dir = tmp_path_factory.mktemp("drsvc-aclsync-state")
    tmp = tmp_path_factory.mktemp("aclsync")
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir, consul_layout="single"))
    try:
        info = env.up(list(SITES), secure=True)
        env.add_principal(READER)
        topic = f"acl-{uuid.uuid4().hex[:6]}"
        security = env.topology_security(SYNC_PRINCIPAL)
        assert security is not None
        document = {
            "name": topic,
            "clusters": {
                a: {"bootstrap_servers": b, "security": security} for a, b in info.clusters.items()
            },
            "flows": [
                {"source": "east", "target": "west", "sync_acls": True},
                {"source": "west", "target": "east"},
            ],
        }
        for flow in document["flows"]:
            flow["topics"] = {"include": [f"^{topic}$"]}  # type: ignore[index]
        path = tmp / "acl-sync.json"
        path.write_text(json.dumps(document, indent=2))
        topology = load_topology_text(path.read_text())
        estate = Estate(env, topic, dict(info.clusters), path)
        for alias in SITES:
            bootstrap, settings = env.admin_settings(alias)
            create(bootstrap, topic, 1, settings)
            create_acls(estate.admin(alias), kafka_grants(topology, "acl-sync", alias))
        # The copy on west, as the flow would have written it.
        bootstrap, settings = env.admin_settings("west")
        create(bootstrap, f"east.{topic}", 1, settings)
        producer = Producer({"bootstrap.servers": bootstrap, **settings})
        for i in range(5):
            producer.produce(f"east.{topic}", f"r{i}".encode())
        assert producer.flush(30) == 0
        # The reader reads and writes the topic on both sites; its group is its own on west.
        for alias in SITES:
            create_acls(
                estate.admin(alias),
                [
                    _grant(topic, Operation.READ),
                    _grant(topic, Operation.WRITE),
                    _grant(GROUP, Operation.READ, ResourceType.GROUP),
                ],
            )
        yield estate
    finally:
        env.down()


def _read_all(estate: Estate, cluster: str, topic: str) -> tuple[list[bytes], KafkaError | None]:
    consumer = Consumer(
        {
            "bootstrap.servers": estate.bootstraps[cluster],
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **estate.reader_settings(),
        }
    )
    values: list[bytes] = []
    failure: list[KafkaError] = []
    try:
        consumer.subscribe([topic])

        def done() -> bool:
            for message in consumer.consume(10, 0.5):
                error = message.error()
                if error is not None:
                    failure.append(error)
                else:
                    values.append(message.value() or b"")
            return len(values) >= 5 or bool(failure)

        wait_until(done, 60, f"records of {topic} on {cluster}, or an error")
    finally:
        consumer.close()
    return values, (failure[0] if failure else None)


def _copy_bindings(estate: Estate, cluster: str, name: str) -> list[Grant]:
    grants = describe_acls(estate.admin(cluster), ResourceType.TOPIC, cluster=cluster)
    return [g for g in grants if g.resource_name == name]


def test_read_reaches_the_copy_write_does_not_and_a_second_pass_changes_nothing(
    estate: Estate,
) -> None:
    copy = f"east.{estate.topic}"
    _, refused = _read_all(estate, "west", copy)
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    code, doc, err = estate.sync()
    assert code == 0, err
    (flow,) = doc["flows"]
    assert flow["flow"] == "east->west"
    assert [(c["operation"], c["resource_name"], c["principal"]) for c in flow["created"]] == [
        ("READ", copy, f"User:{READER}")
    ]
    assert any(
        s["operation"] == "WRITE" and s["resource_name"] == estate.topic for s in flow["skipped"]
    ), flow["skipped"]
    assert _copy_bindings(estate, "west", copy) == [
        Grant(
            ResourceType.TOPIC,
            PatternType.LITERAL,
            copy,
            Operation.READ,
            f"User:{READER}",
            Permission.ALLOW,
        )
    ]

    values, error = _read_all(estate, "west", copy)
    assert error is None
    assert values == [f"r{i}".encode() for i in range(5)]

    producer = Producer(
        {"bootstrap.servers": estate.bootstraps["west"], **estate.reader_settings()}
    )
    delivered: list[KafkaError | None] = []
    producer.produce(copy, b"not mine", on_delivery=lambda e, _m: delivered.append(e))
    producer.flush(30)
    assert delivered and delivered[0] is not None
    assert delivered[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    code, again, err = estate.sync()
    assert code == 0, err
    assert again["flows"][0]["created"] == [] and again["flows"][0]["present"] == 1


def test_a_flow_without_the_option_syncs_nothing(estate: Estate) -> None:
    code, _doc, err = estate.sync("--flow", "west->east")
    assert code != 0
    assert "west->east does not set sync_acls" in err
    code, _doc, err = estate.sync()
    assert code == 0, err
    # The reader may read the topic on west, but the flow west->east does not mirror it.
    assert _copy_bindings(estate, "east", f"west.{estate.topic}") == []


def _writes(estate: Estate, cluster: str) -> KafkaError | None:
    """Whether the reader's principal may write the topic on ``cluster`` (None: it may)."""
    producer = Producer(
        {"bootstrap.servers": estate.bootstraps[cluster], **estate.reader_settings()}
    )
    delivered: list[KafkaError | None] = []
    producer.produce(estate.topic, b"w", on_delivery=lambda e, _m: delivered.append(e))
    producer.flush(30)
    assert delivered, f"no delivery report from {cluster}"
    return delivered[0]


def _fence_plan(source: str, target: str) -> FailoverPlan:
    steps = tuple(
        Step(name, OnFailure.ROLL_BACK)
        for name in (StepName.DEACTIVATE, StepName.WAIT_LEASE, StepName.SET_OFFSETS)
    )
    plan = FailoverPlan(
        f"f-{source}-{target}",
        "reader",
        source,
        target,
        FailoverKind.PLANNED,
        (*steps, Step(StepName.ACTIVATE, OnFailure.RETRY)),
    )
    return with_write_fence(plan, True)


def test_the_write_fence_denies_the_old_cluster_and_a_failback_gives_it_back(
    estate: Estate,
) -> None:
    security = estate.env.topology_security("drsvc-executor")
    assert security is not None
    topology = load_topology_text(
        json.dumps(
            {
                "name": f"{estate.topic}-fence",
                "clusters": {
                    a: {"bootstrap_servers": b, "security": security}
                    for a, b in estate.bootstraps.items()
                },
                "flows": [
                    {"source": "east", "target": "west", "topics": {"include": [estate.topic]}},
                    {"source": "west", "target": "east", "topics": {"include": [estate.topic]}},
                ],
                "applications": [
                    {
                        "name": "reader",
                        "groups": [GROUP],
                        "topics": [estate.topic],
                        "preferred": "east",
                        "principal": f"User:{READER}",
                        "fence_writes": True,
                    }
                ],
            }
        )
    )
    for alias in SITES:  # the executor's own grants, ALTER on the cluster among them
        create_acls(estate.admin(alias), kafka_grants(topology, "executor", alias))
    app = topology.application("reader")
    acls = KafkaWriteFenceAcls(lambda alias: topology.cluster(alias).client_config())
    assert _writes(estate, "east") is None

    outcome, detail = fence_writes(_fence_plan("east", "west"), app, acls)
    assert outcome is Outcome.OK, detail
    refused = _writes(estate, "east")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert _writes(estate, "west") is None
    # Done again (a resumed executor): the same bindings, nothing else.
    assert fence_writes(_fence_plan("east", "west"), app, acls)[0] is Outcome.OK

    outcome, detail = fence_writes(_fence_plan("west", "east"), app, acls)
    assert outcome is Outcome.OK, detail
    assert "DENY WRITE lifted on east (1 of 1 present)" in detail
    assert _writes(estate, "east") is None
    refused = _writes(estate, "west")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
