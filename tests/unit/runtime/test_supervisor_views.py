"""What ``drsvc run`` shows: the live table and the plain log lines."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
from rich.console import Console

from drsvc.runtime.supervisor.flow_metrics import FlowNumbers
from drsvc.runtime.supervisor.formatting import format_count, format_duration, format_latency
from drsvc.runtime.supervisor.live_view import LiveView, RecentEvents, render
from drsvc.runtime.supervisor.log_files import LogFollower, last_lines
from drsvc.runtime.supervisor.plain_view import PlainView, describe_flow
from drsvc.runtime.supervisor.restart_policy import RoleState
from drsvc.runtime.supervisor.status import FlowStatus, RoleStatus, Snapshot


def role(name: str, state: RoleState, **kwargs: object) -> RoleStatus:
    fields: dict[str, object] = {
        "name": name,
        "kind": "replicate",
        "flow": "east->west",
        "state": state,
        "pid": None,
        "metrics_port": None,
        "restarts": 0,
        "crashes": 0,
        "consecutive_failures": 0,
        "restart_in_s": None,
        "uptime_s": None,
        "last_exit": None,
        "log_file": f"/run/{name}.log",
        "started_at": None,
    }
    fields.update(kwargs)
    return RoleStatus(**fields)  # type: ignore[arg-type]


SNAPSHOT = Snapshot(
    roles=(
        role("replicate.east-to-west.1", RoleState.RUNNING, pid=4242, metrics_port=9100,
             uptime_s=75.0),
        role("replicate.west-to-east.1", RoleState.WAITING, flow="west->east", restarts=3,
             crashes=3, consecutive_failures=3, restart_in_s=7.6,
             last_exit="exited with code 1"),
        role("heartbeats", RoleState.FAILED, kind="heartbeats", flow=None, crashes=1,
             last_exit="exited with code 2 (bad input)"),
    ),
    flows=(
        FlowStatus("east->west", 1, 1, FlowNumbers(1520.0, 98765.0, 12.0, 35.4)),
        FlowStatus("west->east", 0, 1),
    ),
)  # fmt: skip


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (role("r", RoleState.WAITING, restart_in_s=0.0), "starting"),
        (role("r", RoleState.WAITING, restart_in_s=4.2, restarts=1, crashes=1), "restarting in 4s"),
        (role("r", RoleState.RUNNING), "running"),
        (role("r", RoleState.FAILED), "failed"),
    ],
)
def test_role_state_in_words(status: RoleStatus, text: str) -> None:
    assert status.describe_state() == text


def test_live_table_shows_roles_flows_and_events(tmp_path: Path) -> None:
    events = RecentEvents()
    logger = logging.getLogger("test.supervisor.views")
    logger.addHandler(events)
    logger.propagate = False
    logger.error("replicate.west-to-east.1 keeps crashing\n    | Traceback (most recent call)")
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    console.print(render(SNAPSHOT, "drsvc run: aa", events, tmp_path))
    screen = console.export_text()
    lines = screen.splitlines()
    row = next(line for line in lines if "replicate.east-to-west.1" in line)
    assert "running" in row and "4242" in row and "1m15s" in row and ":9100" in row
    row = next(line for line in lines if "replicate.west-to-east.1" in line)
    assert "restarting in 8s (crashed 3x in a row)" in row and "exited with code 1" in row
    row = next(line for line in lines if line.lstrip("│ ").startswith("heartbeats"))
    assert "failed" in row and "bad input" in row
    flow = next(line for line in lines if "east->west" in line and "1/1" in line)
    assert "1.5k" in flow and "12" in flow and "35 ms" in flow and "98.8k" in flow
    flow = next(line for line in lines if "west->east" in line and "0/1" in line)
    assert flow.count("-") >= 4  # no numbers yet: dashes, not zeros
    assert "keeps crashing" in screen and "Traceback" not in screen
    assert f"role logs: {tmp_path}/<role>.log" in screen


def test_live_table_shows_each_application_and_the_controller_leader(tmp_path: Path) -> None:
    apps = {
        "controller_leader": "ctl-1",
        "applications": [
            {"app": "orders", "active": "west", "epoch": 3, "auto_failover": True},
            {"app": "billing", "active": None, "epoch": 4, "auto_failover": False},
        ],
    }
    console = Console(file=io.StringIO(), width=160, record=True, color_system=None)
    console.print(render(SNAPSHOT, "drsvc run: aa", None, tmp_path, apps))
    text = console.export_text()
    assert "applications (controller leader: ctl-1)" in text
    assert "orders" in text and "west" in text and "none (switching)" in text
    console.print(render(SNAPSHOT, "x", None, tmp_path, {"applications_error": "Consul down"}))
    assert "applications: Consul down" in console.export_text()


def test_live_view_draws_about_once_a_second_and_the_final_state_on_close(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    now = [0.0]
    view = LiveView(
        "t",
        tmp_path,
        console=Console(file=out, width=120, force_terminal=True, color_system=None),
        clock=lambda: now[0],
    )
    view.update(SNAPSHOT)
    first = out.getvalue()
    assert "replicate.east-to-west.1" in first
    now[0] = 0.3
    view.update(Snapshot(roles=SNAPSHOT.roles[:1], flows=()))
    assert out.getvalue() == first  # throttled
    now[0] = 0.4
    view.update(Snapshot(roles=SNAPSHOT.roles[:1], flows=(), stopping=True))
    assert "stopping: waiting for roles to exit" in out.getvalue()  # state change: drawn now
    now[0] = 0.5
    view.update(Snapshot(roles=SNAPSHOT.roles[1:], flows=(), stopping=True))
    assert "every role stopped" not in out.getvalue()
    view.close()  # draws the last state even though it came within the second
    assert "every role stopped" in out.getvalue()


def test_plain_view_prefixes_role_output_and_summarises_flows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="drsvc.run")
    log_file = tmp_path / "replicate.east-to-west.1.log"
    log_file.write_text("output of an earlier run\n")
    stream = io.StringIO()
    now = [0.0]
    view = PlainView(
        {"replicate.east-to-west.1": log_file},
        summary_every_s=10,
        stream=lambda: stream,
        clock=lambda: now[0],
    )
    with log_file.open("a") as out:
        out.write("=== 2024-01-01T00:00:00+00:00 drsvc run starts: drsvc replicate\n")
        out.write("worker started\npartial")
    view.update(SNAPSHOT)
    assert stream.getvalue() == "replicate.east-to-west.1 | worker started\n"
    assert not caplog.records
    with log_file.open("a") as out:
        out.write(" line\n")
    now[0] = 10.0
    view.update(SNAPSHOT)
    assert stream.getvalue().splitlines()[-1] == "replicate.east-to-west.1 | partial line"
    summaries = [r.getMessage() for r in caplog.records]
    assert summaries == [
        "flow east->west: 1/1 workers, 1.5k records/s, lag 12, latency 35 ms, 98.8k copied",
        "flow west->east: 0/1 workers, - records/s, lag -, latency -, - copied",
    ]


def test_plain_view_in_json_keeps_json_lines_and_wraps_the_rest(tmp_path: Path) -> None:
    log_file = tmp_path / "r.log"
    stream = io.StringIO()
    view = PlainView({"r": log_file}, log_format="json", stream=lambda: stream)
    log_file.write_text('{"message": "hello", "role": "r"}\nTraceback (most recent call last):\n')
    view.close()
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first == {"message": "hello", "role": "r"}
    assert second["role"] == "r" and second["message"] == "Traceback (most recent call last):"


def test_follower_starts_over_when_the_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("a\nb\n")
    follower = LogFollower(path)
    assert follower.new_lines() == ["a", "b"]
    assert follower.new_lines() == []
    path.write_text("c\n")
    assert follower.new_lines() == ["c"]
    assert LogFollower(tmp_path / "missing.log").new_lines() == []


def test_last_lines_of_one_run(tmp_path: Path) -> None:
    path = tmp_path / "f.log"
    path.write_text("old run\n")
    start = path.stat().st_size
    with path.open("a") as out:
        out.write("".join(f"line {i}\n" for i in range(30)) + "\n")
    assert last_lines(path, start, 3) == ["line 27", "line 28", "line 29"]
    assert last_lines(path, 0, 100)[0] == "old run"
    assert last_lines(tmp_path / "missing", 0, 3) == []


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0, "0"), (999, "999"), (1520, "1.5k"), (2_500_000, "2.5M"), (3e9, "3.0G")],
)
def test_counts(value: float | None, text: str) -> None:
    assert format_count(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "-"), (5.9, "5s"), (75, "1m15s"), (7500, "2h05m")]
)
def test_durations(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    ("ms", "text"), [(None, "-"), (35.4, "35 ms"), (4467, "4.5 s"), (3_600_294, "1h00m")]
)
def test_latencies(ms: float | None, text: str) -> None:
    assert format_latency(ms) == text


def test_flow_line() -> None:
    assert describe_flow(SNAPSHOT.flows[1]) == (
        "west->east: 0/1 workers, - records/s, lag -, latency -, - copied"
    )
