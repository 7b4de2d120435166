"""The migration workflow end to end on real brokers and a real Consul: plan, start (topics
created, an identity flow copying), status, a cutover refused while the copy lags (changing
nothing), cutovers of two applications while their producers keep writing, finish, and then:
nothing lost, nothing duplicated, every group resumed on the target where it stopped on the
source, and the source holding all it held. A compacted topic with holes the log cleaner left
cuts over exactly although its copy's offsets differ. A plan with a partition-count conflict
stops start before anything is created."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from migration_support import (
    AppProducer,
    StartProcess,
    committed_offsets,
    consume_some,
    drsvc,
    read_from_committed,
)
from replication_support import produce, read_all, topics_of, wait_for
from translation_support import commit_at, compacted_history, hole_and_tombstone, read_keyed

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.service import ApiService
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.runtime.failover.connect import connect_executor
from drsvc.settings import Settings
from drsvc.topology.loader import load_topology
from failover.migration_state import migration_key
from failover.naming import app_active_key, app_failover_key, flow_control_key

TOKEN = "migration-test-token-0123"


def _topology(path: Path, name: str, bootstraps: dict[str, str], prefix: str,
              apps: list[dict[str, Any]]) -> Path:  # fmt: skip
    path.write_text(
        json.dumps(
            {
                "name": name,
                "clusters": {a: {"bootstrap_servers": b} for a, b in bootstraps.items()},
                "applications": apps,
                "migrations": [
                    {
                        "name": "to-west",
                        "source": "east",
                        "target": "west",
                        "topics": {"include": [f"{prefix}\\..*"]},
                        "applications": [a["name"] for a in apps],
                    }
                ],
            },
            indent=2,
        )
    )
    return path


def test_migration_with_running_producers_loses_nothing_and_resumes_exactly(  # noqa: PLR0915
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    started = time.monotonic()
    marks: dict[str, float] = {}

    def mark(what: str) -> None:
        marks[what] = round(time.monotonic() - started, 1)

    assert cluster_pair.consul_http_addr is not None
    consul_addr = cluster_pair.consul_http_addr
    consul = ConsulClient(consul_addr)
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    bootstraps = {"east": east, "west": west}
    tag = uuid.uuid4().hex[:6]
    prefix, ns = f"mw{tag}", f"mw-{tag}"
    orders, audit, events = f"{prefix}.orders", f"{prefix}.audit", f"{prefix}.events"
    accounts, metrics = f"{prefix}.accounts", f"{prefix}.metrics"
    admin = admin_client(east)
    assert create_topic(admin, orders, 12)
    assert create_topic(admin, audit, 2)
    assert create_topic(admin, events, 4, config={"retention.ms": "86400000"})
    assert create_topic(
        admin, accounts, 3, config={"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
    )
    assert create_topic(admin, metrics, 1)
    all_topics = [orders, audit, events, accounts, metrics]
    wait_for(lambda: set(all_topics) <= topics_of(east), 10, "east's new topics")
    # Records from before the migration (with headers and explicit timestamps on events).
    base_ts = int(time.time() * 1000) - 7_200_000
    produce(east, events, [(i % 4, f"k{i}".encode(), f"{events}:pre{i:04d}".encode(),
                            [("trace", f"pre-{i}".encode()), ("null", None)], base_ts + i)
                           for i in range(200)])  # fmt: skip
    for topic in (orders, audit, accounts, metrics):
        produce(east, topic, [(i % 1, f"k{i}".encode(), f"{topic}:pre{i:04d}".encode(), [],
                               base_ts + i) for i in range(100)])  # fmt: skip
    apps = [
        {"name": "orders-app", "groups": ["g-orders", "g-audit"],
         "topics": [orders, audit, events], "preferred": "east", "lease_s": 2},
        {"name": "accounts-app", "groups": ["g-accounts"], "topics": [accounts, metrics],
         "preferred": "east", "lease_s": 2},
    ]  # fmt: skip
    groups = {"g-orders": [orders, events], "g-audit": [audit], "g-accounts": [accounts, metrics]}
    topology = _topology(tmp_path / "mig.yaml", ns, bootstraps, prefix, apps)
    env = {
        "DRSVC_CONSUL_HTTP_ADDR": consul_addr,
        "DRSVC_FAILOVER_LOCK_TTL_S": "2",
        "DRSVC_FAILOVER_LOCK_DELAY_S": "1",
    }
    t = ["-t", str(topology)]

    code, plan, err = drsvc("migrate", "plan", *t, "--json", env=env)
    assert code == 0, err
    assert {p["topic"]: p["action"] for p in plan["topics"]} == dict.fromkeys(all_topics, "create")

    # Before start: a cutover is refused, naming why.
    code, doc, err = drsvc("migrate", "cutover", *t, "--app", "orders-app", "--json",
                           "--wait-s", "0", env=env)  # fmt: skip
    assert code == 1 and "was not started" in doc["reason"], (doc, err)

    producers = {
        "orders-app": AppProducer(consul, ns, "orders-app", bootstraps, [orders, audit, events],
                                  timed_topics=[events]).start(),
        "accounts-app": AppProducer(consul, ns, "accounts-app", bootstraps,
                                    [accounts, metrics]).start(),
    }  # fmt: skip
    consumed: dict[str, list[bytes]] = {g: [] for g in groups}
    for group, topics in groups.items():
        values, _ = consume_some(east, group, topics, 0.5)
        consumed[group] += values

    copier = StartProcess(*t, "--progress-every-s", "1", log_file=tmp_path / "start.log",
                          env=env)  # fmt: skip
    try:
        wait_for(lambda: set(all_topics) <= topics_of(west), 30, "the migration's topics on west")

        def caught_up() -> bool:
            # A cutover's check: every partition copied up to the source's end when it began.
            return all(
                drsvc("migrate", "cutover", *t, "--app", app, "--dry-run", "--json", env=env)[0]
                == 0
                for app in ("orders-app", "accounts-app")
            )

        wait_for(caught_up, 60, "the copy to catch up", interval_s=1)
        mark("caught up")
        code, status, err = drsvc("migrate", "status", *t, "--json", env=env)
        assert code == 0, err
        assert {(p["topic"]) for p in status["partitions"]} == set(all_topics)
        assert len(status["partitions"]) == 12 + 2 + 4 + 3 + 1
        assert all(p["replicated_offset"] is not None for p in status["partitions"])
        assert status["group"] == "drsvc-replicator.east-west"
        assert {a["app"]: a["phase"] for a in status["applications"]} == {
            "orders-app": "on-source", "accounts-app": "on-source"}  # fmt: skip
        table_code, _, _ = drsvc("migrate", "status", *t, env=env)
        assert table_code == 0

        # The copy is paused and the producers keep writing: a cutover is refused and changes
        # nothing. It waits for the copier's own word that it paused every partition: one
        # refused dry run only shows a lag at that moment, and a copier that had not yet seen
        # the pause could catch up within the real cutover's check, which would then start.
        control = flow_control_key(ns, "east", "west")
        log_offset = copier.log_size()
        consul.kv_put(control, json.dumps({"paused": True}))
        partitions = 12 + 2 + 4 + 3 + 1
        wait_for(lambda: copier.paused_since(log_offset) >= partitions, 30,
                 "the copier to pause every partition", interval_s=0.5)  # fmt: skip

        def refused() -> bool:
            return drsvc("migrate", "cutover", *t, "--app", "orders-app", "--dry-run",
                         "--wait-s", "1", "--json", env=env)[0] == 1  # fmt: skip

        wait_for(refused, 30, "the paused copy to lag", interval_s=1)
        code, doc, err = drsvc("migrate", "cutover", *t, "--app", "orders-app", "--json",
                               "--wait-s", "1", env=env)  # fmt: skip
        assert code == 1, (doc, err)
        assert "the copy lags" in doc["reason"] and "not on the target yet" in doc["reason"], doc
        assert consul.kv_get(app_active_key(ns, "orders-app")) is None
        assert consul.kv_get(app_failover_key(ns, "orders-app")) is None  # no failover started
        assert not committed_offsets(west, "g-orders", [orders, events])
        mark("refused with lag")
        consul.kv_put(control, json.dumps({"paused": False}))

        # Consumers read on: more of what is on east, committed there.
        for group, topics in groups.items():
            values, _ = consume_some(east, group, topics, 0.7)
            consumed[group] += values
        wait_for(caught_up, 60, "the resumed copy to catch up", interval_s=1)
        mark("caught up again")
        code, dry, err = drsvc("migrate", "cutover", *t, "--app", "orders-app", "--dry-run",
                               "--json", env=env)  # fmt: skip
        assert code == 0 and dry["dry_run"] is True and dry["state"] == "planned", (dry, err)
        assert consul.kv_get(app_active_key(ns, "orders-app")) is None

        east_before = {g: committed_offsets(east, g, topics) for g, topics in groups.items()}
        code, over, err = drsvc("migrate", "cutover", *t, "--app", "orders-app", "--json", env=env)
        assert code == 0 and over["state"] == "completed", (over, err)
        assert over["check"]["lag"] == 0
        mark("orders-app cut over")

        # Finishing now is refused: accounts-app is still on the source.
        code, doc, err = drsvc("migrate", "finish", *t, "--json", env=env)
        assert code == 1 and "accounts-app (on-source)" in doc["reason"], (doc, err)

        for group in ("g-accounts",):
            values, _ = consume_some(east, group, groups[group], 0.5)
            consumed[group] += values
        east_before["g-accounts"] = committed_offsets(east, "g-accounts", groups["g-accounts"])
        code, over2, err = drsvc("migrate", "cutover", *t, "--app", "accounts-app", "--json",
                                 env=env)  # fmt: skip
        assert code == 0 and over2["state"] == "completed", (over2, err)
        mark("accounts-app cut over")
        wait_for(lambda: "west" in producers["accounts-app"].clusters_seen, 15, "accounts on west")
        time.sleep(1.0)  # the producers write on west for a while

        code, fin, err = drsvc("migrate", "finish", *t, "--json", env=env)
        assert code == 0 and fin["state"] == "finished", (fin, err)
        assert copier.wait(30) == 0, copier.tail()  # the copy stops by itself
    finally:
        copier.stop()
    acked = {app: p.stop() for app, p in producers.items()}
    for app, producer in producers.items():
        assert producer.clusters_seen == ["east", None, "west"], (app, producer.clusters_seen)

    on_east = {tp: read_all(east, tp) for tp in all_topics}
    on_west = {tp: read_all(west, tp) for tp in all_topics}

    # Every group resumed on west at the same place it stopped on east (identity offsets), and
    # reads from there exactly what it had not read: nothing lost, nothing twice.
    for group, topics in groups.items():
        assert committed_offsets(west, group, topics) == east_before[group], group
        rest = read_from_committed(west, group, topics)
        written = sorted(
            [v for app in acked.values() for _c, tp, v in app if tp in topics]
            + [r.value for tp in topics for r in on_east[tp] if b":pre" in (r.value or b"")]
        )
        got = sorted(consumed[group] + rest)
        assert len(got) == len(set(got)), f"{group}: {len(got) - len(set(got))} read twice"
        assert got == written, (
            f"{group}: {len(set(written) - set(got))} lost, {len(set(got) - set(written))} extra"
        )

    # The source holds everything written there; west holds identical copies, then the new.
    for topic in all_topics:
        east_written = [
            v for app in acked.values() for c, tp, v in app if c == "east" and tp == topic
        ]
        source = on_east[topic]
        assert sorted(r.value for r in source if b":pre" not in (r.value or b"")) == sorted(
            east_written
        )
        assert sum(1 for r in source if b":pre" in (r.value or b"")) == (
            200 if topic == events else 100
        )
        copies = {(r.partition, r.offset): r for r in on_west[topic]}
        for r in source:
            copy = copies[(r.partition, r.offset)]
            assert (copy.key, copy.value, copy.timestamp) == (r.key, r.value, r.timestamp)
            assert [h for h in copy.headers if h[0] != "drsvc.provenance"] == r.headers
    state = json.loads(consul.kv_get(migration_key(ns, "to-west")) or "{}")
    assert state["state"] == "finished" and sorted(state["created_topics"]) == sorted(all_topics)
    mark("checked")
    code, verified, err = drsvc("migrate", "verify", *t, "--json", env=env)
    assert code == 0 and verified["passed"] is True, (verified, err)
    totals = verified["totals"]
    on_east_total = sum(len(records) for records in on_east.values())
    assert totals["source_records"] == totals["copies"] == on_east_total
    assert totals["missing"] == totals["altered"] == totals["duplicates"] == 0
    assert totals["target_only"] == sum(
        1 for app in acked.values() for c, _t, _v in app if c == "west"
    )
    assert {g["state"] for g in verified["groups"]} == {"ok"}
    assert {(g["group"]) for g in verified["groups"]} == set(groups)
    mark("verified")
    print(f"migration workflow: {marks}")


def test_start_with_a_partition_count_conflict_names_it_and_creates_nothing(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    assert cluster_pair.consul_http_addr is not None
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    tag = uuid.uuid4().hex[:6]
    prefix, ns = f"mc{tag}", f"mc-{tag}"
    assert create_topic(admin_client(east), f"{prefix}.a", 3)
    assert create_topic(admin_client(east), f"{prefix}.b", 2)
    assert create_topic(admin_client(west), f"{prefix}.a", 5)
    wait_for(lambda: f"{prefix}.a" in topics_of(west), 10, "west's topic")
    topology = _topology(tmp_path / "c.yaml", ns, {"east": east, "west": west}, prefix, [])
    env = {"DRSVC_CONSUL_HTTP_ADDR": cluster_pair.consul_http_addr}
    code, plan, _ = drsvc("migrate", "plan", "-t", str(topology), "--json", env=env)
    assert code == 1
    conflict = next(p for p in plan["topics"] if p["action"] == "conflict")
    assert (
        conflict["topic"] == f"{prefix}.a"
        and "5 partitions, the source has 3" in conflict["reason"]
    )
    done = StartProcess("-t", str(topology), log_file=tmp_path / "start.log", env=env)
    assert done.wait(60) == 1
    log = done.log_file.read_text()
    assert f"{prefix}.a" in log and "5 partitions" in log and "refused" in log, log
    assert f"{prefix}.b" not in topics_of(west)
    assert ConsulClient(cluster_pair.consul_http_addr).kv_get(migration_key(ns, "to-west")) is None

    # The same through the API: the plan names the conflict, a start is refused (409) and
    # creates nothing; an unknown migration is 404.
    address = cluster_pair.consul_http_addr
    loaded = load_topology(topology)
    bootstraps = {"east": east, "west": west}
    service = ApiService(
        loaded,
        bootstraps,
        lambda: connect_executor(loaded, bootstraps, address, Settings.from_env(),
                                 catch_up_timeout_s=30),
        ConsulCoordinator(address),
        ConsulClient(address),
    )  # fmt: skip
    api_app = create_app(service, ApiAuth.of(TOKEN, public_reads=True))
    web = TestClient(api_app, raise_server_exceptions=False)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    planned = web.get("/v1/migrations/to-west/plan").json()
    assert planned["conflicts"] == 1
    refused = web.post("/v1/migrations/to-west/start", headers=auth)
    assert refused.status_code == 409, refused.text
    assert "5 partitions" in refused.json()["error"]["message"]
    assert web.get("/v1/migrations/north").status_code == 404
    listed = web.get("/v1/migrations").json()
    assert listed[0]["state"] == "not-started"
    assert f"{prefix}.b" not in topics_of(west)


def test_a_compacted_topic_with_holes_cuts_over_exactly(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    """The log cleaner left holes in the source: the copy on the target is dense, so its
    offsets differ from the source's, and a group that stopped in a hole or on a tombstone must
    still resume on the target at exactly the next record it had not read."""
    assert cluster_pair.consul_http_addr is not None
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    tag = uuid.uuid4().hex[:6]
    prefix, ns = f"mk{tag}", f"mk-{tag}"
    topic = f"{prefix}.ledger"
    compacted_history(east, topic)
    source = read_keyed(east, topic, {0: 0, 1: 0})
    stops = hole_and_tombstone(source)
    commit_at(east, topic, "g-ledger", stops)
    apps = [{"name": "ledger-app", "groups": ["g-ledger"], "topics": [topic],
             "preferred": "east", "lease_s": 2}]  # fmt: skip
    topology = _topology(tmp_path / "k.yaml", ns, {"east": east, "west": west}, prefix, apps)
    env = {
        "DRSVC_CONSUL_HTTP_ADDR": cluster_pair.consul_http_addr,
        "DRSVC_FAILOVER_LOCK_TTL_S": "2",
        "DRSVC_FAILOVER_LOCK_DELAY_S": "1",
    }
    t = ["-t", str(topology)]

    copier = StartProcess(*t, "--progress-every-s", "1", log_file=tmp_path / "start.log",
                          env=env)  # fmt: skip
    try:
        wait_for(
            lambda: drsvc("migrate", "cutover", *t, "--app", "ledger-app", "--dry-run", "--json",
                          env=env)[0] == 0,
            60, "the copy to catch up", interval_s=1,
        )  # fmt: skip
        code, over, err = drsvc("migrate", "cutover", *t, "--app", "ledger-app", "--json",
                                env=env)  # fmt: skip
        assert code == 0 and over["state"] == "completed", (over, err)
        code, fin, err = drsvc("migrate", "finish", *t, "--json", env=env)
        assert code == 0 and fin["state"] == "finished", (fin, err)
        assert copier.wait(30) == 0, copier.tail()
    finally:
        copier.stop()

    copies = read_keyed(west, topic, {0: 0, 1: 0})
    for p in (0, 1):
        assert [(k, v) for _o, k, v in copies[p]] == [(k, v) for _o, k, v in source[p]], p
    # Not identity: the hole partition 0 stops in is not on the target.
    assert [o for o, _k, _v in copies[0]] != [o for o, _k, _v in source[0]]

    resumed = committed_offsets(west, "g-ledger", [topic])
    after = read_keyed(west, topic, {p: resumed[(topic, p)] for p in (0, 1)})
    for p in (0, 1):
        wanted = [(k, v) for o, k, v in source[p] if o >= stops[p]]
        got = [(k, v) for _o, k, v in after[p]]
        assert got == wanted, f"partition {p}: {len(got)} read on west, {len(wanted)} wanted"

    code, verified, err = drsvc("migrate", "verify", *t, "--json", env=env)
    assert code == 0 and verified["passed"] is True, (verified, err)
    totals = verified["totals"]
    assert totals["source_records"] == totals["copies"] == sum(len(r) for r in source.values())
    assert totals["missing"] == totals["altered"] == totals["duplicates"] == 0
    assert {g["group"]: g["state"] for g in verified["groups"]} == {"g-ledger": "ok"}
