"""Taking a migration over from MirrorMaker 2 (connect-mirror, dedicated mode, identity names) on
real brokers: refused while MirrorMaker runs; after it stopped, drsvc continues exactly where
its copy ended, so every source record is on the target once, in order: none lost, none copied
again; and ``migrate verify`` matches MirrorMaker's copies, which carry no provenance."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

from migration_support import StartProcess, drsvc
from replication_support import produce, read_all, sequence_records, topics_of, wait_for

from drsvc.devenv.components import load_components
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.settings import Settings
from failover.provenance import PROVENANCE_HEADER

LOG4J = """\
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


def start_mirror_maker(work: Path, east: str, west: str, pattern: str) -> subprocess.Popen[bytes]:
    """MirrorMaker 2, dedicated mode, east -> west with identity names, committing its progress
    every second."""
    props = {
        "clusters": "east, west",
        "east.bootstrap.servers": east,
        "west.bootstrap.servers": west,
        "east->west.enabled": "true",
        "west->east.enabled": "false",
        "east->west.topics": pattern,
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "tasks.max": "1",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "offset.flush.interval.ms": "1000",
        "emit.heartbeats.enabled": "false",
        "emit.checkpoints.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "refresh.groups.enabled": "false",
        "refresh.topics.interval.seconds": "2",
    }
    (work / "mm2.properties").write_text("".join(f"{k} = {v}\n" for k, v in props.items()))
    (work / "log4j2.yaml").write_text(LOG4J.format(log_file=work / "mm2.log"))
    libs = load_components(Settings.from_env().cache_dir).kafka.libs
    java = shutil.which("java") or "java"
    with (work / "mm2.stdout").open("wb") as out:
        return subprocess.Popen(
            [java, "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
             f"-Dlog4j2.configurationFile={work / 'log4j2.yaml'}", "-cp", str(libs / "*"),
             "org.apache.kafka.connect.mirror.MirrorMaker", str(work / "mm2.properties")],
            cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def test_take_over_from_mirror_maker_loses_and_recopies_nothing(  # noqa: PLR0915
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    started = time.monotonic()
    assert cluster_pair.consul_http_addr is not None
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    tag = uuid.uuid4().hex[:6]
    prefix, ns = f"m2{tag}", f"m2-{tag}"
    topic = f"{prefix}.orders"
    assert create_topic(admin_client(east), topic, 3)
    produce(east, topic, sequence_records(300, 3, tag="a"))
    topology = tmp_path / "mm2.yaml"
    topology.write_text(
        json.dumps(
            {
                "name": ns,
                "clusters": {"east": {"bootstrap_servers": east},
                             "west": {"bootstrap_servers": west}},
                "migrations": [{"name": "off-mm2", "source": "east", "target": "west",
                                "topics": {"include": [f"{prefix}\\..*"]}}],
            }
        )
    )  # fmt: skip
    env = {"DRSVC_CONSUL_HTTP_ADDR": cluster_pair.consul_http_addr}
    t = ["-t", str(topology)]

    mm2 = start_mirror_maker(tmp_path, east, west, f"{prefix}\\..*")
    try:
        # MirrorMaker's JVM and its Connect runtime start first: on a loaded CI host that alone
        # has taken over 90 s.
        wait_for(lambda: topic in topics_of(west), 180, "MirrorMaker to create the copy")
        wait_for(lambda: len(read_all(west, topic)) >= 300, 60, "MirrorMaker to copy")
        produce(east, topic, sequence_records(200, 3, first=300, tag="b"))
        wait_for(lambda: len(read_all(west, topic)) >= 500, 60, "MirrorMaker to copy more")
        # While MirrorMaker runs, taking over is refused and changes nothing.
        code, _doc, err = drsvc("migrate", "start", *t, "--take-over-mm2", "--prepare-only",
                                env=env)  # fmt: skip
        assert code == 1 and "MirrorMaker 2 still runs" in err, err
    finally:
        mm2.send_signal(signal.SIGTERM)  # a clean stop commits its progress
        mm2.wait(60)
    # Written after MirrorMaker stopped: only drsvc can copy these.
    produce(east, topic, sequence_records(200, 3, first=500, tag="c"))
    mirrored = len(read_all(west, topic))
    assert mirrored == 500

    copier = StartProcess(*t, "--take-over-mm2", "--progress-every-s", "1",
                          log_file=tmp_path / "start.log", env=env)  # fmt: skip
    try:
        wait_for(lambda: len(read_all(west, topic)) >= 700, 60, "drsvc to copy the rest")
        time.sleep(2.0)  # anything copied twice would arrive by now
    finally:
        assert copier.stop() == 0, copier.tail()
    log = copier.log_file.read_text()
    assert "MirrorMaker's committed progress" in log, log

    source, copies = read_all(east, topic), read_all(west, topic)
    assert len(copies) == len(source) == 700
    by_offset = {(r.partition, r.offset): r for r in copies}
    recopied = 0
    for r in source:
        copy = by_offset[(r.partition, r.offset)]
        assert (copy.key, copy.value, copy.timestamp) == (r.key, r.value, r.timestamp)
        assert [h for h in copy.headers if h[0] != PROVENANCE_HEADER] == r.headers
        made_by_drsvc = any(h[0] == PROVENANCE_HEADER for h in copy.headers)
        assert made_by_drsvc == (r.value or b"").startswith(b"c"), (r.partition, r.offset)
        recopied += made_by_drsvc and not (r.value or b"").startswith(b"c")
    assert recopied == 0
    code, status, err = drsvc("migrate", "status", *t, "--json", env=env)
    assert code == 0 and status["lag"] == 0, (status, err)
    assert sum(status["takeover"][topic].values()) == 500  # where drsvc started, per partition
    # The Spark comparison knows MirrorMaker's copies (no provenance) below the takeover start.
    code, verdict, err = drsvc("migrate", "verify", *t, "--json", env=env)
    assert code == 0 and verdict["passed"], (verdict, err[-3000:])
    totals = verdict["totals"]
    assert (totals["source_records"], totals["copies"]) == (700, 700), totals
    assert totals["missing"] == totals["target_only"] == totals["duplicates"] == 0, totals
    print(f"MirrorMaker takeover: {time.monotonic() - started:.1f}s")
