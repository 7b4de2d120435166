"""Active/passive failover and failback: identity naming, the way back a ``standby`` flow.

The application's topic has the same name on both clusters. A producer following the active key
writes sequence-numbered records the whole time; the groups consume part of them before each move.
At the failover the flow east->west stops copying the topic and the standby flow west->east starts
at the cut-off, so east catches up with what the application writes on west; the failback is a
planned failover back. Across both clusters every acknowledged record is read exactly once, in
each delivery mode.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from failover_support import (
    FollowingProducer,
    active_cluster,
    check_exactly_once,
    consume_part,
    failover_env,
    read_rest,
    run_cli,
    wait_until,
    write_failover_topology,
)
from replication_support import create, read_all, running_workers

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo
from failover.naming import app_active_key, flow_control_key

pytestmark = pytest.mark.timeout(600)

GROUPS = ("g1", "g2")


def _move(
    cli_env: dict[str, str],
    topology: Path,
    bootstraps: dict[str, str],
    here: str,
    topic: str,
    consumed: dict[str, list[bytes]],
    *args: str,
) -> dict:  # type: ignore[type-arg]
    for group, fraction in zip(GROUPS, (1.0, 0.5), strict=True):
        values, _ = consume_part(bootstraps[here], group, [topic], fraction)
        consumed[group] += values
    code, doc, err = run_cli(*args, "--app", "app", "--json", "-t", str(topology), env=cli_env)
    assert code == 0, err
    assert doc is not None
    assert doc["state"] == "completed" and doc["kind"] == "planned", doc
    assert doc["groups"] and all(g["exact"] for g in doc["groups"]), doc["groups"]
    return doc


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_active_passive_failover_and_failback_read_every_record_exactly_once(
    cluster_pair: EnvironmentInfo, tmp_path: Path, delivery: str
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic = f"ap-{tag}"
    bootstraps = dict(cluster_pair.clusters)
    for alias in ("east", "west"):
        create(bootstraps[alias], topic, 2)
    namespace = f"ap-{tag}"
    topology = write_failover_topology(
        tmp_path / "topology.json",
        namespace,
        bootstraps,
        topic,
        policy="identity",
        delivery=delivery,
    )
    assert cluster_pair.consul_http_addr is not None
    consul = ConsulClient(cluster_pair.consul_http_addr)
    env = failover_env(cluster_pair.consul_http_addr)
    consumed: dict[str, list[bytes]] = {g: [] for g in GROUPS}
    flows = ["east->west", "west->east"]
    with running_workers(topology, flows, tmp_path, "--consul", cluster_pair.consul_http_addr):
        producer = FollowingProducer(
            consul, app_active_key(namespace, "app"), bootstraps, topic
        ).start()
        try:
            wait_until(lambda: len(producer.acked) >= 200, 60, "records on east")
            over = _move(
                env, topology, bootstraps, "east", topic, consumed, "failover", "--to", "west"
            )
            assert over["to"] == "west" and active_cluster(consul, namespace) == "west"
            controls = {
                flow: json.loads(consul.kv_get(flow_control_key(namespace, *flow)) or "{}")
                for flow in (("east", "west"), ("west", "east"))
            }
            assert topic in controls[("east", "west")]["paused_topics"]
            assert topic in controls[("west", "east")]["started_topics"]
            written = len(producer.acked)
            wait_until(lambda: len(producer.acked) >= written + 200, 60, "records on west")
            back = _move(env, topology, bootstraps, "west", topic, consumed, "failback")
            assert back["to"] == "east" and active_cluster(consul, namespace) == "east"
            written = len(producer.acked)
            wait_until(lambda: len(producer.acked) >= written + 100, 60, "records on east again")
        finally:
            acked = producer.stop()
    assert [c for c in producer.clusters_seen] == ["east", None, "west", None, "east"]
    for group in GROUPS:
        rest = read_rest(bootstraps["east"], group, [topic])
        check_exactly_once(acked, consumed[group] + rest)
    # East holds every acknowledged record once: its own, and west's copied back by the way back.
    on_east = [r.value for r in read_all(bootstraps["east"], topic)]
    assert sorted(on_east) == sorted(v for _c, v in acked)
