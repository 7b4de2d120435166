"""Running scenarios on one environment and one Spark session: ``chaos run`` and ``chaos suite``.

Results go under ``out_dir``: per scenario ``<name>/report.html``, ``<name>/result.json`` and its
histories; for a suite also ``verdicts.json`` (every scenario's document) and ``index.html``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chaos.access import principal_of
from chaos.report.html import build_index
from chaos.runner import APP, run_scenario
from chaos.scenarios import Scenario
from chaos.world import Progress, World


def run_many(
    scenarios: Sequence[Scenario],
    seed: int,
    state_dir: Path,
    out_dir: Path,
    progress: Progress,
    master: str = "local[2]",
    keep_environment: bool = False,
    secure: bool = False,
) -> dict[str, Any]:
    """Run ``scenarios`` in order; scenarios that need links on an environment without them are
    listed as skipped, never as passed. ``secure``: on secured clusters, each process under its
    role's principal (:mod:`chaos.access`)."""
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    _log_to(out_dir / "chaos.log")
    world = World(
        state_dir=state_dir,
        out_dir=out_dir,
        master=master,
        progress=progress,
        secure=secure,
        principals=(principal_of("application", APP),),
    )
    results: list[dict[str, Any]] = []
    skipped: list[dict[str, str]] = []
    try:
        secured = "secured " if secure else ""
        progress(
            f"starting the {secured}local environment (east, west, Consul per site and a witness)"
        )
        world.up(fresh=not keep_environment)
        for scenario in scenarios:
            if scenario.needs_links and world.links is None:
                skipped.append({"scenario": scenario.name, "reason": "needs links between sites"})
                progress(f"{scenario.name}: skipped (needs links between sites)")
                continue
            progress(f"{scenario.name}: starting ({scenario.delivery})")
            outcome = run_scenario(scenario, seed, world)
            document = dict(outcome.document)
            word = "passed" if document["passed"] else f"FAILED: {'; '.join(outcome.reasons)}"
            progress(f"{scenario.name}: {word} ({outcome.elapsed_s:.0f} s)")
            results.append(
                {
                    **document,
                    "delivery": scenario.delivery,
                    "faults": list(scenario.faults),
                    "elapsed_s": round(outcome.elapsed_s, 1),
                    "report_link": f"{scenario.name}/report.html",
                    "reasons": outcome.reasons,
                }
            )
    finally:
        world.close(keep_environment=keep_environment)
    summary = {
        "passed": bool(results) and all(r["passed"] for r in results),
        "scenarios": results,
        "skipped": skipped,
        "elapsed_s": round(time.monotonic() - started, 1),
        "spark_start_s": round(world.spark_start_s, 1),
        "secure": secure,
    }
    (out_dir / "verdicts.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out_dir / "index.html").write_text(build_index(results, "drsvc chaos suite"))
    return summary


def _log_to(path: Path) -> None:
    """What this process logs (the clients' and librdkafka's lines included) goes to a file."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    for noisy in ("py4j", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
