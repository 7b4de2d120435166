"""Micro-benchmark of the offset-sync format, the index and translation; prints JSON.

Scenario: one source partition replicated in runs of ``--records`` records. Each run ends with a
transaction marker on the target (exactly-once mode), so every run is one segment; every
``--restart-every`` runs the worker restarts half a run back (at-least-once re-copy). A second,
non-transactional scenario shows contiguous runs merging into one segment.

Reported (medians of ``--repeat`` rounds, timed in this process's CPU time so that other load on the
machine distorts them less):

* ``bytes_per_run``: index memory divided by runs applied (transactional and contiguous);
* ``sync_value_bytes``: size of one encoded sync of a contiguous batch;
* ``encode_per_s`` / ``decode_per_s`` / ``apply_per_s`` / ``build_per_s`` (decode and apply);
* ``downstream_per_s`` / ``upstream_per_s``: single translations of random committed offsets;
  ``downstream_batch_per_s`` through ``translate_downstream_batch``;
* snapshot size, and time to take and to restore one.

Run: ``python bench/translation_bench.py [--runs N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections.abc import Callable

from failover.offset_index import OffsetIndex, SyncPosition
from failover.offset_syncs import (
    OffsetSync,
    Segment,
    TopicPartition,
    decode_sync,
    encode_sync,
    encode_value,
)

TP = TopicPartition("orders", 0)
SOURCE_ID = bytes(range(16))
TARGET_ID = bytes(range(16, 32))


def make_syncs(runs: int, records: int, restart_every: int, marker: int) -> list[OffsetSync]:
    """Syncs of ``runs`` batches; ``marker`` target offsets between batches (0 or 1)."""
    syncs = []
    source = target = 0
    for i in range(runs):
        if restart_every and i and i % restart_every == 0:
            source -= records // 2  # at-least-once restart: re-copy half a batch
        segment = Segment(source, target, records)
        syncs.append(
            OffsetSync(TP.topic, 0, SOURCE_ID, TARGET_ID, 5, source, source + records, (segment,))
        )
        source += records
        target += records + marker
    return syncs


def median_rate(work: Callable[[], int], repeat: int) -> float:
    """Median of ``items / seconds`` over ``repeat`` rounds after one warm-up round."""
    work()
    rates = []
    for _ in range(repeat):
        start = time.process_time()
        items = work()
        rates.append(items / (time.process_time() - start))
    return statistics.median(rates)


def median_seconds(work: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return statistics.median(times)


def build_index(syncs: list[OffsetSync]) -> OffsetIndex:
    index = OffsetIndex()
    for position, sync in enumerate(syncs):
        index.apply(sync, SyncPosition(0, position))
    return index


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=200_000, help="sync runs per partition")
    parser.add_argument("--records", type=int, default=500, help="records per run")
    parser.add_argument("--restart-every", type=int, default=10_000, help="runs between restarts")
    parser.add_argument("--queries", type=int, default=500_000, help="translations per round")
    parser.add_argument("--repeat", type=int, default=7, help="rounds; medians are reported")
    args = parser.parse_args()

    transactional = make_syncs(args.runs, args.records, args.restart_every, marker=1)
    contiguous = make_syncs(args.runs, args.records, 0, marker=0)
    messages = [encode_sync(sync) for sync in transactional]

    index = build_index(transactional)
    plain = build_index(contiguous)
    frontier = index.frontier(TP)
    assert frontier is not None
    rng = random.Random(42)
    source_queries = [rng.randrange(0, frontier + 1) for _ in range(args.queries)]
    last = transactional[-1].segments[-1]
    target_queries = [rng.randrange(1, last.target_end + 1) for _ in range(args.queries)]

    def downstream() -> int:
        translate = index.translate_downstream
        for offset in source_queries:
            translate(TP, offset)
        return len(source_queries)

    def upstream() -> int:
        translate = index.translate_upstream
        for offset in target_queries:
            translate(TP, offset)
        return len(target_queries)

    def batch() -> int:
        return len(index.translate_downstream_batch(TP, source_queries))

    def encode() -> int:
        for sync in transactional:
            encode_sync(sync)
        return len(transactional)

    def decode() -> int:
        for key, value in messages:
            decode_sync(key, value)
        return len(messages)

    def apply() -> int:
        build_index(transactional)
        return len(transactional)

    def decode_and_apply() -> int:
        fresh = OffsetIndex()
        for position, (key, value) in enumerate(messages):
            fresh.apply(decode_sync(key, value), SyncPosition(0, position))
        return len(messages)

    snapshot = index.snapshot()
    exact = sum(index.translate_downstream(TP, c).exact for c in source_queries[:10_000])
    result = {
        "python": platform.python_version(),
        "runs": args.runs,
        "records_per_run": args.records,
        "restart_every": args.restart_every,
        "segments": index.segment_count(),
        "bytes_per_run": round(index.memory_bytes() / args.runs, 2),
        "bytes_per_run_contiguous": round(plain.memory_bytes() / args.runs, 4),
        "sync_value_bytes": len(encode_value(transactional[0])),
        "encode_per_s": round(median_rate(encode, args.repeat)),
        "decode_per_s": round(median_rate(decode, args.repeat)),
        "apply_per_s": round(median_rate(apply, args.repeat)),
        "build_per_s": round(median_rate(decode_and_apply, args.repeat)),
        "downstream_per_s": round(median_rate(downstream, args.repeat)),
        "downstream_batch_per_s": round(median_rate(batch, args.repeat)),
        "upstream_per_s": round(median_rate(upstream, args.repeat)),
        "exact_share_of_sampled_downstream": exact / 10_000,
        "snapshot_bytes": len(snapshot),
        "snapshot_seconds": round(median_seconds(index.snapshot, args.repeat), 4),
        "restore_seconds": round(
            median_seconds(lambda: OffsetIndex.from_snapshot(snapshot), args.repeat), 4
        ),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
