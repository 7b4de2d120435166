"""Checkpoints and group offset sync recover from what used to leave a group ahead on the target:
a remote topic deleted and recreated on the target, and a source-group rewind whose sync could not
happen at the time (a live member of the group on the target, a switch under way in Consul), also
across a restart of the checkpoint agent.

One real replication worker (east->west), one ``drsvc checkpoints`` process with the real Consul
agent, and applications that opt in to group offset sync serve the module. Every check reads the
clusters: the checkpoints topic, the group's committed offsets on west, and the records a consumer
of the group reads there.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkpoint_support import (
    AgentProcess,
    checkpoint_log,
    commit,
    latest,
    wait_replicated,
)
from confluent_kafka import Consumer, TopicPartition
from replication_support import (
    WorkerProcess,
    create,
    end_offsets,
    produce,
    read_all,
    sequence_records,
    topics_of,
    wait_for,
)

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import (
    admin_client,
    committed_offsets_with_metadata,
    describe_topics,
)
from drsvc.runtime.checkpoints.sync_origin import decode_origin
from failover import naming, provenance
from failover.checkpoints import CheckpointKey

pytestmark = pytest.mark.timeout(300)

FLOW = "east->west"
PARTITIONS = 2
PER_PARTITION = 1000


@dataclass
class Stack:
    east: str
    west: str
    consul_addr: str
    consul: ConsulClient
    namespace: str
    topology: Path
    tmp: Path
    recreated_topic: str  # on east; east.<it> on west is deleted and recreated
    rewound_topic: str  # on east; its partition 0 starts at 100 (older records deleted)
    recreated_group: str
    rewound_group: str
    worker: WorkerProcess
    agent: AgentProcess

    def restart_agent(self, name: str) -> AgentProcess:
        self.agent = AgentProcess(
            self.topology, self.tmp / f"{name}.log", self.tmp, "--consul", self.consul_addr
        )
        return self.agent


def write_topology(
    path: Path, namespace: str, east: str, west: str, apps: list[dict[str, object]]
) -> Path:
    document = {
        "name": "recovery",
        "namespace": namespace,
        "clusters": {"east": {"bootstrap_servers": east}, "west": {"bootstrap_servers": west}},
        "flows": [{"source": "east", "target": "west", "topics": {"include": ["rc\\..*"]}}],
        "applications": apps,
    }
    path.write_text(json.dumps(document, indent=2))
    return path


def delete_before(bootstrap: str, topic: str, offsets: Mapping[int, int]) -> None:
    admin = admin_client(bootstrap)
    wanted = [TopicPartition(topic, p, o) for p, o in offsets.items() if o > 0]
    for future in admin.delete_records(wanted, request_timeout=15).values():
        future.result(timeout=15)


def committed_on_west(stack: Stack, group: str, topic: str) -> dict[int, int]:
    found = committed_offsets_with_metadata(
        {"bootstrap.servers": stack.west}, group, [(topic, p) for p in range(PARTITIONS)], 15
    )
    return {p: found[(t, p)].offset for t, p in found}


def wait_committed_on_west(
    stack: Stack, group: str, topic: str, expected: dict[int, int], timeout_s: float, what: str
) -> None:
    seen: list[dict[int, int]] = []

    def there() -> bool:
        seen.append(committed_on_west(stack, group, topic))
        return seen[-1] == expected

    try:
        wait_for(there, timeout_s, what)
    except AssertionError as err:
        raise AssertionError(
            f"{err}; last seen {seen[-1:]}, expected {expected}\n{stack.agent.log_tail()}"
        ) from err


def values(bootstrap: str, topic: str, starts: Mapping[int, int]) -> dict[int, list[bytes | None]]:
    out: dict[int, list[bytes | None]] = {p: [] for p in starts}
    for record in read_all(bootstrap, topic):
        if record.offset >= starts.get(record.partition, 1 << 62):
            out[record.partition].append(record.value)
    return out


def read_as_the_group(bootstrap: str, group: str, topic: str) -> dict[int, list[bytes | None]]:
    """What a consumer of ``group`` reads of ``topic``, starting at the group's committed offsets
    (it fails rather than fall back to a reset policy), up to the current end. It never commits."""
    ends = end_offsets(bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "error",
        }
    )
    out: dict[int, list[bytes | None]] = {p: [] for p in ends}
    try:
        consumer.subscribe([topic])
        todo = set(ends)
        deadline = time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                todo = {p for p in todo if _position(consumer, topic, p) < ends[p]}
                continue
            assert msg.error() is None, msg.error()
            p, offset = msg.partition(), msg.offset()
            assert p is not None and offset is not None
            out[p].append(msg.value())
            if offset + 1 >= ends[p]:
                todo.discard(p)
        assert not todo, f"{group} did not read {topic} to its end: {todo}"
    finally:
        consumer.close()
    return out


def joined(member: Consumer) -> bool:
    """Poll once (a member takes part in the group only while it polls); True once it owns every
    partition."""
    member.poll(0.2)
    return len(member.assignment()) == PARTITIONS


def _position(consumer: Consumer, topic: str, partition: int) -> int:
    if not any(tp.partition == partition for tp in consumer.assignment()):
        return -1
    [tp] = consumer.position([TopicPartition(topic, partition)])
    return int(tp.offset)


@pytest.fixture(scope="module")
def stack(
    cluster_pair: EnvironmentInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    assert cluster_pair.consul_http_addr is not None
    consul = ConsulClient(cluster_pair.consul_http_addr)
    suffix = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("rc")
    recreated, rewound = f"rc.recreated-{suffix}", f"rc.rewound-{suffix}"
    for topic in (recreated, rewound):
        create(east, topic, PARTITIONS)
        produce(
            east, topic, sequence_records(PARTITIONS * PER_PARTITION, PARTITIONS, tag=f"{topic}-")
        )
    delete_before(east, rewound, {0: 100})
    groups = (f"rc-recreated-{suffix}", f"rc-rewound-{suffix}")
    namespace = f"rc-{suffix}"
    apps = [
        {"name": "recreated-app", "groups": [groups[0]], "topics": [recreated],
         "preferred": "east", "sync_group_offsets": True},
        {"name": "rewound-app", "groups": [groups[1]], "topics": [rewound],
         "preferred": "east", "sync_group_offsets": True},
    ]  # fmt: skip
    topology = write_topology(tmp / "rc.yaml", namespace, east, west, apps)
    worker = WorkerProcess(topology, FLOW, tmp / "worker.log")
    for topic in (recreated, rewound):
        wait_replicated(east, topic)
    agent = AgentProcess(
        topology, tmp / "agent.log", tmp, "--consul", cluster_pair.consul_http_addr
    )
    stack = Stack(
        east,
        west,
        cluster_pair.consul_http_addr,
        consul,
        namespace,
        topology,
        tmp,
        recreated,
        rewound,
        *groups,
        worker,
        agent,
    )
    try:
        yield stack
    finally:
        code = stack.agent.stop()
        stack.worker.stop()
        assert code == 0, f"the checkpoint agent exited with {code}:\n{stack.agent.log_tail()}"


# -- a remote topic deleted and recreated on the target --------------------------------------------


def test_a_recreated_remote_topic_gets_the_new_lower_positions_and_nothing_is_skipped(
    stack: Stack,
) -> None:
    east, west = stack.east, stack.west
    source, remote, group = (
        stack.recreated_topic,
        f"east.{stack.recreated_topic}",
        stack.recreated_group,
    )
    consumed = {0: 600, 1: 400}
    commit(east, group, source, consumed)
    # The copies start at offset 0 like the source: the first translation is the identity.
    wait_committed_on_west(stack, group, remote, consumed, 60, f"{group} synced onto west")

    # Retention removed the source's oldest records; then the copy on west is deleted and created
    # again. The worker copies the source again from its log start: at lower offsets than before.
    deleted = {0: 300, 1: 200}
    delete_before(east, source, deleted)
    old_id = describe_topics(admin_client(west), [remote])[remote].topic_id
    west_admin = admin_client(west)  # kept: its futures die with it
    for future in west_admin.delete_topics([remote], operation_timeout=30).values():
        future.result(timeout=30)
    wait_for(lambda: remote not in topics_of(west), 30, f"{remote} to be deleted")
    create(west, remote, PARTITIONS)
    # A busy broker may answer the describe before the new topic is in its metadata.
    wait_for(
        lambda: remote in describe_topics(admin_client(west), [remote]), 30, f"{remote} created"
    )
    new_id = describe_topics(admin_client(west), [remote])[remote].topic_id
    assert new_id != old_id

    expected_ends = {p: PER_PARTITION - deleted[p] for p in range(PARTITIONS)}
    wait_for(
        lambda: end_offsets(west, remote) == expected_ends,
        120,
        f"the worker to copy {source} again into the new {remote}:\n{stack.worker.log_tail()}",
    )
    copies = read_all(west, remote)
    firsts = {r.partition: provenance.chain(r.headers)[-1].offset for r in copies if r.offset == 0}
    assert firsts == deleted, "the new copy starts at the source's log start"

    # The new checkpoint is lower than the old one, and it is what the group gets on west.
    translated = {p: consumed[p] - deleted[p] for p in range(PARTITIONS)}
    wait_committed_on_west(
        stack, group, remote, translated, 60, f"{group} synced onto the new {remote}"
    )
    checkpoints = latest(checkpoint_log(west))
    for p in range(PARTITIONS):
        checkpoint = checkpoints[CheckpointKey(group, remote, p)]
        assert (checkpoint.source_offset, checkpoint.target_offset) == (consumed[p], translated[p])
        assert checkpoint.exact and checkpoint.target_topic_id == new_id
    found = committed_offsets_with_metadata(
        {"bootstrap.servers": west}, group, [(remote, p) for p in range(PARTITIONS)]
    )
    for (_topic, p), committed in found.items():
        origin = decode_origin(committed.metadata)
        assert origin is not None and origin.source_offset == consumed[p]
        assert origin.target_topic_id == new_id

    # A consumer of the group on west reads exactly what the group had not consumed on east.
    unread_on_east = values(east, source, consumed)
    assert {p: len(v) for p, v in unread_on_east.items()} == {
        p: PER_PARTITION - consumed[p] for p in range(PARTITIONS)
    }
    assert read_as_the_group(west, group, remote) == unread_on_east


# -- a rewind whose sync could not happen at the time ----------------------------------------------


def test_a_rewind_reaches_the_target_once_a_live_member_leaves_even_across_an_agent_restart(
    stack: Stack,
) -> None:
    east, west = stack.east, stack.west
    source, remote, group = stack.rewound_topic, f"east.{stack.rewound_topic}", stack.rewound_group
    shift = {0: 100, 1: 0}  # east's partition 0 starts at 100, its copy at 0
    commit(east, group, source, {0: 800, 1: 700})
    wait_committed_on_west(stack, group, remote, {0: 700, 1: 700}, 60, f"{group} synced onto west")

    # A live member of the group on west: the broker refuses every commit of the sync.
    member = Consumer(
        {"bootstrap.servers": west, "group.id": group, "enable.auto.commit": False,
         "auto.offset.reset": "error"}
    )  # fmt: skip
    try:
        member.subscribe([remote])
        wait_for(lambda: joined(member), 60, f"a member of {group} on west")
        rewound = {0: 300, 1: 250}
        commit(east, group, source, rewound)  # the operator resets the group on east
        key = CheckpointKey(group, remote, 0)
        wait_for(
            lambda: (
                latest(checkpoint_log(west)).get(key) is not None
                and latest(checkpoint_log(west))[key].source_offset == rewound[0]
            ),
            60,
            "the rewound checkpoint",
        )
        time.sleep(3)  # several cycles with the member in place
        member.poll(0.2)
        assert committed_on_west(stack, group, remote) == {0: 700, 1: 700}
        assert "not syncing its offsets onto west" in stack.agent.log_file.read_text()
        stack.agent.kill()  # whatever it kept in memory is gone
    finally:
        member.close()

    stack.restart_agent("agent-after-rewind")
    translated = {p: rewound[p] - shift[p] for p in range(PARTITIONS)}
    wait_committed_on_west(
        stack, group, remote, translated, 90, f"{group} moved back on west after the restart"
    )
    assert read_as_the_group(west, group, remote) == values(east, source, rewound)


def test_a_rewind_during_a_switch_reaches_the_target_once_the_switch_is_over(stack: Stack) -> None:
    east, west = stack.east, stack.west
    source, remote, group = stack.rewound_topic, f"east.{stack.rewound_topic}", stack.rewound_group
    shift = {0: 100, 1: 0}
    wait_for(
        lambda: stack.agent.sample("drsvc_checkpoint_numbers_as_of_seconds", flow=FLOW) is not None,
        90,
        f"the checkpoint agent's first cycle:\n{stack.agent.log_tail()}",
    )
    commit(east, group, source, {0: 900, 1: 900})
    wait_committed_on_west(stack, group, remote, {0: 800, 1: 900}, 60, f"{group} synced onto west")

    key = naming.app_active_key(stack.namespace, "rewound-app")
    stack.consul.kv_put(key, "null")  # a switch is under way: nothing is synced
    try:
        rewound = {0: 500, 1: 400}
        commit(east, group, source, rewound)
        wait_for(
            lambda: (
                latest(checkpoint_log(west))[CheckpointKey(group, remote, 1)].source_offset
                == rewound[1]
            ),
            60,
            "the rewound checkpoint",
        )
        time.sleep(3)
        assert committed_on_west(stack, group, remote) == {0: 800, 1: 900}
    finally:
        stack.consul.kv_put(key, "east")  # the switch ended where it began
    translated = {p: rewound[p] - shift[p] for p in range(PARTITIONS)}
    wait_committed_on_west(
        stack, group, remote, translated, 30, f"{group} moved back on west after the switch"
    )
    assert read_as_the_group(west, group, remote) == values(east, source, rewound)
