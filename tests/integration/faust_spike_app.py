"""Spike: a minimal faust app (one agent, one changelog-backed table) against Kafka 4.x.

Test support for ``test_faust_spike.py``, not part of drsvc: it keeps the findings of
``docs/faust-on-kafka4.md`` checked against the pinned faust, aiokafka and Kafka versions.

The app counts words read from an input topic in a table and emits ``word=count`` for every word
it sees to an output topic. Input records should be keyed by the word so that a word always lands
in the same partition: the table is co-partitioned with the input topic and each count is kept
(and written to the changelog) in the partition of the event that updated it.

Nothing is built at import time. Run it as a worker process with::

    python tests/integration/faust_spike_app.py --bootstrap HOST:PORT --app-id ID --input IN \
        --output OUT

The worker runs its own event loop and stops cleanly on SIGTERM or SIGINT. With ``--ready-file``
it writes that file each time a rebalance has fully completed (table recovery included), which is
when the worker processes its input again.

Known faust limitation (see docs/faust-on-kafka4.md): when a rebalance has to restore a table from
its changelog while input records are already waiting, faust 0.15.3 can drop or repeat some of
them. It does not depend on the broker version.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import faust

TABLE_NAME = "word-counts"
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
PROCESSING_GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)


def changelog_topic(app_id: str) -> str:
    """Name of the changelog topic faust declares for the word-count table of ``app_id``."""
    return f"{app_id}-{TABLE_NAME}-changelog"


def broker_urls(bootstrap_servers: str) -> list[str]:
    """``host:port,host:port`` as the list of ``kafka://`` URLs faust expects."""
    servers = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
    if not servers:
        raise ValueError("no bootstrap servers given")
    return [f"kafka://{server}" for server in servers]


class ReadyMarker(faust.Sensor):
    """Sensor writing ``path`` whenever a rebalance (with table recovery) has completed.

    The file holds the number of rebalances so far; it is replaced atomically.
    """

    def __init__(self, path: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.path = path
        self.completed = 0

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        self.completed += 1
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(f"{self.completed}\n")
        os.replace(tmp, self.path)


def build_spike_app(
    bootstrap_servers: str,
    app_id: str,
    input_topic: str,
    output_topic: str,
    *,
    partitions: int = 1,
    replication_factor: int = 1,
    processing_guarantee: str = AT_LEAST_ONCE,
    ready_file: Path | None = None,
) -> Any:
    """Build the word-count app (a ``faust.App``; typed ``Any`` because faust is untyped).

    ``partitions`` must equal the partition count of ``input_topic``: it is used for the table
    (and so for its changelog topic), which faust requires to be co-partitioned with the stream.
    The input and output topics must already exist; faust declares its own internal topics
    (the table changelog and the assignor's leader topic) with ``replication_factor``.
    ``processing_guarantee`` is faust's ``at_least_once`` (default) or ``exactly_once``
    (transactional producers, one per assigned input partition).
    """
    if processing_guarantee not in PROCESSING_GUARANTEES:
        raise ValueError(f"unknown processing guarantee {processing_guarantee!r}")
    app: Any = faust.App(
        app_id,
        broker=broker_urls(bootstrap_servers),
        store="memory://",
        web_enabled=False,
        autodiscover=False,
        topic_partitions=partitions,
        topic_replication_factor=replication_factor,
        consumer_auto_offset_reset="earliest",
        # Commit often so that a restarted worker does not reprocess much.
        broker_commit_every=100,
        broker_commit_interval=1.0,
        # The single-worker spike has nobody to keep standby copies of the table.
        table_standby_replicas=0,
        processing_guarantee=processing_guarantee,
    )
    if ready_file is not None:
        app.sensors.add(ReadyMarker(ready_file))
    words = app.topic(
        input_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        internal=False,
    )
    counts_out = app.topic(
        output_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        internal=False,
    )
    counts = app.Table(TABLE_NAME, default=int, partitions=partitions)

    async def count_words(stream: AsyncIterator[bytes]) -> None:
        async for raw in stream:
            word = raw.decode("utf-8").strip()
            if not word:
                continue
            counts[word] += 1
            await counts_out.send(key=word.encode(), value=f"{word}={counts[word]}".encode())

    app.agent(words, name="count-words")(count_words)
    return app


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the faust word-count spike as a worker.")
    parser.add_argument("--bootstrap", required=True, help="bootstrap servers, host:port[,...]")
    parser.add_argument("--app-id", required=True, help="faust app id (also the consumer group)")
    parser.add_argument("--input", required=True, help="input topic (must exist)")
    parser.add_argument("--output", required=True, help="output topic (must exist)")
    parser.add_argument("--partitions", type=int, default=1, help="input topic partition count")
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument(
        "--processing-guarantee", choices=PROCESSING_GUARANTEES, default=AT_LEAST_ONCE
    )
    parser.add_argument(
        "--ready-file", type=Path, help="file written each time a rebalance has completed"
    )
    parser.add_argument("--loglevel", default="info")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Run one worker until SIGTERM/SIGINT (never returns: the worker exits the process)."""
    args = parse_args(argv)
    app = build_spike_app(
        args.bootstrap,
        args.app_id,
        args.input,
        args.output,
        partitions=args.partitions,
        replication_factor=args.replication_factor,
        processing_guarantee=args.processing_guarantee,
        ready_file=args.ready_file,
    )
    worker: Any = faust.Worker(app, loglevel=args.loglevel)
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
