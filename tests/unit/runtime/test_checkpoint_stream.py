"""The checkpoint stream on fake clusters: planning, following syncs, translating, deciding,
counting, and one whole cycle with a fake faust topic and a fake group syncer."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from drsvc.adapters.consul_client import ConsulClient
from drsvc.errors import ConfigError
from drsvc.kafka.admin import TopicInfo
from drsvc.runtime.checkpoints.faust_apps import StreamRunner
from drsvc.runtime.checkpoints.group_reader import GroupCommit
from drsvc.runtime.checkpoints.group_sync_hook import GroupSyncHook
from drsvc.runtime.checkpoints.metrics import CheckpointMetrics
from drsvc.runtime.checkpoints.plan import SyncSource, plan_checkpoints
from drsvc.runtime.checkpoints.stream import CheckpointStream
from drsvc.runtime.checkpoints.sync_follower import Gap, SyncFollower
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin
from drsvc.topology import Topology, load_topology_text
from failover.checkpoints import Checkpoint, CheckpointKey, decode_key, decode_value
from failover.offset_syncs import OffsetSync, Segment, TopicPartition, encode_sync

ONE_WAY = """
name: one-way
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, groups: {exclude: ["private-.*"]}}
applications:
  - {name: shop, groups: [g], topics: [orders], preferred: east}
"""

BOTH_WAYS = """
name: both-ways
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
  - {source: west, target: east}
"""

EAST_ORDERS = b"E" * 16
WEST_COPY = b"W" * 16  # east.orders on west
WEST_PAYMENTS = b"P" * 16
EAST_COPY = b"Q" * 16  # west.payments on east


def topology(text: str) -> Topology:
    return load_topology_text(text, "test.yaml")


@dataclass
class FakeReader:
    """A cluster as the stream reads it."""

    alias: str
    topic_infos: dict[str, TopicInfo] = field(default_factory=dict)
    commits: dict[str, dict[TopicPartition, GroupCommit]] = field(default_factory=dict)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    forgotten: list[str] = field(default_factory=list)

    def add_topic(self, name: str, topic_id: bytes, partitions: int = 1) -> None:
        self.topic_infos[name] = TopicInfo(name, topic_id, partitions)

    def group_names(self) -> list[str]:
        return sorted(self.commits)

    def topic_names(self) -> list[str]:
        return sorted(self.topic_infos)

    def describe(self, names: Collection[str]) -> dict[str, TopicInfo]:
        return {n: self.topic_infos[n] for n in names if n in self.topic_infos}

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, GroupCommit]:
        return {tp: c for tp, c in self.commits.get(group, {}).items() if tp in partitions}

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def forget_groups_except(self, groups: Collection[str]) -> None:
        self.forgotten = sorted(set(self.commits) - set(groups))

    def commit(self, group: str, topic: str, offsets: dict[int, int], metadata: str = "") -> None:
        self.commits.setdefault(group, {}).update(
            {TopicPartition(topic, p): GroupCommit(o, None, metadata) for p, o in offsets.items()}
        )


def sync(
    topic: str,
    begin: int,
    end: int,
    segments: list[tuple[int, int, int]],
    source_id: bytes = EAST_ORDERS,
    target_id: bytes = WEST_COPY,
) -> OffsetSync:
    return OffsetSync(
        topic, 0, source_id, target_id, 0, begin, end, tuple(Segment(*s) for s in segments)
    )


def follower(flow_id: str, cluster: str, topic: str, syncs: list[OffsetSync]) -> SyncFollower:
    """A follower that was handed ``syncs`` as records 0, 1, ... of sync-topic partition 0."""
    follower = SyncFollower(SyncSource(flow_id, cluster, topic), {"bootstrap.servers": "x:1"})
    for offset, s in enumerate(syncs):
        key, value = encode_sync(s)
        assert follower.accept(0, offset, key, value) is None
    return follower


def one_way_setup(
    state: dict[CheckpointKey, Checkpoint] | None = None, syncs: int = 2
) -> tuple[CheckpointStream, FakeReader, FakeReader]:
    """east ``orders``-0 starts at 500 (older records deleted); west has its copies from offset 0:
    500..999 copied to 0..499 (by ``syncs`` syncs of the two); the log ends at 1200."""
    topo = topology(ONE_WAY)
    plan = plan_checkpoints(topo)
    down = follower(
        "east->west",
        "west",
        "drsvc.offset-syncs.east",
        [sync("orders", 500, 800, [(500, 0, 300)]), sync("orders", 800, 1000, [(800, 300, 200)])][
            :syncs
        ],
    )
    east, west = FakeReader("east"), FakeReader("west")
    east.add_topic("orders", EAST_ORDERS)
    east.add_topic("audit.internal", b"A" * 16)  # never routed
    west.add_topic("east.orders", WEST_COPY)
    east.ends[TopicPartition("orders", 0)] = 1200
    return CheckpointStream(topo, plan.streams[0], down, None, state), east, west


def run_cycle(stream: CheckpointStream, east: FakeReader, west: FakeReader) -> list[Any]:
    observation = stream.observe(east, west)
    views = stream.translate(observation)
    ends = east.end_offsets(stream.end_offsets_needed(views))
    return [stream.numbers(views, ends), stream.candidates(views, observation.read_at_ms)]


# -- planning -------------------------------------------------------------------------------------


def test_one_way_plan_has_one_stream_without_upstream() -> None:
    plan = plan_checkpoints(topology(ONE_WAY))
    [stream] = plan.streams
    assert (stream.flow_id, stream.checkpoints_topic) == ("east->west", "east.checkpoints.internal")
    assert stream.downstream == SyncSource("east->west", "west", "drsvc.offset-syncs.east")
    assert stream.upstream is None
    assert plan.clusters == ("west",)


def test_both_ways_plan_shares_each_sync_topic_between_the_two_streams() -> None:
    plan = plan_checkpoints(topology(BOTH_WAYS))
    forward, backward = plan.streams
    assert forward.upstream == backward.downstream
    assert backward.upstream == forward.downstream
    assert len(plan.sync_sources) == 2
    assert plan.clusters == ("east", "west")
    assert plan.streams_into("east") == (backward,)
    assert [s.topic for s in plan.sync_sources_on("east")] == ["drsvc.offset-syncs.west"]
    only = plan_checkpoints(topology(BOTH_WAYS), "west->east")
    assert [s.flow_id for s in only.streams] == ["west->east"]
    assert only.clusters == ("east", "west")  # its upstream syncs live on west


def test_an_unknown_flow_is_refused() -> None:
    with pytest.raises(ConfigError, match="no flow 'east->south'"):
        plan_checkpoints(topology(ONE_WAY), "east->south")


# -- following syncs ------------------------------------------------------------------------------


def test_follower_applies_in_order_skips_repeats_and_reports_gaps() -> None:
    syncs = [sync("orders", 0, 10, [(0, 0, 10)]), sync("orders", 10, 20, [(10, 10, 10)])]
    records = [encode_sync(s) for s in syncs]
    f = SyncFollower(SyncSource("east->west", "west", "s"), {"bootstrap.servers": "x:1"})
    assert f.accept(0, 0, *records[0]) is None
    assert f.accept(0, 0, *records[0]) is None  # faust delivered it again: skipped
    assert f.next_offsets == {0: 1}
    # Offsets 1..2 never reached the agent (a marker at 1, the second sync at 2, say).
    gap = f.accept(0, 3, *records[1])
    assert gap == Gap(0, 1, 3)
    f.fill(gap, [(2, *records[1])])
    assert f.next_offsets == {0: 3}
    assert f.read.index.frontier(TopicPartition("orders", 0)) == 20
    assert f.accept(0, 3, *records[1]) is None  # the same sync again, at offset 3: a repeat
    assert f.read.applied == 2


def test_follower_stops_at_a_record_that_is_not_a_sync() -> None:
    f = SyncFollower(SyncSource("east->west", "west", "s"), {"bootstrap.servers": "x:1"})
    f.accept(0, 0, b"junk", b"junk")
    assert f.broken is not None and "not an offset sync" in f.broken
    assert f.next_offsets == {}


# -- a cycle, step by step ------------------------------------------------------------------------


def test_a_committed_offset_becomes_an_exact_checkpoint_with_the_numbers() -> None:
    stream, east, west = one_way_setup()
    east.commit("g", "orders", {0: 650}, metadata="m")
    east.commit("drsvc-replicator.east-west", "orders", {0: 1000})  # drsvc's own: never
    east.commit("private-x", "orders", {0: 1})  # excluded by the flow's group filter
    numbers, emissions = run_cycle(stream, east, west)
    [emission] = emissions
    assert emission.key == CheckpointKey("g", "east.orders", 0)
    checkpoint = emission.checkpoint
    assert (checkpoint.source_topic, checkpoint.source_offset, checkpoint.target_offset) == (
        "orders",
        650,
        150,
    )
    assert checkpoint.exact and checkpoint.metadata == "m" and checkpoint.direction == "downstream"
    [row] = numbers
    # 1000..1199 are neither consumed nor on west: lost; nothing is read twice.
    assert (row.group, row.topic, row.partition, row.exact) == ("g", "orders", 0, True)
    assert (row.exposure.would_lose, row.exposure.would_reread) == (200, 0)
    assert east.forgotten == ["drsvc-replicator.east-west", "private-x"]


def test_a_group_ahead_of_replication_is_checkpointed_after_the_last_copy() -> None:
    stream, east, west = one_way_setup()
    east.commit("g", "orders", {0: 1100})
    [row], [emission] = run_cycle(stream, east, west)
    assert (emission.checkpoint.target_offset, emission.checkpoint.reason) == (
        500,
        "ahead-of-syncs",
    )
    # 1000..1099 consumed but not on west (re-read if east comes back), 1100..1199 lost.
    assert (row.exposure.would_lose, row.exposure.would_reread) == (100, 100)


def test_nothing_is_emitted_twice_and_nothing_moves_backwards() -> None:
    previous = Checkpoint("orders", 700, 200, "exact")
    stream, east, west = one_way_setup({CheckpointKey("g", "east.orders", 0): previous})
    east.commit("g", "orders", {0: 700})
    assert run_cycle(stream, east, west)[1] == []  # unchanged
    # A checkpoint from before a restart says 900 -> 400; the index of this process is behind
    # (it only knows copies up to source 800), so it translates 900 ahead of the syncs to 300.
    stream, east, west = one_way_setup({CheckpointKey("g", "east.orders", 0): cp(900, 400)}, 1)
    east.commit("g", "orders", {0: 900})
    [emission] = run_cycle(stream, east, west)[1] or [None]
    assert emission is None
    # The group went back (an operator reset it): followed, flagged as rewound.
    east.commit("g", "orders", {0: 600})
    [emission] = run_cycle(stream, east, west)[1]
    assert emission.verdict.rewound and emission.checkpoint.target_offset == 100


def cp(source: int, target: int) -> Checkpoint:
    return Checkpoint("orders", source, target, "exact")


def test_unknown_partitions_are_checkpointed_with_their_reason_once() -> None:
    stream, east, west = one_way_setup()
    east.add_topic("fresh", b"F" * 16)  # copied by the flow, but no sync yet
    west.add_topic("east.fresh", b"G" * 16)
    east.commit("g", "fresh", {0: 3})
    east.ends[TopicPartition("fresh", 0)] = 10
    [row], [emission] = run_cycle(stream, east, west)
    assert (emission.checkpoint.target_offset, emission.checkpoint.reason) == (
        None,
        "unknown-partition",
    )
    assert (row.exposure.would_lose, row.exposure.would_reread) == (7, None)
    stream.record_emitted([emission])
    assert run_cycle(stream, east, west)[1] == []


def test_upstream_positions_of_an_active_active_group_are_checkpointed_too() -> None:
    topo = topology(BOTH_WAYS)
    plan = plan_checkpoints(topo)
    # west->east copies west's payments to east as west.payments; its syncs are on east.
    up = follower(
        "west->east",
        "east",
        "drsvc.offset-syncs.west",
        [sync("payments", 0, 100, [(0, 40, 100)], WEST_PAYMENTS, EAST_COPY)],
    )
    down = follower("east->west", "west", "drsvc.offset-syncs.east", [])
    stream = CheckpointStream(topo, plan.streams[0], down, up)
    east, west = FakeReader("east"), FakeReader("west")
    east.add_topic("west.payments", EAST_COPY)
    west.add_topic("payments", WEST_PAYMENTS)
    east.commit("g", "west.payments", {0: 90})  # read the copies 40..89, i.e. payments 0..49
    [row], [emission] = run_cycle(stream, east, west)
    assert emission.key == CheckpointKey("g", "payments", 0)
    assert (emission.checkpoint.direction, emission.checkpoint.target_offset) == ("upstream", 50)
    assert emission.checkpoint.source_topic == "west.payments"
    assert (row.exposure.would_lose, row.exposure.would_reread) == (0, 0)


# -- a whole cycle through the runner -------------------------------------------------------------


class FakeTopic:
    """Stands in for a faust topic: ``send`` returns an awaitable acknowledgement."""

    def __init__(self, fail_keys: int = 0) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.fail_keys = fail_keys

    async def send(self, *, key: bytes, value: bytes) -> asyncio.Future[object]:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if len(self.sent) < self.fail_keys:
            future.set_exception(RuntimeError("not acknowledged"))
        else:
            future.set_result(object())
        self.sent.append((key, value))
        return future


def test_a_runner_cycle_writes_counts_and_offers_exact_positions_to_the_group_syncer() -> None:
    stream, east, west = one_way_setup()
    east.commit("g", "orders", {0: 650})
    registry = CollectorRegistry()
    offered: list[tuple[str, Any, Any, Any]] = []

    class Syncer:
        def __init__(self, *args: object) -> None:
            assert len(args) == 4

        def sync(
            self, group: str, offsets: Any, rewound: Any, unknown: Any, origins: Any
        ) -> object:
            offered.append((group, dict(offsets), set(rewound), dict(unknown)))
            assert origins == {
                ("east.orders", 0): SyncOrigin("east->west", "orders", 650, EAST_ORDERS, WEST_COPY)
            }
            return None

    topo = stream.topology
    hook = GroupSyncHook(topo, stream.flow, {"bootstrap.servers": "x:1"}, syncer_factory=Syncer)
    runner = StreamRunner(stream, east, west, CheckpointMetrics(registry), hook)
    runner.topic = FakeTopic()
    asyncio.run(runner.cycle())
    [(key, value)] = runner.topic.sent
    assert decode_key(key) == CheckpointKey("g", "east.orders", 0)
    assert decode_value(value).target_offset == 150
    assert stream.state[CheckpointKey("g", "east.orders", 0)].target_offset == 150
    assert offered == [("g", {("east.orders", 0): 150}, set(), {})]

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"flow": "east->west", **labels})

    partition = {"group": "g", "topic": "orders", "partition": "0"}
    assert sample("drsvc_checkpoints_emitted_total") == 1
    assert sample("drsvc_group_would_lose_records", **partition) == 200
    assert sample("drsvc_group_would_reread_records", **partition) == 0
    assert sample("drsvc_group_translation_exact", **partition) == 1
    assert (sample("drsvc_checkpoint_latency_ms") or 0) > 0

    # The group goes away: its series go too. Nothing new is written.
    east.commits.clear()
    asyncio.run(runner.cycle())
    assert sample("drsvc_group_would_lose_records", **partition) is None
    assert len(runner.topic.sent) == 1


def test_checkpoints_the_target_did_not_acknowledge_are_written_again() -> None:
    stream, east, west = one_way_setup()
    east.commit("g", "orders", {0: 650})
    runner = StreamRunner(stream, east, west, CheckpointMetrics(CollectorRegistry()))
    runner.topic = FakeTopic(fail_keys=1)
    asyncio.run(runner.cycle())
    assert stream.state == {}
    asyncio.run(runner.cycle())
    assert len(runner.topic.sent) == 2
    assert stream.state[CheckpointKey("g", "east.orders", 0)].target_offset == 150


def test_a_failing_cycle_is_counted_and_the_next_one_runs() -> None:
    stream, east, west = one_way_setup()
    registry = CollectorRegistry()
    runner = StreamRunner(stream, east, west, CheckpointMetrics(registry))

    def broken() -> list[str]:
        raise ConfigError("boom")

    east.group_names = broken  # type: ignore[method-assign]
    asyncio.run(runner.cycle())
    assert (
        registry.get_sample_value("drsvc_checkpoint_cycle_errors_total", {"flow": "east->west"})
        == 1
    )


def test_the_hook_builds_its_syncer_once_on_the_first_offer() -> None:
    topo = topology(ONE_WAY)
    built: list[tuple[object, ...]] = []
    offers: list[str] = []

    class Syncer:
        def __init__(self, *args: object) -> None:
            built.append(args)

        def sync(self, group: str, offsets: Any, rewound: Any, unknown: Any, origins: Any) -> None:
            offers.append(group)

    consul = ConsulClient("127.0.0.1:1")
    hook = GroupSyncHook(
        topo, topo.flows[0], {"bootstrap.servers": "x:1"}, consul, syncer_factory=Syncer
    )
    assert built == []  # nothing is built (nor checked) before the first offer
    assert hook.offer("g", {("east.orders", 0): 1}, (), {}, {}) is None
    assert hook.offer("h", {("east.orders", 0): 2}, (), {}, {}) is None
    assert built == [(topo, topo.flows[0], {"bootstrap.servers": "x:1"}, consul)]
    assert offers == ["g", "h"]


def test_the_default_syncer_is_the_group_offset_syncer_built_on_the_first_offer() -> None:
    topo = topology(ONE_WAY)
    hook = GroupSyncHook(topo, topo.flows[0], {})  # refused by the syncer, not by the hook
    with pytest.raises(ConfigError, match="group offset sync: the target client config"):
        hook.offer("g", {("east.orders", 0): 1}, (), {}, {})


# -- recreated topics, re-copy passes -------------------------------------------------------------


NEW_COPY = b"N" * 16  # east.orders on west, deleted and created again


def test_checkpoints_carry_the_topic_ids_of_both_sides() -> None:
    stream, east, west = one_way_setup()
    east.commit("g", "orders", {0: 650})
    [emission] = run_cycle(stream, east, west)[1]
    assert (emission.checkpoint.source_topic_id, emission.checkpoint.target_topic_id) == (
        EAST_ORDERS,
        WEST_COPY,
    )


def test_a_recreated_remote_topic_replaces_the_old_checkpoint_with_its_lower_position() -> None:
    """east.orders on west was deleted and created again; the worker copies orders again from its
    start (500) into the new topic, from offset 0. The old checkpoint (900 -> 1400 on the old
    topic) is higher than the new, correct one (900 -> 400): it must give way all the same."""
    old = Checkpoint("orders", 900, 1400, "exact", source_topic_id=EAST_ORDERS,
                     target_topic_id=WEST_COPY)  # fmt: skip
    key = CheckpointKey("g", "east.orders", 0)
    stream, east, west = one_way_setup({key: old}, syncs=0)
    for s in (
        sync("orders", 500, 800, [(500, 0, 300)], target_id=NEW_COPY),
        sync("orders", 800, 1000, [(800, 300, 200)], target_id=NEW_COPY),
    ):
        offset = stream.downstream.next_offsets.get(0, 0)
        assert stream.downstream.accept(0, offset, *encode_sync(s)) is None
    west.add_topic("east.orders", NEW_COPY)
    east.commit("g", "orders", {0: 900})
    [emission] = run_cycle(stream, east, west)[1]
    assert emission.verdict.rewound
    assert emission.verdict.why == "the target topic was recreated (new topic id)"
    assert (emission.checkpoint.target_offset, emission.checkpoint.target_topic_id) == (
        400,
        NEW_COPY,
    )
    stream.record_emitted([emission])
    assert stream.exact_positions("g") == {("east.orders", 0): 400}
    # Without the ids (a checkpoint of an earlier version) the old position is kept, as before.
    stream, east, west = one_way_setup({key: Checkpoint("orders", 900, 1400, "exact")})
    east.commit("g", "orders", {0: 900})
    assert run_cycle(stream, east, west)[1] == []


def test_would_lose_counts_what_an_earlier_pass_copied_while_a_re_copy_is_behind() -> None:
    """500..999 were copied to 0..499; after a worker restart a second pass copies 800..899 again
    (to 500..599) and has not reached 1000 yet. Records up to 999 are on west all the same."""
    stream, east, west = one_way_setup()
    recopy = sync("orders", 800, 900, [(800, 500, 100)])
    assert stream.downstream.accept(0, 2, *encode_sync(recopy)) is None
    index = stream.downstream.read.index
    assert index.frontier(TopicPartition("orders", 0)) == 900
    assert index.replicated_end(TopicPartition("orders", 0)) == 1000
    east.commit("g", "orders", {0: 950})
    [row], [emission] = run_cycle(stream, east, west)
    # 1000..1199: neither consumed nor copied. Counting from the frontier would say 250.
    assert row.exposure.would_lose == 200
    assert emission.checkpoint.reason == "recopy-behind"
    assert row.exposure.would_reread == emission.checkpoint.pending > 0


# -- group sync retries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeResult:
    status: str


class ScriptedHook:
    """Stands in for the group sync hook: answers each offer with the next scripted status
    (``raise`` raises), and records what it was offered."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.offers: list[tuple[str, dict[Any, int], set[Any], dict[Any, SyncOrigin]]] = []

    def offer(
        self, group: str, offsets: Any, rewound: Any, unknown: Any, origins: Any
    ) -> FakeResult:
        self.offers.append((group, dict(offsets), set(rewound), dict(origins)))
        answer = self.answers.pop(0) if self.answers else "unchanged"
        if answer == "raise":
            raise RuntimeError("Consul: connection refused")
        return FakeResult(answer)


def runner_with(
    hook: ScriptedHook, state: dict[CheckpointKey, Checkpoint] | None = None
) -> tuple[StreamRunner, FakeReader]:
    stream, east, west = one_way_setup(state)
    runner = StreamRunner(
        stream,
        east,
        west,
        CheckpointMetrics(CollectorRegistry()),
        hook,
        resync_s=0.0,  # type: ignore[arg-type]
    )
    runner.topic = FakeTopic()
    return runner, east


def test_a_rewind_whose_sync_did_not_go_through_is_offered_again_until_it_does() -> None:
    """The source group goes back; the first sync is refused, the second fails; the checkpoint
    does not change any more, yet the group is offered again until the sync settles."""
    hook = ScriptedHook("synced", "active-here", "raise", "synced")
    runner, east = runner_with(hook)
    east.commit("g", "orders", {0: 900})
    asyncio.run(runner.cycle())  # 900 -> 400, synced
    east.commit("g", "orders", {0: 600})
    for _ in range(5):
        asyncio.run(runner.cycle())
    to_100 = [offer for offer in hook.offers if offer[1] == {("east.orders", 0): 100}]
    # refused, failed, synced; then settled: not offered again while nothing changes
    assert len(to_100) == 3
    assert [offer[2] for offer in to_100] == [{("east.orders", 0)}, set(), set()]
    origin = to_100[-1][3][("east.orders", 0)]
    assert (origin.source_offset, origin.source_topic_id) == (600, EAST_ORDERS)
    assert len(runner.topic.sent) == 2


def test_after_a_restart_every_group_is_offered_once() -> None:
    """A restarted agent cannot know which syncs failed before: it offers every group it holds
    checkpoints of in its first cycle, with nothing new to write."""
    state = {
        CheckpointKey("g", "east.orders", 0): Checkpoint("orders", 600, 100, "exact"),
        CheckpointKey("h", "east.orders", 0): Checkpoint("orders", 700, 200, "exact"),
    }
    hook = ScriptedHook()
    runner, east = runner_with(hook, state)
    east.commit("g", "orders", {0: 600})
    east.commit("h", "orders", {0: 700})
    asyncio.run(runner.cycle())
    asyncio.run(runner.cycle())
    assert [offer[0] for offer in hook.offers] == ["g", "h"]
    assert runner.topic.sent == []
