"""Profile one replication worker while it drains preloaded records.

::

    .venv/bin/python bench/profile_worker.py [--records 300000] [--size 100]
        [--profiler pyinstrument|cprofile] [--output FILE] [--state-dir DIR]

Preloads ``--records`` records of ``--size`` bytes into a fresh topic on ``bsrc`` (the clusters of
``replication_bench.py``: started in a temporary directory, or reused from ``--state-dir``), then
runs a ``ReplicationEngine`` in this process, on the main thread, under the profiler until it has
copied them all. The profile goes to ``--output`` (pyinstrument: ``.html`` or text; cProfile: a
``pstats`` file) or, as text, to stdout; a one-line summary (records/s, CPU) goes to stderr.

pyinstrument samples the stack (1 ms by default) and adds little overhead, so its percentages are
close to the unprofiled worker's; cProfile counts every call exactly but slows small calls down a
lot, so use it for call counts rather than for shares of time.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from replication_bench import (
    FLOW,
    SOURCE,
    local_environment,
    new_topic,
    preload,
    say,
    topology_document,
)

from drsvc.kafka.admin import admin_client
from drsvc.runtime.replication.engine import ReplicationEngine
from drsvc.runtime.replication.settings import worker_settings
from drsvc.topology.models import Topology


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def make_worker(
    clusters: dict[str, str], topic: str, overrides: dict[str, object] | None = None
) -> ReplicationEngine:
    topology = Topology.model_validate(topology_document(clusters, f"^{topic}$"))
    flow = next(f for f in topology.flows if f.id == FLOW)
    settings = worker_settings(
        topology, flow, {}, group_id=f"drsvc-profile.{topic}", **(overrides or {})
    )
    return ReplicationEngine(settings)


def parse_override(text: str) -> tuple[str, object]:
    """``fetch_queue_kbytes=131072`` -> a WorkerSettings field and its value (int, float or
    string): experiments with settings drsvc does not expose, never a recommendation."""
    key, _, raw = text.partition("=")
    value: object = raw
    for kind in (int, float):
        try:
            value = kind(raw)
            break
        except ValueError:
            continue
    return key.strip(), value


def profiled_drain(
    worker: ReplicationEngine, records: int, profiler: str
) -> tuple[Any, dict[str, Any]]:
    """Run ``worker`` under ``profiler`` until ``records`` are copied; return the profiler and
    the drain's numbers (from the first copied record to the end of the run)."""
    marks: dict[str, float] = {}

    def on_cycle(w: ReplicationEngine) -> None:
        copied = w.stats.records_copied
        if copied and "first" not in marks:
            marks["first"], marks["cpu_first"] = time.monotonic(), cpu_s()
        if copied >= records:
            w.stop()

    if profiler == "pyinstrument":
        from pyinstrument import Profiler  # noqa: PLC0415 (optional dev dependency)

        prof: Any = Profiler(interval=0.001)
    else:
        prof = cProfile.Profile()
    prof.start() if profiler == "pyinstrument" else prof.enable()
    try:
        worker.run(on_cycle=on_cycle)
    finally:
        prof.stop() if profiler == "pyinstrument" else prof.disable()
    seconds = time.monotonic() - marks["first"]
    summary = {
        "records": worker.stats.records_copied,
        "seconds": round(seconds, 3),
        "records_per_s": round(worker.stats.records_copied / seconds),
        "cpu_s_per_million": round((cpu_s() - marks["cpu_first"]) / records * 1e6, 2),
        "profiler": profiler,
        "stats": worker.stats.__dict__,
    }
    return prof, summary


def write_profile(prof: Any, profiler: str, output: Path | None) -> None:
    if profiler == "pyinstrument":
        if output is not None and output.suffix == ".html":
            output.write_text(prof.output_html())
            return
        text = prof.output_text(unicode=False, color=False, show_all=False)
    else:
        if output is not None:
            prof.dump_stats(str(output))
            return
        stats = pstats.Stats(prof, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(30)
        return
    if output is not None:
        output.write_text(text)
    else:
        print(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--profiler", choices=("pyinstrument", "cprofile"), default="pyinstrument")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a WorkerSettings field (experiments only; repeatable)",
    )
    args = parser.parse_args(argv)
    overrides = dict(parse_override(text) for text in args.set)
    with local_environment(args.state_dir) as env:
        clusters = env.clusters
        topic = f"bench-profile-{args.size}b-{uuid.uuid4().hex[:8]}"
        new_topic(admin_client(clusters[SOURCE]), topic, args.partitions)
        say(f"preloading {args.records} records of {args.size} bytes into {topic}")
        preload(clusters[SOURCE], topic, args.partitions, args.records, args.size)
        say(f"draining under {args.profiler}")
        for attempt in range(1, 4):
            worker = make_worker(clusters, topic, overrides)
            try:
                prof, summary = profiled_drain(worker, args.records, args.profiler)
                break
            except KafkaException as err:
                # A worker that fails while starting (before any copy) is retried, like the
                # benchmark does, and said so: the profile is about the drain.
                if worker.stats.records_copied or attempt == 3:
                    raise
                say(f"worker failed while starting ({err}); starting another")
        write_profile(prof, args.profiler, args.output)
        summary["overrides"] = overrides
        print(json.dumps(summary), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
