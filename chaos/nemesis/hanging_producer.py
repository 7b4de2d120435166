"""A transactional producer that begins a transaction, writes, and never commits.

Run as ``python -m chaos.nemesis.hanging_producer BOOTSTRAP TOPIC PRODUCER_ID COUNT TIMEOUT_MS``
by :class:`chaos.nemesis.transactions.HangingTransaction`, which kills it with SIGKILL. It prints
one JSON line per delivered record (where it landed and what it was), then ``open``, then sleeps:
the transaction stays open until the broker aborts it after ``TIMEOUT_MS``
(``transaction.timeout.ms``). Client security settings, if any, come as a JSON object in the
variable :data:`SETTINGS_VARIABLE`. Until then ``read_committed`` readers (replication workers among
them) cannot read past its first record in each partition it wrote to.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

from confluent_kafka import Producer

from drsvc.verify.identity import value_prefix

#: the environment variable holding the producer's client security settings (JSON)
SETTINGS_VARIABLE = "CHAOS_KAFKA_SETTINGS"


def main(argv: list[str]) -> None:
    bootstrap, topic, producer_id, count, timeout_ms = argv
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"chaos-hanging-{producer_id}",
            "transaction.timeout.ms": int(timeout_ms),
            "acks": "all",
            **json.loads(os.environ.get(SETTINGS_VARIABLE) or "{}"),
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    delivered: list[dict[str, Any]] = []

    def report(seq: int, value: bytes) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                delivered.append(
                    {
                        "seq": seq,
                        "partition": msg.partition(),
                        "offset": msg.offset(),
                        "value_sha256": hashlib.sha256(value).hexdigest(),
                        "value_size": len(value),
                        "timestamp_ms": msg.timestamp()[1],
                    }
                )

        return on_delivery

    for seq in range(int(count)):
        value = value_prefix(producer_id, seq) + b"never committed"
        producer.produce(topic, value, b"hanging", on_delivery=report(seq, value))
    producer.flush(30)
    for row in delivered:
        print(json.dumps(row), flush=True)
    print("open", flush=True)
    while True:  # the transaction hangs until this process is killed
        time.sleep(3600)


if __name__ == "__main__":
    main(sys.argv[1:])
