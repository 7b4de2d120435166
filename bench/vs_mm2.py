"""drsvc against MirrorMaker 2 at its best, and against the machine's own limit, in one session.

Run through ``bench/replication_bench.py --vs-mm2 [--quick]`` (or this file directly). One JSON
object on stdout, progress on stderr; results under ``bench/results/`` (JSON, markdown, PNG).

Phases, in this order (each one's results are written as soon as it ends, so a run cut short
still leaves what it measured):

1. ``sweep``: MirrorMaker 2's ``tasks.max`` and drsvc's ``--workers-per-flow``,
   ``--sweep-runs`` interleaved drains each per record size (3; one drain varies by up to half on
   this kind of machine); the best median of each is used from then on.
2. ``alo``: drains of a backlog (``--records``, 12 partitions) at least once, interleaved run by
   run: drsvc at its best, MM2 at its best, and the limit (Kafka's own perf tools consuming the
   source and producing as many records of the same size to the target at the same time).
3. ``failover``: consumer groups caught up, in the middle of the log, and 10,000 records behind
   fail over; records read twice and skipped on the target, drsvc (``drsvc translate``) against
   MM2 (its checkpoints and ``sync.group.offsets.enabled`` at 1 s intervals); and how long a
   commit on the source takes to become a usable position on the target.
4. ``eos``: the drains exactly once (drsvc ``delivery: exactly-once``, MM2
   ``exactly.once.source.support = enabled``).
5. ``rtt``: the at-least-once drains with 40 ms round trip between the clusters (20 ms each way,
   through the local environment's links); replicators run at the target's site.
6. ``latency``: replication latency at a fixed rate below both tools' maximum.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import replication_bench as rb
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from drsvc.devenv.components import load_components
from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.admin import admin_client
from drsvc.settings import Settings

SOURCE, TARGET = rb.SOURCE, rb.TARGET
#: record sizes by the key latest.json uses (value bytes)
SIZES = {"100": 100, "1024": 1024}
PARTITIONS = 12
RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
PHASES = ("sweep", "alo", "failover", "eos", "rtt", "latency")
RTT_ONE_WAY_MS = 20
FAILOVER_LAG = 10_000
CHECKPOINT_WAIT_S = 90.0


def say(message: str) -> None:
    rb.say(message)


# ---------------------------------------------------------------------------- process trees


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    return kids


def process_tree(roots: list[int]) -> list[int]:
    """``roots`` and all their descendants that are alive now."""
    kids = _children()
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen or not Path(f"/proc/{pid}").exists():
            continue
        seen.append(pid)
        todo.extend(kids.get(pid, []))
    return seen


def process_label(pid: int) -> str:
    """A short name for a process: the main class of a JVM, the role of a drsvc process."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    words = [a.decode(errors="replace") for a in argv if a]
    for word in reversed(words):
        if word.startswith("org.apache.kafka."):
            return word.rsplit(".", 1)[1]
    for i, word in enumerate(words[:-1]):
        # the subcommand follows the program (``.../drsvc run``) or module (``drsvc.cli.main``)
        if word.endswith(("/drsvc", "drsvc.cli.main")):
            return f"drsvc {words[i + 1]}"
    # never a path in the results: the program's name only
    return Path(words[0]).name if words else "?"


@dataclass(frozen=True)
class TreeSample:
    """CPU seconds per process of a tree, at one moment (monotonic and wall clock), with the
    tree's CPU seconds by kind of thread and the machine's (see :func:`machine_seconds`)."""

    at: float
    wall: float
    cpu: dict[int, float]
    #: per process, CPU seconds of its threads by :func:`thread_kind`
    threads: dict[int, dict[str, float]] = field(default_factory=dict)
    machine: dict[str, float] = field(default_factory=dict)

    def carried_from(self, earlier: TreeSample | None) -> TreeSample:
        """This sample with what ``earlier`` knew of processes that have exited since (the
        limit's perf tools exit as they finish): their CPU stays counted."""
        if earlier is None:
            return self
        return replace(
            self,
            cpu={**earlier.cpu, **self.cpu},
            threads={**earlier.threads, **self.threads},
        )


def thread_kind(pid: int, tid: int, name: str) -> str:
    """What a thread of a replicator does, from its name: a drsvc worker copies on its main
    thread and talks to brokers on librdkafka's; a JVM also compiles and collects garbage."""
    if name.startswith("rdk:"):
        return "librdkafka"
    if "Compiler" in name:
        return "jit"
    if name.startswith(("GC Thread", "G1 ")):
        return "gc"
    return "main" if tid == pid else "other"


def thread_seconds(pids: list[int]) -> dict[int, dict[str, float]]:
    """CPU seconds of the threads of each of ``pids``, summed by :func:`thread_kind`."""
    ticks = os.sysconf("SC_CLK_TCK")
    per_pid: dict[int, dict[str, float]] = {}
    for pid in pids:
        kinds = per_pid.setdefault(pid, {})
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                try:
                    stat = (task / "stat").read_text()
                except OSError:
                    continue
                name = stat[stat.index("(") + 1 : stat.rindex(")")]
                fields = stat.rsplit(")", 1)[1].split()
                kind = thread_kind(pid, int(task.name), name)
                kinds[kind] = kinds.get(kind, 0.0) + (int(fields[11]) + int(fields[12])) / ticks
    return per_pid


def machine_seconds(brokers: dict[str, tuple[int, ...]]) -> dict[str, float]:
    """CPU seconds so far: the machine's busy time (all cores), each cluster's brokers, and
    this benchmark's own process (the poller that watches the drain)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    usage = os.times()
    seconds = {
        "busy": (sum(fields[:8]) - fields[3] - fields[4]) / ticks,
        "benchmark": usage.user + usage.system,
    }
    for site, pids in brokers.items():
        seconds[f"brokers {site}"] = sum(rb.process_cpu_s(pid) or 0.0 for pid in pids)
    return seconds


def tree_sample(
    roots: list[int],
    pids: list[int] | None = None,
    brokers: dict[str, tuple[int, ...]] | None = None,
) -> TreeSample:
    """``pids``: the tree as found earlier (finding it reads all of ``/proc``)."""
    pids = process_tree(roots) if pids is None else pids
    cpu = {pid: rb.process_cpu_s(pid) for pid in pids}
    alive = {p: c for p, c in cpu.items() if c is not None}
    return TreeSample(
        time.monotonic(),
        time.time(),
        alive,
        thread_seconds(list(alive)) if brokers is not None else {},
        machine_seconds(brokers) if brokers is not None else {},
    )


def cores_between(first: TreeSample, last: TreeSample) -> dict[str, Any]:
    """Where the machine's cores went between two samples of a drain: the tool (and its
    threads by kind), each cluster's brokers, this benchmark, everything else, and idle."""
    window = max(last.at - first.at, 1e-3)

    def cores(after: float, before: float) -> float:
        return round((after - before) / window, 2)

    tool = sum(last.cpu.get(p, 0.0) - first.cpu.get(p, 0.0) for p in last.cpu) / window
    split: dict[str, Any] = {"tool": round(tool, 2)}
    for key, value in last.machine.items():
        if key != "busy":
            split[key] = cores(value, first.machine.get(key, 0.0))
    busy = (last.machine.get("busy", 0.0) - first.machine.get("busy", 0.0)) / window
    split["other"] = round(
        busy - tool - sum(v for k, v in split.items() if k not in ("tool", "other")), 2
    )
    split["idle"] = round(max(0.0, (os.cpu_count() or 1) - busy), 2)
    threads: dict[str, float] = {}
    for pid, kinds in last.threads.items():
        before = first.threads.get(pid, {})
        for kind, value in kinds.items():
            threads[kind] = threads.get(kind, 0.0) + value - before.get(kind, 0.0)
    split["tool_threads"] = {
        kind: round(value / window, 2) for kind, value in sorted(threads.items()) if value > 0
    }
    return split


# ---------------------------------------------------------------------------- environment


@dataclass(frozen=True)
class Env:
    """Both clusters: direct addresses, and the source as the target's site reaches it."""

    env: LocalEnvironment
    state_dir: Path
    direct: dict[str, str]
    source_from_target: str
    broker_pids: tuple[int, ...]
    #: the brokers' processes of each cluster
    brokers_by_site: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def source_for(self, rtt: bool) -> str:
        return self.source_from_target if rtt else self.direct[SOURCE]


#: Kafka's default, which the local environment sets to 0 to keep tests quick. With 0, the first
#: of a flow's workers to join took all 12 partitions and copied alone for about a second until
#: the second joined and the group rebalanced: a start-up cost that a drain of a few seconds
#: weighed far beyond what it costs a long-running flow. Production brokers delay the first
#: rebalance of a new group by these 3 s so that members started together join together.
SOURCE_BROKER_OVERRIDES = {SOURCE: {"group.initial.rebalance.delay.ms": 3000}}


@contextmanager
def environment(state_dir: Path | None) -> Iterator[Env]:
    """``bsrc`` and ``bdst`` joined by a link; started here and stopped at the end, or reused
    from ``state_dir`` when both run there already (brought up with ``--links``)."""
    temporary = state_dir is None
    if state_dir is None:
        state_dir = Path(tempfile.mkdtemp(prefix="drsvc-vs-mm2-"))
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir))
    running = {p.site for p in env.status().processes if p.running and p.listening}
    started_here = not {SOURCE, TARGET} <= running
    if started_here:
        say(f"starting linked local clusters {SOURCE} and {TARGET}")
        env.up(
            [SOURCE, TARGET],
            links=True,
            progress=lambda line: say(f"env: {line}"),
            broker_overrides=SOURCE_BROKER_OVERRIDES,
        )
    try:
        clusters = dict(env.info().clusters)
        linked = env.bootstrap_from(TARGET, SOURCE)
        brokers = {
            site: tuple(
                p.pid
                for p in env.status().processes
                if p.site == site and p.pid is not None and p.running
            )
            for site in (SOURCE, TARGET)
        }
        pids = brokers[SOURCE] + brokers[TARGET]
        yield Env(env, state_dir, clusters, linked, pids, brokers)
    finally:
        with contextlib.suppress(Exception):
            env.links().heal_all()
        if started_here:
            gc.collect()
            say("stopping the local clusters")
            env.down(purge=temporary)


# ---------------------------------------------------------------------------- systems


@dataclass(frozen=True)
class System:
    """What copies: drsvc (``workers`` processes), MM2 (``tasks``), or the perf-tool limit."""

    kind: str
    delivery: str = "at-least-once"
    workers: int = 1
    tasks: int = 1
    #: MM2's ``offset.lag.max`` (None: its default, 100)
    offset_lag_max: int | None = None

    @property
    def name(self) -> str:
        eos = "-eos" if self.delivery == "exactly-once" else ""
        if self.kind == "drsvc":
            return f"drsvc-w{self.workers}{eos}"
        if self.kind == "mm2":
            lag = "" if self.offset_lag_max is None else f"-lag{self.offset_lag_max}"
            return f"mm2-t{self.tasks}{eos}{lag}"
        return "limit"


@dataclass
class Launched:
    """Processes under measurement and where their output goes."""

    system: System
    procs: list[subprocess.Popen[bytes]]
    logs: list[Path]
    started: float
    outputs: list[Path] = field(default_factory=list)
    #: peak RSS (MiB) per process, as seen while it ran, and what each process is
    peaks: dict[int, float] = field(default_factory=dict)
    labels: dict[int, str] = field(default_factory=dict)

    @property
    def roots(self) -> list[int]:
        return [p.pid for p in self.procs]

    def alive(self) -> bool:
        return all(p.poll() is None for p in self.procs)

    def any_failed(self) -> bool:
        return any(p.poll() not in (None, 0) for p in self.procs)

    def tail(self, lines: int = 30) -> str:
        text = []
        for log in self.logs:
            with contextlib.suppress(OSError):
                text.extend(log.read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(text)


def _spawn(command: list[str], log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=rb._die_with_parent,  # noqa: PLW1509 (only prctl, no Python state)
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def drsvc_topology(
    source: str, target: str, topics: list[str], delivery: str, name: str, linger_ms: int = 5
) -> dict[str, Any]:
    return {
        "name": name,
        "clusters": {SOURCE: {"bootstrap_servers": source}, TARGET: {"bootstrap_servers": target}},
        "flows": [
            {
                "source": SOURCE,
                "target": TARGET,
                "topics": {"include": [f"^{t}$" for t in topics]},
                "delivery": delivery,
                "start": "earliest",
                "linger_ms": linger_ms,
            }
        ],
    }


def launch_drsvc(
    system: System,
    work: Path,
    source: str,
    target: str,
    topics: list[str],
    *,
    latency: bool = False,
) -> Launched:
    """``drsvc run --roles replicate --workers-per-flow N``, as a user runs the flow: with the
    flow's ``linger_ms`` at 100 for volume, as MM2's producer gets, and at its default 5 in
    latency runs, as MM2's does too."""
    tag = uuid.uuid4().hex[:8]
    run_dir = work / f"drsvc-{tag}"
    run_dir.mkdir(parents=True)
    topology = run_dir / "topology.yaml"
    # JSON is YAML: the topology file as drsvc reads any other.
    topology.write_text(
        json.dumps(
            drsvc_topology(
                source, target, topics, system.delivery, f"bench-{tag}", 5 if latency else 100
            )
        )
    )
    command = [
        str(Path(sys.executable).parent / "drsvc"),
        "run",
        "--topology",
        str(topology),
        "--workers-per-flow",
        str(system.workers),
        "--roles",
        "replicate",
        "--plain",
        "--summary-every-s",
        "0",
        "--state-dir",
        str(run_dir / "state"),
    ]
    log = run_dir / "run.log"
    return Launched(system, [_spawn(command, log, run_dir)], [log], time.monotonic())


MM2_LOG4J = """\
Configuration:
  status: warn
  Appenders:
    File:
      name: file
      fileName: "{log_file}"
      PatternLayout: {{pattern: "[%d] %p %m (%c)%n"}}
  Loggers:
    Root: {{level: WARN, AppenderRef: [{{ref: file}}]}}
"""


def mm2_properties(
    source: str,
    target: str,
    topics: list[str],
    system: System,
    *,
    latency: bool = False,
    groups: list[str] | None = None,
    rest_port: int = 0,
) -> dict[str, str]:
    """MirrorMaker 2 as its documentation advises for volume (see bench/README.md)."""
    flow = f"{SOURCE}->{TARGET}"
    props = {
        "clusters": f"{SOURCE}, {TARGET}",
        f"{SOURCE}.bootstrap.servers": source,
        f"{TARGET}.bootstrap.servers": target,
        f"{flow}.enabled": "true",
        f"{TARGET}->{SOURCE}.enabled": "false",
        f"{flow}.topics": ",".join(topics),
        "tasks.max": str(system.tasks),
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "emit.heartbeats.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "refresh.topics.interval.seconds": "5",
        "offset.flush.timeout.ms": "10000",
        # the same guarantees as drsvc's target producer
        f"{TARGET}.producer.acks": "all",
        f"{TARGET}.producer.enable.idempotence": "true",
        f"{TARGET}.producer.max.in.flight.requests.per.connection": "5",
        f"{TARGET}.producer.compression.type": "lz4",
        # batching for volume as the MM2 tuning guides advise (latency runs: drsvc's 5 ms)
        f"{TARGET}.producer.batch.size": "327680",
        f"{TARGET}.producer.linger.ms": "5" if latency else "100",
        f"{SOURCE}.consumer.fetch.max.bytes": str(50 * 1024 * 1024),
        f"{SOURCE}.consumer.max.partition.fetch.bytes": str(4 * 1024 * 1024),
        f"{SOURCE}.consumer.max.poll.records": "10000",
        f"{SOURCE}.consumer.isolation.level": "read_committed",
    }
    if groups:
        props.update(
            {
                f"{flow}.groups": ",".join(groups),
                "emit.checkpoints.enabled": "true",
                "emit.checkpoints.interval.seconds": "1",
                "sync.group.offsets.enabled": "true",
                "sync.group.offsets.interval.seconds": "1",
                "refresh.groups.enabled": "true",
                "refresh.groups.interval.seconds": "1",
            }
        )
    else:
        props.update(
            {
                "emit.checkpoints.enabled": "false",
                "sync.group.offsets.enabled": "false",
                "refresh.groups.enabled": "false",
            }
        )
    if system.offset_lag_max is not None:
        props["offset.lag.max"] = str(system.offset_lag_max)
    if system.delivery == "exactly-once":
        props.update(
            {
                f"{TARGET}.exactly.once.source.support": "enabled",
                "dedicated.mode.enable.internal.rest": "true",
                "listeners": f"http://127.0.0.1:{rest_port or free_port()}",
            }
        )
    return props


def launch_mm2(
    system: System,
    work: Path,
    source: str,
    target: str,
    topics: list[str],
    java: str,
    heap: str,
    *,
    latency: bool = False,
    groups: list[str] | None = None,
) -> Launched:
    tag = uuid.uuid4().hex[:8]
    run_dir = work / f"mm2-{tag}"
    run_dir.mkdir(parents=True)
    libs = load_components(Settings.from_env().cache_dir).kafka.libs
    props = mm2_properties(source, target, topics, system, latency=latency, groups=groups)
    props_file = run_dir / "mm2.properties"
    props_file.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    log = run_dir / "mm2.log"
    log4j = run_dir / "log4j2.yaml"
    log4j.write_text(MM2_LOG4J.format(log_file=log))
    command = [
        java,
        # connect-mirror-maker.sh's own heap settings
        "-Xms256m",
        f"-Xmx{heap}",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        str(libs / "*"),
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(props_file),
    ]
    out = run_dir / "mm2.stdout"
    return Launched(system, [_spawn(command, out, run_dir)], [log, out], time.monotonic())


def launch_limit(
    work: Path,
    source: str,
    target: str,
    source_topic: str,
    target_topic: str,
    records: int,
    size: int,
    java: str,
) -> Launched:
    """Kafka's consumer perf tool reading the backlog and its producer perf tool writing as many
    records of the same size to the target, started together, with the client settings drsvc and
    MM2 get in volume runs (the producer lingers 100 ms as theirs do)."""
    tag = uuid.uuid4().hex[:8]
    run_dir = work / f"limit-{tag}"
    run_dir.mkdir(parents=True)
    libs = load_components(Settings.from_env().cache_dir).kafka.libs
    consumer_config = run_dir / "consumer.properties"
    consumer_config.write_text(
        "max.poll.records=10000\n"
        f"max.partition.fetch.bytes={4 * 1024 * 1024}\n"
        f"fetch.max.bytes={50 * 1024 * 1024}\n"
        "isolation.level=read_committed\n"
        "auto.offset.reset=earliest\n"
        # the consumer protocol (KIP-848) has no initial rebalance delay: the tool starts
        # reading as soon as it joins, together with the producer tool (the window starts with
        # the first of them)
        "group.protocol=consumer\n"
    )
    # 1 GiB: lingering 100 ms, the producer tool ran out of a 512 MiB heap at 1 KB (its 256 MiB
    # of record buffers plus the batches being sent)
    base = [java, "-Xms512m", "-Xmx1g", "-cp", str(libs / "*")]
    consume = [
        *base,
        "org.apache.kafka.tools.ConsumerPerformance",
        "--bootstrap-server",
        source,
        "--topic",
        source_topic,
        "--messages",
        str(records),
        "--timeout",
        "60000",
        "--fetch-size",
        str(4 * 1024 * 1024),
        "--consumer.config",
        str(consumer_config),
        "--group",
        f"limit-{tag}",
    ]
    produce = [
        *base,
        "org.apache.kafka.tools.ProducerPerformance",
        "--topic",
        target_topic,
        "--num-records",
        str(records),
        "--record-size",
        str(size),
        "--throughput",
        "-1",
        "--producer-props",
        f"bootstrap.servers={target}",
        "acks=all",
        "enable.idempotence=true",
        "compression.type=lz4",
        "linger.ms=100",
        f"batch.size={1024 * 1024}",
        f"buffer.memory={256 * 1024 * 1024}",
    ]
    outs = [run_dir / "consumer.out", run_dir / "producer.out"]
    procs = [_spawn(consume, outs[0], run_dir), _spawn(produce, outs[1], run_dir)]
    return Launched(System("limit"), procs, outs, time.monotonic(), outputs=outs)


def stop_launched(launched: Launched, grace_s: float = 40.0) -> None:
    for proc in launched.procs:
        rb.stop_process(proc, grace_s)


# ---------------------------------------------------------------------------- drains


@dataclass
class DrainResult:
    system: str
    size: str
    run: int
    rtt_ms: int
    records: int
    records_per_s: float
    mb_per_s: float
    seconds: float
    startup_s: float
    cpu_s_per_million: float
    cpu_utilization: float
    peak_rss_mb_total: float
    peak_rss_mb_max_process: float
    processes: list[dict[str, Any]]
    copies_end_offset: int
    machine_cpu_busy_share: float
    brokers_cpu_utilization: float
    load_average: float
    tool_rates: dict[str, float] = field(default_factory=dict)
    #: where the machine's cores went while the copy ran (:func:`cores_between`)
    cores: dict[str, Any] = field(default_factory=dict)


class Stalled(RuntimeError):
    """The copy did not finish in time or a process died."""


def end_total(admin: AdminClient, topic: str) -> int:
    return rb.end_offsets_total(admin, topic, PARTITIONS)


def watch(
    launched: Launched,
    admin: AdminClient,
    remote: str,
    records: int,
    timeout_s: float,
    brokers: dict[str, tuple[int, ...]] | None = None,
) -> tuple[TreeSample, TreeSample, int, int]:
    """Poll the target until ``records`` copies are there and the end offsets stop moving
    (transaction markers take offsets too); the copy ended when the end reached its final value.
    Returns the samples at the first copy and at the end, the count at the first, and the end.
    With ``brokers`` the samples also hold the machine's and the tool's threads' CPU."""
    deadline = time.monotonic() + timeout_s
    first: TreeSample | None = None
    first_count = 0
    last_count = -1
    last_change: TreeSample | None = None
    polls = 0
    tree: list[int] = []
    previous: TreeSample | None = None
    while True:
        polls += 1
        if time.monotonic() > deadline:
            raise Stalled(f"timed out after {timeout_s:.0f}s:\n{launched.tail()}")
        if launched.any_failed() or (launched.system.kind != "limit" and not launched.alive()):
            raise Stalled(f"process exited early:\n{launched.tail()}")
        count = end_total(admin, remote)
        # Finding the tree reads all of /proc: every 8th poll (200 ms), and before the first
        # copy, so the poller takes little of the cores it measures.
        if first is None or polls % 8 == 0:
            tree = process_tree(launched.roots)
        now = tree_sample(launched.roots, tree, brokers).carried_from(previous)
        previous = now
        if polls % 8 == 0:
            for pid in now.cpu:
                launched.peaks[pid] = max(launched.peaks.get(pid, 0.0), vm_hwm(pid))
                if pid not in launched.labels:
                    launched.labels[pid] = process_label(pid)
        if count and first is None:
            first, first_count = now, count
        if count != last_count:
            last_count, last_change = count, now
        if (
            first is not None
            and last_change is not None
            and count >= records
            and now.at - last_change.at >= 1.0
        ):
            return first, last_change, first_count, count
        time.sleep(rb.POLL_S)


def vm_hwm(pid: int) -> float:
    return rb.process_status_mb(pid, "VmHWM") or 0.0


def _parse_consumer_perf(text: str) -> tuple[float, float] | None:
    """Wall-clock start and end (epoch s) of ConsumerPerformance's data line."""
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 7 and parts[0][:2] == "20":
            try:
                start = datetime.strptime(parts[0], "%Y-%m-%d %H:%M:%S:%f")
                end = datetime.strptime(parts[1], "%Y-%m-%d %H:%M:%S:%f")
                joining_s = float(parts[6]) / 1000
            except ValueError:
                continue
            # the tool's start time is before it joined its group: data flows after that
            return start.timestamp() + joining_s, end.timestamp()
    return None


def _parse_producer_perf(text: str) -> float | None:
    for line in reversed(text.splitlines()):
        if "records sent" in line and "records/sec" in line:
            with contextlib.suppress(ValueError, IndexError):
                return float(line.split(",")[1].split("records/sec")[0].strip())
    return None


def limit_rates(
    launched: Launched, first: TreeSample, done: TreeSample, records: int
) -> dict[str, float]:
    """The perf tools' own rates, and the rate over the window from the first of them moving
    data (the consumer after joining its group, the producer's first record on the target) to
    the last one ending."""
    for proc in launched.procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(120)
    consumer_text = launched.outputs[0].read_text(errors="replace")
    producer_text = launched.outputs[1].read_text(errors="replace")
    window = _parse_consumer_perf(consumer_text)
    producer_rate = _parse_producer_perf(producer_text)
    if window is None or producer_rate is None:
        raise Stalled(f"perf tools gave no result:\n{launched.tail()}")
    start = min(window[0], first.wall)
    finish = max(window[1], done.wall)
    return {
        "consumer_records_per_s": round(records / max(window[1] - window[0], 1e-3)),
        "producer_records_per_s": round(producer_rate),
        "overlap_records_per_s": round(records / max(finish - start, 1e-3)),
    }


def drain(
    system: System,
    size_key: str,
    run: int,
    records: int,
    args: argparse.Namespace,
    env: Env,
    work: Path,
    rtt: bool,
) -> DrainResult:
    size = SIZES[size_key]
    label = f"{system.name} {size_key} B run {run}{' rtt' if rtt else ''}"
    topic = f"vs-{system.name}-{size_key}-r{run}-{uuid.uuid4().hex[:6]}"
    remote = rb.remote_topic(topic)
    source_admin = admin_client(env.direct[SOURCE])
    target_admin = admin_client(env.direct[TARGET])
    rb.new_topic(source_admin, topic, PARTITIONS)
    try:
        say(f"{label}: preloading {records:,} records")
        rate = rb.preload(env.direct[SOURCE], topic, PARTITIONS, records, size)
        say(f"{label}: preloaded at {rate:,.0f}/s; copying")
        source = env.source_for(rtt)
        target = env.direct[TARGET]
        machine0 = rb.machine_sample(env.broker_pids)
        machine_t0 = time.monotonic()
        if system.kind == "drsvc":
            launched = launch_drsvc(system, work, source, target, [topic])
        elif system.kind == "mm2":
            launched = launch_mm2(system, work, source, target, [topic], args.java, args.mm2_heap)
        else:
            rb.new_topic(target_admin, remote, PARTITIONS)
            launched = launch_limit(work, source, target, topic, remote, records, size, args.java)
        try:
            first, done, first_count, end = watch(
                launched, target_admin, remote, records, args.drain_timeout_s, env.brokers_by_site
            )
            machine1 = rb.machine_sample(env.broker_pids)
            machine_t1 = time.monotonic()
            pids = sorted(set(first.cpu) | set(done.cpu))
            peaks = {pid: max(vm_hwm(pid), launched.peaks.get(pid, 0.0)) for pid in pids}
            tool_rates = (
                limit_rates(launched, first, done, records) if system.kind == "limit" else {}
            )
        finally:
            stop_launched(launched)
    finally:
        with contextlib.suppress(Exception):
            rb.delete_topics(source_admin, [topic])
            rb.delete_topics(target_admin, [remote])
    seconds = max(done.at - first.at, rb.POLL_S)
    copied = records - first_count
    if system.kind == "limit":
        # Both tools together: from the first of them starting to move data to the last ending.
        rate_per_s = float(tool_rates["overlap_records_per_s"])
        seconds = records / rate_per_s
        copied = records
    else:
        rate_per_s = copied / seconds
    cpu_s = sum(done.cpu.get(p, 0.0) - first.cpu.get(p, 0.0) for p in done.cpu)
    processes = [
        {
            "pid": pid,
            "process": launched.labels.get(pid) or process_label(pid),
            "cpu_s_per_million": round(
                (done.cpu.get(pid, 0.0) - first.cpu.get(pid, 0.0)) / max(copied, 1) * 1e6, 2
            ),
            "peak_rss_mb": round(peaks.get(pid, 0.0), 1),
        }
        for pid in pids
    ]
    ticks = max(1, machine1.total - machine0.total)
    result = DrainResult(
        system=system.name,
        size=size_key,
        run=run,
        rtt_ms=2 * RTT_ONE_WAY_MS if rtt else 0,
        records=records,
        records_per_s=round(rate_per_s),
        mb_per_s=round(rate_per_s * (size + rb.KEY_BYTES) / rb.MB, 2),
        seconds=round(seconds, 3),
        startup_s=round(first.at - launched.started, 2),
        cpu_s_per_million=round(cpu_s / max(copied, 1) * 1e6, 2),
        cpu_utilization=round(cpu_s / max(done.at - first.at, rb.POLL_S), 2),
        peak_rss_mb_total=round(sum(peaks.values()), 1),
        peak_rss_mb_max_process=round(max(peaks.values(), default=0.0), 1),
        processes=processes,
        copies_end_offset=end,
        machine_cpu_busy_share=round((machine1.busy - machine0.busy) / ticks, 2),
        brokers_cpu_utilization=round(
            (machine1.brokers_cpu_s - machine0.brokers_cpu_s) / max(machine_t1 - machine_t0, 1e-3),
            2,
        ),
        load_average=round(os.getloadavg()[0], 2),
        tool_rates=tool_rates,
        cores=cores_between(first, done),
    )
    say(
        f"{label}: {result.records_per_s:,} records/s ({result.mb_per_s} MB/s), "
        f"{result.cpu_s_per_million} CPU s/M, RSS {result.peak_rss_mb_total} MiB, "
        f"load {result.load_average}"
    )
    return result


def drain_retrying(
    system: System,
    size_key: str,
    run: int,
    records: int,
    args: argparse.Namespace,
    env: Env,
    work: Path,
    rtt: bool = False,
) -> DrainResult | None:
    """A drain; once more if it stalled (reported in the log, not hidden: ``None`` if again)."""
    for attempt in (1, 2):
        try:
            return drain(system, size_key, run, records, args, env, work, rtt)
        except Exception as err:  # reported; one run must not end the session
            say(f"{system.name} {size_key} run {run}: attempt {attempt} failed: {err!r}")
    return None


def summarize(runs: list[DrainResult]) -> dict[str, Any]:
    if not runs:
        return {"runs": 0}
    return {
        "runs": len(runs),
        "records_per_s_median": round(statistics.median(r.records_per_s for r in runs)),
        "records_per_s_all": [r.records_per_s for r in runs],
        "mb_per_s_median": round(statistics.median(r.mb_per_s for r in runs), 2),
        "cpu_s_per_million_median": round(statistics.median(r.cpu_s_per_million for r in runs), 2),
        "cpu_utilization_median": round(statistics.median(r.cpu_utilization for r in runs), 2),
        "peak_rss_mb_total_max": max(r.peak_rss_mb_total for r in runs),
        "peak_rss_mb_per_process_max": max(r.peak_rss_mb_max_process for r in runs),
        "startup_s_median": round(statistics.median(r.startup_s for r in runs), 2),
        "load_average_median": round(statistics.median(r.load_average for r in runs), 2),
        "machine_cpu_busy_share_median": round(
            statistics.median(r.machine_cpu_busy_share for r in runs), 2
        ),
        "cores_median": median_cores([r.cores for r in runs if r.cores]),
    }


def median_cores(splits: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each entry of :func:`cores_between` over runs (threads likewise)."""
    if not splits:
        return {}
    keys = {k for s in splits for k, v in s.items() if not isinstance(v, dict)}
    kinds = {k for s in splits for k in s.get("tool_threads", {})}
    result: dict[str, Any] = {
        k: round(statistics.median(s.get(k, 0.0) for s in splits), 2) for k in sorted(keys)
    }
    result["tool_threads"] = {
        k: round(statistics.median(s.get("tool_threads", {}).get(k, 0.0) for s in splits), 2)
        for k in sorted(kinds)
    }
    return result


def ratio(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    x, y = a.get("records_per_s_median"), b.get("records_per_s_median")
    return round(x / y, 2) if x and y else None


def paired_ratio(ours: list[DrainResult], theirs: list[DrainResult]) -> float | None:
    """The median of the ratios of runs made next to each other."""
    by_run = {r.run: r for r in theirs}
    pairs = [o.records_per_s / by_run[o.run].records_per_s for o in ours if o.run in by_run]
    return round(statistics.median(pairs), 2) if pairs else None


# ---------------------------------------------------------------------------- failover


def read_keys(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of ``topic`` (read committed): per partition, (offset, key) in order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"vs-read-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "log_level": 4,
        }
    )
    try:
        ends: dict[int, int] = {}
        for p in range(PARTITIONS):
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        done = {p for p, e in ends.items() if e == 0}
        deadline = time.monotonic() + 120
        while len(done) < PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                if msg.error() is not None:
                    continue
                part, off = msg.partition(), msg.offset()
                key = msg.key()
                if part is None or off is None:
                    continue
                if key is not None:
                    out[part].append((off, key))
                if off + 1 >= ends[part] - 1:
                    # the last data record (a transaction marker may follow it)
                    done.add(part)
            if len(done) < PARTITIONS:
                # partitions whose end is a marker never deliver ends-1: check the position
                for tp in consumer.position(
                    [TopicPartition(topic, p) for p in range(PARTITIONS) if p not in done]
                ):
                    if tp.offset >= ends[tp.partition]:
                        done.add(tp.partition)
        return out
    finally:
        consumer.close()


def precision(
    source_records: dict[int, list[tuple[int, bytes]]],
    copies: dict[int, list[tuple[int, bytes]]],
    committed: dict[int, int],
    translated: dict[int, int | None],
) -> dict[str, int]:
    """Records a consumer resuming at ``translated`` on the target reads twice (consumed on the
    source before ``committed``) and skips (not consumed on the source, copied below it)."""
    reread = skipped = missing = 0
    for p, commit in committed.items():
        consumed = {k for off, k in source_records[p] if off < commit}
        position = translated.get(p)
        if position is None:
            missing += 1
            continue
        after = {k for off, k in copies[p] if off >= position}
        before = {k for off, k in copies[p] if off < position}
        reread += len(after & consumed)
        skipped += len(before - consumed)
    return {"reread": reread, "skipped": skipped, "partitions_untranslated": missing}


def commit_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def target_group_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offsets on the target (MM2 writes them there), None where absent."""
    from confluent_kafka import ConsumerGroupTopicPartitions  # noqa: PLC0415

    request = [
        ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    ]
    out: dict[int, int | None] = dict.fromkeys(range(PARTITIONS))
    with contextlib.suppress(Exception):
        for future in admin.list_consumer_group_offsets(request).values():
            for tp in future.result(timeout=10).topic_partitions:
                if tp.topic == topic and tp.offset >= 0:
                    out[tp.partition] = tp.offset
    return out


def drsvc_translate(topology: Path, group: str) -> dict[int, int | None]:
    """``drsvc translate --json``, as an operator runs it before a failover."""
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "drsvc"),
            "translate",
            "--topology",
            str(topology),
            "--group",
            group,
            "--from",
            SOURCE,
            "--to",
            TARGET,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    positions: dict[int, int | None] = dict.fromkeys(range(PARTITIONS))
    try:
        document = json.loads(out.stdout)
    except json.JSONDecodeError:
        say(f"translate failed: {out.stderr[-500:]}")
        return positions
    for p in document.get("partitions", []):
        positions[int(p["partition"])] = p.get("target_offset")
    return positions


def mm2_synced_positions(
    target_admin: AdminClient, groups: dict[str, str], remote: str
) -> dict[str, dict[int, int | None]]:
    """MM2 writes translated offsets of groups idle on the target every interval: wait until
    every partition of every group has one and nothing moved for 5 s (or give up)."""
    deadline = time.monotonic() + CHECKPOINT_WAIT_S
    stable_since = time.monotonic()
    last: dict[str, dict[int, int | None]] = {}
    while time.monotonic() < deadline:
        now = {n: target_group_offsets(target_admin, g, remote) for n, g in groups.items()}
        complete = all(v is not None for o in now.values() for v in o.values())
        if now != last:
            last, stable_since = now, time.monotonic()
        elif complete and time.monotonic() - stable_since > 5:
            break
        time.sleep(0.5)
    return last


def failover_precision(
    system: System,
    args: argparse.Namespace,
    env: Env,
    work: Path,
) -> dict[str, Any]:
    """Three groups on the source (caught up, mid-log, 10,000 behind), the copy running; where
    each would resume on the target, and what that re-reads and skips."""
    per_partition = args.failover_records // PARTITIONS
    total = per_partition * PARTITIONS
    topic = f"vs-fo-{system.name}-{uuid.uuid4().hex[:6]}"
    remote = rb.remote_topic(topic)
    tag = uuid.uuid4().hex[:6]
    groups = {
        "caught_up": f"app-caught-up-{tag}",
        "mid_log": f"app-mid-log-{tag}",
        "lagging_10k": f"app-lagging-{tag}",
    }
    source_admin = admin_client(env.direct[SOURCE])
    target_admin = admin_client(env.direct[TARGET])
    rb.new_topic(source_admin, topic, PARTITIONS)
    say(f"failover {system.name}: {total:,} records, groups {', '.join(groups)}")
    rb.preload(env.direct[SOURCE], topic, PARTITIONS, total, 100)
    lag_each = [
        FAILOVER_LAG // PARTITIONS + (1 if p < FAILOVER_LAG % PARTITIONS else 0)
        for p in range(PARTITIONS)
    ]
    commits = {
        "caught_up": dict.fromkeys(range(PARTITIONS), per_partition),
        # a position in the middle, not on any round number
        "mid_log": {p: per_partition // 2 + 37 * p + 11 for p in range(PARTITIONS)},
        "lagging_10k": {p: per_partition - lag_each[p] for p in range(PARTITIONS)},
    }
    for name, offsets in commits.items():
        commit_group(env.direct[SOURCE], groups[name], topic, offsets)
    topology = work / f"fo-{tag}.yaml"
    topology.write_text(
        json.dumps(
            drsvc_topology(env.direct[SOURCE], env.direct[TARGET], [topic], "at-least-once", "fo")
        )
    )
    if system.kind == "drsvc":
        launched = launch_drsvc(system, work, env.direct[SOURCE], env.direct[TARGET], [topic])
    else:
        launched = launch_mm2(
            system,
            work,
            env.direct[SOURCE],
            env.direct[TARGET],
            [topic],
            args.java,
            args.mm2_heap,
            groups=list(groups.values()),
        )
    result: dict[str, Any] = {"system": system.name, "records": total, "groups": {}}
    try:
        watch(launched, target_admin, remote, total, args.drain_timeout_s)
        positions: dict[str, dict[int, int | None]] = {}
        if system.kind == "drsvc":
            for name, group in groups.items():
                positions[name] = drsvc_translate(topology, group)
        else:
            waited = time.monotonic()
            positions = mm2_synced_positions(target_admin, groups, remote)
            result["waited_for_synced_offsets_s"] = round(time.monotonic() - waited, 1)
        source_records = read_keys(env.direct[SOURCE], topic)
        copies = read_keys(env.direct[TARGET], remote)
        for name in groups:
            result["groups"][name] = precision(
                source_records, copies, commits[name], positions.get(name, {})
            )
        say(f"failover {system.name}: {result['groups']}")
        result["commit_to_usable_s"] = commit_to_usable(
            system,
            env,
            topic,
            remote,
            groups["caught_up"],
            per_partition,
            topology,
            target_admin,
            launched,
        )
    finally:
        stop_launched(launched)
        with contextlib.suppress(Exception):
            rb.delete_topics(source_admin, [topic])
            rb.delete_topics(target_admin, [remote])
    return result


def commit_to_usable(
    system: System,
    env: Env,
    topic: str,
    remote: str,
    group: str,
    per_partition: int,
    topology: Path,
    target_admin: AdminClient,
    launched: Launched,
) -> list[float | None]:
    """New records arrive and are copied; the group commits their end on the source; seconds
    until the target offers a position for that commit (drsvc: its translation answers with the
    exact position; MM2: the group's synced offsets on the target move). Three tries."""
    from drsvc.runtime.translation.cluster_view import KafkaClusterView  # noqa: PLC0415
    from drsvc.runtime.translation.group_translation import translate_group  # noqa: PLC0415
    from drsvc.topology.loader import load_topology  # noqa: PLC0415

    times: list[float | None] = []
    end = per_partition
    producer = Producer({"bootstrap.servers": env.direct[SOURCE], "acks": "all", "linger.ms": 5})
    for _ in range(3):
        for p in range(PARTITIONS):
            for _i in range(100):
                producer.produce(topic, b"x" * 100, b"more-%d" % p, partition=p)
        producer.flush(30)
        end += 100
        want = end * PARTITIONS
        deadline = time.monotonic() + 60
        while end_total(target_admin, remote) < want and time.monotonic() < deadline:
            time.sleep(0.05)
        before = target_group_offsets(target_admin, group, remote)
        commit_group(env.direct[SOURCE], group, topic, dict.fromkeys(range(PARTITIONS), end))
        committed_at = time.monotonic()
        usable: float | None = None
        while time.monotonic() - committed_at < 60 and launched.alive():
            if system.kind == "drsvc":
                top = load_topology(topology)
                views = {
                    a: KafkaClusterView(a, top.cluster(a).client_config(None), 10.0)
                    for a in (SOURCE, TARGET)
                }
                answer = translate_group(top, group, SOURCE, TARGET, views)
                if answer.exact and all(p.target_offset == end for p in answer.partitions):
                    usable = time.monotonic() - committed_at
                    break
            else:
                now = target_group_offsets(target_admin, group, remote)
                if all(now[p] != before[p] and now[p] is not None for p in range(PARTITIONS)):
                    usable = time.monotonic() - committed_at
                    break
                time.sleep(0.1)
        times.append(None if usable is None else round(usable, 2))
    return times


# ---------------------------------------------------------------------------- latency


def latency(
    system: System, args: argparse.Namespace, env: Env, work: Path, rtt: bool
) -> dict[str, Any]:
    rate, seconds = args.latency_rate, args.latency_seconds
    total = rate * seconds
    topic = f"vs-lat-{system.name}-{uuid.uuid4().hex[:6]}"
    remote = rb.remote_topic(topic)
    source_admin = admin_client(env.direct[SOURCE])
    target_admin = admin_client(env.direct[TARGET])
    rb.new_topic(source_admin, topic, PARTITIONS)
    source = env.source_for(rtt)
    if system.kind == "drsvc":
        launched = launch_drsvc(system, work, source, env.direct[TARGET], [topic], latency=True)
    else:
        launched = launch_mm2(
            system,
            work,
            source,
            env.direct[TARGET],
            [topic],
            args.java,
            args.mm2_heap,
            latency=True,
        )
    producer = Producer({"bootstrap.servers": env.direct[SOURCE], "acks": "all", "linger.ms": 1})
    reader: rb.CopyReader | None = None
    try:
        # Two warm-up rounds 10 s apart: every worker or task has joined and settled (a second
        # drsvc worker joining mid-measurement would pause the copy for a rebalance).
        for round_ in (1, 2):
            if round_ == 2:
                time.sleep(10)
            for p in range(PARTITIONS):
                producer.produce(topic, b"warm-up", b"warm-up-%d" % p, partition=p)
            producer.flush(30)
            deadline = time.monotonic() + 180
            while end_total(target_admin, remote) < round_ * PARTITIONS:
                if time.monotonic() > deadline or not launched.alive():
                    raise Stalled(f"no copy:\n{launched.tail()}")
                time.sleep(0.1)
        reader = rb.CopyReader(env.direct[TARGET], remote, dict.fromkeys(range(PARTITIONS), 2))
        reader.start()
        say(f"latency {system.name}{' rtt' if rtt else ''}: {rate}/s for {seconds}s")
        cpu0 = tree_sample(launched.roots)
        produced_s, acks = rb.paced_produce(producer, topic, PARTITIONS, rate, seconds)
        cpu1 = tree_sample(launched.roots)
        wait_until = time.monotonic() + 60
        while len(reader.seen) < total and time.monotonic() < wait_until:
            time.sleep(0.1)
    finally:
        if reader is not None:
            reader.stop()
        stop_launched(launched)
        with contextlib.suppress(Exception):
            rb.delete_topics(source_admin, [topic])
            rb.delete_topics(target_admin, [remote])
    values = sorted(reader.latencies_ms) if reader else []
    cpu = sum(cpu1.cpu.get(p, 0.0) - cpu0.cpu.get(p, 0.0) for p in cpu1.cpu)
    result = {
        "system": system.name,
        "rtt_ms": 2 * RTT_ONE_WAY_MS if rtt else 0,
        "rate_per_s": rate,
        "records": total,
        "received": len(values),
        "p50_ms": round(rb.percentile(values, 0.5), 1),
        "p99_ms": round(rb.percentile(values, 0.99), 1),
        "max_ms": round(values[-1], 1) if values else None,
        # The source's own acknowledgement delay of the same records: the part of the latency
        # that lies before any replicator could read them (on a busy machine, most of it).
        "source_ack_p50_ms": round(rb.percentile(sorted(acks), 0.5), 1) if acks else None,
        "source_ack_p99_ms": round(rb.percentile(sorted(acks), 0.99), 1) if acks else None,
        "cpu_utilization": round(cpu / produced_s, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }
    say(f"latency {system.name}: {result}")
    return result


# ---------------------------------------------------------------------------- report files


def _png(width: int, height: int, pixels: bytearray) -> bytes:
    rows = b"".join(
        b"\x00" + bytes(pixels[y * width * 3 : (y + 1) * width * 3]) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )


#: a 3x5 pixel font for the plot's labels (rows top to bottom, 3 bits each)
FONT = {
    "0": "7,5,5,5,7",
    "1": "2,6,2,2,7",
    "2": "7,1,7,4,7",
    "3": "7,1,7,1,7",
    "4": "5,5,7,1,1",
    "5": "7,4,7,1,7",
    "6": "7,4,7,5,7",
    "7": "7,1,1,1,1",
    "8": "7,5,7,5,7",
    "9": "7,5,7,1,7",
    "A": "2,5,7,5,5",
    "B": "6,5,6,5,6",
    "C": "7,4,4,4,7",
    "D": "6,5,5,5,6",
    "E": "7,4,6,4,7",
    "F": "7,4,6,4,4",
    "G": "7,4,5,5,7",
    "H": "5,5,7,5,5",
    "I": "7,2,2,2,7",
    "K": "5,5,6,5,5",
    "L": "4,4,4,4,7",
    "M": "5,7,7,5,5",
    "N": "6,5,5,5,5",
    "O": "7,5,5,5,7",
    "P": "7,5,7,4,4",
    "R": "6,5,6,5,5",
    "S": "7,4,7,1,7",
    "T": "7,2,2,2,2",
    "U": "5,5,5,5,7",
    "V": "5,5,5,5,2",
    "W": "5,5,7,7,5",
    "X": "5,5,2,5,5",
    "Y": "5,5,2,2,2",
    "/": "1,1,2,4,4",
    "-": "0,0,7,0,0",
    ".": "0,0,0,0,2",
    " ": "0,0,0,0,0",
    "K2": "0,0,0,0,0",
    ":": "0,2,0,2,0",
    "%": "5,1,2,4,5",
}


def plot_png(bars: list[tuple[str, list[tuple[str, float, tuple[int, int, int]]]]]) -> bytes:
    """Grouped bars (records/s), one group per label, with the values written above."""
    scale_px, width, height, margin = 3, 900, 420, 40
    pixels = bytearray(b"\xff" * (width * height * 3))

    def rect(x0: int, y0: int, x1: int, y1: int, color: tuple[int, int, int]) -> None:
        for y in range(max(0, y0), min(height, y1)):
            for x in range(max(0, x0), min(width, x1)):
                i = (y * width + x) * 3
                pixels[i : i + 3] = bytes(color)

    def text(x: int, y: int, value: str, px: int = scale_px) -> None:
        for ch in value.upper():
            rows = FONT.get(ch, FONT[" "]).split(",")
            for r, bits in enumerate(rows):
                for c in range(3):
                    if int(bits) & (4 >> c):
                        rect(x + c * px, y + r * px, x + (c + 1) * px, y + (r + 1) * px, (0, 0, 0))
            x += 4 * px

    top = max((v for _, group in bars for _, v, _ in group), default=1.0) or 1.0
    plot_h = height - 2 * margin - 60
    group_w = (width - 2 * margin) // max(1, len(bars))
    rect(margin, height - margin - 30, width - margin, height - margin - 28, (0, 0, 0))
    for g, (label, group) in enumerate(bars):
        x = margin + g * group_w + 20
        bar_w = (group_w - 40) // max(1, len(group))
        for name, value, color in group:
            h = int(plot_h * value / top)
            base = height - margin - 30
            rect(x, base - h, x + bar_w - 6, base, color)
            text(x, base - h - 14, f"{value / 1000:.0f}K", 2)
            text(x, base + 8, name.split("-")[0][:5], 2)
            x += bar_w
        text(margin + g * group_w + 20, height - margin + 10, label)
    text(margin, 8, "RECORDS/S")
    return _png(width, height, pixels)


COLORS = {"drsvc": (31, 119, 180), "mm2": (255, 127, 14), "limit": (120, 120, 120)}


def markdown_table(report: dict[str, Any]) -> str:
    lines = [
        f"# drsvc vs MirrorMaker 2, {report['date']} (commit {report['commit']})",
        "",
        f"Machine: {report['machine']['cores']} cores, {report['machine']['cpu_model']}, "
        f"{report['machine']['memory_mb']} MiB; load average at start "
        f"{report['machine']['load_average_at_start']}, at end "
        f"{report['machine'].get('load_average_at_end')}.",
        "",
    ]
    for section, title in (
        ("alo", "At least once, loopback"),
        ("eos", "Exactly once, loopback"),
        ("rtt", f"At least once, {2 * RTT_ONE_WAY_MS} ms round trip"),
    ):
        block = report.get(section)
        if not block:
            continue
        lines += [
            f"## {title}",
            "",
            "| size | system | records/s (median) | MB/s | CPU s / M records | peak RSS MiB "
            "(total / largest process) | runs |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for size, per in block.items():
            if not isinstance(per, dict) or "systems" not in per:
                continue
            for name, s in per["systems"].items():
                if not s.get("runs"):
                    continue
                lines.append(
                    f"| {size} B | {name} | {s['records_per_s_median']:,} | "
                    f"{s['mb_per_s_median']} | {s['cpu_s_per_million_median']} | "
                    f"{s['peak_rss_mb_total_max']} / {s['peak_rss_mb_per_process_max']} | "
                    f"{s['runs']} |"
                )
            ratios = per.get("ratios", {})
            if ratios:
                shown = ", ".join(f"{k} {v}" for k, v in ratios.items() if v is not None)
                lines.append(f"| {size} B | ratios | {shown} | | | | |")
        lines.append("")
    lines += cores_table(report)
    failover = report.get("failover")
    if failover:
        lines += [
            "## Failover precision (records re-read / skipped on the target)",
            "",
            "| system | caught up | mid-log | lagging 10k | commit → usable (s) |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, f in failover.get("systems", {}).items():
            cells = [
                f"{g['reread']} / {g['skipped']}"
                + (
                    f" ({g['partitions_untranslated']} untranslated)"
                    if g["partitions_untranslated"]
                    else ""
                )
                for g in f["groups"].values()
            ]
            lines.append(f"| {name} | {' | '.join(cells)} | {f.get('commit_to_usable_s')} |")
        lines.append("")
    lat = report.get("latency")
    if lat:
        lines += [
            "## Replication latency",
            "",
            "| system | round trip | rate/s | p50 ms | p99 ms | max ms | CPU (cores) "
            "| source ack p50 / p99 ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in lat.get("runs", []):
            lines.append(
                f"| {r['system']} | {r['rtt_ms']} ms | {r['rate_per_s']:,} | {r['p50_ms']} | "
                f"{r['p99_ms']} | {r['max_ms']} | {r['cpu_utilization']} | "
                f"{r.get('source_ack_p50_ms')} / {r.get('source_ack_p99_ms')} |"
            )
        lines.append("")
        if lat.get("medians"):
            lines += [
                "Medians over the rounds:",
                "",
                "| system | round trip | runs | p50 ms | p99 ms | max ms |",
                "| --- | ---: | ---: | ---: | ---: | ---: |",
            ]
            for m in lat["medians"]:
                lines.append(
                    f"| {m['system']} | {m['rtt_ms']} ms | {m['runs']} | {m['p50_ms']} | "
                    f"{m['p99_ms']} | {m['max_ms']} |"
                )
            lines.append("")
    return "\n".join(lines)


def cores_table(report: dict[str, Any]) -> list[str]:
    """Where the cores went while each tool copied (medians over its runs)."""
    rows = []
    for section in ("alo", "eos", "rtt"):
        for size, per in (report.get(section) or {}).items():
            if not isinstance(per, dict):
                continue
            for name, s in per.get("systems", {}).items():
                c = s.get("cores_median")
                if not c:
                    continue
                threads = ", ".join(f"{k} {v}" for k, v in c.get("tool_threads", {}).items())
                rows.append(
                    f"| {section} | {size} B | {name} | {c.get('tool')} ({threads}) | "
                    f"{c.get(f'brokers {SOURCE}')} | {c.get(f'brokers {TARGET}')} | "
                    f"{c.get('benchmark')} | {c.get('other')} | {c.get('idle')} |"
                )
    if not rows:
        return []
    return [
        "## Where the cores went while copying (medians, in cores)",
        "",
        f"| phase | size | system | tool (its threads by kind) | brokers {SOURCE} "
        f"| brokers {TARGET} | this benchmark | other | idle |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        "",
    ]


def latest_document(report: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "date": report["date"],
        "commit": report["commit"],
        "machine": report["machine"],
        "source": report.get("file"),
    }
    alo = report.get("alo") or {}
    for size in SIZES:
        per = alo.get(size)
        if not per:
            continue
        best = per.get("best", {})
        systems = per["systems"]
        doc[size] = {
            "drsvc_records_per_s": systems.get(best.get("drsvc", ""), {}).get(
                "records_per_s_median"
            ),
            "mm2_records_per_s": systems.get(best.get("mm2", ""), {}).get("records_per_s_median"),
            "limit_records_per_s": systems.get("limit", {}).get("records_per_s_median"),
            "drsvc_system": best.get("drsvc"),
            "mm2_system": best.get("mm2"),
            "ratios": per.get("ratios"),
        }
    failover = report.get("failover") or {}
    fs = failover.get("systems", {})
    d = next((v for k, v in fs.items() if k.startswith("drsvc")), None)
    # MM2 at its most precise: the configuration that left the fewest partitions without a
    # translated position, then re-read and skipped the fewest records
    mm2_runs = [v for k, v in fs.items() if k.startswith("mm2")]
    m = min(
        mm2_runs,
        key=lambda v: (
            sum(g["partitions_untranslated"] for g in v["groups"].values()),
            sum(g["reread"] + g["skipped"] for g in v["groups"].values()),
        ),
        default=None,
    )
    if d and m:
        doc["failover"] = {
            "drsvc_reread": sum(g["reread"] for g in d["groups"].values()),
            "mm2_reread": sum(g["reread"] for g in m["groups"].values()),
            "drsvc_skipped": sum(g["skipped"] for g in d["groups"].values()),
            "mm2_skipped": sum(g["skipped"] for g in m["groups"].values()),
            "drsvc_system": d["system"],
            "mm2_system": m["system"],
            "per_group": {"drsvc": d["groups"], "mm2": m["groups"]},
        }
    return doc


def write_outputs(report: dict[str, Any], stem: str, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    report["file"] = f"{stem}.json"
    (out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    (out_dir / f"{stem}.md").write_text(markdown_table(report) + "\n")
    bars: list[tuple[str, list[tuple[str, float, tuple[int, int, int]]]]] = []
    for section in ("alo", "eos", "rtt"):
        for size, per in (report.get(section) or {}).items():
            if not isinstance(per, dict) or "systems" not in per:
                continue
            group = [
                (name, float(s["records_per_s_median"]), COLORS[name.split("-")[0]])
                for name, s in per["systems"].items()
                if s.get("runs") and (name == "limit" or name in per.get("best", {}).values())
            ]
            if group:
                bars.append((f"{section} {size}B", group))
    if bars:
        (out_dir / f"{stem}.png").write_bytes(plot_png(bars))
    (out_dir / "latest.json").write_text(json.dumps(latest_document(report), indent=2) + "\n")


# ---------------------------------------------------------------------------- the session


def _best(results: dict[str, list[DrainResult]], prefix: str) -> str | None:
    medians = {
        name: statistics.median(r.records_per_s for r in runs)
        for name, runs in results.items()
        if name.startswith(prefix) and runs
    }
    return max(medians, key=lambda n: medians[n]) if medians else None


def system_named(name: str) -> System:
    eos = name.endswith("-eos")
    base = name.removesuffix("-eos")
    delivery = "exactly-once" if eos else "at-least-once"
    if base.startswith("drsvc-w"):
        return System("drsvc", delivery, workers=int(base[len("drsvc-w") :]))
    if base.startswith("mm2-t"):
        return System("mm2", delivery, tasks=int(base[len("mm2-t") :]))
    return System("limit")


def drain_block(
    systems: list[System],
    sizes: list[str],
    runs: int,
    records: int,
    args: argparse.Namespace,
    env: Env,
    work: Path,
    rtt: bool = False,
) -> dict[str, dict[str, list[DrainResult]]]:
    """Interleaved: run by run, size by size, system by system."""
    out: dict[str, dict[str, list[DrainResult]]] = {z: {s.name: [] for s in systems} for z in sizes}
    for run in range(1, runs + 1):
        for size in sizes:
            for system in systems:
                result = drain_retrying(system, size, run, records, args, env, work, rtt)
                if result is not None:
                    out[size][system.name].append(result)
    return out


def block_report(
    results: dict[str, dict[str, list[DrainResult]]], best: dict[str, str]
) -> dict[str, Any]:
    block: dict[str, Any] = {}
    for size, per in results.items():
        summaries = {name: summarize(runs) for name, runs in per.items()}
        d, m = best.get("drsvc"), best.get("mm2")
        ratios: dict[str, float | None] = {}
        if d and m and d in per and m in per:
            ratios["drsvc_over_mm2"] = ratio(summaries[d], summaries[m])
            ratios["drsvc_over_mm2_paired"] = paired_ratio(per[d], per[m])
        if d and "limit" in per and d in per:
            ratios["drsvc_over_limit"] = ratio(summaries[d], summaries["limit"])
            ratios["drsvc_over_limit_paired"] = paired_ratio(per[d], per["limit"])
        if m and "limit" in per and m in per:
            ratios["mm2_over_limit"] = ratio(summaries[m], summaries["limit"])
        block[size] = {
            "systems": summaries,
            "best": best,
            "ratios": ratios,
            "all_runs": {name: [asdict(r) for r in runs] for name, runs in per.items()},
        }
    return block


def commit_info() -> tuple[str, bool]:
    revision = rb.source_revision()
    return str(revision.get("commit")), bool(revision.get("modified"))


def phase_sweep(
    args: argparse.Namespace, env: Env, work: Path, sizes: list[str], best: dict[str, str]
) -> dict[str, Any]:
    """``--sweep-runs`` drains per size for each MM2 ``tasks.max`` and drsvc
    ``--workers-per-flow``, interleaved; ``best`` becomes, per tool, the one with the highest sum
    over sizes of its median rate relative to the size's fastest median."""
    systems = [System("mm2", tasks=t) for t in args.sweep_tasks] + [
        System("drsvc", workers=w) for w in args.sweep_workers
    ]
    sweep = drain_block(systems, sizes, args.sweep_runs, args.sweep_records, args, env, work)

    def median_rate(runs: list[DrainResult]) -> float | None:
        return statistics.median(r.records_per_s for r in runs) if runs else None

    for kind in ("mm2", "drsvc"):
        scores: dict[str, float] = {}
        for per in sweep.values():
            rates = {n: median_rate(r) or 0.0 for n, r in per.items() if n.startswith(kind) and r}
            top = max(rates.values(), default=0) or 1
            for n, v in rates.items():
                scores[n] = scores.get(n, 0.0) + v / top
        if scores:
            best[kind] = max(scores, key=lambda n: scores[n])
    say(f"sweep: best {best}")
    return {
        "records": args.sweep_records,
        "runs": args.sweep_runs,
        "records_per_s": {
            size: {n: median_rate(runs) for n, runs in per.items()} for size, per in sweep.items()
        },
        "best": dict(best),
        "all_runs": {
            size: {n: [asdict(r) for r in runs] for n, runs in per.items()}
            for size, per in sweep.items()
        },
    }


def phase_failover(
    args: argparse.Namespace, env: Env, work: Path, systems: list[System]
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    # MM2 twice: as configured for the drains (offset.lag.max at its default, 100), and with an
    # offset sync after every record it can (offset.lag.max 0), its most precise setting.
    mm2 = [replace(s, offset_lag_max=0) for s in systems if s.kind == "mm2"]
    for system in [*systems, *mm2]:
        try:
            found[system.name] = failover_precision(system, args, env, work)
        except Exception as err:  # reported; the other systems still run
            say(f"failover {system.name} failed: {err!r}")
    return {"records": args.failover_records, "lag": FAILOVER_LAG, "systems": found}


def phase_latency(
    args: argparse.Namespace, env: Env, work: Path, systems: list[System]
) -> dict[str, Any]:
    measured: list[dict[str, Any]] = []
    for rtt in (False, True) if args.latency_rtt else (False,):
        if rtt:
            env.env.links().delay(SOURCE, TARGET, RTT_ONE_WAY_MS)
        try:
            # Rounds in alternating order: a slow moment of the machine (the brokers deleting
            # the drains' topics a minute after they were dropped, a JIT warming up) falls on
            # either tool alike, and the medians discount it.
            for round_ in range(args.latency_runs):
                for system in systems if round_ % 2 == 0 else systems[::-1]:
                    try:
                        measured.append({**latency(system, args, env, work, rtt), "round": round_})
                    except Stalled as err:
                        say(f"latency {system.name} failed: {err}")
        finally:
            if rtt:
                env.env.links().heal(SOURCE, TARGET)
    return {"runs": measured, "medians": latency_medians(measured)}


def _median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def latency_medians(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per system and round trip, the medians of the runs' p50, p99 and max."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["system"], r["rtt_ms"]), []).append(r)
    return [
        {
            "system": system,
            "rtt_ms": rtt_ms,
            "runs": len(rs),
            **{key: _median_of(rs, key) for key in ("p50_ms", "p99_ms", "max_ms")},
        }
        for (system, rtt_ms), rs in sorted(groups.items())
    ]


def phase_eos(
    args: argparse.Namespace, env: Env, work: Path, sizes: list[str], best: dict[str, str]
) -> dict[str, Any]:
    eos_best = {k: f"{v}-eos" for k, v in best.items()}
    systems = [system_named(eos_best["drsvc"]), system_named(eos_best["mm2"])]
    results = drain_block(systems, sizes, args.eos_runs, args.records, args, env, work)
    return block_report(results, eos_best)


def phase_rtt(
    args: argparse.Namespace,
    env: Env,
    work: Path,
    sizes: list[str],
    best: dict[str, str],
    systems: list[System],
) -> dict[str, Any]:
    env.env.links().delay(SOURCE, TARGET, RTT_ONE_WAY_MS)
    try:
        results = drain_block(systems, sizes, args.rtt_runs, args.records, args, env, work, True)
    finally:
        env.env.links().heal(SOURCE, TARGET)
    return block_report(results, best)


def session_header(args: argparse.Namespace) -> dict[str, Any]:
    commit, modified = commit_info()
    return {
        "benchmark": "drsvc vs MirrorMaker 2 and the perf-tool limit",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": commit,
        "drsvc_modified": modified,
        "machine": rb.machine_info(),
        "kafka": rb.KAFKA_VERSION,
        "java": rb.java_version(args.java),
        "quick": args.quick,
        "config": {
            "partitions": PARTITIONS,
            "records_per_drain": args.records,
            "runs": args.runs,
            "eos_runs": args.eos_runs,
            "rtt_runs": args.rtt_runs,
            "key_bytes": rb.KEY_BYTES,
            "mm2_heap": args.mm2_heap,
            "mm2_properties_example": mm2_properties(
                "SOURCE:9092", "TARGET:9092", ["TOPIC"], System("mm2", tasks=0), rest_port=1
            ),
            "mm2_exactly_once_additions": {
                f"{TARGET}.exactly.once.source.support": "enabled",
                "dedicated.mode.enable.internal.rest": "true",
                "listeners": "http://127.0.0.1:<free port>",
            },
            "drsvc_command": "drsvc run --topology T --roles replicate --workers-per-flow N",
            "rtt_ms": 2 * RTT_ONE_WAY_MS,
        },
    }


def without_paths(text: str) -> str:
    """``text`` with every file system path replaced: results never name this machine's."""
    return re.sub(r"(/[\w.+-]+){2,}", "<path>", text)


def run_session(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    report = session_header(args)
    stem = args.stem or (
        f"vs-mm2-{report['date']}-{report['commit']}{'-quick' if args.quick else ''}"
    )
    phases = [p for p in PHASES if p in args.phases]
    sizes = [s for s in SIZES if s in args.sizes]
    work = Path(tempfile.mkdtemp(prefix="drsvc-vs-mm2-work-"))
    best = {"drsvc": f"drsvc-w{args.drsvc_workers}", "mm2": f"mm2-t{args.mm2_tasks}"}

    def save() -> None:
        report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        report["duration_s"] = round(time.monotonic() - started)
        if args.write_results:
            write_outputs(report, stem, args.results_dir)

    def phase(name: str, run: Callable[[], dict[str, Any]]) -> None:
        if name not in phases:
            return
        say(f"phase {name}")
        try:
            report[name] = run()
        except Exception as err:  # reported; later phases still run
            say(f"phase {name} failed: {err!r}")
            report[name] = {"error": without_paths(repr(err).splitlines()[0][:300])}
        save()

    try:
        with environment(args.state_dir) as env:
            phase("sweep", lambda: phase_sweep(args, env, work, sizes, best))
            report["best"] = dict(best)
            main = [system_named(best["drsvc"]), system_named(best["mm2"]), System("limit")]
            phase(
                "alo",
                lambda: block_report(
                    drain_block(main, sizes, args.runs, args.records, args, env, work), best
                ),
            )
            phase("failover", lambda: phase_failover(args, env, work, main[:2]))
            phase("eos", lambda: phase_eos(args, env, work, sizes, best))
            phase("rtt", lambda: phase_rtt(args, env, work, sizes, best, main))
            phase("latency", lambda: phase_latency(args, env, work, main[:2]))
    finally:
        if args.keep_work:
            say(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    save()
    return report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small session (minutes)")
    parser.add_argument("--records", type=int, default=None, help="backlog per drain")
    parser.add_argument("--runs", type=int, default=None, help="at-least-once runs per size")
    parser.add_argument("--eos-runs", type=int, default=None)
    parser.add_argument("--rtt-runs", type=int, default=None)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--sweep-tasks", default="1,2,4,12", help="MM2 tasks.max to try")
    parser.add_argument("--sweep-workers", default="1,2", help="drsvc workers per flow to try")
    parser.add_argument("--sweep-records", type=int, default=None)
    parser.add_argument("--sweep-runs", type=int, default=None, help="drains per setting")
    parser.add_argument("--mm2-tasks", type=int, default=12, help="without a sweep")
    parser.add_argument("--drsvc-workers", type=int, default=2, help="without a sweep")
    parser.add_argument("--mm2-heap", default="2g", help="MM2 -Xmx (-Xms256m)")
    parser.add_argument("--failover-records", type=int, default=None)
    parser.add_argument("--latency-rate", type=int, default=None)
    parser.add_argument("--latency-seconds", type=int, default=None)
    parser.add_argument("--no-latency-rtt", dest="latency_rtt", action="store_false")
    parser.add_argument("--latency-runs", type=int, default=None, help="rounds per tool")
    parser.add_argument("--drain-timeout-s", type=float, default=300.0)
    parser.add_argument("--java", default=Settings.from_env().java)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--stem", default=None, help="file name stem of the results")
    parser.add_argument("--no-write", dest="write_results", action="store_false")
    parser.add_argument("--keep-work", action="store_true")
    args = parser.parse_args(argv)
    quick = args.quick
    defaults: dict[str, Any] = {
        "records": 200_000 if quick else 1_000_000,
        "runs": 1 if quick else 3,
        "eos_runs": 1 if quick else 2,
        "rtt_runs": 1,
        "sweep_records": 100_000 if quick else 500_000,
        "sweep_runs": 1 if quick else 3,
        "failover_records": 60_000 if quick else 240_000,
        "latency_rate": 5_000 if quick else 10_000,
        "latency_seconds": 10 if quick else 20,
        "latency_runs": 1 if quick else 3,
    }
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    args.phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    args.sweep_tasks = [int(x) for x in args.sweep_tasks.split(",") if x.strip()]
    args.sweep_workers = [int(x) for x in args.sweep_workers.split(",") if x.strip()]
    unknown = [p for p in args.phases if p not in PHASES] + [
        s for s in args.sizes if s not in SIZES
    ]
    if unknown:
        parser.error(f"unknown phases or sizes: {unknown}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    report = run_session(args)
    print(json.dumps(latest_document(report), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
