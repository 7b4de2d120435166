"""An application's following producer in a process of its own, so that a nemesis can freeze it
(SIGSTOP) with its queue full and thaw it later.

Run as ``python -m chaos.workload.producer_process APP TOPOLOGY TOPIC PRODUCER_ID HISTORY_DIR
CONSUL RATE LINGER_MS SEED``: a :class:`~chaos.workload.following.FollowingProducer` lingering
``LINGER_MS`` (records wait that long in its queue before they are sent) at ``RATE`` records per
second, until SIGTERM; then it closes (what it cannot deliver is handed back, never logged as
acknowledged), writes its ``produced`` history and prints its counts as one JSON line.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from pathlib import Path

from chaos.workload.following import FollowingProducer
from chaos.workload.shapes import Shape


def main(argv: list[str]) -> int:
    app, topology, topic, producer_id, history, consul, rate, linger_ms, seed = argv
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    producer = FollowingProducer(
        app,
        Path(topology),
        topic,
        producer_id,
        Path(history),
        consul,
        float(rate),
        Shape(value_size_median=64, value_size_max=1024),
        int(seed),
        config={"linger.ms": int(linger_ms), "batch.num.messages": 100_000},
    )
    producer.start()
    stop.wait()
    producer.stop()
    print(
        json.dumps(
            {
                "acknowledged": producer.acknowledged,
                "failed": producer.failed,
                "errors": producer.errors[:5],
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
