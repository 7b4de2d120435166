"""The dashboard's pure decisions (``drsvc/api/static/dashboard_logic.js``), tested in Node: a
failed refresh keeps the last good answer with its age, unknown values show as a dash, the lost
count follows the answer's exactness. Skipped, saying why, where Node is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from importlib.resources import files
from pathlib import Path

import pytest

NODE = shutil.which("node")
TESTS = Path(__file__).parent / "js" / "dashboard_logic.test.js"


@pytest.mark.skipif(NODE is None, reason="node is not installed: the dashboard's JS is untested")
def test_the_dashboard_logic_passes_its_node_tests() -> None:
    assert NODE is not None
    module = Path(str(files("drsvc.api").joinpath("static/dashboard_logic.js")))
    done = subprocess.run(
        [NODE, "--test", str(TESTS)],
        env={**os.environ, "DASHBOARD_LOGIC": str(module)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "# fail 0" in done.stdout, done.stdout
