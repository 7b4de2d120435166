"""Scale cases of issue 35 ("production scale"). Prints one JSON object (progress on stderr) and
writes it to ``bench/results/scale-<case>-<date>.json``.

Cases (``--case``):

* ``failover-history``: does a planned failover's downtime grow with the history of the flow's
  offset-sync topic? Clusters ``east`` and ``west`` with Consul (the ``drsvc dev`` environment,
  started in a temporary state directory), flows both ways (prefix naming, at least once) run by
  ``drsvc replicate`` workers, and one application with ``--groups`` consumer groups (12) over one
  topic of ``--partitions`` partitions (12): a producer writing steadily and one consumer per
  group, committing, all following the application's active cluster (``drsvc.client``).
  ``--rounds`` rounds (3) of ``drsvc failover --to west`` and ``drsvc failback``, each a fresh
  process run from the command line as a user runs it, on the fresh sync topics; then
  ``--history`` copies (2,000,000) of the flow's own offset syncs are produced again into
  ``drsvc.offset-syncs.east`` on west (same key and partition: repeats, which the index must
  skip), and the same rounds again. Per move, from the failover record's events: the downtime
  (the ``deactivate`` event to the ``activate`` event), the time before deactivate (from the
  command's start: start-up and the refusal check, which reads every sync topic in full), each
  step, and the command's wall time. ``drsvc translate`` of a probe group (fixed offsets
  committed on east) is timed before and after the history is added, and its answers must not
  change. Goal (issue 35): downtime with history <= fresh + 2 s (medians).

Run: ``python bench/scale_bench.py --case failover-history [--rounds 3] [--history 2000000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from controller_bench import stop
from replication_bench import source_revision

from drsvc.client import FailoverConsumer, FailoverProducer, NoActiveClusterError
from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.settings import Settings
from drsvc.topology.models import Topology
from failover.offset_syncs import SyncFormatError, decode_sync

CASES = ("failover-history",)
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
APP = "scale-app"
TOPIC = "orders"
PROBE_GROUP = "scale-probe"
#: the issue's goal: downtime with history at most this much above the fresh one (medians)
GOAL_MARGIN_S = 2.0
#: warnings of a move's command about syncs that contradict earlier ones (the CLI logs warnings
#: only): a repeated sync must not be one
_SYNC_LOG = re.compile(r".*contradicts earlier syncs.*")


def say(message: str) -> None:
    print(f"scale-bench: {message}", file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    """The environment of drsvc subprocesses: this checkout's code first."""
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT) if not path else f"{ROOT}{os.pathsep}{path}",
    }


def drsvc_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "drsvc.cli.main", *args]


def start_role(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        drsvc_command(args), stdout=log.open("ab"), stderr=subprocess.STDOUT, env=child_env()
    )


def write_topology(
    path: Path, name: str, clusters: dict[str, str], groups: list[str], lease_s: float | None
) -> dict[str, Any]:
    application: dict[str, Any] = {
        "name": APP,
        "groups": groups,
        "topics": [TOPIC],
        "preferred": "east",
    }
    if lease_s is not None:
        application["lease_s"] = lease_s
    document = {
        "name": name,
        "clusters": {alias: {"bootstrap_servers": b} for alias, b in clusters.items()},
        "flows": [
            {"source": s, "target": t, "topics": {"include": [f"^{TOPIC}$"]},
             "policy": "prefix", "delivery": "at-least-once"}
            for s, t in (("east", "west"), ("west", "east"))
        ],
        "applications": [application],
    }  # fmt: skip
    path.write_text(json.dumps(document, indent=2))
    return document


class Workload:
    """The application: a producer writing ``rate`` records/s and one consumer per group, each
    on a thread, following the active cluster."""

    def __init__(
        self, path: Path, consul: str, groups: list[str], rate: int, partitions: int
    ) -> None:
        self.producer = FailoverProducer(APP, path, {"linger.ms": 5}, consul=consul)
        self.consumers = []
        for group in groups:
            consumer = FailoverConsumer(
                APP, path,
                {"group.id": group, "auto.offset.reset": "earliest",
                 "auto.commit.interval.ms": 500},
                consul=consul,
            )  # fmt: skip
            consumer.subscribe([TOPIC])
            self.consumers.append(consumer)
        self.rate = rate
        self.partitions = partitions
        self.produced = 0
        #: per consumer: the cluster it last read a record on, and when (monotonic)
        self.last_read: list[tuple[str, float] | None] = [None] * len(groups)
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True)] + [
            threading.Thread(target=self._consume, args=(i,), daemon=True)
            for i in range(len(groups))
        ]
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        tick = 0.1
        per_tick = max(1, round(self.rate * tick))
        next_at = time.monotonic()
        while not self._stop.is_set():
            for _ in range(per_tick):
                seq = self.produced
                try:
                    self.producer.produce(TOPIC, str(seq).encode(), partition=seq % self.partitions)
                    self.produced += 1
                except (NoActiveClusterError, BufferError):
                    break
            self.producer.poll(0)
            next_at += tick
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _consume(self, i: int) -> None:
        consumer = self.consumers[i]
        while not self._stop.is_set():
            msg = consumer.poll(0.1)
            cluster = consumer.cluster
            if msg is not None and msg.error() is None and cluster is not None:
                self.last_read[i] = (cluster, time.monotonic())

    def all_reading_on(self, cluster: str, since: float) -> bool:
        return all(r is not None and r[0] == cluster and r[1] >= since for r in self.last_read)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self.producer.close(5)
        for consumer in self.consumers:
            consumer.close()


def wait_reading(workload: Workload, cluster: str, since: float, timeout_s: float) -> float | None:
    """Seconds from ``since`` until every consumer has read on ``cluster`` (None: not within
    ``timeout_s``)."""
    deadline = since + timeout_s
    while time.monotonic() < deadline:
        if workload.all_reading_on(cluster, since):
            return round(time.monotonic() - since, 2)
        time.sleep(0.1)
    return None


def move(
    path: Path, consul: str, to: str, failback: bool, logs: Path, label: str
) -> dict[str, Any]:
    """One ``drsvc failover --to`` / ``drsvc failback``, a fresh process; its times from the
    failover record it prints."""
    args = ["failback" if failback else "failover", "-t", str(path), "--app", APP, "--json",
            "--consul", consul]  # fmt: skip
    if not failback:
        args += ["--to", to]
    log = logs / f"{label}.log"
    started_ms = time.time() * 1000
    began = time.monotonic()
    done = subprocess.run(
        drsvc_command(args), capture_output=True, text=True, env=child_env(), timeout=1800,
        check=False,
    )  # fmt: skip
    wall_s = time.monotonic() - began
    log.write_text(done.stderr + "\n--- stdout ---\n" + done.stdout)
    result: dict[str, Any] = {
        "move": "failback" if failback else "failover",
        "to": to,
        "exit_code": done.returncode,
        "wall_s": round(wall_s, 2),
        "sync_conflicts": _SYNC_LOG.findall(done.stderr)[:5],
    }
    try:
        record = json.loads(done.stdout)
    except ValueError:
        result["error"] = f"no JSON on stdout; stderr ends: {done.stderr[-2000:]}"
        return result
    events = record.get("events", [])
    at = {e["step"]: e["at_ms"] for e in events if e["outcome"] == "ok"}
    result["state"] = record.get("state")
    result["groups_exact"] = sum(1 for g in record.get("groups", []) if g["exact"])
    result["groups_total"] = len(record.get("groups", []))
    # The document has the record's duration (created to its last event), not its start. The
    # executor takes the time it creates the record with before it plans and runs the refusal
    # check (which reads every sync topic in full), so those count in the deactivate step.
    created_ms: float | None = None
    if events and record.get("duration_s") is not None:
        created_ms = events[-1]["at_ms"] - record["duration_s"] * 1000
        result["startup_s"] = round((created_ms - started_ms) / 1000, 2)
    if "deactivate" in at and "activate" in at:
        result["downtime_s"] = round((at["activate"] - at["deactivate"]) / 1000, 2)
        result["pre_deactivate_s"] = round((at["deactivate"] - started_ms) / 1000, 2)
        if created_ms is not None:
            result["check_and_deactivate_s"] = round((at["deactivate"] - created_ms) / 1000, 2)
        result["after_activate_s"] = round(wall_s - (at["activate"] - started_ms) / 1000, 2)
    previous = created_ms
    steps = []
    for e in events:
        steps.append({
            "step": e["step"], "outcome": e["outcome"],
            "took_s": None if previous is None else round((e["at_ms"] - previous) / 1000, 2),
            "detail": e["detail"][:300],
        })  # fmt: skip
        previous = e["at_ms"]
    result["steps"] = steps
    return result


def round_trip(
    path: Path, consul: str, workload: Workload, logs: Path, phase: str, i: int, settle_s: float
) -> list[dict[str, Any]]:
    """Failover to west, then failback to east; after each, every consumer reads on the new
    cluster and ``settle_s`` pass before the next move."""
    moves = []
    for to, failback in (("west", False), ("east", True)):
        label = f"{phase}-{i}-{'failback' if failback else 'failover'}"
        say(f"{label}: starting")
        result = move(path, consul, to, failback, logs, label)
        since = time.monotonic()
        result["consumers_reading_s"] = wait_reading(workload, to, since, 120)
        say(
            f"{label}: state {result.get('state')}, downtime {result.get('downtime_s')} s, "
            f"before deactivate {result.get('pre_deactivate_s')} s, wall {result['wall_s']} s"
        )
        moves.append(result)
        if result.get("state") != "completed":
            raise RuntimeError(f"{label} did not complete: {json.dumps(result)[:3000]}")
        time.sleep(settle_s)
    return moves


def commit_probe(bootstrap: str, partitions: int) -> dict[int, int]:
    """Commit half of each partition's end for the probe group on east, without joining it: a
    position that stays put, so its translation can be compared before and after the history."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": PROBE_GROUP,
                         "enable.auto.commit": False})  # fmt: skip
    try:
        offsets = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
            offsets[p] = high // 2
        consumer.commit(
            offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False
        )
        return offsets
    finally:
        consumer.close()


def translate(path: Path, group: str) -> dict[str, Any]:
    """``drsvc translate`` of ``group`` east -> west, a fresh process, timed."""
    began = time.monotonic()
    done = subprocess.run(
        drsvc_command(["translate", "-t", str(path), "--group", group, "--from", "east",
                       "--to", "west", "--json", "--timeout-s", "120"]),
        capture_output=True, text=True, env=child_env(), timeout=1800, check=False,
    )  # fmt: skip
    wall_s = round(time.monotonic() - began, 2)
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return {"wall_s": wall_s, "error": done.stderr[-2000:]}
    partitions = answer.get("partitions", [])
    return {
        "wall_s": wall_s,
        "exact": answer.get("exact"),
        "reasons": dict(Counter(p["reason"] for p in partitions)),
        "answers": {
            f"{p['source_topic']}-{p['partition']}": p["target_offset"] for p in partitions
        },
    }


def sync_topic_end(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scale-{uuid.uuid4().hex}"})
    try:
        described = consumer.list_topics(topic, timeout=10).topics[topic]
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in sorted(described.partitions)
        }
    finally:
        consumer.close()


def read_syncs(bootstrap: str, topic: str) -> tuple[list[tuple[int, bytes, bytes]], Counter[str]]:
    """Every offset sync ``topic`` holds now that has copies, in order: (partition, key, value);
    and what was left out, counted by why."""
    bounds = sync_topic_end(bootstrap, topic)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"scale-{uuid.uuid4().hex}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    found: list[tuple[int, bytes, bytes]] = []
    skipped = Counter[str]()
    try:
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in bounds.items()])
        left = {p for p, (low, high) in bounds.items() if high > low}
        while left:
            for msg in consumer.consume(10_000, 1.0):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"reading {topic}: {error}")
                p, offset, key, value = msg.partition(), msg.offset(), msg.key(), msg.value()
                assert p is not None and offset is not None
                if offset + 1 >= bounds[p][1]:
                    left.discard(p)
                if key is None or value is None:
                    skipped["no key or value"] += 1
                    continue
                try:
                    sync = decode_sync(key, value)
                except SyncFormatError:
                    skipped["not a sync"] += 1
                    continue
                if not sync.segments:
                    # A run with no copies, applied again out of order, would start a chain of
                    # its own (as a worker restart does): not a repeat.
                    skipped["no copies"] += 1
                    continue
                found.append((p, key, value))
    finally:
        consumer.close()
    return found, skipped


def add_history(bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """Produce ``count`` copies of the offset syncs ``topic`` holds now, in their order, each
    with its key into its partition, cycling through them: repeats of copies already mapped."""
    before = sync_topic_end(bootstrap, topic)
    began = time.monotonic()
    originals, skipped = read_syncs(bootstrap, topic)
    if not originals:
        raise RuntimeError(f"{topic} holds no syncs to repeat")
    say(f"read {len(originals)} syncs of {topic} in {time.monotonic() - began:.1f} s; "
        f"producing {count} copies")  # fmt: skip
    producer = Producer({
        "bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
        "compression.type": "lz4", "queue.buffering.max.messages": 500_000,
    })  # fmt: skip
    failed: list[str] = []
    delivered = 0

    def report(err: KafkaError | None, _msg: object) -> None:
        nonlocal delivered
        if err is None:
            delivered += 1
        elif len(failed) < 5:
            failed.append(str(err))

    began = time.monotonic()
    for n in range(count):
        p, key, value = originals[n % len(originals)]
        while True:
            try:
                producer.produce(topic, value, key, partition=p, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    produce_s = time.monotonic() - began
    after = sync_topic_end(bootstrap, topic)
    return {
        "syncs_before": sum(high - low for low, high in before.values()),
        "distinct_syncs_repeated": len(originals),
        "skipped": dict(skipped),
        "copies_produced": delivered,
        "delivery_errors": failed,
        "produce_s": round(produce_s, 1),
        "syncs_after": sum(high - low for low, high in after.values()),
    }


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def summarize(moves: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per measure, over every move and per direction."""
    out: dict[str, Any] = {}
    for scope, chosen in (
        ("all", moves),
        ("failover", [m for m in moves if m["move"] == "failover"]),
        ("failback", [m for m in moves if m["move"] == "failback"]),
    ):
        out[scope] = {
            measure: median([m[measure] for m in chosen if m.get(measure) is not None])
            for measure in (
                "downtime_s",
                "pre_deactivate_s",
                "startup_s",
                "check_and_deactivate_s",
                "wall_s",
                "consumers_reading_s",
            )
        } | {"moves": len(chosen)}
    return out


def goal(fresh: dict[str, Any], history: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for scope in ("failover", "failback", "all"):
        f, h = fresh[scope]["downtime_s"], history[scope]["downtime_s"]
        found[scope] = {
            "fresh_median_downtime_s": f,
            "history_median_downtime_s": h,
            "difference_s": None if f is None or h is None else round(h - f, 2),
            "met": None if f is None or h is None else h <= f + GOAL_MARGIN_S,
        }
    return found


def start_application(
    args: argparse.Namespace,
    work: Path,
    clusters: dict[str, str],
    consul: str,
    processes: list[subprocess.Popen[bytes]],
) -> tuple[Path, str, Workload]:
    """The topic, the topology, replication both ways (appended to ``processes``) and the
    application, reading on east; returns the topology's path, the sync topic of east->west and
    the workload."""
    for bootstrap in clusters.values():
        create_topic(admin_client(bootstrap), TOPIC, args.partitions, 1)
    name = f"scale-{uuid.uuid4().hex[:6]}"
    path = work / f"{name}.json"
    groups = [f"g-{i}" for i in range(args.groups)]
    document = write_topology(path, name, clusters, groups, args.lease_s)
    sync_topic = Topology.model_validate(document).internal_names().offset_syncs_topic("east")
    for flow in ("east->west", "west->east"):
        processes.append(
            start_role(["replicate", "-t", str(path), "--flow", flow, "--consul", consul],
                       work / "logs" / f"replicate-{flow.replace('->', '-to-')}.log")
        )  # fmt: skip
    workload = Workload(path, consul, groups, args.rate, args.partitions)
    if wait_reading(workload, "east", time.monotonic(), 120) is None:
        workload.close()
        raise RuntimeError("the consumers did not all read on east within 120 s")
    return path, sync_topic, workload


def with_history(
    args: argparse.Namespace, path: Path, west: str, sync_topic: str, result: dict[str, Any]
) -> None:
    """Add the history, translate the probe group again and compare."""
    say(f"adding {args.history} syncs of history to {sync_topic} on west")
    result["history"] = add_history(west, sync_topic, args.history)
    say(f"history: {result['history']}")
    before = result["translate_fresh"]
    after = result["translate_history"] = translate(path, PROBE_GROUP)
    say(f"translate, with history: {after['wall_s']} s, exact {after.get('exact')}")
    result["probe"] |= {
        "answers_unchanged": before.get("answers") == after.get("answers"),
        "exact_before": before.get("exact"),
        "exact_after": after.get("exact"),
    }


def failover_history(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    env = LocalEnvironment(Settings.from_env(state_dir=work / "state"))
    processes: list[subprocess.Popen[bytes]] = []
    workload: Workload | None = None
    result: dict[str, Any] = {}
    logs = work / "logs"
    logs.mkdir()
    try:
        say("starting east and west")
        info = env.up(["east", "west"])
        consul = info.consul_http_addr
        assert consul is not None
        clusters = dict(info.clusters)
        path, sync_topic, workload = start_application(args, work, clusters, consul, processes)
        say(f"the application reads on east; warming up {args.warmup_s:.0f} s")
        time.sleep(args.warmup_s)
        result["probe"] = {"committed": commit_probe(clusters["east"], args.partitions)}
        time.sleep(5)  # replication past the probe's positions
        result["translate_fresh"] = translate(path, PROBE_GROUP)
        say(f"translate, fresh: {result['translate_fresh']['wall_s']} s")
        result["sync_topic_fresh"] = sync_topic_end(clusters["west"], sync_topic)
        fresh = [
            m
            for i in range(args.rounds)
            for m in round_trip(path, consul, workload, logs, "fresh", i, args.settle_s)
        ]
        with_history(args, path, clusters["west"], sync_topic, result)
        history = [
            m
            for i in range(args.rounds)
            for m in round_trip(path, consul, workload, logs, "history", i, args.settle_s)
        ]
        result["sync_topic_end"] = sync_topic_end(clusters["west"], sync_topic)
        result["records_produced"] = workload.produced
        fresh_summary, history_summary = summarize(fresh), summarize(history)
        return result | {
            "fresh": {"summary": fresh_summary, "moves": fresh},
            "with_history": {"summary": history_summary, "moves": history},
            "goal": goal(fresh_summary, history_summary),
        }
    finally:
        if workload is not None:
            workload.close()
        stop(processes)
        env.down()
        if args.keep_logs:
            say(f"logs kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--case", choices=CASES, required=True)
    parser.add_argument("--rounds", type=int, default=3, help="failover + failback rounds each")
    parser.add_argument("--history", type=int, default=2_000_000, help="syncs added")
    parser.add_argument("--groups", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rate", type=int, default=200, help="records/s the producer writes")
    parser.add_argument("--lease-s", type=float, help="the application's lease (default: drsvc's)")
    parser.add_argument("--warmup-s", type=float, default=20.0)
    parser.add_argument("--settle-s", type=float, default=10.0, help="after each move")
    parser.add_argument("--results-dir", type=Path, default=RESULTS)
    parser.add_argument("--stem", help="file name without .json (default: scale-<case>-<date>)")
    parser.add_argument("--no-write", action="store_true", help="only print")
    parser.add_argument("--keep-logs", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="drsvc-scale-bench-"))
    say(f"work directory: {work}")
    measured = failover_history(args, work)
    result = {
        "benchmark": "scale",
        "case": args.case,
        "date": time.strftime("%Y-%m-%d"),
        # Where the results go says nothing about the run (and names this machine's paths).
        "settings": {k: v for k, v in vars(args).items() if k != "results_dir"},
        **measured,
        "load_average": os.getloadavg(),
        "cpus": os.cpu_count(),
        "machine": platform.platform(),
        **source_revision(ROOT),
        "took_s": round(time.time() - started, 1),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if not args.no_write:
        stem = args.stem or f"scale-{args.case}-{result['date']}"
        out = args.results_dir / f"{stem}.json"
        out.write_text(text + "\n")
        say(f"wrote {out}")


if __name__ == "__main__":
    main()
