"""The checkpoint stream against real clusters: a commit on east becomes an exact checkpoint on
west within seconds, a killed agent loses no history, and the would-lose / would-re-read numbers
match a record-by-record count on both clusters.

One real replication worker (east->west) and one ``drsvc checkpoints`` process serve the module;
the source logs start at different offsets than their copies, so taking offsets over unchanged
would fail every test.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from checkpoint_support import (
    AgentProcess,
    CheckpointTail,
    brute_force_exposure,
    checkpoint_log,
    commit,
    latest,
    translate_json,
    wait_replicated,
)
from confluent_kafka import TopicPartition
from replication_support import (
    WorkerProcess,
    create,
    produce,
    read_all,
    sequence_records,
    wait_for,
    write_topology,
)

from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import admin_client
from failover.checkpoints import CheckpointKey

pytestmark = pytest.mark.timeout(240)

FLOW = "east->west"
ORDERS = "ck.orders"
DELETED = {0: 40, 1: 0}  # east orders-0 starts at 40, its copy on west at 0


@dataclass
class Stack:
    east: str
    west: str
    topology: Path
    tmp: Path
    worker: WorkerProcess
    agent: AgentProcess

    def restart_agent(self, name: str) -> AgentProcess:
        self.agent = AgentProcess(self.topology, self.tmp / f"{name}.log", self.tmp)
        return self.agent

    def restart_worker(self, name: str) -> None:
        self.worker = WorkerProcess(self.topology, FLOW, self.tmp / f"{name}.log")


def wait_agent_ready(agent: AgentProcess) -> None:
    wait_for(
        lambda: agent.sample("drsvc_checkpoint_numbers_as_of_seconds", flow=FLOW) is not None,
        90,
        f"the checkpoint agent's first cycle:\n{agent.log_tail()}",
    )


def delete_before(bootstrap: str, topic: str, offsets: Mapping[int, int]) -> None:
    admin = admin_client(bootstrap)
    wanted = [TopicPartition(topic, p, o) for p, o in offsets.items() if o > 0]
    for future in admin.delete_records(wanted, request_timeout=15).values():
        future.result(timeout=15)


def values_from(bootstrap: str, topic: str, partition: int, start: int) -> list[bytes | None]:
    return [
        r.value
        for r in read_all(bootstrap, topic)
        if r.partition == partition and r.offset >= start
    ]


@pytest.fixture(scope="module")
def stack(
    cluster_pair: EnvironmentInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    tmp = tmp_path_factory.mktemp("ck")
    create(east, ORDERS, 2)
    produce(east, ORDERS, sequence_records(400, 2, tag="ck-"))
    delete_before(east, ORDERS, DELETED)
    topology = write_topology(
        tmp / "ck.yaml",
        "ck",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["ck\\..*"]}}],
    )
    worker = WorkerProcess(topology, FLOW, tmp / "worker.log")
    wait_replicated(east, ORDERS)
    agent = AgentProcess(topology, tmp / "agent.log", tmp)
    stack = Stack(east, west, topology, tmp, worker, agent)
    wait_agent_ready(agent)
    try:
        yield stack
    finally:
        code = stack.agent.stop()
        stack.worker.stop()
        assert code == 0, f"the checkpoint agent exited with {code}:\n{stack.agent.log_tail()}"


def test_a_commit_on_east_is_an_exact_checkpoint_on_west_within_seconds(stack: Stack) -> None:
    east, west = stack.east, stack.west
    tail = CheckpointTail(west)
    latencies = []
    try:
        # The group moves through the topic; each commit must show up on west, translated.
        for stops in ({0: 60, 1: 10}, {0: 100, 1: 80}, {0: 150, 1: 80}, {0: 170, 1: 130}):
            started = time.time()
            commit(east, "ck-app", ORDERS, stops)
            for p, stop in stops.items():
                seen_at, checkpoint = tail.wait_for(
                    CheckpointKey("ck-app", f"east.{ORDERS}", p), stop, timeout_s=30
                )
                latencies.append(seen_at - started)
                assert checkpoint.exact, checkpoint
    finally:
        tail.close()
    print(  # reported by -s; the benchmark measures it properly (bench/checkpoint_bench.py)
        f"commit -> checkpoint on west: median {statistics.median(latencies):.2f}s, "
        f"max {max(latencies):.2f}s over {len(latencies)}"
    )
    assert max(latencies) < 15, latencies  # "within seconds", even on a loaded machine

    # The checkpoints say what drsvc translate computes, and a consumer starting there on west
    # reads exactly the records the group had not read on east.
    checkpoints = latest(checkpoint_log(west))
    result = translate_json(stack.topology, "ck-app")
    rows = {row["partition"]: row for row in result["partitions"]}
    for p, stop in {0: 170, 1: 130}.items():
        checkpoint = checkpoints[CheckpointKey("ck-app", f"east.{ORDERS}", p)]
        assert (checkpoint.source_offset, checkpoint.exact) == (stop, True)
        assert checkpoint.target_offset == rows[p]["target_offset"] == stop - DELETED[p]
        unread_on_east = values_from(east, ORDERS, p, stop)
        assert len(unread_on_east) == 200 - stop  # 200 records per partition
        assert values_from(west, f"east.{ORDERS}", p, checkpoint.target_offset) == unread_on_east


def test_a_killed_agent_loses_no_history_and_resumes_within_seconds(stack: Stack) -> None:
    east, west = stack.east, stack.west
    tail = CheckpointTail(west)
    commit(east, "ck-other", ORDERS, {0: 50, 1: 70})
    try:
        tail.wait_for(CheckpointKey("ck-other", f"east.{ORDERS}", 1), 70, timeout_s=30)
    finally:
        tail.close()
    before = checkpoint_log(west)
    assert {e.key.group for e in before} >= {"ck-app", "ck-other"}

    stack.agent.kill()
    commit(east, "ck-other", ORDERS, {1: 120})  # while no agent runs
    restarted = time.monotonic()
    agent = stack.restart_agent("agent-restarted")
    key = CheckpointKey("ck-other", f"east.{ORDERS}", 1)
    wait_for(
        lambda: (
            latest(checkpoint_log(west)).get(key, None) is not None
            and latest(checkpoint_log(west))[key].source_offset == 120
        ),
        60,
        f"the restarted agent to checkpoint ck-other at 120:\n{agent.log_tail()}",
    )
    print(f"kill -9, restart -> new position on west after {time.monotonic() - restarted:.1f}s")

    after = checkpoint_log(west)
    old, new = latest(before), latest(after)
    assert set(old) <= set(new), "a checkpoint key disappeared"
    for k, checkpoint in ((k, c) for k, c in old.items() if k.group.startswith("ck-")):
        assert new[k].target_offset is not None and checkpoint.target_offset is not None
        assert new[k].target_offset >= checkpoint.target_offset, (k, checkpoint, new[k])
    # The restarted agent read the topic before emitting: it wrote the one changed position
    # and nothing it had written before.
    appended = [e for e in after if e.offset > before[-1].offset]
    assert [(e.key, e.checkpoint.source_offset) for e in appended] == [(key, 120)]
    assert new[key].target_offset == 120 and new[key].exact
    # Per key, positions only move forward in the whole log (this module's groups: other tests
    # on the session's clusters write checkpoints of their own groups to the same topic).
    newest: dict[CheckpointKey, int] = {}
    for entry in (e for e in after if e.key.group.startswith("ck-")):
        target = entry.checkpoint.target_offset
        assert target is not None
        assert target >= newest.get(entry.key, -1), entry
        newest[entry.key] = target


def test_would_lose_and_would_reread_match_a_brute_force_count(stack: Stack) -> None:
    east, west = stack.east, stack.west
    topic = "ck.ledger"
    create(east, topic, 2)
    produce(east, topic, sequence_records(300, 2, tag="ledger-"))  # 150 per partition
    wait_replicated(east, topic)
    stack.worker.stop()  # replication stops at 150 in both partitions
    try:
        produce(east, topic, sequence_records(100, 2, first=300, tag="ledger-"))  # 150..199
        # Partition 0: consumed less than was replicated; partition 1: more.
        committed = {0: 100, 1: 180}
        commit(east, "ck-numbers", topic, committed)
        result = translate_json(stack.topology, "ck-numbers")
        rows = {row["partition"]: row for row in result["partitions"]}
        assert result["as_of"] is not None
        translated = {p: rows[p]["target_offset"] for p in committed}
        expected = brute_force_exposure(east, west, topic, committed, translated)
        assert expected == {0: (50, 0), 1: (20, 30)}  # the scenario is what it should be
        for p, (lose, reread) in expected.items():
            assert (rows[p]["would_lose"], rows[p]["would_reread"]) == (lose, reread), rows[p]

        agent = stack.agent

        def agent_numbers() -> dict[int, tuple[float | None, float | None]]:
            labels = {"flow": FLOW, "group": "ck-numbers", "topic": topic}
            return {
                p: (
                    agent.sample("drsvc_group_would_lose_records", partition=str(p), **labels),
                    agent.sample("drsvc_group_would_reread_records", partition=str(p), **labels),
                )
                for p in committed
            }

        wait_for(lambda: agent_numbers() == expected, 30, f"agent numbers {expected}")
        assert (
            agent.sample(
                "drsvc_group_translation_exact",
                flow=FLOW,
                group="ck-numbers",
                topic=topic,
                partition="1",
            )
            == 0
        )  # ahead of replication: not exact
    finally:
        stack.restart_worker("worker-restarted")
