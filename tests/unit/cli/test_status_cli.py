"""``drsvc status``: the table, the JSON, and the exits (no brokers: unreachable addresses only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from drsvc.cli.main import EXIT_BAD_INPUT, main
from drsvc.cli.status import render
from drsvc.runtime.status.report import FlowStatus, Owner, PartitionStatus, StatusReport

UNREACHABLE = """
name: unreachable
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""


def partition(
    number: int,
    replicated: int | None,
    end: int,
    lag: int | None,
    owner: Owner | None,
    progress: str = "committed",
) -> PartitionStatus:
    return PartitionStatus(
        topic="orders",
        partition=number,
        remote_topic="east.orders",
        progress=progress,  # type: ignore[arg-type]
        replicated_offset=replicated,
        log_start_offset=0,
        source_end_offset=end,
        lag=lag,
        owner=owner,
    )


def sample_report() -> StatusReport:
    owner = Owner("drsvc-east->west-5f1c", "drsvc-east->west", "/127.0.0.1")
    east_west = FlowStatus(
        flow="east->west",
        source="east",
        target="west",
        delivery="at-least-once",
        progress_group="drsvc-replicator.east-west",
        progress_cluster="east",
        partitions=(
            partition(0, 120, 120, 0, owner),
            partition(1, None, 80, 80, None, progress="none"),
            partition(2, None, 15, None, None, progress="unknown"),
        ),
    )
    west_east = FlowStatus(
        flow="west->east",
        source="west",
        target="east",
        delivery="exactly-once",
        progress_group="drsvc-replicator.west-east",
        progress_cluster="east",
        error="cluster 'west': listing topics: Local: Broker transport failure",
    )
    return StatusReport(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), (east_west, west_east))


def test_table_has_the_shape_of_the_consumer_group_tool() -> None:
    console = Console(record=True, width=200)
    render(sample_report(), console)
    lines = console.export_text().splitlines()
    assert lines[0] == (
        "flow east->west (at-least-once, progress in group 'drsvc-replicator.east-west' on east):"
        " 3 partition(s), lag 80 (+ 1 partition(s) of unknown lag)"
    )
    assert lines[1].split() == [
        "FLOW",
        "TOPIC",
        "(east)",
        "PARTITION",
        "REPLICATED-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "REMOTE-TOPIC",
        "(west)",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert lines[2].split() == [
        "east->west",
        "orders",
        "0",
        "120",
        "120",
        "0",
        "east.orders",
        "drsvc-east->west-5f1c",
        "/127.0.0.1",
        "drsvc-east->west",
    ]
    assert (
        lines[3].split()
        == ["east->west", "orders", "1", "-", "80", "80", "east.orders"] + ["-"] * 3
    )
    assert lines[4].split()[3:6] == ["?", "15", "?"]
    assert "error: cluster 'west': listing topics: Local: Broker transport failure" in lines


def test_json_has_the_documented_shape() -> None:
    document = json.loads(json.dumps(sample_report().as_dict()))
    assert document["as_of"] == "2025-01-02T03:04:05.000+00:00"
    first, second = document["flows"]
    assert (first["flow"], first["delivery"], first["lag"], first["error"]) == (
        "east->west",
        "at-least-once",
        80,
        None,
    )
    assert first["partitions"][0]["owner"] == "drsvc-east->west-5f1c"
    assert first["partitions"][1]["owner"] == "-"
    assert first["partitions"][1]["replicated_offset"] is None
    assert (second["lag"], second["partitions"]) == (None, [])
    assert second["error"].startswith("cluster 'west'")


def test_unknown_flow_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text(UNREACHABLE)
    with pytest.raises(SystemExit) as caught:
        main(["status", "-t", str(topology), "--flow", "west->east"])
    assert caught.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "has no flow 'west->east' (flows: east->west)" in err
    assert "Traceback" not in err


def test_unreachable_cluster_is_an_error_entry_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text(UNREACHABLE)
    with pytest.raises(SystemExit) as caught:
        main(["status", "-t", str(topology), "--json", "--timeout-s", "1"])
    assert caught.value.code == 1
    out = capsys.readouterr()
    (flow,) = json.loads(out.out)["flows"]
    assert flow["flow"] == "east->west"
    assert flow["error"].startswith("cluster 'east': listing topics:")
    assert "Traceback" not in out.err
