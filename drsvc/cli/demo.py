"""``drsvc demo``: the main job on the embedded default, end to end, in under a minute.

It starts (or reuses) the local clusters ``east`` and ``west`` with Consul, writes sequence-numbered
orders on both, runs both flows of ``topologies/active-active.yaml`` until every record is copied,
and prints what landed where, with the offset syncs that map each copy.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Annotated

import typer
from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console
from rich.table import Table

from drsvc.adapters.kafka_admin import admin_client, create_topic
from drsvc.cli.common import StateDirOption, configure_logging
from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.smoke import run_smoke
from drsvc.errors import LocalEnvError
from drsvc.runtime.replication.engine import ReplicationEngine
from drsvc.runtime.replication.settings import worker_settings
from drsvc.settings import Settings
from drsvc.topology.loader import load_topology
from failover import naming

DEFAULT_TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "active-active.yaml"


def _end_offsets(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": naming.DEMO_READER_GROUP})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return 0
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.partitions
        )
    finally:
        consumer.close()


def _produce(bootstrap: str, topic: str, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for seq in range(count):
        producer.produce(topic, f"{tag}-{seq}".encode(), f"order-{seq}".encode())
        if seq % 5000 == 0:
            producer.poll(0)
    if producer.flush(60):
        raise LocalEnvError(f"could not write the demo records to {topic}")


def register(app: typer.Typer) -> None:
    @app.command()
    def demo(
        records: Annotated[
            int, typer.Option(help="Orders to write on each cluster.", min=1)
        ] = 5000,
        topology_file: Annotated[
            Path, typer.Option("--topology", "-t", help="Active/active topology to run.")
        ] = DEFAULT_TOPOLOGY,
        state_dir: StateDirOption = None,
    ) -> None:
        """Start east and west, write orders on both, replicate both ways, show the result."""
        configure_logging(verbose=False)
        err = Console(stderr=True)
        env = LocalEnvironment(Settings.from_env(state_dir=state_dir))
        info = env.up(["east", "west"], progress=lambda m: err.print(f"[dim]dev:[/dim] {m}"))
        run_smoke(info)
        topology = load_topology(topology_file)
        topic = f"demo-orders-{int(time.time())}"
        for alias in ("east", "west"):
            create_topic(admin_client(info.clusters[alias]), topic, partitions=3)
            _produce(info.clusters[alias], topic, records, alias)
        workers = [
            ReplicationEngine(
                worker_settings(topology, flow, info.clusters, refresh_interval_s=1.0)
            )
            for flow in topology.flows
        ]
        threads = [threading.Thread(target=w.run, daemon=True) for w in workers]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        try:
            deadline = started + 120
            while time.monotonic() < deadline:
                if all(
                    _end_offsets(info.clusters[target], f"{source}.{topic}") >= records
                    for source, target in (("east", "west"), ("west", "east"))
                ):
                    break
                time.sleep(0.5)
            elapsed = time.monotonic() - started
        finally:
            for worker in workers:
                worker.stop()
            for thread in threads:
                thread.join(60)
        table = Table(title=f"drsvc demo: {records} orders written on each cluster")
        for column in ("flow", "remote topic", "records on target", "syncs written", "rewinds"):
            table.add_column(column)
        for flow, worker in zip(topology.flows, workers, strict=True):
            remote = f"{flow.source}.{topic}"
            table.add_row(
                flow.id,
                f"{remote} on {flow.target}",
                str(_end_offsets(info.clusters[flow.target], remote)),
                str(worker.stats.syncs_written),
                str(worker.stats.rewinds),
            )
        Console().print(table)
        typer.echo(f"replicated both ways in {elapsed:.1f}s; stop with 'drsvc dev down'")
        missing = [
            flow.id
            for flow in topology.flows
            if _end_offsets(info.clusters[flow.target], f"{flow.source}.{topic}") < records
        ]
        if missing:
            raise LocalEnvError(f"flows {', '.join(missing)} did not copy every record in time")
