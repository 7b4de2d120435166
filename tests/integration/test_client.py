"""drsvc.client against real brokers and a real Consul.

An application (one topic, two partitions, a 2 s lease, flows both ways with prefix naming) runs a
producer and a consumer group built on drsvc.client the whole time while the CLI fails it over
east -> west and back. Every record produced is consumed exactly once, each key's records in the
order they were written, and records the producer could not deliver were handed back to the
application (which sent them again), never dropped.

A second test cuts a client off from Consul (its agent frozen with SIGSTOP): the client stops
producing and consuming within its lease, and goes on once Consul answers again.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from failover_support import (
    failover_env,
    run_cli,
    wait_for_remote_copies,
    wait_until,
    write_failover_topology,
)
from replication_support import create, produce, running_workers, sequence_records

from drsvc.adapters.consul_client import ConsulClient
from drsvc.client import FailoverConsumer, FailoverProducer, NoActiveClusterError
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.settings import Settings
from failover.active import ActiveDocument
from failover.naming import app_active_key

pytestmark = pytest.mark.timeout(600)

KEYS = 8
LEASE_S = 2.0
REPO = Path(__file__).resolve().parents[2]


@dataclass
class App:
    topology: Path
    topic: str
    consul: str
    env: dict[str, str]
    namespace: str
    bootstraps: dict[str, str]


@contextmanager
def _application(
    cluster_pair: EnvironmentInfo, tmp: Path, groups: tuple[str, ...]
) -> Iterator[App]:
    """A topic on east and west, flows both ways (prefix naming) and application ``app``."""
    tag = uuid.uuid4().hex[:6]
    topic = f"cl-{tag}"
    bootstraps = dict(cluster_pair.clusters)
    for alias in ("east", "west"):
        create(bootstraps[alias], topic, 2)
    topology = write_failover_topology(
        tmp / "topology.json", f"cl-{tag}", bootstraps, topic, groups=groups, lease_s=LEASE_S
    )
    consul = cluster_pair.consul_http_addr
    assert consul is not None
    env = failover_env(consul)
    # Active on east with the application's 2 s lease from the start (an absent key means the
    # default 15 s lease, which the first failover would wait out).
    ConsulClient(consul).kv_put(
        app_active_key(f"cl-{tag}", "app"), ActiveDocument("east", lease_ms=2000).encode()
    )
    with running_workers(topology, ["east->west", "west->east"], tmp, "--consul", consul):
        wait_for_remote_copies(bootstraps, topic)
        yield App(topology, topic, consul, env, f"cl-{tag}", bootstraps)


@pytest.fixture(scope="module")
def app(cluster_pair: EnvironmentInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    with _application(cluster_pair, tmp_path_factory.mktemp("client"), ("readers",)) as made:
        yield made


def _cli(app: App, command: str, to: str | None) -> dict[str, Any]:
    args = [command, "--app", "app", "--json", "-t", str(app.topology)]
    code, doc, err = run_cli(*args, *(["--to", to] if to else []), env=app.env)
    assert code == 0, err
    assert doc is not None and doc["state"] == "completed", doc
    return doc


@dataclass
class Writer:
    """The application's producer: one keyed, sequence-numbered record at a time; a record
    handed back undelivered, or refused while no cluster is active, is sent again."""

    producer: FailoverProducer
    topic: str
    acked: list[tuple[int, str]] = field(default_factory=list)  # (seq, cluster)
    handed_back: list[str] = field(default_factory=list)
    refused: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        seq = 0
        try:
            while not self.stop.is_set():
                if self._send(seq):
                    seq += 1
        except Exception as err:  # reported by the test, not lost in the thread
            self.errors.append(repr(err))

    def _send(self, seq: int) -> bool:
        outcome: list[Any] = []
        done = threading.Event()

        def report(err: Any, _msg: Any) -> None:
            outcome.append(err)
            done.set()

        try:
            self.producer.produce(
                self.topic, f"{seq:07d}".encode(), f"k{seq % KEYS}".encode(), on_delivery=report
            )
        except NoActiveClusterError:
            self.refused += 1
            time.sleep(0.05)
            return False
        cluster = self.producer.cluster
        deadline = time.monotonic() + 30
        while not done.is_set() and time.monotonic() < deadline:
            self.producer.poll(0.05)
        assert done.is_set(), f"no delivery report for record {seq} within 30 s"
        if outcome[0] is not None:
            self.handed_back.append(outcome[0].str())
            return False
        assert cluster is not None
        self.acked.append((seq, cluster))
        time.sleep(0.005)
        return True


@dataclass
class Reader:
    consumer: FailoverConsumer
    seen: list[tuple[str, int, str | None]] = field(default_factory=list)  # key, seq, cluster
    origins: Counter[str | None] = field(default_factory=Counter)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                key, value = msg.key(), msg.value()
                assert key is not None and value is not None
                self.seen.append((key.decode(), int(value), self.consumer.cluster))
                self.origins[self.consumer.origin_of(msg).cluster] += 1
        except Exception as err:
            self.errors.append(repr(err))
        finally:
            self.consumer.close()


def _start(target: Any) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_client_application_keeps_running_through_failover_and_failback_exactly_once(
    app: App,
) -> None:
    producer = FailoverProducer(
        "app", app.topology, {"acks": "all", "enable.idempotence": True, "linger.ms": 1},
        consul=app.consul,
    )  # fmt: skip
    consumer = FailoverConsumer(
        "app", app.topology,
        {"group.id": "readers", "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500},
        consul=app.consul,
    )  # fmt: skip
    consumer.subscribe([app.topic])
    writer, reader = Writer(producer, app.topic), Reader(consumer)
    threads = [_start(writer.run), _start(reader.run)]
    try:
        for command, to in (("failover", "west"), ("failback", "east")):
            written = len(writer.acked)
            wait_until(lambda w=written: len(writer.acked) >= w + 150, 90, "records written")
            wait_until(lambda: len(reader.seen) >= len(writer.acked) - 50, 90, "records read")
            doc = _cli(app, command, to if command == "failover" else None)
            assert doc["to"] == to, doc
        written = len(writer.acked)
        wait_until(lambda: len(writer.acked) >= written + 150, 90, "records on east again")
    finally:
        writer.stop.set()
        threads[0].join(60)
        producer.close()
    assert not writer.errors, writer.errors
    acked = writer.acked
    wait_until(lambda: len(reader.seen) >= len(acked), 90, "every record read")
    time.sleep(1)  # anything read twice would show now
    reader.stop.set()
    threads[1].join(60)
    assert not reader.errors, reader.errors

    # Written on east, then west, then east again; refused while none was active.
    clusters = [c for i, (_, c) in enumerate(acked) if i == 0 or acked[i - 1][1] != c]
    assert clusters == ["east", "west", "east"], clusters
    assert writer.refused > 0
    # Every acknowledged record read exactly once, nothing read that was not acknowledged.
    counts = Counter(seq for _, seq, _ in reader.seen)
    twice = sorted(s for s, n in counts.items() if n > 1)
    missing = sorted({s for s, _ in acked} - set(counts))
    extra = sorted(set(counts) - {s for s, _ in acked})
    assert not (twice or missing or extra), (twice[:10], missing[:10], extra[:10])
    # Each key's records in the order written, across both switches.
    for key in {k for k, _, _ in reader.seen}:
        seqs = [s for k, s, _ in reader.seen if k == key]
        assert seqs == sorted(seqs), f"{key} read out of order: {seqs}"
    read_on = [c for i, (_, _, c) in enumerate(reader.seen) if i == 0 or reader.seen[i - 1][2] != c]
    assert read_on == ["east", "west", "east"], read_on
    # Copies say where they were written: some records were read on west as copies of east's.
    assert reader.origins["east"] > 0 and reader.origins["west"] > 0, reader.origins


@pytest.fixture
def own_consul(tmp_path: Path) -> Iterator[LocalEnvironment]:
    env = LocalEnvironment(Settings.from_env(state_dir=tmp_path / "drsvc-state"))
    try:
        env.up(["east"], consul_only=True)
        yield env
    finally:
        env.down()


def test_a_client_cut_off_from_consul_stops_within_its_lease(
    cluster_pair: EnvironmentInfo, own_consul: LocalEnvironment, tmp_path: Path
) -> None:
    topic = namespace = f"cut-{uuid.uuid4().hex[:6]}"
    create(cluster_pair.clusters["east"], topic, 2)
    topology = write_failover_topology(
        tmp_path / "topology.json", namespace, cluster_pair.clusters, topic,
        both_ways=False, groups=("cut",), lease_s=LEASE_S,
    )  # fmt: skip
    state = own_consul.store.load()
    assert state.consul is not None and state.consul.process is not None
    consul, pid = state.consul.http_addr, state.consul.process.pid
    ConsulClient(consul).kv_put(
        app_active_key(namespace, "app"), ActiveDocument("east", lease_ms=2000).encode()
    )
    producer = FailoverProducer("app", topology, {"linger.ms": 1}, consul=consul)
    consumer = FailoverConsumer(
        "app", topology, {"group.id": "cut", "auto.offset.reset": "earliest"}, consul=consul
    )
    consumer.subscribe([topic])
    try:
        wait_until(lambda: _produce(producer, topic), 30, "a record accepted")
        assert producer.flush(10) == 0
        wait_until(lambda: consumer.poll(0.5) is not None, 60, "the consumer to read")
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        try:
            wait_until(lambda: not _produce(producer, topic), LEASE_S + 2, "produce to be refused")
            stopped_producing = time.monotonic() - frozen
            wait_until(lambda: _consumes_nothing(consumer), LEASE_S + 2, "the consumer to stop")
            stopped_consuming = time.monotonic() - frozen
        finally:
            os.kill(pid, signal.SIGCONT)
        assert stopped_producing <= LEASE_S + 1, stopped_producing
        assert stopped_consuming <= LEASE_S + 1, stopped_consuming
        # Consul answers again: both go on.
        wait_until(lambda: _produce(producer, topic), 30, "producing again")
        wait_until(lambda: consumer.poll(0.5) is not None, 60, "consuming again")
    finally:
        producer.close()
        consumer.close()


def _produce(producer: FailoverProducer, topic: str) -> bool:
    try:
        producer.produce(topic, b"x", b"k")
    except NoActiveClusterError:
        return False
    return True


def _consumes_nothing(consumer: FailoverConsumer) -> bool:
    consumer.poll(0.1)
    return consumer.cluster is None


def _kill_session(pgid: int) -> int:
    """Kill what is left of process group ``pgid``; 1 if anything was, else 0."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return 0
    return 1


def test_the_shell_example_follows_a_switch(cluster_pair: EnvironmentInfo, tmp_path: Path) -> None:
    """examples/follow-active.sh: Consul's HTTP API and Kafka's console consumer, no Python."""
    with _application(cluster_pair, tmp_path, ("shell",)) as shell_app:
        topic = shell_app.topic
        produce(shell_app.bootstraps["east"], topic, sequence_records(100, 2, tag="east-"))
        log = tmp_path / "follow-active.err"
        script = REPO / "examples" / "follow-active.sh"
        include = f"^({topic}|(east|west)[.]{topic})$"
        with log.open("w") as err:
            follower = subprocess.Popen(
                ["bash", str(script), "--consul", shell_app.consul, "--namespace",
                 shell_app.namespace, "--app", "app", "--preferred", "east", "--group", "shell",
                 "--include", include, "--lease-s", str(LEASE_S)],
                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
            )  # fmt: skip
        lines: list[str] = []
        collector = threading.Thread(
            target=lambda: lines.extend(iter(follower.stdout.readline, "")),  # type: ignore[union-attr]
            daemon=True,
        )
        collector.start()
        try:
            try:
                wait_until(lambda: len(lines) >= 100, 90, "east's records printed")
                doc = _cli(shell_app, "failover", "west")
                assert doc["to"] == "west"
                produce(shell_app.bootstraps["west"], topic, sequence_records(100, 2, tag="west-"))
                wait_until(lambda: len(lines) >= 200, 90, "west's records printed after the switch")
            except AssertionError as err:
                raise AssertionError(f"{err}; the script said:\n{log.read_text()}") from err
        finally:
            follower.send_signal(signal.SIGTERM)
            try:
                exited = follower.wait(30)
            finally:
                # The script's own session: whatever it left behind (its console consumer) is
                # in it, and must be gone once the script has exited.
                survivors = _kill_session(follower.pid)
            collector.join(10)
        assert exited == 143, exited
        assert survivors == 0, "the console consumer outlived the script"
        said = log.read_text()
        assert "consuming on east" in said and "consuming on west" in said, said
        assert "stopped consuming on east (no active cluster)" in said, said
        values = [line.strip() for line in lines]
        expected = {f"east-{i}" for i in range(100)} | {f"west-{i}" for i in range(100)}
        assert sorted(values) == sorted(expected), Counter(values).most_common(3)
