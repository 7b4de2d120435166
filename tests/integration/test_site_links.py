"""Sites that can be cut apart: real brokers reached through real Toxiproxy links.

An environment of its own (the session's has no links): east and west, one broker each, joined
by links. A client "of west" uses ``bootstrap_from("west", "east")``; same-site clients use the
cluster's own bootstrap servers.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.links import SiteLinks
from drsvc.devenv.ports import port_accepts
from drsvc.devenv.processes import is_alive
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.settings import Settings

DRSVC = [sys.executable, "-m", "drsvc.cli.main"]
TOPIC = "across"


@dataclass(frozen=True)
class Linked:
    env: LocalEnvironment
    links: SiteLinks
    east: str  # east's own bootstrap servers
    west: str
    east_from_west: str  # east as west's processes reach it: through the link


def _netns() -> list[str]:
    if shutil.which("ip") is None:
        return []
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return sorted(out.stdout.split())


NAMESPACES_BEFORE = _netns()


def _listeners(port: int) -> list[str]:
    """The command lines of the processes listening on a TCP port of this machine."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(fields[9])
    owners = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if inodes & _socket_inodes(proc):
                owners.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # the process ended meanwhile
            continue
    return owners


def _socket_inodes(proc: Path) -> set[str]:
    held = set()
    for fd in (proc / "fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:  # closed while listed
            continue
        if target.startswith("socket:["):
            held.add(target[len("socket:[") : -1])
    return held


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Linked]:
    state_dir: Path = tmp_path_factory.mktemp("drsvc-linked")
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir, consul_layout="single"))
    try:
        info = env.up(["east", "west"], links=True)
        for alias in ("east", "west"):
            assert create_topic(admin_client(info.clusters[alias]), TOPIC, partitions=1)
        yield Linked(
            env=env,
            links=env.links(),
            east=info.clusters["east"],
            west=info.clusters["west"],
            east_from_west=env.bootstrap_from("west", "east"),
        )
    finally:
        env.down()


@pytest.fixture
def healed(linked: Linked) -> Iterator[Linked]:
    try:
        yield linked
    finally:
        linked.links.heal_all()


def produce(bootstrap: str, timeout_s: float = 3.0, value: bytes = b"x") -> KafkaError | None:
    """Produce one record and wait for its delivery report: None, or the error it ended with."""
    outcome: list[KafkaError | None] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "message.timeout.ms": int(timeout_s * 1000),
            "reconnect.backoff.max.ms": 200,
            "log_level": 0,
        }
    )
    producer.produce(TOPIC, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(timeout_s + 5)
    assert outcome, "no delivery report"
    return outcome[0]


def produce_latencies_ms(bootstrap: str, count: int) -> list[float]:
    """Round trips of single records, one at a time (acks=all): request and response each
    cross the link once."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(TOPIC, b"warm-up")
    assert producer.flush(10) == 0
    samples = []
    for _ in range(count):
        started = time.monotonic()
        producer.produce(TOPIC, b"timed")
        assert producer.flush(10) == 0
        samples.append((time.monotonic() - started) * 1000)
    return samples


def test_records_cross_the_link_and_clients_stay_on_it(healed: Linked) -> None:
    # west's clients reach east only through the proxies: the brokers advertise them
    producer = Producer({"bootstrap.servers": healed.east_from_west})
    brokers = producer.list_topics(timeout=10).brokers.values()
    assert {f"{b.host}:{b.port}" for b in brokers} == set(healed.east_from_west.split(","))
    assert healed.east_from_west != healed.east

    marker = f"through-the-link-{time.time_ns()}".encode()
    assert produce(healed.east_from_west, value=marker) is None
    consumer = Consumer(
        {
            "bootstrap.servers": healed.east_from_west,
            "group.id": f"links-{time.time_ns()}",
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 20
        values: list[bytes | None] = []
        while marker not in values and time.monotonic() < deadline:
            values.extend(m.value() for m in consumer.consume(100, timeout=1) if not m.error())
        assert marker in values
    finally:
        consumer.close()


def test_a_cut_link_stops_cross_site_traffic_and_a_heal_restores_it(healed: Linked) -> None:
    west_from_east = healed.env.bootstrap_from("east", "west")
    healed.links.cut("east", "west")
    described = healed.links.describe()[0]
    assert (described["sites"], described["cut"], described["consistent"]) == (
        ["east", "west"],
        True,
        True,
    )
    for through_link in (healed.east_from_west, west_from_east):
        err = produce(through_link)
        assert err is not None
        assert err.code() == KafkaError._MSG_TIMED_OUT, err
    # same-site traffic does not cross the link
    assert produce(healed.east) is None
    assert produce(healed.env.bootstrap_from("west", "west")) is None

    healed.links.heal("west", "east")
    assert produce(healed.east_from_west, timeout_s=15) is None
    assert produce(west_from_east, timeout_s=15) is None


def test_a_black_hole_times_clients_out_and_heals(healed: Linked) -> None:
    healed.links.cut("east", "west", blackhole=True)
    assert healed.links.describe()[0]["blackhole"] is True
    err = produce(healed.east_from_west)
    assert err is not None
    assert err.code() == KafkaError._MSG_TIMED_OUT, err
    assert produce(healed.east) is None
    healed.links.heal("east", "west")
    assert produce(healed.east_from_west, timeout_s=15) is None


def test_a_delay_of_20_ms_each_way_adds_40_ms_to_a_round_trip(healed: Linked) -> None:
    before = statistics.median(produce_latencies_ms(healed.east_from_west, 15))
    healed.links.delay("east", "west", 20)
    assert healed.links.describe()[0]["latency_ms"] == 20
    during = statistics.median(produce_latencies_ms(healed.east_from_west, 15))
    direct = statistics.median(produce_latencies_ms(healed.east, 15))
    print(
        f"median produce round trip: {before:.1f} ms, delayed {during:.1f} ms, direct {direct:.1f}"
    )
    assert during - before >= 35
    # same-site traffic is not delayed
    assert direct < before + 20


def test_a_limit_throttles_the_link(healed: Linked) -> None:
    payload = b"b" * (160 * 1024)
    started = time.monotonic()
    assert produce(healed.east_from_west, timeout_s=10, value=payload) is None
    unlimited = time.monotonic() - started
    healed.links.limit("east", "west", 64)
    assert healed.links.describe()[0]["kilobytes_per_s"] == 64
    started = time.monotonic()
    assert produce(healed.east_from_west, timeout_s=20, value=payload) is None
    limited = time.monotonic() - started
    print(f"160 KB through the link: {unlimited:.2f} s, at 64 KB/s {limited:.2f} s")
    assert limited >= 1.8  # 160 KB at 64 KB/s: 2.5 s
    assert limited > unlimited + 1.0


def test_the_cli_cuts_delays_shows_and_heals(healed: Linked) -> None:
    state = ["--state-dir", str(healed.env.state_dir)]

    def dev(*args: str) -> str:
        done = subprocess.run(
            [*DRSVC, "dev", *args, *state], capture_output=True, text=True, timeout=60, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    dev("cut", "west", "east")
    dev("delay", "east", "west", "7", "--jitter", "2")
    (link,) = json.loads(dev("links", "--json"))["links"]
    assert (link["cut"], link["latency_ms"], link["jitter_ms"]) == (True, 7, 2)
    dev("heal")
    (link,) = healed.links.describe()
    assert (link["cut"], link["latency_ms"]) == (False, 0)


def test_down_leaves_no_proxy_and_no_namespace(linked: Linked) -> None:
    state = linked.env.store.load()
    assert state.links is not None
    proxy = state.links.process
    assert proxy is not None and is_alive(proxy)
    ports = [state.links.api_port, *(li.proxy_port for li in state.links.listeners)]
    assert all(port_accepts("127.0.0.1", p) for p in ports)

    linked.env.down()
    assert not is_alive(proxy)
    # The other test process may take a freed port at once, so a port that answers is checked
    # for who holds it, not only whether it accepts.
    leftovers = {p: _listeners(p) for p in ports if port_accepts("127.0.0.1", p)}
    assert all("toxiproxy" not in " ".join(cmds) for cmds in leftovers.values()), leftovers
    assert _netns() == NAMESPACES_BEFORE
    assert [p for p in linked.env.status().processes if p.running] == []
