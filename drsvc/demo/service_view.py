"""What the demo shows while it runs: the service as its API reports it, and the drill's steps.

A thread polls the API (clusters, flows, applications, events) once a second; on a terminal a
live view redraws from the latest answers, elsewhere only the drill's steps are printed, one line
each. Nothing from the client libraries reaches the screen: their lines go to the log file.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

__all__ = ["ApiReader", "DemoView"]


class ApiReader:
    """Polls the API; keeps the latest answer of each endpoint (None until one arrived)."""

    def __init__(self, url: str, token: str, ca_file: Path | None = None) -> None:
        self.url = url
        self._auth = {"Authorization": f"Bearer {token}"}
        #: an https API's certificate is checked against the CA that issued it
        self._verify: bool | str = True if ca_file is None else str(ca_file)
        self.latest: dict[str, Any] = {}
        self.events: deque[dict[str, Any]] = deque(maxlen=8)
        self._last_event = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="demo-api-reader", daemon=True)

    def get(self, path: str, timeout_s: float = 10.0) -> Any:
        answer = requests.get(
            self.url + path, timeout=timeout_s, headers=self._auth, verify=self._verify
        )
        answer.raise_for_status()
        return answer.json()

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        answer = requests.post(
            self.url + path, json=body, timeout=120, headers=self._auth, verify=self._verify
        )
        return answer.status_code, answer.json()

    def answers(self) -> bool:
        try:
            answer = requests.get(self.url + "/readyz", timeout=2, verify=self._verify)
            return answer.status_code == 200
        except requests.RequestException:
            return False

    def start(self) -> ApiReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for key, path in (
                ("apps", "/v1/apps"),
                ("flows", "/v1/flows"),
                ("clusters", "/v1/clusters"),
            ):
                with contextlib.suppress(requests.RequestException, ValueError):
                    self.latest[key] = self.get(path)
            try:
                found = self.get(f"/v1/events?after={self._last_event}")
                self.events.extend(found["events"])
                self._last_event = found["last_id"]
            except (requests.RequestException, ValueError, KeyError):
                pass
            self._stop.wait(1.0)


class DemoView:
    """The screen: a live view on a terminal, the drill's steps as lines elsewhere."""

    def __init__(self, console: Console, reader: ApiReader | None = None) -> None:
        self.console = console
        self.reader = reader
        self.steps: list[tuple[float, str, str]] = []
        self.status: Callable[[], str] = lambda: ""
        self._started = time.monotonic()
        self._live: Live | None = None

    def attach(self, reader: ApiReader, status: Callable[[], str]) -> None:
        self.reader = reader
        self.status = status
        if self.console.is_terminal:
            self._live = Live(
                get_renderable=self._render,
                console=self.console,
                refresh_per_second=2,
                transient=True,
            )
            self._live.start()

    def step(self, message: str, style: str = "") -> None:
        at = time.monotonic() - self._started
        self.steps.append((at, message, style))
        if self._live is None:
            self.console.print(Text(f"[{at:6.1f}s] {message}", style=style))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
            for at, message, style in self.steps:  # the story stays on the screen
                self.console.print(Text(f"[{at:6.1f}s] {message}", style=style))

    # -- rendering -----------------------------------------------------------------------------

    def _render(self) -> RenderableType:
        latest = self.reader.latest if self.reader else {}
        parts: list[RenderableType] = [Text(self.status(), style="bold")]
        parts.append(_clusters(latest.get("clusters") or []))
        parts.append(_flows((latest.get("flows") or {}).get("flows", [])))
        parts.append(_apps(latest.get("apps") or {}))
        if self.reader and self.reader.events:
            events = Table(title="failover steps", title_justify="left", box=None)
            for column in ("failover", "step", "outcome"):
                events.add_column(column)
            for e in self.reader.events:
                style = "green" if e["outcome"] == "ok" else "red"
                events.add_row(e["failover_id"], e["step"], Text(e["outcome"], style=style))
            parts.append(events)
        drill = Table(title="drill", title_justify="left", box=None, show_header=False)
        drill.add_column(justify="right")
        drill.add_column()
        for at, message, style in self.steps[-10:]:
            drill.add_row(f"{at:.1f}s", Text(message, style=style))
        parts.append(drill)
        return Group(*parts)


def _clusters(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="clusters", title_justify="left", box=None)
    for column in ("cluster", "answers", "consul checks", "heartbeats (seen from: age)"):
        table.add_column(column)
    for c in rows:
        beats = ", ".join(f"{h['observer']}: {h['freshness_s']:.1f}s" for h in c["heartbeats"])
        table.add_row(
            c["cluster"],
            Text("yes", style="green") if c["reachable"] else Text("no", style="bold red"),
            c["consul_health"] or "-",
            beats or "-",
        )
    return table


def _flows(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="flows", title_justify="left", box=None)
    for column in ("flow", "state", "lag", "heartbeat age"):
        table.add_column(column)
    for f in rows:
        age = f.get("heartbeat_freshness_s")
        style = "green" if f["state"] == "caught-up" else ("red" if f["error"] else "yellow")
        table.add_row(
            f["flow"],
            Text(f["state"], style=style),
            "-" if f["lag"] is None else str(f["lag"]),
            "-" if age is None else f"{age:.1f}s",
        )
    return table


def _apps(doc: dict[str, Any]) -> Table:
    leader = doc.get("controller_leader") or "none"
    table = Table(
        title=f"applications (controller leader: {leader})", title_justify="left", box=None
    )
    for column in ("application", "active", "epoch", "group", "would lose", "would re-read"):
        table.add_column(column)
    for a in doc.get("apps", []):
        active = Text(a["active"] or "none (switching)", style="bold" if a["active"] else "yellow")
        groups = a["groups"] or [{}]
        for i, g in enumerate(groups):
            table.add_row(
                a["app"] if i == 0 else "",
                active if i == 0 else "",
                str(a["epoch"]) if i == 0 else "",
                g.get("group", "-"),
                _n(g.get("would_lose")),
                _n(g.get("would_reread")),
            )
    return table


def _n(value: object) -> str:
    return "-" if value is None else str(value)
