"""One chaos scenario on secured clusters, as ``drsvc chaos run --secure`` runs it: SASL_SSL
only, ACLs that allow nothing by default, each role of drsvc under its own principal with only
the grants ``failover.kafka_acls.role_grants`` gives it (a ``drsvc run`` per principal), the
application's producer and consumer as the application's principal, Spark's check as the
verifier's.

The scenario is the site-loss drill: every broker of site east killed with SIGKILL under load,
the DR controller fails the application over to west, east returns, is recovered, and the
application fails back. Nothing acknowledged may be lost or reordered, and the group never
skips a record across the moves (it may re-read after the unplanned one, from its last
checkpoint). Its own secured environment (in the test's directory)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.scenarios import find

SCENARIO = "site-loss-failback-alo"

# About 5 min on a quiet 2-core machine; under other test runs the drill's waits stretch, and a
# run cut short by the timeout says nothing of why (the command's verdict does).
pytestmark = pytest.mark.timeout(900)


def test_the_site_loss_drill_passes_on_secured_clusters(tmp_path: Path) -> None:
    out = tmp_path / "chaos"
    state_dir = tmp_path / "secured-env"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "chaos", "run", SCENARIO, "--secure", "--json",
         "--out", str(out), "--state-dir", str(state_dir)],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.stdout.strip(), f"no verdict (exit {done.returncode}):\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout)
    checks = result["checks"]
    print(f"chaos run {SCENARIO} --secure: {elapsed:.0f} s, passed {result['passed']}")
    print(f"  checks {checks}")
    rpo = f"{result['rpo_records']}/{result['rpo_reported_records']}"
    print(f"  rpo {rpo}, rto {result['rto_seconds']} s")
    details = json.loads((out / SCENARIO / "result.json").read_text())["details"]
    print(f"  timings {details['timings_s']}, workload {details['workload']}")
    assert result["passed"] is True, (
        f"{SCENARIO} failed: {'; '.join(details['reasons'])} (checks {checks}); "
        f"log tail:\n{done.stderr[-3000:]}"
    )
    assert checks["lost"] == 0 and checks["reordered"] == 0
    # the unplanned failover may re-read (at least once, the group's last checkpoint), never skip
    assert checks["skipped_after_failover"] == 0
    assert find(SCENARIO).failovers_expected == 2
    # every role ran apart, under its own principal
    for role in ("replicator", "checkpoints", "executor", "application", "verifier"):
        topology = (out / SCENARIO / f"topology-{role}.yaml").read_text()
        assert "SASL_SSL" in topology and "password_file" in topology
        assert "password:" not in topology
    for run in ("service", "service-replicator", "service-checkpoints"):
        assert (out / SCENARIO / run / "run" / "roles.json").is_file()
    assert done.returncode == 0
