"""The verification as ``spark-submit`` runs it: this file is the application.

``spark-submit --master URL --jars KAFKA_SOURCE_JARS .../drsvc/verify/submit.py -t TOPOLOGY
--history DIR [--exactly-once] [--max-hops N] [--sample N]`` checks what ``drsvc verify`` checks,
on the master, jars and settings ``spark-submit`` was given (``--packages`` instead of
``--jars`` on a real cluster), prints the verdict as one JSON object and exits 1 when a check
fails, 2 when the arguments or the topology are wrong. Every cluster of the topology must name
its ``bootstrap_servers`` (a submitted job does not look for a local environment). See
``docs/chaos.md``.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    # Run as a file: its directory comes first on sys.path, where it must not shadow a package.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from drsvc.errors import ConfigError
from drsvc.topology.loader import load_topology
from drsvc.topology.models import Topology
from drsvc.verify import job
from drsvc.verify.kafka_options import cluster_read_options
from drsvc.verify.spark import DEFAULT_SHUFFLE_PARTITIONS, verification_session

APP_NAME = "drsvc-verify"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="submit.py",
        description="drsvc verify as a spark-submit application (see docs/chaos.md).",
    )
    parser.add_argument("-t", "--topology", type=Path, required=True, help="Topology file.")
    parser.add_argument("--history", type=Path, required=True, help="History directory.")
    parser.add_argument("--exactly-once", action="store_true", help="Duplicates fail the run.")
    parser.add_argument("--max-hops", type=int, default=1, help="Most flows a record may cross.")
    parser.add_argument("--sample", type=int, default=10, help="Violations shown per check.")
    parser.add_argument(
        "--shuffle-partitions", type=int, default=DEFAULT_SHUFFLE_PARTITIONS, help="Spark's."
    )
    return parser.parse_args(list(argv))


def bootstrap_of(topology_file: Path) -> tuple[Topology, dict[str, str]]:
    """The topology and each cluster's ``bootstrap_servers``, which it must name."""
    topology = load_topology(topology_file)
    missing = sorted(a for a, c in topology.clusters.items() if c.bootstrap_servers is None)
    if missing:
        raise ConfigError(
            f"{topology_file}: cluster(s) {', '.join(missing)} name no bootstrap_servers "
            "(a submitted verification reads the clusters the topology names)"
        )
    return topology, {a: str(c.bootstrap_servers) for a, c in topology.clusters.items()}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if not args.history.is_dir():
            raise ConfigError(f"history directory {args.history} does not exist")
        topology, bootstrap = bootstrap_of(args.topology)
        kafka_options = cluster_read_options(topology, bootstrap)
    except ConfigError as err:
        print(f"drsvc verify: {err}", file=sys.stderr)
        return 2
    # master None: spark-submit's, with its --jars or --packages for the Kafka source
    with verification_session(
        None, app_name=APP_NAME, shuffle_partitions=args.shuffle_partitions
    ) as spark:
        verdict = job.check_history(
            spark,
            topology,
            bootstrap,
            args.history,
            kafka_options,
            max_hops=args.max_hops,
            exactly_once=args.exactly_once,
            sample=args.sample,
        )
    print(json.dumps(verdict.as_dict(), indent=2, sort_keys=False))
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
