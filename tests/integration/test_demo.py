"""The README's main command: ``drsvc demo`` runs the whole service and the DR drill on its own
fresh local environment and ends with a passing verdict; the screen shows no raw client-library
lines."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(1200)

RAW_CLIENT_LINE = re.compile(r"^%\d\|", re.MULTILINE)


def test_the_demo_drill_passes(tmp_path: Path) -> None:
    state = tmp_path / "state"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "demo", "--state-dir", str(state)],
            capture_output=True, text=True, timeout=840, check=False,
            env={**os.environ, "COLUMNS": "120"},
        )  # fmt: skip
    finally:
        subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "dev", "down", "--state-dir",
             str(state / "demo")],
            capture_output=True, timeout=120, check=False,
        )  # fmt: skip
    screen = done.stdout + done.stderr
    (tmp_path / "screen.txt").write_text(screen)  # kept with the run's temporary directory
    assert done.returncode == 0, screen[-4000:]
    assert "verdict: PASSED" in screen
    for step in ("is active on west", "consumers read on west", "completed: orders-service is"
                 " active on east again"):  # fmt: skip
        assert step in screen, step
    assert not RAW_CLIENT_LINE.search(screen), "raw librdkafka lines reached the screen"
    assert "Spark: passed" in screen
    assert list((state / "demo" / "history" / "produced").glob("part-*.parquet"))
