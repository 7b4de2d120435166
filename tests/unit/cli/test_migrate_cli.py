"""``drsvc migrate plan``: the table, and bad input refused before any cluster is read."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from drsvc.cli.main import EXIT_BAD_INPUT, main
from drsvc.cli.migrate import render
from drsvc.runtime.migration.plan_reader import MigrationPlanReport
from drsvc.topology.models import Migration
from failover.migration_plan import SourceTopic, TargetCluster, TargetTopic, plan_migration

# Unreachable addresses: these tests must fail before anything connects.
TOPOLOGY = """
name: mig
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
"""

TWO_MIGRATIONS = """
migrations:
  - {name: a, source: east, target: west}
  - {name: b, source: west, target: east}
"""


def run(tmp_path: Path, text: str, *args: str, capsys: pytest.CaptureFixture[str]) -> str:
    path = tmp_path / "t.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit) as exited:
        main(["migrate", "plan", "-t", str(path), *args])
    assert exited.value.code == EXIT_BAD_INPUT
    return capsys.readouterr().err


def test_no_migration_in_the_topology_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "has 0 migrations" in run(tmp_path, TOPOLOGY, capsys=capsys)


def test_two_migrations_need_a_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = run(tmp_path, TOPOLOGY + TWO_MIGRATIONS, capsys=capsys)
    assert "name one with --migration (known: a, b)" in err


def test_an_unknown_migration_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = run(tmp_path, TOPOLOGY + TWO_MIGRATIONS, "--migration", "c", capsys=capsys)
    assert "no migration 'c'" in err


def test_an_invalid_migration_section_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = TOPOLOGY + "migrations: [{name: m, source: east, target: east}]\n"
    assert "migrations[0]: source and target are both 'east'" in run(tmp_path, bad, capsys=capsys)


def test_the_table_shows_each_decision_and_the_totals() -> None:
    plan = plan_migration(
        [
            SourceTopic("mig.a", 3, 1, {"cleanup.policy": "compact"}, compacted=True),
            SourceTopic("mig.b", 4, 1),
            SourceTopic("__consumer_offsets", 50, 1),
        ],
        TargetCluster(brokers=1, topics={"mig.b": TargetTopic("mig.b", 2)}),
    )
    report = MigrationPlanReport(
        migration=Migration(name="to-west", source="east", target="west"),
        source_brokers=1,
        target_brokers=1,
        plan=plan,
    )
    console = Console(width=240, record=True)
    render(report, console)
    text = console.export_text()
    assert "migration to-west: east -> west" in text
    assert "cleanup.policy=compact" in text
    assert "exists on the target with 2 partitions, the source has 4" in text
    assert "1 create, 0 match, 1 conflict, 1 skip" in text
    assert "conflicts must be resolved" in text
