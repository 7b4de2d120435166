"""``drsvc topology validate`` and ``show``, through the real command tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from drsvc.cli.main import EXIT_BAD_INPUT, main

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "topologies"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    out, err = capsys.readouterr()
    code = caught.value.code
    return (code if isinstance(code, int) else 1), out, err


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tables wrap long cells at the terminal width; a wide one keeps each name on one line.
    monkeypatch.setenv("COLUMNS", "200")


@pytest.mark.parametrize(
    ("name", "summary"),
    [
        ("active-active", "2 clusters, 2 flows, 1 application"),
        ("active-passive", "2 clusters, 2 flows, 2 applications"),
        ("aggregation", "4 clusters, 3 flows, 1 application"),
    ],
)
def test_validate_examples(name: str, summary: str, capsys: pytest.CaptureFixture[str]) -> None:
    file = EXAMPLES / f"{name}.yaml"
    code, out, err = run(["topology", "validate", str(file)], capsys)
    assert (code, err) == (0, "")
    assert out == f"ok: {file}: {summary}\n"


def test_validate_reports_the_problem_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text(
        "name: bad\nclusters: {east: {}, west: {}}\n"
        "flows:\n  - {source: east, target: north}\n  - {source: west, target: east, polcy: x}\n"
    )
    code, out, err = run(["topology", "validate", str(file)], capsys)
    assert code == EXIT_BAD_INPUT
    assert out == ""
    assert err == (
        f"drsvc: error: invalid topology {file}:\n"
        "  - flows[1]: unknown key 'polcy' (did you mean 'policy'?)\n"
    )


def test_validate_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["topology", "validate", str(tmp_path / "nope.yaml")], capsys)
    assert code == EXIT_BAD_INPUT
    assert "nope.yaml:\n  - file not found" in err


def show_json(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code, out, err = run(["topology", "show", str(EXAMPLES / f"{name}.yaml"), "--json"], capsys)
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


def examples_of(flow: dict[str, Any]) -> dict[str, str | None]:
    return {example["topic"]: example["target_topic"] for example in flow["examples"]}


def test_show_json_active_active(capsys: pytest.CaptureFixture[str]) -> None:
    data = show_json("active-active", capsys)
    assert data["name"] == "active-active"
    assert [c["bootstrap_from"] for c in data["clusters"]] == ["drsvc dev", "drsvc dev"]
    east_west, west_east = data["flows"]
    assert east_west["id"] == "east->west"
    assert east_west["internal_topics"] == {
        "cluster": "west",
        "offset_syncs": "drsvc.offset-syncs.east",
        "checkpoints": "east.checkpoints.internal",
    }
    assert examples_of(east_west) == {
        "orders": "east.orders",
        "heartbeats": "east.heartbeats",
        "west.orders": None,
        "west.heartbeats": None,
    }
    assert west_east["topics"] == {"include": [".*"], "exclude": [r"^tmp\..*"]}
    assert examples_of(west_east)["orders"] == "west.orders"


def test_show_json_identity_and_aggregation(capsys: pytest.CaptureFixture[str]) -> None:
    passive = show_json("active-passive", capsys)
    flow, way_back = passive["flows"]
    assert (way_back["source"], way_back["standby"]) == ("west", True)
    assert (flow["policy"], flow["separator"], flow["delivery"]) == (
        "identity",
        None,
        "exactly-once",
    )
    assert examples_of(flow)["orders"] == "orders"
    assert examples_of(flow)["heartbeats"] == "heartbeats"
    aggregation = show_json("aggregation", capsys)
    south = aggregation["flows"][2]
    assert south["start"] == "latest"
    assert examples_of(south)["orders"] == "south.orders"


def test_show_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["topology", "show", str(EXAMPLES / "active-active.yaml")], capsys)
    assert (code, err) == (0, "")
    for expected in (
        "Topology active-active",
        "(from drsvc dev)",
        "Flow east->west",
        "drsvc.offset-syncs.east",
        "east.checkpoints.internal",
        "east.heartbeats",
        "(not copied)",
        r"exclude ^tmp\..*",
        "orders-service",
    ):
        assert expected in out, expected


def test_show_keeps_brackets_in_patterns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Rich would read "[a-z]" as markup if cells were not plain text.
    file = tmp_path / "t.yaml"
    file.write_text(
        "name: t\nclusters: {east: {}, west: {}}\n"
        "flows: [{source: east, target: west, topics: {include: ['[a-z]+']}}]\n"
    )
    code, out, _ = run(["topology", "show", str(file)], capsys)
    assert code == 0
    assert "include [a-z]+" in out
