"""Replication benchmark: drain throughput, replication latency, and MirrorMaker 2 for comparison.

One command, one JSON object on stdout (progress goes to stderr)::

    .venv/bin/python bench/replication_bench.py --vs-mm2 [--quick]   # see bench/vs_mm2.py

    .venv/bin/python bench/replication_bench.py [--records 300000] [--runs 3] [--with-mm2]
                                                [--state-dir DIR] [--output FILE]

It starts two local clusters (``bsrc`` and ``bdst``) in a temporary state directory, or reuses
them when ``--state-dir`` names an environment where both already run, and measures:

* **drain**: N records of one size are preloaded into a fresh source topic, then one replication
  worker starts and copies them. Throughput is measured over the window from the first copy
  readable on the target to the last one (worker start-up is reported separately), with the
  worker process's CPU seconds over that window and its peak RSS.
* **latency**: a producer writes 100-byte records at a fixed rate while a worker runs; a consumer
  on the target compares the time it reads each copy with the record's timestamp (the produce
  time; one machine, one clock).
* **mm2** (``--with-mm2``): the same drain for MirrorMaker 2 (dedicated mode, same Kafka version,
  same clusters, same topic shape and record sizes), interleaved with the drsvc runs so both see
  the same machine noise.

The worker runs in a child process of its own (this script re-executed with a hidden option) so
that its CPU and memory are measured alone: the preloading producer, the progress polling and the
latency consumer live in this parent process and never share the worker's interpreter or GIL. The
child builds its settings exactly as ``drsvc replicate`` does (``worker_settings`` with the same
defaults) and reports its ``ReplicationEngine.stats`` when it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib.metadata
import json
import logging
import os
import platform
import random
import resource
import shutil
import signal
import statistics
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

import drsvc
from drsvc.devenv.components import load_components
from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.settings import Settings

SOURCE = "bsrc"
TARGET = "bdst"
FLOW = f"{SOURCE}->{TARGET}"
KAFKA_VERSION = "4.1.1"
SIZES = {"100B": 100, "1KB": 1024}
KEY_BYTES = 10
MB = 1_000_000
POLL_S = 0.025
TARGET_RECORDS_PER_S = 150_000
TARGET_RSS_MB = 300
PR_SET_PDEATHSIG = 1


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- process accounting


def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` (all its threads) from ``/proc/<pid>/stat``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _clock_ticks()


@dataclass(frozen=True)
class Sample:
    """One look at a process: wall time, its CPU, and its main thread's CPU and run-queue wait."""

    at: float
    cpu_s: float
    main_cpu_s: float
    main_wait_s: float


def sample(pid: int) -> Sample:
    """``main_*`` come from ``/proc/<pid>/task/<pid>/schedstat`` (ns on a CPU, ns runnable but
    waiting for one): the Python worker runs all its Python code on that thread."""
    main_cpu = main_wait = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
        main_cpu, main_wait = int(fields[0]) / 1e9, int(fields[1]) / 1e9
    return Sample(time.monotonic(), process_cpu_s(pid) or 0.0, main_cpu, main_wait)


@dataclass(frozen=True)
class MachineSample:
    """All CPUs from ``/proc/stat``, in clock ticks, and the brokers' CPU seconds."""

    busy: int
    steal: int
    total: int
    brokers_cpu_s: float


def machine_sample(broker_pids: tuple[int, ...]) -> MachineSample:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is already in user)
    total = sum(fields[:8])
    idle = fields[3] + fields[4]
    brokers = sum(process_cpu_s(pid) or 0.0 for pid in broker_pids)
    return MachineSample(total - idle, fields[7], total, brokers)


def process_status_mb(pid: int, key: str) -> float | None:
    """A ``kB`` line of ``/proc/<pid>/status`` (VmHWM: peak RSS, VmRSS: current RSS) in MiB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _die_with_parent() -> None:
    """In a child before exec: get SIGKILL when this benchmark dies, even by SIGKILL."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_process(proc: subprocess.Popen[Any], grace_s: float) -> None:
    """SIGTERM the child's process group, then SIGKILL it if it does not exit in ``grace_s``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        say(f"child {proc.pid} did not stop in {grace_s:.0f}s: killing it")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


# ---------------------------------------------------------------------------- environment


@dataclass(frozen=True)
class BenchEnv:
    """The two clusters: bootstrap servers by alias, and the pids of their broker processes.

    On a secured environment ``admin`` holds, per alias, the bootstrap servers and client settings
    of the administrator (topics are created, preloaded and watched as it), and ``security`` the
    topology ``security`` block of the replicator's principal, which the worker runs as."""

    clusters: dict[str, str]
    broker_pids: tuple[int, ...]
    admin: dict[str, tuple[str, dict[str, str]]] = field(default_factory=dict)
    security: dict[str, Any] | None = None

    def admin_access(self, alias: str) -> tuple[str, dict[str, str]]:
        return self.admin.get(alias, (self.clusters[alias], {}))

    def admin_client(self, alias: str) -> AdminClient:
        return admin_client(*self.admin_access(alias))


def _broker_pids(env: LocalEnvironment) -> tuple[int, ...]:
    return tuple(
        p.pid
        for p in env.status().processes
        if p.site in (SOURCE, TARGET) and p.pid is not None and p.running
    )


#: the principal a secured drain's worker runs as, with the grants ``drsvc acls plan`` gives it
SECURED_PRINCIPAL = "drsvc-replicator"
#: every drain topic starts with it: one prefixed grant covers them all
TOPIC_PREFIX = "bench-"
#: the workers' consumer groups (one per drain, see start_drsvc_worker)
GROUP_PREFIX = "drsvc-bench."


def _secured_bench_env(env: LocalEnvironment, clusters: dict[str, str]) -> BenchEnv:
    """The replicator's grants for any drain topic (what the role gets in production), plus
    READ on the benchmark's own consumer groups; the administrator for everything else."""
    from drsvc.kafka.acls import create_acls  # noqa: PLC0415
    from drsvc.runtime.access.grants import kafka_grants  # noqa: PLC0415
    from drsvc.topology.models import Topology  # noqa: PLC0415
    from failover.kafka_acls import (  # noqa: PLC0415
        Grant,
        Operation,
        PatternType,
        ResourceType,
    )

    topology = Topology.model_validate(topology_document(clusters, f"{TOPIC_PREFIX}.*"))
    admin = {alias: env.admin_settings(alias) for alias in (SOURCE, TARGET)}
    groups = Grant(
        ResourceType.GROUP,
        PatternType.PREFIXED,
        GROUP_PREFIX,
        Operation.READ,
        f"User:{SECURED_PRINCIPAL}",
    )
    for alias in (SOURCE, TARGET):
        grants = (*kafka_grants(topology, "replicator", alias), groups)
        create_acls(admin_client(*admin[alias]), grants, cluster=alias)
    return BenchEnv(
        clusters,
        _broker_pids(env),
        admin=admin,
        security=env.topology_security(SECURED_PRINCIPAL),
    )


@contextmanager
def local_environment(state_dir: Path | None, secure: bool = False) -> Iterator[BenchEnv]:
    """``bsrc`` and ``bdst``; start them if needed, stop afterwards what was started here.
    ``secure``: SASL_SSL clusters with ACLs enforced (``drsvc dev up --secure``)."""
    temporary = state_dir is None
    if state_dir is None:
        state_dir = Path(tempfile.mkdtemp(prefix="drsvc-bench-"))
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir))
    running = {p.site for p in env.status().processes if p.running and p.listening}
    clusters = env.info().clusters
    if {SOURCE, TARGET} <= running and {SOURCE, TARGET} <= set(clusters):
        say(f"reusing running clusters {SOURCE} and {TARGET}")
        yield _secured_bench_env(env, clusters) if secure else BenchEnv(clusters, _broker_pids(env))
        return
    kind = "secured " if secure else ""
    say(f"starting local {kind}clusters {SOURCE} and {TARGET} (Kafka {KAFKA_VERSION})")
    try:
        info = env.up([SOURCE, TARGET], progress=lambda line: say(f"env: {line}"), secure=secure)
        yield (
            _secured_bench_env(env, info.clusters)
            if secure
            else BenchEnv(info.clusters, _broker_pids(env))
        )
    finally:
        if running:
            # Someone else's environment: stop only the clusters this run added.
            for alias in (SOURCE, TARGET):
                if alias not in running:
                    env.stop_site(alias)
        else:
            # Drop this process's last Kafka clients first, so none retries a stopped broker.
            gc.collect()
            say("stopping the local clusters")
            env.down(purge=temporary)


# ---------------------------------------------------------------------------- Kafka helpers


def new_topic(admin: AdminClient, name: str, partitions: int) -> None:
    if not create_topic(admin, name, partitions):
        raise RuntimeError(f"topic {name} already exists")


def delete_topics(admin: AdminClient, names: list[str]) -> None:
    """Delete this benchmark's own topics (unique names, nobody else uses them)."""
    if not names:
        return
    for future in admin.delete_topics(names, operation_timeout=30).values():
        with contextlib.suppress(KafkaException):
            future.result(timeout=30)


def end_offsets_total(admin: AdminClient, topic: str, partitions: int) -> int:
    """Sum of the high watermarks of ``topic`` (0 while it does not exist yet)."""
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    request = {TopicPartition(topic, p): latest for p in range(partitions)}
    total = 0
    try:
        for future in admin.list_offsets(request, request_timeout=5).values():
            total += future.result(timeout=5).offset
    except KafkaException:
        return 0
    return total


def payload_pool(size: int, seed: int) -> list[bytes]:
    """Distinct values of ``size`` bytes of random letters (lz4 barely compresses them)."""
    rng = random.Random(seed)
    letters = string.ascii_letters.encode()
    blob = bytes(rng.choice(letters) for _ in range(256 * 1024 + size))
    return [blob[i : i + size] for i in rng.sample(range(256 * 1024), 4096)]


def preload(
    bootstrap: str,
    topic: str,
    partitions: int,
    records: int,
    size: int,
    settings: dict[str, str] | None = None,
) -> float:
    """Write ``records`` records of ``size`` bytes round-robin over the partitions; records/s."""
    producer = Producer(
        {
            **(settings or {}),
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 50,
            "batch.size": 1024 * 1024,
            "batch.num.messages": 100_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 512 * 1024,
            "log_level": 4,
        }
    )
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err.str())

    values = payload_pool(size, seed=size)
    produce = producer.produce
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                produce(
                    topic,
                    values[i & 4095],
                    b"k%09d" % i,
                    partition=i % partitions,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i & 0xFFFF == 0:
            producer.poll(0)
    left = producer.flush(120)
    elapsed = time.monotonic() - started
    if left or errors:
        raise RuntimeError(f"preloading {topic}: {left} not delivered, errors {errors[:3]}")
    return records / elapsed


def topology_document(
    clusters: dict[str, str],
    topic_pattern: str,
    delivery: str = "at-least-once",
    security: dict[str, Any] | None = None,
) -> dict[str, Any]:
    secured = {} if security is None else {"security": security}
    return {
        "name": "bench",
        "clusters": {
            alias: {"bootstrap_servers": clusters[alias], **secured} for alias in (SOURCE, TARGET)
        },
        "flows": [
            {
                "source": SOURCE,
                "target": TARGET,
                "topics": {"include": [topic_pattern]},
                "delivery": delivery,
                "start": "earliest",
            }
        ],
    }


#: the exactly-once series (same worker defaults, ``delivery: exactly-once``)
EOS_SYSTEM = "drsvc-eos"
#: the at-least-once series on the secured clusters (SASL_SSL, SCRAM-SHA-512, ACLs enforced)
SECURED_SYSTEM = "drsvc-secured"
#: the same worker run from another source tree (``--baseline-tree``), for before/after drains
BASELINE_SUFFIX = "-baseline"


def remote_topic(topic: str) -> str:
    """Name of the copy on the target (the prefix policy, as for MM2's default policy)."""
    return f"{SOURCE}.{topic}"


# ---------------------------------------------------------------------------- replicators


@dataclass
class Replicator:
    """A replicator process under measurement (a drsvc worker or an MM2 JVM)."""

    proc: subprocess.Popen[bytes]
    log_file: Path
    started: float

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start_drsvc_worker(
    work_dir: Path,
    clusters: dict[str, str],
    topic: str,
    delivery: str = "at-least-once",
    tree: Path | None = None,
    security: dict[str, Any] | None = None,
) -> Replicator:
    """Start one worker in a child process; from ``tree`` (another checkout of drsvc: its
    benchmark script and its package) instead of this one when given; as the principal of
    ``security`` (a topology ``security`` block) on secured clusters."""
    spec = {
        "topology": topology_document(clusters, f"^{topic}$", delivery, security),
        "flow": FLOW,
        # A group of its own per run: no rebalance waits on a previous run's member.
        "group_id": f"{GROUP_PREFIX}{topic}",
    }
    spec_file = work_dir / f"{topic}.worker.json"
    spec_file.write_text(json.dumps(spec))
    log_file = work_dir / f"{topic}.worker.log"
    script = Path(__file__).resolve() if tree is None else tree / "bench" / Path(__file__).name
    child_env = None
    if tree is not None:
        # The tree's package wins over the installed one: PYTHONPATH comes before site-packages.
        child_env = {**os.environ, "PYTHONPATH": str(tree)}
    with log_file.open("wb") as log_out:
        proc = subprocess.Popen(
            [sys.executable, str(script), "--worker-child", str(spec_file)],
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log_out,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (only prctl, no Python state)
        )
    return Replicator(proc, log_file, time.monotonic())


def finish_drsvc_worker(worker: Replicator) -> dict[str, Any]:
    """Stop the worker (it settles and commits) and return what it reported about itself."""
    stop_process(worker.proc, grace_s=60)
    out = worker.proc.stdout.read() if worker.proc.stdout else b""
    if worker.proc.returncode != 0 or not out.strip():
        raise RuntimeError(f"worker exited with {worker.proc.returncode}:\n{worker.log_tail()}")
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return report


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
    Logger:
      - {{name: org.apache.kafka.connect.mirror, level: INFO}}
"""


def mm2_properties(clusters: dict[str, str], topic: str, tasks: int) -> dict[str, str]:
    """MirrorMaker 2 in dedicated mode, one flow, one topic, RF 1, nothing but the copy.

    The target producer and the source consumer get the client settings drsvc uses (lz4, 5 ms
    linger, 1 MiB batches, 10,000 records a poll, 4 MiB a partition fetch), so the comparison is
    about the replicators, not about client defaults.
    """
    flow = f"{SOURCE}->{TARGET}"
    return {
        "clusters": f"{SOURCE}, {TARGET}",
        f"{SOURCE}.bootstrap.servers": clusters[SOURCE],
        f"{TARGET}.bootstrap.servers": clusters[TARGET],
        f"{flow}.enabled": "true",
        f"{TARGET}->{SOURCE}.enabled": "false",
        f"{flow}.topics": topic,
        "tasks.max": str(tasks),
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",
        "refresh.groups.enabled": "false",
        "refresh.topics.interval.seconds": "5",
        f"{TARGET}.producer.compression.type": "lz4",
        f"{TARGET}.producer.linger.ms": "5",
        f"{TARGET}.producer.batch.size": str(1024 * 1024),
        f"{TARGET}.producer.acks": "all",
        f"{SOURCE}.consumer.max.poll.records": "10000",
        f"{SOURCE}.consumer.max.partition.fetch.bytes": str(4 * 1024 * 1024),
    }


def start_mm2(
    work_dir: Path, clusters: dict[str, str], topic: str, java: str, heap: str, tasks: int
) -> Replicator:
    libs = load_components(Settings.from_env().cache_dir).kafka.libs
    props = mm2_properties(clusters, topic, tasks)
    props_file = work_dir / f"{topic}.mm2.properties"
    props_file.write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    log_file = work_dir / f"{topic}.mm2.log"
    log4j_file = work_dir / f"{topic}.mm2-log4j2.yaml"
    log4j_file.write_text(MM2_LOG4J.format(log_file=log_file))
    command = [
        java,
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j_file}",
        "-cp",
        str(libs / "*"),
        "org.apache.kafka.connect.mirror.MirrorMaker",
        str(props_file),
    ]
    with (work_dir / f"{topic}.mm2.stdout").open("wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=work_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (only prctl, no Python state)
        )
    return Replicator(proc, log_file, time.monotonic())


# ---------------------------------------------------------------------------- drain


@dataclass
class DrainRun:
    system: str
    size: str
    run: int
    records: int
    record_bytes: int
    preload_records_per_s: float
    startup_s: float
    restarts_before_first_copy: int
    seconds: float
    records_per_s: float
    records_per_s_10_90: float
    mb_per_s: float
    cpu_s: float
    cpu_s_per_million: float
    cpu_utilization: float
    #: the worker's Python thread (None for MM2): CPU per million records, share of the window
    #: it ran, share it was runnable but waited for a CPU (a loaded machine shows here)
    main_thread_cpu_s_per_million: float | None
    main_thread_utilization: float | None
    main_thread_runqueue_wait_share: float | None
    peak_rss_mb: float
    #: CPU the two brokers used (in cores), and how busy all CPUs of the machine were (shares
    #: of all cores; steal: taken by the hypervisor) over the same window
    brokers_cpu_utilization: float
    machine_cpu_busy_share: float
    machine_cpu_steal_share: float
    copies_on_target: int
    worker_stats: dict[str, Any] = field(default_factory=dict)


class StartupCrash(RuntimeError):
    """The replicator exited before any copy reached the target."""


@dataclass
class DrainTimes:
    """What the progress poll saw (times on the monotonic clock)."""

    first: Sample
    done: Sample
    machine_first: MachineSample
    machine_done: MachineSample
    mark10: float
    mark90: float
    first_count: int
    peak_rss_mb: float


def watch_drain(
    replicator: Replicator,
    admin: AdminClient,
    remote: str,
    partitions: int,
    records: int,
    timeout_s: float,
    broker_pids: tuple[int, ...] = (),
) -> DrainTimes:
    """Poll the target every 25 ms until all ``records`` are readable there."""
    deadline = time.monotonic() + timeout_s
    first: Sample | None = None
    machine_first = machine_sample(broker_pids)
    first_count = 0
    mark10 = mark90 = 0.0
    while True:
        if not replicator.alive():
            kind = RuntimeError if first else StartupCrash
            raise kind(f"replicator exited early:\n{replicator.log_tail()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout_s:.0f}s:\n{replicator.log_tail()}")
        count = end_offsets_total(admin, remote, partitions)
        now = sample(replicator.pid)
        if count and first is None:
            first, first_count = now, count
            machine_first = machine_sample(broker_pids)
        if count >= records * 0.1 and not mark10:
            mark10 = now.at
        if count >= records * 0.9 and not mark90:
            mark90 = now.at
        if first is not None and count >= records:
            peak = process_status_mb(replicator.pid, "VmHWM") or 0.0
            machine = machine_sample(broker_pids)
            return DrainTimes(first, now, machine_first, machine, mark10, mark90, first_count, peak)
        time.sleep(POLL_S)


def start_replicator(
    system: str, args: argparse.Namespace, env: BenchEnv, work_dir: Path, topic: str
) -> Replicator:
    clusters = env.clusters
    tree = None
    if system.endswith(BASELINE_SUFFIX):
        system, tree = system.removesuffix(BASELINE_SUFFIX), args.baseline_tree
    if system == SECURED_SYSTEM:
        return start_drsvc_worker(work_dir, clusters, topic, security=env.security)
    if system == "drsvc":
        return start_drsvc_worker(work_dir, clusters, topic, tree=tree)
    if system == EOS_SYSTEM:
        return start_drsvc_worker(work_dir, clusters, topic, "exactly-once", tree)
    return start_mm2(work_dir, clusters, topic, args.java, args.mm2_heap, args.mm2_tasks)


def stop_replicator(system: str, replicator: Replicator) -> dict[str, Any]:
    """Stop it; for a drsvc worker, return what it reported about itself."""
    if not system.startswith("drsvc"):
        stop_process(replicator.proc, grace_s=30)
        return {}
    try:
        return finish_drsvc_worker(replicator)
    except RuntimeError as err:
        say(f"worker report missing: {err}")
        return {}


def drain_once(
    system: str,
    size_name: str,
    run: int,
    args: argparse.Namespace,
    env: BenchEnv,
    work_dir: Path,
    created: list[tuple[AdminClient, str]],
) -> DrainRun:
    size = SIZES[size_name]
    records = args.records
    label = f"{system} {size_name} run {run}"
    topic = f"{TOPIC_PREFIX}{system}-{size_name.lower()}-r{run}-{uuid.uuid4().hex[:8]}"
    remote = remote_topic(topic)
    source_admin, target_admin = env.admin_client(SOURCE), env.admin_client(TARGET)
    new_topic(source_admin, topic, args.partitions)
    created.extend([(source_admin, topic), (target_admin, remote)])
    say(f"{label}: preloading {records} records into {topic}")
    source_bootstrap, source_settings = env.admin_access(SOURCE)
    preload_rate = preload(source_bootstrap, topic, args.partitions, records, size, source_settings)
    say(f"{label}: preloaded at {preload_rate:,.0f} records/s; draining")
    restarts = 0
    while True:
        replicator = start_replicator(system, args, env, work_dir, topic)
        report: dict[str, Any] = {}
        try:
            times = watch_drain(
                replicator,
                target_admin,
                remote,
                args.partitions,
                records,
                args.drain_timeout_s,
                env.broker_pids,
            )
            break
        except StartupCrash as crash:
            # Counted and reported: a replicator that dies while starting is a finding too.
            restarts += 1
            say(f"{label}: replicator died before copying (restart {restarts}): {crash}")
            if restarts > 2:
                raise
        finally:
            report = stop_replicator(system, replicator)
    copies = end_offsets_total(target_admin, remote, args.partitions)
    first, done = times.first, times.done
    seconds = max(done.at - first.at, POLL_S)
    drained = records - times.first_count
    cpu_s = done.cpu_s - first.cpu_s
    main_cpu_s = done.main_cpu_s - first.main_cpu_s
    main_wait_s = done.main_wait_s - first.main_wait_s
    record_bytes = size + KEY_BYTES
    spread = times.mark90 - times.mark10
    python_worker = system.startswith("drsvc")
    m0, m1 = times.machine_first, times.machine_done
    ticks = max(1, m1.total - m0.total)
    result = DrainRun(
        system=system,
        size=size_name,
        run=run,
        records=records,
        record_bytes=record_bytes,
        preload_records_per_s=round(preload_rate),
        startup_s=round(first.at - replicator.started, 2),
        restarts_before_first_copy=restarts,
        seconds=round(seconds, 3),
        records_per_s=round(drained / seconds),
        records_per_s_10_90=round(0.8 * records / spread) if spread > 0 else 0,
        mb_per_s=round(drained * record_bytes / seconds / MB, 2),
        cpu_s=round(cpu_s, 2),
        cpu_s_per_million=round(cpu_s / drained * 1e6, 2),
        cpu_utilization=round(cpu_s / seconds, 2),
        main_thread_cpu_s_per_million=(
            round(main_cpu_s / drained * 1e6, 2) if python_worker else None
        ),
        main_thread_utilization=round(main_cpu_s / seconds, 2) if python_worker else None,
        main_thread_runqueue_wait_share=(
            round(main_wait_s / seconds, 2) if python_worker else None
        ),
        peak_rss_mb=round(max(times.peak_rss_mb, float(report.get("vm_hwm_mb") or 0.0)), 1),
        brokers_cpu_utilization=round((m1.brokers_cpu_s - m0.brokers_cpu_s) / seconds, 2),
        machine_cpu_busy_share=round((m1.busy - m0.busy) / ticks, 2),
        machine_cpu_steal_share=round((m1.steal - m0.steal) / ticks, 2),
        copies_on_target=copies,
        worker_stats=report.get("stats", {}),
    )
    say(
        f"{label}: {result.records_per_s:,} records/s ({result.mb_per_s} MB/s), "
        f"{result.cpu_s_per_million} CPU s per million, peak RSS {result.peak_rss_mb} MiB, "
        f"start-up {result.startup_s}s"
    )
    return result


def _median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 2) if present else None


def _rate_bound(cpu_s_per_million: list[float | None]) -> int | None:
    median = _median_or_none(cpu_s_per_million)
    return round(1e6 / median) if median else None


def summarize_drain(runs: list[DrainRun]) -> dict[str, Any]:
    return {
        "records_per_s_median": round(statistics.median(r.records_per_s for r in runs)),
        "mb_per_s_median": round(statistics.median(r.mb_per_s for r in runs), 2),
        "cpu_s_per_million": round(statistics.median(r.cpu_s_per_million for r in runs), 2),
        "peak_rss_mb": max(r.peak_rss_mb for r in runs),
        "records_per_s_10_90_median": round(statistics.median(r.records_per_s_10_90 for r in runs)),
        "cpu_utilization_median": round(statistics.median(r.cpu_utilization for r in runs), 2),
        "main_thread_cpu_s_per_million": _median_or_none(
            [r.main_thread_cpu_s_per_million for r in runs]
        ),
        "main_thread_runqueue_wait_share_median": _median_or_none(
            [r.main_thread_runqueue_wait_share for r in runs]
        ),
        # An estimate, not a measurement: the rate if the worker's Python thread had a CPU to
        # itself and nothing else limited it (1 / its CPU per record).
        "main_thread_bound_records_per_s": _rate_bound(
            [r.main_thread_cpu_s_per_million for r in runs]
        ),
        "startup_s_median": round(statistics.median(r.startup_s for r in runs), 2),
        "brokers_cpu_utilization_median": round(
            statistics.median(r.brokers_cpu_utilization for r in runs), 2
        ),
        "machine_cpu_busy_share_median": round(
            statistics.median(r.machine_cpu_busy_share for r in runs), 2
        ),
        "all_runs": [asdict(r) for r in runs],
    }


# ---------------------------------------------------------------------------- latency


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


class CopyReader(threading.Thread):
    """Reads the copies on the target and records, per copy, read time - record timestamp."""

    def __init__(self, bootstrap: str, topic: str, starts: dict[int, int]) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"drsvc-bench-latency-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5,
                "fetch.min.bytes": 1,
                "log_level": 4,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, o) for p, o in starts.items()])
        self.latencies_ms: list[float] = []
        self.seen: set[bytes] = set()
        self.duplicates = 0
        self._halt = threading.Event()

    def run(self) -> None:
        # poll(), not consume(n, timeout): consume waits out its timeout unless n records came,
        # which would add up to that timeout to every measured latency.
        poll = self.consumer.poll
        latencies, seen = self.latencies_ms, self.seen
        while not self._halt.is_set():
            msg = poll(0.05)
            if msg is None or msg.error() is not None:
                continue
            now_ms = time.time() * 1000
            key = msg.key()
            if key is None or key.startswith(b"warm-up"):
                continue
            if key in seen:
                self.duplicates += 1
                continue
            seen.add(key)
            latencies.append(now_ms - msg.timestamp()[1])

    def stop(self) -> None:
        self._halt.set()
        self.join(10)
        self.consumer.close()


def paced_produce(
    producer: Producer, topic: str, partitions: int, rate: int, seconds: int
) -> tuple[float, list[float]]:
    """Produce ``rate * seconds`` 100-byte records at ``rate``; return the time it took and the
    source acknowledgement delays (ms) from the delivery reports."""
    acks_ms: list[float] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acks_ms.append(time.time() * 1000 - msg.timestamp()[1])

    values = payload_pool(100, seed=7)
    total = rate * seconds
    sent = 0
    started = time.monotonic()
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate) + 1)
        while sent < due:
            producer.produce(
                topic,
                values[sent & 4095],
                b"k%09d" % sent,
                partition=sent % partitions,
                on_delivery=on_delivery,
            )
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    elapsed = time.monotonic() - started
    producer.flush(30)
    return elapsed, acks_ms


def wait_until_copying(
    worker: Replicator, producer: Producer, topic: str, admin: AdminClient, partitions: int
) -> None:
    """One warm-up record per partition must arrive: the worker is assigned and connected."""
    for p in range(partitions):
        producer.produce(topic, b"warm-up", b"warm-up-%d" % p, partition=p)
    producer.flush(30)
    deadline = time.monotonic() + 120
    while end_offsets_total(admin, remote_topic(topic), partitions) < partitions:
        if time.monotonic() > deadline or not worker.alive():
            raise RuntimeError(f"worker did not start copying:\n{worker.log_tail()}")
        time.sleep(0.1)


def measure_latency(
    args: argparse.Namespace,
    clusters: dict[str, str],
    work_dir: Path,
    created: list[tuple[AdminClient, str]],
) -> dict[str, Any]:
    rate, seconds, partitions = args.latency_rate, args.latency_seconds, args.partitions
    total = rate * seconds
    topic = f"bench-latency-{uuid.uuid4().hex[:8]}"
    source_admin, target_admin = admin_client(clusters[SOURCE]), admin_client(clusters[TARGET])
    new_topic(source_admin, topic, partitions)
    created.extend([(source_admin, topic), (target_admin, remote_topic(topic))])
    producer = Producer({"bootstrap.servers": clusters[SOURCE], "acks": "all", "log_level": 4})
    restarts = 0
    while True:
        worker = start_drsvc_worker(work_dir, clusters, topic)
        try:
            wait_until_copying(worker, producer, topic, target_admin, partitions)
            break
        except RuntimeError:
            stop_process(worker.proc, grace_s=30)
            restarts += 1
            if restarts > 2:
                raise
            say(f"latency: worker died while starting (restart {restarts})")
    reader = CopyReader(clusters[TARGET], remote_topic(topic), dict.fromkeys(range(partitions), 1))
    try:
        reader.start()
        say(f"latency: {rate} records/s of 100 B for {seconds}s")
        cpu_start = process_cpu_s(worker.pid) or 0.0
        produced_s, acks_ms = paced_produce(producer, topic, partitions, rate, seconds)
        cpu_window = (process_cpu_s(worker.pid) or 0.0) - cpu_start
        deadline = time.monotonic() + 60
        while len(reader.seen) < total and time.monotonic() < deadline:
            time.sleep(0.1)
        peak = process_status_mb(worker.pid, "VmHWM") or 0.0
    finally:
        reader.stop()
        stop_process(worker.proc, grace_s=60)
    latencies = sorted(reader.latencies_ms)
    acks = sorted(acks_ms)
    result = {
        "records": total,
        "received": len(latencies),
        "duplicates": reader.duplicates,
        "offered_rate_per_s": rate,
        "achieved_rate_per_s": round(total / produced_s),
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p90_ms": round(percentile(latencies, 0.90), 1),
        "p99_ms": round(percentile(latencies, 0.99), 1),
        "p999_ms": round(percentile(latencies, 0.999), 1),
        "max_ms": round(latencies[-1], 1) if latencies else None,
        "mean_ms": round(statistics.fmean(latencies), 1) if latencies else None,
        "source_ack_p50_ms": round(percentile(acks, 0.50), 1),
        "source_ack_p99_ms": round(percentile(acks, 0.99), 1),
        "worker_cpu_utilization": round(cpu_window / produced_s, 3),
        "worker_peak_rss_mb": round(peak, 1),
        "worker_restarts_before_first_copy": restarts,
    }
    say(
        f"latency: p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, max {result['max_ms']} ms "
        f"({result['received']}/{total} copies read)"
    )
    return result


# ---------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_mb = (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // (1024 * 1024)
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_mb": memory_mb,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": confluent_kafka.libversion()[0],
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def java_version(java: str) -> str | None:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    first = (out.stderr or out.stdout).splitlines()
    return first[0].strip() if first else None


def source_revision(root: Path | None = None) -> dict[str, Any]:
    """The commit of a checkout and whether its code is modified; by default the checkout
    whose drsvc this process runs (which PYTHONPATH may point away from this script's)."""
    if root is None:
        root = Path(drsvc.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "drsvc", "failover"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "modified": None}
    return {"commit": commit, "modified": bool(dirty)}


def summarize_exactly_once(
    drains: dict[str, dict[str, list[DrainRun]]],
    at_least_once: dict[str, dict[str, Any]],
    sizes: list[str],
) -> dict[str, Any]:
    """The exactly-once series, with its ratio to the at-least-once one of the same session."""
    eos: dict[str, Any] = {size: summarize_drain(drains[EOS_SYSTEM][size]) for size in sizes}
    for size in sizes:
        ours, exact = drains["drsvc"][size], drains[EOS_SYSTEM][size]
        eos[size]["exactly_once_over_at_least_once_records_per_s"] = round(
            eos[size]["records_per_s_median"] / at_least_once[size]["records_per_s_median"], 2
        )
        eos[size]["exactly_once_over_at_least_once_per_run_median"] = round(
            statistics.median(
                b.records_per_s / a.records_per_s for a, b in zip(ours, exact, strict=True)
            ),
            2,
        )
    eos["note"] = (
        "a drain ends when the remote topic's end offsets reach the record count; transaction "
        "markers take offsets too (one per partition per transaction), so the last few hundred "
        "records may still be in flight then: a slight overstatement"
    )
    return eos


def run_benchmark(args: argparse.Namespace) -> dict[str, Any]:
    started = time.monotonic()
    report: dict[str, Any] = {
        "benchmark": "drsvc replication",
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine_info(),
        "kafka": KAFKA_VERSION,
        "drsvc": source_revision(),
        "runs": args.runs,
        "config": {
            "records_per_run": args.records,
            "partitions": args.partitions,
            "key_bytes": KEY_BYTES,
            "values": "random ASCII letters",
            "source_compression": "lz4",
            "worker": "ReplicationEngine in its own process, drsvc replicate defaults",
            "mb": "10^6 bytes of key + value",
        },
    }
    sizes = [s for s in SIZES if s in args.sizes]
    systems = _series(args)
    drains: dict[str, dict[str, list[DrainRun]]] = {s: {z: [] for z in sizes} for s in systems}
    created: list[tuple[AdminClient, str]] = []
    work_dir = Path(tempfile.mkdtemp(prefix="drsvc-bench-work-"))
    try:
        secured_clusters = (
            local_environment(args.secured_state_dir, secure=True)
            if args.with_secured
            else contextlib.nullcontext(None)
        )
        # Both environments run through every round: the secured one's idle brokers cost the
        # plaintext drains what the plaintext ones cost the secured drains.
        with local_environment(args.state_dir) as env, secured_clusters as secured_env:
            # Interleave systems and sizes run by run: slow phases of a noisy machine then hit
            # every series alike instead of one series' runs.
            for run in range(1, args.runs + 1):
                for size in sizes:
                    for system in _round_order(systems, run):
                        on = secured_env if system == SECURED_SYSTEM else env
                        assert on is not None
                        result = drain_once(system, size, run, args, on, work_dir, created)
                        drains[system][size].append(result)
                        if not args.keep_topics:
                            for admin, topic in created:
                                delete_topics(admin, [topic])
                            created.clear()
            report["drain"] = {size: summarize_drain(drains["drsvc"][size]) for size in sizes}
            report["latency_100B_at_5000_per_s"] = None
            if args.latency_seconds > 0:
                latency = measure_latency(args, env.clusters, work_dir, created)
                key = f"latency_100B_at_{args.latency_rate}_per_s"
                report.pop("latency_100B_at_5000_per_s")
                report[key] = latency
            if not args.keep_topics:
                for admin, topic in created:
                    delete_topics(admin, [topic])
                created.clear()
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)
    report["exactly_once"] = (
        summarize_exactly_once(drains, report["drain"], sizes) if args.with_eos else None
    )
    report["secured"] = (
        summarize_secured(drains, report["drain"], sizes) if args.with_secured else None
    )
    report["baseline"] = (
        summarize_baseline(drains, sizes, args.baseline_tree)
        if args.baseline_tree is not None
        else None
    )
    report["mm2"] = None
    if args.with_mm2:
        mm2: dict[str, Any] = {size: summarize_drain(drains["mm2"][size]) for size in sizes}
        for size in sizes:
            ours, theirs = drains["drsvc"][size], drains["mm2"][size]
            mm2[size]["drsvc_over_mm2_records_per_s"] = round(
                report["drain"][size]["records_per_s_median"] / mm2[size]["records_per_s_median"],
                2,
            )
            mm2[size]["drsvc_over_mm2_per_run_median"] = round(
                statistics.median(
                    a.records_per_s / b.records_per_s for a, b in zip(ours, theirs, strict=True)
                ),
                2,
            )
        mm2["version"] = KAFKA_VERSION
        mm2["java"] = java_version(args.java)
        mm2["heap"] = args.mm2_heap
        mm2["tasks_max"] = args.mm2_tasks
        report["mm2"] = mm2
    if "100B" in sizes:
        hundred = report["drain"]["100B"]
        report["issue_target"] = {
            "records_per_s_100B": TARGET_RECORDS_PER_S,
            "rss_mb_below": TARGET_RSS_MB,
            "records_per_s_met": hundred["records_per_s_median"] >= TARGET_RECORDS_PER_S,
            "rss_met": all(report["drain"][s]["peak_rss_mb"] < TARGET_RSS_MB for s in sizes),
        }
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report["duration_s"] = round(time.monotonic() - started)
    return report


def _series(args: argparse.Namespace) -> list[str]:
    """The series a round drains, in order."""
    systems = (
        ["drsvc"]
        + ([SECURED_SYSTEM] if args.with_secured else [])
        + ([EOS_SYSTEM] if args.with_eos else [])
        + (["mm2"] if args.with_mm2 else [])
    )
    if args.baseline_tree is None:
        return systems
    # Each drsvc series gets a twin run from the baseline tree, right after it in every round.
    return [
        name
        for system in systems
        for name in (
            [system, system + BASELINE_SUFFIX] if system in ("drsvc", EOS_SYSTEM) else [system]
        )
    ]


def _round_order(systems: list[str], run: int) -> list[str]:
    """The order of one round's drains. A baseline twin runs right after its series in odd
    rounds and right before it in even ones: the first drain after a change of series was
    seen to run slower (by up to a fifth at 100 B), and alternating puts either tree first
    equally often."""
    if run % 2:
        return systems
    order = list(systems)
    for i, name in enumerate(order):
        if name.endswith(BASELINE_SUFFIX) and i > 0:
            order[i - 1], order[i] = order[i], order[i - 1]
    return order


def summarize_secured(
    drains: dict[str, dict[str, list[DrainRun]]], plain: dict[str, Any], sizes: list[str]
) -> dict[str, Any]:
    """The secured series next to the plaintext one of the same rounds: medians, the ratio of
    the medians and the median of the per-round ratios (secured over plaintext; below 1 is the
    cost of TLS, SCRAM and the authorizer)."""
    secured: dict[str, Any] = {
        "listener": "SASL_SSL (SCRAM-SHA-512 over TLS) on both clusters, ACLs enforced",
        "principal": SECURED_PRINCIPAL,
    }
    for size in sizes:
        ours, plaintext = drains[SECURED_SYSTEM][size], drains["drsvc"][size]
        summary = summarize_drain(ours)
        summary["secured_over_plaintext_records_per_s"] = round(
            summary["records_per_s_median"] / plain[size]["records_per_s_median"], 3
        )
        summary["secured_over_plaintext_per_run_median"] = round(
            statistics.median(
                a.records_per_s / b.records_per_s for a, b in zip(ours, plaintext, strict=True)
            ),
            3,
        )
        summary["cpu_s_per_million_secured_over_plaintext"] = round(
            statistics.median(
                a.cpu_s_per_million / b.cpu_s_per_million
                for a, b in zip(ours, plaintext, strict=True)
            ),
            3,
        )
        secured[size] = summary
    return secured


def summarize_baseline(
    drains: dict[str, dict[str, list[DrainRun]]], sizes: list[str], tree: Path
) -> dict[str, Any]:
    """Each drsvc series next to its twin from the baseline tree: the ratio of the medians and
    the median of the per-round ratios (this tree over the baseline; above 1 is faster)."""
    baseline: dict[str, Any] = {"tree_revision": source_revision(tree)}
    for system in [name for name in drains if name.endswith(BASELINE_SUFFIX)]:
        ours_name = system.removesuffix(BASELINE_SUFFIX)
        series: dict[str, Any] = {}
        for size in sizes:
            ours, theirs = drains[ours_name][size], drains[system][size]
            summary = summarize_drain(theirs)
            summary["this_over_baseline_records_per_s"] = round(
                summarize_drain(ours)["records_per_s_median"] / summary["records_per_s_median"], 3
            )
            summary["this_over_baseline_per_run_median"] = round(
                statistics.median(
                    a.records_per_s / b.records_per_s for a, b in zip(ours, theirs, strict=True)
                ),
                3,
            )
            summary["cpu_s_per_million_this_over_baseline"] = round(
                statistics.median(
                    a.cpu_s_per_million / b.cpu_s_per_million
                    for a, b in zip(ours, theirs, strict=True)
                ),
                3,
            )
            series[size] = summary
        baseline[ours_name] = series
    return baseline


# ---------------------------------------------------------------------------- worker child


def worker_child(spec_file: Path) -> int:
    """Run one engine until SIGTERM; print its stats and resource use as one JSON line."""
    from drsvc.runtime.replication.engine import ReplicationEngine  # noqa: PLC0415
    from drsvc.runtime.replication.settings import worker_settings  # noqa: PLC0415
    from drsvc.topology.models import Topology  # noqa: PLC0415

    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    spec = json.loads(spec_file.read_text())
    topology = Topology.model_validate(spec["topology"])
    flow = next(f for f in topology.flows if f.id == spec["flow"])
    settings = worker_settings(topology, flow, {}, group_id=spec["group_id"])
    worker: Any = ReplicationEngine(settings)
    parent = os.getppid()

    def stop(_signum: int, _frame: Any) -> None:
        worker.stop()

    def on_cycle(w: Any) -> None:
        if os.getppid() != parent:
            w.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    worker.run(on_cycle=on_cycle)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "stats": asdict(worker.stats),
                "cpu_s_total": round(usage.ru_utime + usage.ru_stime, 2),
                "vm_hwm_mb": process_status_mb(os.getpid(), "VmHWM"),
            }
        ),
        flush=True,
    )
    return 0


# ---------------------------------------------------------------------------- command line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000, help="records per drain run")
    parser.add_argument("--runs", type=int, default=3, help="drain runs per record size")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each topic")
    parser.add_argument(
        "--sizes", default="100B,1KB", help="record sizes to drain (100B, 1KB; comma-separated)"
    )
    parser.add_argument("--latency-rate", type=int, default=5000, help="records/s")
    parser.add_argument(
        "--latency-seconds", type=int, default=20, help="latency test length (0: skip it)"
    )
    parser.add_argument("--with-mm2", action="store_true", help="also drain with MirrorMaker 2")
    parser.add_argument(
        "--with-eos", action="store_true", help="also drain with an exactly-once drsvc flow"
    )
    parser.add_argument(
        "--with-secured",
        action="store_true",
        help="also drain at least once on secured clusters (SASL_SSL, ACLs; a second local"
        " environment), interleaved with the plaintext drains",
    )
    parser.add_argument(
        "--secured-state-dir",
        type=Path,
        default=None,
        help="local secured environment to use with --with-secured (reused when running)",
    )
    parser.add_argument("--mm2-heap", default="256m", help="MirrorMaker 2 JVM heap")
    parser.add_argument("--mm2-tasks", type=int, default=1, help="MirrorMaker 2 tasks.max")
    parser.add_argument("--java", default=Settings.from_env().java, help="java executable")
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="local environment to use (reused when bsrc and bdst run there)",
    )
    parser.add_argument("--drain-timeout-s", type=float, default=240.0)
    parser.add_argument(
        "--keep-topics", action="store_true", help="keep the benchmark's topics afterwards"
    )
    parser.add_argument("--output", type=Path, default=None, help="also write the JSON here")
    parser.add_argument(
        "--baseline-tree",
        type=Path,
        default=None,
        help="another checkout of drsvc (e.g. a git worktree of the commit before a change):"
        " every drsvc drain also runs from it, interleaved, and the report compares the two",
    )
    parser.add_argument("--worker-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in args.sizes if s not in SIZES]
    if unknown:
        parser.error(f"unknown sizes {unknown}; use {', '.join(SIZES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--vs-mm2" in argv:
        # The side-by-side session (bench/vs_mm2.py) takes every other option.
        import vs_mm2  # noqa: PLC0415

        return vs_mm2.main([a for a in argv if a != "--vs-mm2"])
    args = parse_args(argv)
    if args.worker_child is not None:
        return worker_child(args.worker_child)

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    report = run_benchmark(args)
    text = json.dumps(report, indent=2)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
