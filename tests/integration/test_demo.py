"""The README's main command: ``drsvc demo`` runs the whole service and the DR drill on its own
fresh local environment and ends with a passing verdict; the screen shows no raw client-library
lines. ``drsvc demo --secure`` runs the same drill on a secured environment (its own state
directory), every role under its own principal with only its grants and the API over HTTPS, and
no secret of the environment appears on its screen or in its logs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(1200)

RAW_CLIENT_LINE = re.compile(r"^%\d\|", re.MULTILINE)
#: what the demo wrote in its state directory, and the logs of the brokers and Consul agents it
#: ran (the secrets themselves are under secure/, the agents' configuration and data beside)
DEMO_OUTPUTS = ("*.log", "topology*.yaml", "run/**/*", "service-*/**/*", "history/**/*",
                "sites/*/*/logs/*.log", "consul/*/logs/*")  # fmt: skip


def _run_demo(tmp_path: Path, *options: str) -> tuple[subprocess.CompletedProcess[str], str]:
    state = tmp_path / "state"
    env_dir = state / ("demo-secure" if "--secure" in options else "demo")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "demo", *options, "--state-dir", str(state)],
            capture_output=True, text=True, timeout=840, check=False,
            env={**os.environ, "COLUMNS": "120"},
        )  # fmt: skip
    finally:
        subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "dev", "down", "--state-dir", str(env_dir)],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    screen = done.stdout + done.stderr
    (tmp_path / "screen.txt").write_text(screen)  # kept with the run's temporary directory
    return done, screen


def _drill_passed(done: subprocess.CompletedProcess[str], screen: str) -> None:
    assert done.returncode == 0, screen[-4000:]
    assert "verdict: PASSED" in screen
    for step in ("is active on west", "consumers read on west", "completed: orders-service is"
                 " active on east again"):  # fmt: skip
        assert step in screen, step
    assert not RAW_CLIENT_LINE.search(screen), "raw librdkafka lines reached the screen"
    assert "Spark: passed" in screen


def test_the_demo_drill_passes(tmp_path: Path) -> None:
    done, screen = _run_demo(tmp_path)

    _drill_passed(done, screen)
    assert list((tmp_path / "state" / "demo" / "history" / "produced").glob("part-*.parquet"))


@pytest.mark.secured_matrix  # several minutes: make test-secured runs it, make test does not
def test_the_secured_demo_drill_passes_and_shows_no_secret(tmp_path: Path) -> None:
    done, screen = _run_demo(tmp_path, "--secure")

    _drill_passed(done, screen)
    state = tmp_path / "state" / "demo-secure"
    secure = state / "secure"
    # the summary says it ran secured, and how to open the dashboard
    assert "secured run" in screen
    assert re.search(r"dashboard: https://127\.0\.0\.1:\d+/dashboard", screen)
    assert str(secure / "tls" / "ca.pem") in screen
    assert str(state / "api-token") in screen
    # each principal's roles ran apart, each role's topology names its password by file
    for run in (state, state / "service-replicator", state / "service-checkpoints"):
        assert (run / "run" / "roles.json").is_file(), run
    for role in ("replicator", "checkpoints", "executor", "application", "verifier"):
        topology = (state / f"topology-{role}.yaml").read_text()
        assert "SASL_SSL" in topology and "password_file" in topology
        assert "password:" not in topology
    # no secret on the screen or in anything the demo wrote
    needles = _secrets(secure) | {"API token": (state / "api-token").read_text().strip()}
    outputs = {"screen": screen.encode()} | {
        str(path): path.read_bytes()
        for pattern in DEMO_OUTPUTS
        for path in state.glob(pattern)
        if path.is_file()
    }
    assert any(name.endswith("drsvc-run.log") for name in outputs), sorted(outputs)
    assert any(name.endswith("server.log") for name in outputs), sorted(outputs)
    leaks = [
        f"{name} in {where}"
        for name, value in needles.items()
        for where, data in outputs.items()
        if value.encode() in data
    ]
    print(f"searched {len(outputs)} outputs for {len(needles)} secrets")
    assert not leaks, "secrets found:\n" + "\n".join(leaks)


def _secrets(secure: Path) -> dict[str, str]:
    """Every SCRAM password, Consul token and private key line the environment keeps."""
    found = {
        f"SCRAM password of {f.stem}": f.read_text().strip()
        for f in sorted((secure / "kafka").glob("*.password"))
    }
    for path in sorted((secure / "consul").rglob("*")):
        if path.is_file() and "accessor" not in path.name and path.read_text().strip():
            found[f"consul {path.relative_to(secure)}"] = path.read_text().strip()
    for key in sorted((secure / "tls").glob("*.key")):
        body = [line for line in key.read_text().splitlines() if line and "-----" not in line]
        found |= {f"{key.name} line {i}": line for i, line in enumerate(body) if len(line) >= 16}
    assert len(found) > 10, sorted(found)  # a search for nothing proves nothing
    return found
