"""Failover and failback through the CLI against real brokers and a real Consul agent.

An application (two groups, one topic, a 2 s client lease) runs on east with flows both ways
(active/active, prefix naming). A producer that follows the application's active key writes
sequence-numbered records the whole time; the groups consume part of them before each move.
After each move a consumer starting from the groups' committed offsets reads the rest: across
both clusters every acknowledged record is read exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from failover_support import (
    FollowingProducer,
    active_cluster,
    check_exactly_once,
    consume_part,
    failover_env,
    failover_id_in,
    read_rest,
    run_cli,
    wait_for_remote_copies,
    wait_until,
    write_failover_topology,
)
from replication_support import create, read_all, running_workers

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.devenv.state import StateStore
from drsvc.errors import CoordinatorUnavailableError
from drsvc.kafka.admin import committed_offsets
from failover.active import decode_active
from failover.epoch_header import EPOCH_HEADER, encode_epoch
from failover.naming import app_active_key, consul_prefix

pytestmark = pytest.mark.timeout(600)

GROUPS = ("g1", "g2")


@dataclass
class App:
    topology: Path
    namespace: str
    topic: str
    consul: ConsulClient
    bootstraps: dict[str, str]
    env: dict[str, str]

    def cli(self, *args: str, extra_env: dict[str, str] | None = None) -> tuple[int, dict, str]:  # type: ignore[type-arg]
        code, doc, err = run_cli(
            *args, "-t", str(self.topology), env={**self.env, **(extra_env or {})}
        )
        return code, doc or {}, err

    def producer(self) -> FollowingProducer:
        key = app_active_key(self.namespace, "app")
        return FollowingProducer(self.consul, key, self.bootstraps, self.topic).start()

    def topics_on(self, cluster: str) -> list[str]:
        other = "west" if cluster == "east" else "east"
        return [self.topic, f"{other}.{self.topic}"]


@pytest.fixture(scope="module")
def app(cluster_pair: EnvironmentInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    tag = uuid.uuid4().hex[:6]
    topic = f"fo-{tag}"
    bootstraps = dict(cluster_pair.clusters)
    for alias in ("east", "west"):
        create(bootstraps[alias], topic, 2)
    tmp = tmp_path_factory.mktemp("failover")
    name = f"fo-{tag}"
    topology = write_failover_topology(tmp / "topology.json", name, bootstraps, topic)
    assert cluster_pair.consul_http_addr is not None
    env = failover_env(cluster_pair.consul_http_addr)
    flows = ["east->west", "west->east"]
    with running_workers(topology, flows, tmp, "--consul", cluster_pair.consul_http_addr):
        wait_for_remote_copies(bootstraps, topic)
        yield App(topology, name, topic, ConsulClient(cluster_pair.consul_http_addr), bootstraps,
                  env)  # fmt: skip


def _move(app: App, command: str, to: str | None, consumed: dict[str, list[bytes]]) -> dict:  # type: ignore[type-arg]
    """Consume part on the active cluster, then move the application while the producer writes."""
    here = active_cluster(app.consul, app.namespace)
    assert here is not None
    for group, fraction in zip(GROUPS, (1.0, 0.5), strict=True):
        values, _ = consume_part(app.bootstraps[here], group, app.topics_on(here), fraction)
        consumed[group] += values
    args = [command, "--app", "app", "--json"] + (["--to", to] if to else [])
    code, doc, err = app.cli(*args)
    assert code == 0, err
    return doc


def test_planned_failover_and_failback_read_every_record_exactly_once(app: App) -> None:
    consumed: dict[str, list[bytes]] = {g: [] for g in GROUPS}
    producer = app.producer()
    try:
        wait_until(lambda: len(producer.acked) >= 100, 60, "records on east")
        doc = _move(app, "failover", "west", consumed)
        assert (doc["state"], doc["kind"], doc["from"], doc["to"]) == (
            "completed",
            "planned",
            "east",
            "west",
        )
        assert doc["groups"] and all(g["exact"] for g in doc["groups"]), doc["groups"]
        assert doc["unreplicated"] == [] and doc["rpo_records"] == 0
        steps = [e["step"] for e in doc["events"]]
        assert steps == ["deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate"]
        assert active_cluster(app.consul, app.namespace) == "west"
        written = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= written + 100, 60, "records on west")
        back = _move(app, "failback", None, consumed)
        assert (back["state"], back["to"]) == ("completed", "east")
        assert all(g["exact"] for g in back["groups"]), back["groups"]
        written = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= written + 50, 60, "records on east again")
    finally:
        acked = producer.stop()
    # Never two active clusters: the producer only ever saw a cluster, none, the next one.
    seen = [c for c in producer.clusters_seen]
    assert seen == ["east", None, "west", None, "east"], seen
    for group in GROUPS:
        rest = read_rest(app.bootstraps["east"], group, app.topics_on("east"))
        check_exactly_once(acked, consumed[group] + rest)


def test_records_a_client_writes_to_the_old_cluster_after_the_switch_are_counted_and_reported(
    app: App,
) -> None:
    """A client that never heard of the switch (a paused process, stood in for by a producer
    that stamps the epoch it joined under) writes to east after west was activated: the
    east->west worker copies those records, and the failover's report lists them."""
    key = app_active_key(app.namespace, "app")
    joined = decode_active(app.consul.kv_get(key), "east").epoch
    code, doc, err = app.cli("failover", "--app", "app", "--to", "west", "--json")
    assert code == 0 and doc["state"] == "completed", err
    switched = decode_active(app.consul.kv_get(key), "east").epoch
    assert switched > joined
    zombie = Producer({"bootstrap.servers": app.bootstraps["east"], "enable.idempotence": True})
    offsets: list[tuple[int, int]] = []

    def acked(err: object, msg: Any) -> None:
        assert err is None, err
        offsets.append((msg.partition(), msg.offset()))

    for i, epoch in enumerate((joined, joined, switched)):
        zombie.produce(
            app.topic,
            value=f"late-{i}".encode(),
            partition=0,
            headers=[(EPOCH_HEADER, encode_epoch(epoch))],
            on_delivery=acked,
        )
    assert zombie.flush(30) == 0
    stale = offsets[:2]  # the third carries the new epoch: a client that heard of the switch

    def reported() -> list[dict[str, Any]]:
        code, shown, err = app.cli("failovers", doc["id"], "--json")
        assert code == 0, err
        return list(shown.get("stale_records", []))

    wait_until(reported, 60, "the stale records in the failover's report")
    (entry,) = reported()
    assert (entry["flow"], entry["topic"], entry["partition"], entry["below_epoch"]) == (
        "east->west",
        app.topic,
        0,
        switched,
    )
    assert entry["offsets"] == [offset for _, offset in stale], (entry, offsets)
    # Copied, not dropped: the copies are on west like any other record.
    late = {b"late-0", b"late-1", b"late-2"}
    wait_until(
        lambda: late <= {r.value for r in read_all(app.bootstraps["west"], f"east.{app.topic}")},
        60,
        "the late records' copies on west",
    )
    code, back, err = app.cli("failback", "--app", "app", "--json")
    assert code == 0 and back["state"] == "completed", err


def test_dry_run_changes_nothing(app: App) -> None:
    before = _snapshot(app)
    code, doc, err = app.cli("failover", "--app", "app", "--to", "west", "--dry-run", "--json")
    assert code == 0, err
    assert doc["dry_run"] is True and doc["kind"] == "planned"
    assert next(s["name"] for s in doc["steps"]) == "deactivate"
    assert _snapshot(app) == before


def _snapshot(app: App) -> tuple[object, ...]:
    """Every key of the namespace with its index, and both clusters' group offsets."""
    keys = ConsulCoordinator(app.consul.http_addr).list(consul_prefix(app.namespace) + "/")
    offsets = []
    for alias, bootstrap in sorted(app.bootstraps.items()):
        for group in GROUPS:
            partitions = [(t, p) for t in app.topics_on(alias) for p in range(2)]
            found = committed_offsets({"bootstrap.servers": bootstrap}, group, partitions)
            offsets.append((alias, group, sorted(found.items())))
    return (keys, app.consul.kv_get(app_active_key(app.namespace, "app")), offsets)


@pytest.mark.parametrize(
    "failpoint",
    ["during-deactivate", "after-deactivate", "after-wait-lease", "after-wait-caught-up",
     "during-set-offsets", "after-set-offsets", "during-activate", "after-activate"],
)  # fmt: skip
def test_an_executor_killed_at_each_step_is_resumed(app: App, failpoint: str) -> None:
    here = active_cluster(app.consul, app.namespace)
    assert here is not None
    there = "west" if here == "east" else "east"
    code, _doc, err = app.cli(
        "failover", "--app", "app", "--to", there, extra_env={"DRSVC_FAILPOINT": failpoint}
    )
    assert code == -9, (code, err)
    failover_id = failover_id_in(err)
    code, doc, err = app.cli("failover", "--resume", failover_id, "--json")
    assert code == 0, err
    assert doc["state"] == "completed" and doc["id"] == failover_id
    assert active_cluster(app.consul, app.namespace) == there
    steps = [e["step"] for e in doc["events"] if e["outcome"] == "ok"]
    assert steps == ["deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate"]
    # The groups stand exactly where the record says: a resumed set-offsets committed the
    # positions stored before the kill, never others.
    for g in doc["groups"]:
        found = committed_offsets(
            {"bootstrap.servers": app.bootstraps[there]}, g["group"], [(g["topic"], g["partition"])]
        )
        assert found == {(g["topic"], g["partition"]): g["target_offset"]}, (g, found)


def test_two_concurrent_failovers_one_runs_one_is_refused(app: App) -> None:
    here = active_cluster(app.consul, app.namespace)
    there = "west" if here == "east" else "east"
    args = ["failover", "--app", "app", "--to", there, "--json", "-t", str(app.topology)]
    env = {**os.environ, **app.env}
    procs = [
        subprocess.Popen([sys.executable, "-m", "drsvc.cli.main", *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    results = [(p.wait(180), *p.communicate()) for p in procs]
    codes = sorted(code for code, _out, _err in results)
    assert codes == [0, 1], results
    refused = next(err for code, _out, err in results if code == 1)
    assert "running" in refused or "already active" in refused, refused


def test_refusals_say_why(app: App) -> None:
    here = active_cluster(app.consul, app.namespace)
    assert here is not None
    code, _doc, err = app.cli("failover", "--app", "nope", "--to", "west")
    assert code == 2 and "nope" in err
    code, _doc, err = app.cli("failover", "--app", "app", "--to", "mars")
    assert code == 2 and "mars" in err
    code, doc, err = app.cli("failover", "--app", "app", "--to", here, "--json")
    assert code == 1 and "already active" in err and doc["state"] == "refused"


def test_apps_shows_where_the_application_is_active_and_what_a_move_would_cost(app: App) -> None:
    here = active_cluster(app.consul, app.namespace)
    code, rows, err = app.cli("apps", "--json")
    assert code == 0, err
    (row,) = rows  # type: ignore[misc]
    assert (row["app"], row["active"], row["preferred"], row["running"]) == (
        "app",
        here,
        "east",
        None,
    )
    assert isinstance(row["epoch"], int)
    groups = {g["group"]: g for g in row["groups"]}
    assert set(groups) == set(GROUPS)
    assert all(g["to"] != here and g["would_lose"] is not None for g in groups.values()), groups


def test_a_target_group_with_live_members_is_refused(app: App) -> None:
    here = active_cluster(app.consul, app.namespace)
    assert here is not None
    there = "west" if here == "east" else "east"
    member = Consumer(
        {"bootstrap.servers": app.bootstraps[there], "group.id": "g2", "session.timeout.ms": 6000}
    )
    try:
        member.subscribe(app.topics_on(there))
        wait_until(lambda: bool(member.poll(0.5) or member.assignment()), 30, "g2 to join")
        code, _doc, err = app.cli("failover", "--app", "app", "--to", there, "--json")
        assert code == 1 and "live members" in err, err
        assert active_cluster(app.consul, app.namespace) == here
    finally:
        member.close()


def test_a_consumer_that_stays_on_the_old_cluster_rolls_the_planned_failover_back(
    app: App,
) -> None:
    here = active_cluster(app.consul, app.namespace)
    assert here is not None
    there = "west" if here == "east" else "east"
    # A consumer that follows no active key: it stays in its group on the old cluster, where
    # it could commit after the positions were set on the new one.
    member = Consumer(
        {
            "bootstrap.servers": app.bootstraps[here],
            "group.id": "g2",
            "client.id": "stays-behind",
            "session.timeout.ms": 6000,
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe(app.topics_on(here))
        wait_until(lambda: bool(member.poll(0.5) or member.assignment()), 30, "g2 to join")
        code, doc, err = app.cli(
            "failover", "--app", "app", "--to", there, "--catch-up-timeout", "8", "--json"
        )
        assert code == 1 and doc["state"] == "rolled_back", (code, err)
        failed = next(e for e in doc["events"] if e["outcome"] == "failed")
        assert failed["step"] == "wait-caught-up"
        assert f"group g2 has 1 member(s) on {here}" in failed["detail"], failed
        assert "client id stays-behind, host /127.0.0.1" in failed["detail"], failed
        assert active_cluster(app.consul, app.namespace) == here
    finally:
        member.close()


def test_failover_works_through_the_other_two_consul_servers_when_one_site_s_is_killed(
    app: App, local_env: LocalEnvironment, cluster_pair: EnvironmentInfo
) -> None:
    assert set(cluster_pair.consul_sites) == {"east", "west", "witness"}
    here = active_cluster(app.consul, app.namespace)
    assert here is not None
    there = "west" if here == "east" else "east"
    west_agent = ConsulClient(cluster_pair.consul_sites["west"])
    east_server = StateStore(local_env.state_dir).load().consul_agent_of("east")
    assert east_server is not None
    gone = f"{east_server.host}:{east_server.server_port}"
    try:
        local_env.stop_consul_site("east")
        # The two servers left keep their leader, or elect one within seconds.
        wait_until(lambda: _leader_other_than(west_agent, gone), 60, "a leader that is not east's")
        code, doc, err = app.cli(
            "failover",
            "--app",
            "app",
            "--to",
            there,
            "--json",
            extra_env={"DRSVC_CONSUL_HTTP_ADDR": cluster_pair.consul_sites["west"]},
        )
        assert code == 0, err
        assert doc["state"] == "completed" and doc["to"] == there
        assert active_cluster(west_agent, app.namespace) == there
    finally:
        local_env.up(["east", "west"])
    # East's server is back in the quorum and sees what was written without it.
    assert active_cluster(ConsulClient(cluster_pair.consul_sites["east"]), app.namespace) == there


def _leader_other_than(client: ConsulClient, gone: str) -> bool:
    try:
        leader = client.leader()
    except CoordinatorUnavailableError:
        return False
    return bool(leader) and leader != gone
