"""Reads a logical topic on an aggregate cluster with drsvc.client and prints, per origin
cluster, how many records it read and how far behind it is.

    python examples/aggregate_feed.py -t topologies/aggregation.yaml --app central-orders \\
        --topic orders [--group G] [--idle-exit-s S] [--stop-after N] [--json]

Every source's copy (``east.orders``, ``west.orders`` ...) and the aggregate's own ``orders`` are
read as one topic; a source added to the topology while it runs is read too, without a restart.
Each record's origin comes from its provenance header (``drsvc.client.origin_of``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

from drsvc.client import FailoverConsumer


def lag_by_origin(consumer: FailoverConsumer, origin_of_topic: dict[str, str]) -> dict[str, int]:
    """Records not read yet, per origin (of the partitions this member reads)."""
    lag: Counter[str] = Counter()
    for (topic, _partition), behind in consumer.lag().items():
        lag[origin_of_topic.get(topic, topic)] += behind
    return dict(lag)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-t", "--topology", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--topic", required=True, help="the logical topic (no prefix)")
    parser.add_argument("--group", help="consumer group (default: the application's first)")
    parser.add_argument("--consul", help="Consul host:port (default as the CLI finds it)")
    parser.add_argument(
        "--idle-exit-s",
        type=float,
        default=0.0,
        help="stop after this long without a record (0: run until Ctrl-C)",
    )
    parser.add_argument("--stop-after", type=int, default=0, help="stop after reading N records")
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args(argv)

    consumer = FailoverConsumer(
        args.app, args.topology,
        {"group.id": args.group or f"{args.app}-feed", "auto.offset.reset": "earliest"},
        consul=args.consul,
    )  # fmt: skip
    consumer.subscribe([args.topic])
    counts: Counter[str] = Counter()
    origin_of_topic: dict[str, str] = {}
    last_record = time.monotonic()
    next_report = time.monotonic() + 2
    try:
        while True:
            msg = consumer.poll(0.5)
            now = time.monotonic()
            if msg is not None and msg.error() is None:
                origin = consumer.origin_of(msg)
                counts[origin.cluster or "?"] += 1
                origin_of_topic[msg.topic() or ""] = origin.cluster or "?"
                last_record = now
            if args.idle_exit_s and now - last_record > args.idle_exit_s:
                break
            if args.stop_after and sum(counts.values()) >= args.stop_after:
                break
            if not args.json and now >= next_report:
                next_report = now + 2
                lag = lag_by_origin(consumer, origin_of_topic)
                line = "  ".join(
                    f"{o}: {counts[o]} read, lag {lag.get(o, 0)}" for o in sorted(counts)
                )
                print(f"[{consumer.cluster}] {line}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        lag = lag_by_origin(consumer, origin_of_topic)
        consumer.close()
    if args.json:
        print(json.dumps({"counts": dict(counts), "lag": lag}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
