"""Unplanned failover: east's brokers are gone, the application moves to west at its latest
checkpoints, and the record says exactly which source records did not make it.

Replication east->west is stopped first and more records are written on east, so a known tail of
each partition never crosses; then east's brokers stop. After ``drsvc failover --to west``:
consumers on west, starting from the offsets the failover set, read every record that crossed and
that the groups had not consumed, and nothing twice; once east is back, the records the failover
reported as unreplicated are exactly those missing on west. Then the recovery: a failback before
it is refused; ``drsvc recover`` reports exactly those records as the divergence and, by the
application's ``on_recovery``, leaves them out (quarantine) or copies them to west marked as
replayed (replay); the flow from east, running again, copies what east gets from then on and
none of them.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from checkpoint_support import AgentProcess
from failover_support import (
    PARTITIONS,
    checkpoints_at,
    consume_part,
    failover_env,
    read_rest,
    run_cli,
    wait_until,
    write_failover_topology,
)
from replication_support import (
    WorkerProcess,
    create,
    produce,
    read_all,
    running_workers,
)
from translation_support import caught_up

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from failover.naming import flow_control_key
from failover.site_recovery import REPLAYED_FROM_HEADER

pytestmark = pytest.mark.timeout(600)

GROUPS = ("g1", "g2")


def _records(
    tag: str, first: int, count: int
) -> list[tuple[int, bytes | None, bytes | None, list, int]]:  # type: ignore[type-arg]
    return [
        (i % PARTITIONS, str(i).encode(), f"{tag}-{i:06d}".encode(), [], 0)
        for i in range(first, first + count)
    ]


@pytest.mark.parametrize("on_recovery", ["quarantine", "replay"])
def test_unplanned_failover_reports_exactly_what_did_not_cross(
    local_env: LocalEnvironment,
    cluster_pair: EnvironmentInfo,
    tmp_path: Path,
    east_restored: None,
    on_recovery: str,
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"fu-{tag}"
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    for bootstrap in (east, west):
        create(bootstrap, topic, PARTITIONS)
    topology = write_failover_topology(
        tmp_path / "topology.json",
        f"fu-{tag}",
        cluster_pair.clusters,
        topic,
        on_recovery=on_recovery,
    )
    assert cluster_pair.consul_http_addr is not None
    env = failover_env(cluster_pair.consul_http_addr)
    produce(east, topic, _records(tag, 0, 400))
    consumed: dict[str, list[bytes]] = {}
    committed: dict[str, dict[tuple[str, int], int]] = {}
    agent = AgentProcess(topology, tmp_path / "agent.log", tmp_path / "agent-state")
    consul = ("--consul", cluster_pair.consul_http_addr)
    forward = WorkerProcess(topology, "east->west", tmp_path / "forward.log", *consul)
    try:
        with running_workers(topology, ["west->east"], tmp_path, *consul):
            wait_until(lambda: caught_up(east, "east->west", topic, PARTITIONS), 90, "replication")
            for group, fraction in zip(GROUPS, (1.0, 0.4), strict=True):
                consumed[group], committed[group] = consume_part(east, group, [topic], fraction)
            wait_until(lambda: checkpoints_at(west, committed), 90, "checkpoints of the commits")
            forward.kill()  # replication stops: what is written from now on never crosses
            produce(east, topic, _records(tag, 400, 60))
            local_env.stop_site("east", grace_s=1)
            code, doc, err = run_cli(
                "failover",
                "-t",
                str(topology),
                "--app",
                "app",
                "--to",
                "west",
                "--force",
                "--json",
                env=env,
            )
            assert code == 0, err
    finally:
        agent.stop()
        if forward.proc.poll() is None:
            forward.stop()
    assert doc is not None
    assert (doc["state"], doc["kind"]) == ("completed", "unplanned")
    ranges = {(u["topic"], u["partition"]): u for u in doc["unreplicated"]}
    assert set(ranges) == {(topic, p) for p in range(PARTITIONS)}
    assert all(u["last_offset"] is None for u in ranges.values())  # east's end was never seen
    # When east returns, its records that did not cross are not copied behind west's back.
    control = ConsulClient(cluster_pair.consul_http_addr).kv_get(
        flow_control_key(f"fu-{tag}", "east", "west")
    )
    assert control is not None and topic in json.loads(control)["paused_topics"]
    # Consumers on west skip nothing that crossed, and read nothing twice.
    for group in GROUPS:
        rest = read_rest(west, group, [f"east.{topic}", topic])
        everything = consumed[group] + rest
        assert len(everything) == len(set(everything)), f"{group} read records twice"
        assert len(everything) == 400, (group, len(consumed[group]), len(rest))
    # East back: the reported ranges start exactly at the first record missing on west.
    local_env.up(["east"])
    on_east = {p: [] for p in range(PARTITIONS)}  # type: ignore[var-annotated]
    for record in read_all(east, topic):
        on_east[record.partition].append((record.offset, record.value))
    copied = {r.value for r in read_all(west, f"east.{topic}")}
    missing: dict[tuple[str, int], list[tuple[int, bytes | None]]] = {}
    for p, records in on_east.items():
        missing[(topic, p)] = [(o, v) for o, v in records if v not in copied]
        offsets = [o for o, _v in missing[(topic, p)]]
        assert offsets, f"partition {p}: nothing missing on west"
        assert offsets == list(range(ranges[(topic, p)]["first_offset"], records[-1][0] + 1))
    assert sum(len(v) for v in on_east.values()) - len(copied) == 60
    _recover(topology, env, cluster_pair, f"fu-{tag}", topic, on_recovery, missing, tmp_path)


def _recover(
    topology: Path,
    env: dict[str, str],
    cluster_pair: EnvironmentInfo,
    namespace: str,
    topic: str,
    on_recovery: str,
    missing: dict[tuple[str, int], list[tuple[int, bytes | None]]],
    tmp_path: Path,
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    assert cluster_pair.consul_http_addr is not None
    code, _doc, err = run_cli("failback", "-t", str(topology), "--app", "app", env=env)
    assert code == 1 and "drsvc recover --app app" in err, err
    copied_before = {r.value for r in read_all(west, f"east.{topic}")}
    code, report, err = run_cli("recover", "-t", str(topology), "--app", "app", "--json", env=env)
    assert code == 0, err
    assert report is not None
    assert (report["state"], report["policy"], report["records"]) == ("completed", on_recovery, 60)
    diverged = {
        (d["topic"], d["partition"]): (d["first_offset"], d["last_offset"])
        for d in report["divergence"]
    }
    assert diverged == {tp: (gone[0][0], gone[-1][0]) for tp, gone in missing.items()}
    control = json.loads(
        ConsulClient(cluster_pair.consul_http_addr).kv_get(
            flow_control_key(namespace, "east", "west")
        )
        or "{}"
    )
    assert topic not in control["paused_topics"]
    replayed = [
        r for r in read_all(west, topic) if any(h[0] == REPLAYED_FROM_HEADER for h in r.headers)
    ]
    if on_recovery == "replay":
        assert report["replayed"] == 60
        by_partition = {
            p: [r.value for r in replayed if r.partition == p] for p in range(PARTITIONS)
        }
        assert by_partition == {p: [v for _o, v in missing[(topic, p)]] for p in range(PARTITIONS)}
    else:
        assert replayed == []
    # The flow from east, running again, copies what east gets from now on and none of them.
    produce(east, topic, _records("after", 0, 20))
    with running_workers(
        topology, ["east->west"], tmp_path, "--consul", cluster_pair.consul_http_addr
    ):
        wait_until(lambda: caught_up(east, "east->west", topic, PARTITIONS), 90, "replication")
    new_copies = {r.value for r in read_all(west, f"east.{topic}")} - copied_before
    assert new_copies == {v for *_x, v, _h, _t in _records("after", 0, 20)}
