"""``drsvc chaos suite --short`` on real brokers, real Consul servers (one per site and a
witness) and real Spark: every short scenario runs its workload and faults, heals, catches up,
is checked by the consistency job, and passes. It runs on the session's local environment (left
running for the other tests) and one Spark session."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.scenarios import suite
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.kafka.admin import admin_client, create_topic
from failover.slots import SlotNames

# The other exactly-once tests on the session's pair ask for this many slots, and a flow's slot
# count is fixed once it has run: the suite's exactly-once flows adopt it instead of their default.
PAIR_SLOTS = 4

pytestmark = pytest.mark.timeout(900)


def test_the_short_suite_passes(
    local_env: LocalEnvironment, cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    for source, target in (("east", "west"), ("west", "east")):
        create_topic(
            admin_client(cluster_pair.clusters[target]),
            SlotNames(source, target).slots_topic,
            partitions=PAIR_SLOTS,
            config={},
        )
    out = tmp_path / "chaos"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "chaos", "suite", "--short", "--json",
         "--out", str(out), "--state-dir", str(local_env.state_dir), "--keep-environment"],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.stdout.strip(), f"no verdict (exit {done.returncode}):\n{done.stderr[-4000:]}"
    summary = json.loads(done.stdout)
    print(f"chaos suite --short: {elapsed:.0f} s")
    for result in summary["scenarios"]:
        print(
            f"  {result['scenario']}: passed {result['passed']}, checks {result['checks']}, "
            f"took {result['elapsed_s']} s"
        )
    names = [r["scenario"] for r in summary["scenarios"]]
    assert names == [s.name for s in suite(short=True)]
    for result in summary["scenarios"]:
        assert result["passed"] is True, (
            f"{result['scenario']} failed: {'; '.join(result['reasons'])} "
            f"(checks {result['checks']}, took {result['elapsed_s']} s)"
        )
        assert result["checks"]["lost"] == 0 and result["checks"]["reordered"] == 0
        assert (out / result["scenario"] / "report.html").is_file()
    assert done.returncode == 0
    assert (out / "index.html").is_file()
