"""``drsvc migrate plan`` against real clusters: what it would create, match and refuse, and
that planning creates nothing on the target."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from replication_support import topics_of, wait_for
from typer.testing import CliRunner

from drsvc.cli.main import build_app, main
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import admin_client, create_topic


def test_plan_lists_create_match_and_conflict_and_changes_nothing(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    started = time.monotonic()
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    east_admin, west_admin = admin_client(east), admin_client(west)
    compact = {"cleanup.policy": "compact", "min.compaction.lag.ms": "1000"}
    assert create_topic(east_admin, "mp.accounts", 3, config=compact)
    assert create_topic(east_admin, "mp.orders", 12, config={"retention.ms": "604800000"})
    assert create_topic(east_admin, "mp.same", 2)
    assert create_topic(east_admin, "mp.clash", 3)
    assert create_topic(east_admin, "mp-other", 1)  # not selected by the filter
    assert create_topic(west_admin, "mp.same", 2)
    assert create_topic(west_admin, "mp.clash", 5)
    # A created topic reaches the brokers' metadata shortly after the controller confirms it.
    on_east = {"mp.accounts", "mp.orders", "mp.same", "mp.clash", "mp-other"}
    wait_for(lambda: on_east <= topics_of(east), 10, "east's metadata to list the new topics")
    wait_for(lambda: {"mp.same", "mp.clash"} <= topics_of(west), 10, "west's new topics")
    west_before = topics_of(west)

    topology = tmp_path / "mig.yaml"
    topology.write_text(
        json.dumps(
            {
                "name": "mp",
                "clusters": {
                    "east": {"bootstrap_servers": east},
                    "west": {"bootstrap_servers": west},
                },
                "migrations": [
                    {
                        "name": "to-west",
                        "source": "east",
                        "target": "west",
                        "topics": {"include": ["mp\\..*"]},
                    }
                ],
            }
        )
    )
    result = CliRunner().invoke(build_app(), ["migrate", "plan", "-t", str(topology), "--json"])
    assert result.exit_code == 1, result.output  # one topic cannot be matched
    document: dict[str, Any] = json.loads(result.stdout)
    topics = {t["topic"]: t for t in document["topics"]}
    assert set(topics) == {"mp.accounts", "mp.orders", "mp.same", "mp.clash"}
    assert {name: t["action"] for name, t in topics.items()} == {
        "mp.accounts": "create",
        "mp.orders": "create",
        "mp.same": "match",
        "mp.clash": "conflict",
    }
    assert document["conflicts"] == 1
    accounts, orders = topics["mp.accounts"], topics["mp.orders"]
    assert accounts["compacted"] is True
    assert accounts["configs"] == compact
    assert (accounts["partitions"], accounts["replication_factor"]) == (3, 1)
    assert orders["compacted"] is False
    assert orders["partitions"] == 12
    assert orders["configs"] == {"retention.ms": "604800000"}
    assert "with 5 partitions, the source has 3" in topics["mp.clash"]["reason"]

    table = CliRunner().invoke(build_app(), ["migrate", "plan", "-t", str(topology)])
    assert table.exit_code == 1, table.output
    assert "mp.clash" in table.stdout
    assert "conflict" in table.stdout

    assert topics_of(west) == west_before
    assert "mp.accounts" not in west_before
    assert "mp.orders" not in west_before
    assert time.monotonic() - started < 40


def test_a_topology_without_migrations_is_bad_input(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    topology = tmp_path / "none.yaml"
    topology.write_text(
        json.dumps(
            {
                "name": "mp-none",
                "clusters": {
                    alias: {"bootstrap_servers": cluster_pair.clusters[alias]}
                    for alias in ("east", "west")
                },
            }
        )
    )
    with pytest.raises(SystemExit) as exited:
        main(["migrate", "plan", "-t", str(topology)])
    assert exited.value.code == 2
