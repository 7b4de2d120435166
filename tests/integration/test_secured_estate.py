"""drsvc on secured clusters: SASL_SSL (SCRAM-SHA-512) and mutual TLS only, ACLs that allow
nothing by default, and each role under its own principal with only the grants
``failover.kafka_acls.role_grants`` gives it.

One secured environment (two sites, its own state directory) serves the whole file. An
application runs on east with flows both ways, at least once east->west and exactly once
west->east; every role is a real process with its own topology file naming its own principal
and password file, as separate deployments would be. A producer that follows the application's
active key writes the whole time; a planned failover and the failback move it, the groups'
positions are translated, and every acknowledged record is read exactly once. The checkpoint
stream (faust) runs on SASL_SSL too.

Consul is secured as well: HTTPS only, ACLs that deny by default, and each role reaches it with
its own token, named in its topology's ``consul:`` block and in Consul's own variables
(``CONSUL_HTTP_ADDR``, ``CONSUL_CACERT``, ``CONSUL_HTTP_TOKEN_FILE``) of its process.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from checkpoint_support import AgentProcess
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from failover_support import (
    FollowingProducer,
    active_cluster,
    check_exactly_once,
    consume_part,
    failover_env,
    read_rest,
    run_cli,
    wait_for_remote_copies,
    wait_until,
)
from migration_support import StartProcess
from replication_support import create, running_workers

from drsvc.adapters.consul_access import resolve_consul_access
from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import LocalEnvironment
from drsvc.errors import CredentialsRefusedError
from drsvc.kafka.acls import create_acls
from drsvc.kafka.admin import admin_client
from drsvc.kafka.errors import COORDINATOR_MOVING
from drsvc.runtime.access.grants import kafka_grants
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.settings import Settings
from drsvc.topology import load_topology_text
from failover.naming import DEFAULT_CHECKPOINTS_TOPIC, app_active_key

pytestmark = pytest.mark.timeout(900)

GROUPS = ("g1", "g2")
SITES = ("east", "west")
#: the roles that run, and the principal each runs as
ROLE_PRINCIPALS = {
    "replicator": "drsvc-replicator",
    "checkpoints": "drsvc-checkpoints",
    "executor": "drsvc-executor",
}
APP = "app"
APP_PRINCIPAL = f"app-{APP}"


@dataclass
class Estate:
    env: LocalEnvironment
    tmp: Path
    name: str
    topic: str
    bootstraps: dict[str, str]
    consul_addr: str
    #: a topology file per role (its clusters name that role's principal)
    topologies: dict[str, Path]

    @property
    def consul(self) -> ConsulClient:
        """Consul as the application reads it (its token may read its active key)."""
        return ConsulClient(
            access=resolve_consul_access(self.env.consul_environment("application"))
        )

    def app_settings(self) -> dict[str, str]:
        return self.env.client_settings(APP_PRINCIPAL)

    def admin(self, alias: str) -> tuple[str, dict[str, str]]:
        return self.env.admin_settings(alias)

    def executor(self, *args: str) -> tuple[int, dict[str, Any], str]:
        code, doc, err = run_cli(
            *args,
            "-t",
            str(self.topologies["executor"]),
            # the topology's consul block alone: its address, CA file and the executor's token
            env=failover_env(self.consul_addr),
        )
        return code, doc or {}, err

    def topics_on(self, cluster: str) -> list[str]:
        other = "west" if cluster == "east" else "east"
        return [self.topic, f"{other}.{self.topic}"]


def _document(name: str, topic: str, clusters: dict[str, dict[str, Any]]) -> dict[str, Any]:
    flows = [
        {"source": "east", "target": "west", "delivery": "at-least-once"},
        {"source": "west", "target": "east", "delivery": "exactly-once"},
    ]
    for flow in flows:
        flow["topics"] = {"include": [f"^{topic}$"]}
    return {
        "name": name,
        "clusters": clusters,
        "flows": flows,
        "applications": [
            {
                "name": APP,
                "groups": list(GROUPS),
                "topics": [topic],
                "preferred": "east",
                "lease_s": 2.0,
            }
        ],
    }


@pytest.fixture(scope="module")
def estate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Estate]:
    state_dir = tmp_path_factory.mktemp("drsvc-secured-state")
    tmp = tmp_path_factory.mktemp("secured")
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir, consul_layout="single"))
    try:
        info = env.up(list(SITES), secure=True)
        env.add_principal(APP_PRINCIPAL)
        assert info.consul_http_addr is not None
        tag = uuid.uuid4().hex[:6]
        name, topic = f"sec-{tag}", f"sec-{tag}"
        bootstraps = dict(info.clusters)
        topologies: dict[str, Path] = {}
        for role, principal in {**ROLE_PRINCIPALS, "application": APP_PRINCIPAL}.items():
            security = env.topology_security(principal)
            consul = env.topology_consul(role)  # type: ignore[arg-type]
            assert security is not None and consul is not None
            clusters = {
                a: {"bootstrap_servers": b, "security": security} for a, b in bootstraps.items()
            }
            document = {**_document(name, topic, clusters), "consul": consul}
            path = tmp / f"{role}.json"
            path.write_text(json.dumps(document, indent=2))
            topologies[role] = path
        # What each role may do, and nothing more: the same grants 'drsvc acls plan' prints.
        topology = load_topology_text(topologies["executor"].read_text())
        for alias in SITES:
            bootstrap, admin_settings = env.admin_settings(alias)
            create(bootstrap, topic, 2, admin_settings)
            admin = admin_client(bootstrap, admin_settings)
            for role in (*ROLE_PRINCIPALS, "application"):
                create_acls(admin, kafka_grants(topology, role, alias), cluster=alias)  # type: ignore[arg-type]
        estate = Estate(env, tmp, name, topic, bootstraps, info.consul_http_addr, topologies)
        yield estate
    finally:
        env.down()


# The migration runs before any test starts the estate's replication workers: its copier joins
# the consumer group of the flow east->west (drsvc-replicator.east-west), and once the estate's
# workers lead that group, they assign it without the migration's topic, which their principal
# may not see. Two topologies copying between the same two clusters in the same direction share
# that group; see the stop's notes.
MIGRATOR = "drsvc-migrator"
MIGRATING_APP = "mover"


def _migration_topology(estate: Estate, prefix: str, group: str) -> Path:
    """A topology of the estate's clusters with no flow and one migration east->west of the
    topics under ``prefix``, cutting one application over; its clusters name the migrator's
    principal, its ``consul`` block the executor's token."""
    security = estate.env.topology_security(MIGRATOR)
    consul = estate.env.topology_consul("executor")
    assert security is not None and consul is not None
    clusters = {
        a: {"bootstrap_servers": b, "security": security} for a, b in estate.bootstraps.items()
    }
    document = {
        "name": f"{prefix}-ns",
        "clusters": clusters,
        "applications": [
            {
                "name": MIGRATING_APP,
                "groups": [group],
                "topics": [f"{prefix}.orders"],
                "preferred": "east",
                "lease_s": 2.0,
            }
        ],
        "migrations": [
            {
                "name": "to-west",
                "source": "east",
                "target": "west",
                "topics": {"include": [f"{prefix}\\..*"]},
                "applications": [MIGRATING_APP],
            }
        ],
        "consul": consul,
    }
    path = estate.tmp / f"{prefix}-migrator.json"
    path.write_text(json.dumps(document, indent=2))
    return path


def _consume_half(bootstrap: str, group: str, topic: str, settings: dict[str, str]) -> list[bytes]:
    consumed: list[bytes] = []

    def consumed_half() -> bool:
        try:  # the group's coordinator may still be loading on a fresh cluster
            consumed.extend(consume_part(bootstrap, group, [topic], 0.5, settings)[0])
        except KafkaException as err:
            if not (err.args[0].retriable() or err.args[0].code() in COORDINATOR_MOVING):
                raise
            return False
        return True

    wait_until(consumed_half, 60, "the application to consume half of its records")
    return consumed


def test_a_migration_runs_under_the_migrators_grants_alone(estate: Estate) -> None:
    """``drsvc migrate`` on secured clusters: plan, start (topics created, the identity flow
    copying), cutover and finish, every command as the migrator's principal with exactly the
    grants ``drsvc acls plan --role migrator`` prints, and Consul through the executor's token
    (its topology's ``consul`` block alone). The application's group resumes on the target
    exactly where it stopped on the source."""
    prefix = f"mig{uuid.uuid4().hex[:6]}"
    orders, group = f"{prefix}.orders", f"{prefix}-g"
    path = _migration_topology(estate, prefix, group)
    topology = load_topology_text(path.read_text())
    estate.env.add_principal(f"app-{MIGRATING_APP}")
    for alias in SITES:
        bootstrap, admin_settings = estate.admin(alias)
        admin = admin_client(bootstrap, admin_settings)
        create_acls(admin, kafka_grants(topology, "migrator", alias), cluster=alias)
        create_acls(admin, kafka_grants(topology, "application", alias), cluster=alias)
    east_bootstrap, east_admin = estate.admin("east")
    create(east_bootstrap, orders, 2, east_admin)
    app_settings = estate.env.client_settings(f"app-{MIGRATING_APP}")
    sent = [f"{orders}:{i:04d}".encode() for i in range(300)]
    producer = Producer({"bootstrap.servers": estate.bootstraps["east"], **app_settings})
    for i, value in enumerate(sent):
        producer.produce(orders, value, partition=i % 2)
    assert producer.flush(30) == 0
    consumed = _consume_half(estate.bootstraps["east"], group, orders, app_settings)

    env = failover_env(estate.consul_addr)
    t = ["-t", str(path)]
    code, plan, err = run_cli("migrate", "plan", *t, "--json", env=env)
    assert code == 0, err
    assert {p["topic"]: p["action"] for p in (plan or {})["topics"]} == {orders: "create"}
    cutover = ("migrate", "cutover", *t, "--app", MIGRATING_APP, "--json")
    copier = StartProcess(*t, "--progress-every-s", "1", log_file=estate.tmp / f"{prefix}.log",
                          env=env)  # fmt: skip
    try:
        try:
            wait_until(lambda: run_cli(*cutover, "--dry-run", env=env)[0] == 0, 90,
                       "the migration's copy to catch up")  # fmt: skip
        except AssertionError:
            raise AssertionError(copier.tail()) from None
        code, over, err = run_cli(*cutover, env=env)
        assert code == 0 and over is not None and over["state"] == "completed", (over, err)
        code, fin, err = run_cli("migrate", "finish", *t, "--json", env=env)
        assert code == 0 and fin is not None and fin["state"] == "finished", (fin, err)
        assert copier.wait(60) == 0, copier.tail()
    finally:
        copier.stop()
    rest = read_rest(estate.bootstraps["west"], group, [orders], app_settings)
    check_exactly_once([("east", v) for v in sent], consumed + rest)


@pytest.fixture(scope="module")
def replicating(estate: Estate) -> Iterator[None]:
    flows = ["east->west", "west->east"]
    topology = estate.topologies["replicator"]
    with ExitStack() as stack:
        # The workers reach Consul with their topology's consul block alone (no CONSUL_*).
        workers = stack.enter_context(
            running_workers(topology, flows, estate.tmp, "--consul", estate.consul_addr)
        )
        try:
            wait_for_remote_copies(estate.bootstraps, estate.topic, estate.app_settings())
        except AssertionError:
            raise AssertionError("\n\n".join(w.log_tail() for w in workers)) from None
        yield


def _move(
    estate: Estate, command: str, to: str | None, consumed: dict[str, list[bytes]]
) -> dict[str, Any]:
    here = active_cluster(estate.consul, estate.name)
    assert here is not None
    for group, fraction in zip(GROUPS, (1.0, 0.5), strict=True):
        values, _ = consume_part(
            estate.bootstraps[here], group, estate.topics_on(here), fraction, estate.app_settings()
        )
        consumed[group] += values
    args = [command, "--app", APP, "--json"] + (["--to", to] if to else [])
    code, doc, err = estate.executor(*args)
    assert code == 0, err
    return doc


def test_a_planned_failover_and_failback_read_every_record_exactly_once_under_least_privilege(
    estate: Estate, replicating: None
) -> None:
    """Replication in both delivery modes, translation, the executor and a following client,
    each under its own principal: the failover goes east->west over the at-least-once flow's
    syncs, the failback west->east over the exactly-once flow's."""
    consumed: dict[str, list[bytes]] = {g: [] for g in GROUPS}
    key = app_active_key(estate.name, APP)
    producer = FollowingProducer(
        estate.consul, key, estate.bootstraps, estate.topic, settings=estate.app_settings()
    ).start()
    try:
        wait_until(lambda: len(producer.acked) >= 100, 60, "records on east")
        doc = _move(estate, "failover", "west", consumed)
        assert (doc["state"], doc["from"], doc["to"]) == ("completed", "east", "west")
        assert doc["groups"] and all(g["exact"] for g in doc["groups"]), doc["groups"]
        written = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= written + 100, 60, "records on west")
        back = _move(estate, "failback", None, consumed)
        assert (back["state"], back["to"]) == ("completed", "east")
        assert all(g["exact"] for g in back["groups"]), back["groups"]
        written = len(producer.acked)
        wait_until(lambda: len(producer.acked) >= written + 50, 60, "records on east again")
    finally:
        acked = producer.stop()
    assert producer.clusters_seen == ["east", None, "west", None, "east"]
    for group in GROUPS:
        rest = read_rest(
            estate.bootstraps["east"], group, estate.topics_on("east"), estate.app_settings()
        )
        check_exactly_once(acked, consumed[group] + rest)


def test_the_checkpoint_stream_runs_on_sasl_ssl(estate: Estate, replicating: None) -> None:
    """faust reads the offset syncs and writes checkpoints with the checkpoints principal's
    SCRAM credentials over TLS."""
    group = "g1"
    consume_part(estate.bootstraps["east"], group, [estate.topic], 1.0, estate.app_settings())
    # It reaches Consul with its topology's consul block alone (no CONSUL_* variables).
    agent = AgentProcess(
        estate.topologies["checkpoints"], estate.tmp / "checkpoints.log", estate.tmp / "cp-state"
    )
    topic = DEFAULT_CHECKPOINTS_TOPIC.format(source="east")
    bootstrap, admin_settings = estate.admin("west")
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"drsvc-test-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            **admin_settings,
        }
    )
    try:
        reader.subscribe([topic])
        found: list[bytes] = []

        def checkpointed() -> bool:
            found.extend(m.key() or b"" for m in reader.consume(100, 0.5) if m.error() is None)
            return any(group.encode() in k for k in found)

        try:
            wait_until(checkpointed, 180, f"a checkpoint of {group} on west's {topic}")
        except AssertionError:
            raise AssertionError(agent.log_tail()) from None
    finally:
        reader.close()
        code = agent.stop()
    assert code == 0, agent.log_tail()
    assert "Authorization" not in agent.log_file.read_text()


def test_an_application_cannot_write_a_remote_topic(estate: Estate, replicating: None) -> None:
    """Remote topics are the flows' alone: the application's principal may read them (after a
    failover it drains them) but never write them."""
    producer = Producer({"bootstrap.servers": estate.bootstraps["west"], **estate.app_settings()})
    errors: list[KafkaError] = []
    producer.produce(
        f"east.{estate.topic}", b"not mine", on_delivery=lambda err, _m: errors.append(err)
    )
    producer.flush(30)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]


def test_a_role_is_refused_what_its_grants_do_not_name(estate: Estate) -> None:
    """The checkpoints principal reads offset syncs; it cannot read the application's topic."""
    consumer = Consumer(
        {
            "bootstrap.servers": estate.bootstraps["east"],
            "group.id": "drsvc-checkpoints-probe",
            **estate.env.client_settings("drsvc-checkpoints"),
        }
    )
    try:
        consumer.assign([TopicPartition(estate.topic, 0, 0)])
        refused = None
        for _ in range(20):
            for msg in consumer.consume(10, 0.5):
                if msg.error() is not None:
                    refused = msg.error()
            if refused is not None:
                break
        assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_refused_credentials_are_a_clear_error_never_an_outage(estate: Estate) -> None:
    """A wrong password must not read as a dead cluster: a planned failover would turn
    unplanned, and a controller's probe would vote "down". The check names the refusal, a
    failover stops before anything moved, and once the password file holds the right secret
    again (a rotation) the same clients answer."""
    right = estate.env.topology_security(ROLE_PRINCIPALS["executor"])
    assert right is not None
    rotated = estate.tmp / "executor-password-being-rotated"
    rotated.write_text("not-the-password\n")
    rotated.chmod(0o600)
    sasl = {**right["sasl"], "password_file": str(rotated)}  # type: ignore[dict-item]
    document = json.loads(estate.topologies["executor"].read_text())
    for cluster in document["clusters"].values():
        cluster["security"] = {**right, "sasl": sasl}
    wrong_file = estate.tmp / "executor-wrong-password.json"
    wrong_file.write_text(json.dumps(document, indent=2))
    clusters = KafkaFailoverClusters(load_topology_text(wrong_file.read_text()))
    started = time.monotonic()
    with pytest.raises(CredentialsRefusedError, match="cluster 'east' refused") as refused:
        clusters.reachable("east", tries=1)
    assert time.monotonic() - started < 15
    assert "not-the-password" not in str(refused.value)

    before = estate.consul.kv_get(app_active_key(estate.name, APP))
    code, _doc, err = run_cli(
        "failover", "-t", str(wrong_file), "--app", APP, "--to", "west",
        env=failover_env(estate.consul_addr),
    )  # fmt: skip
    assert code != 0 and "refused drsvc's credentials" in err, err
    assert "not-the-password" not in err
    assert estate.consul.kv_get(app_active_key(estate.name, APP)) == before

    secret_file = Path(str(right["sasl"]["password_file"]))  # type: ignore[index]
    rotated.write_text(secret_file.read_text())
    assert clusters.reachable("east", tries=1) is True
