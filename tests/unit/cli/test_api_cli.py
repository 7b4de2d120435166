"""``drsvc api``: the service it builds asks "does the active cluster answer?" for a failover as
``drsvc failover`` does, and quickly for reads (no Consul, no brokers: the executors are fakes)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from drsvc.api.auth import Role
from drsvc.api.events import EventLog
from drsvc.api.service import MoveRequest
from drsvc.cli import api as api_cli
from drsvc.cli import failover as failover_cli
from drsvc.cli.main import main
from drsvc.errors import ConfigError
from drsvc.settings import Settings
from drsvc.topology.models import Application, Topology
from failover.active import ActiveDocument
from failover.failover_plan import FailoverKind, FailoverPlan, FailoverRequest, GroupTarget

TOPOLOGY = Topology.model_validate(
    {
        "name": "shop",
        "clusters": {
            "east": {"bootstrap_servers": "e:9092"},
            "west": {"bootstrap_servers": "w:9092"},
        },
        "flows": [{"source": "east", "target": "west"}, {"source": "west", "target": "east"}],
        "applications": [
            {"name": "orders", "groups": ["g1"], "topics": ["orders"], "preferred": "east"}
        ],
    }
)


class ReadOnlyExecutor:
    """What the service asks of an executor for a dry run and an application's page."""

    def application(self, name: str) -> Application:
        return TOPOLOGY.application(name)

    def active(self, app: Application) -> ActiveDocument:
        return ActiveDocument("east", 2)

    def running(self, app: Application, me: str | None = None) -> str | None:
        return None

    def preview(self, request: FailoverRequest) -> tuple[FailoverPlan, list[GroupTarget], str]:
        plan = FailoverPlan("dry-run", request.app, "east", request.to, FailoverKind.PLANNED, ())
        return plan, [], ""


def test_the_apis_failovers_probe_as_the_clis_and_its_reads_quickly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probes: list[float] = []

    def connect(*_args: Any, probe_timeout_s: float, **_kwargs: Any) -> ReadOnlyExecutor:
        probes.append(probe_timeout_s)
        return ReadOnlyExecutor()

    monkeypatch.setattr(api_cli, "connect_executor", connect)
    service = api_cli.build_service(
        TOPOLOGY, {"east": "e:9092", "west": "w:9092"}, "127.0.0.1:1", Settings(), 30.0
    )
    status, plan = service.move(MoveRequest("orders", "west", True, False, None, False))
    assert (status, plan["kind"], plan["epoch"]) == (200, "planned", 2)
    assert service.app("orders", exposure=False)["active"] == "east"
    assert probes == [api_cli.FAILOVER_PROBE_TIMEOUT_S, api_cli.READ_PROBE_TIMEOUT_S]
    cli_default = inspect.signature(failover_cli.build_executor).parameters["probe_timeout_s"]
    assert probes[0] == cli_default.default
    assert api_cli.READ_PROBE_TIMEOUT_S < api_cli.FAILOVER_PROBE_TIMEOUT_S


TOKEN = "s3cret-token-0123456789"


class ServedApi:
    """What ``drsvc api`` built and would have served (no socket is opened)."""

    def __init__(self) -> None:
        self.config: Any = None
        self.joined: list[float] = []


def _serve(
    monkeypatch: pytest.MonkeyPatch, *args: str, env: dict[str, str] | None = None
) -> ServedApi:
    served = ServedApi()

    class Observer:
        def __init__(self, *_args: Any) -> None:
            pass

        def start(self) -> None:
            pass

        def stop(self) -> None:
            pass

    class Service:
        def __init__(self) -> None:
            self.events = EventLog()

        def refresh_events(self) -> None:
            pass

        def running_threads(self) -> int:
            return 1

        def join_failovers(self, timeout_s: float) -> list[str]:
            served.joined.append(timeout_s)
            return []

    class Server:
        def __init__(self, config: Any) -> None:
            served.config = config

        def run(self) -> None:
            pass

    monkeypatch.setattr(api_cli, "load_with_bootstraps", lambda *_a, **_k: (TOPOLOGY, {}))
    monkeypatch.setattr(api_cli, "resolve_consul", lambda *_a: "127.0.0.1:1")
    monkeypatch.setattr(api_cli, "HeartbeatObserver", Observer)
    monkeypatch.setattr(api_cli, "build_service", lambda *_a, **_k: Service())
    monkeypatch.setattr(api_cli.uvicorn, "Server", Server)
    monkeypatch.delenv("DRSVC_API_TOKEN", raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as ended:
        main(["api", "-t", "topology.yaml", *args])
    assert ended.value.code == 0
    return served


def _client(served: ServedApi) -> TestClient:
    return TestClient(served.config.app, raise_server_exceptions=False)


def test_the_served_api_protects_reads_and_stops_gracefully(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    served = _serve(monkeypatch, env={"DRSVC_API_TOKEN": TOKEN})
    assert served.config.timeout_graceful_shutdown >= 30
    assert served.joined == [api_cli.GRACEFUL_SHUTDOWN_S] and api_cli.GRACEFUL_SHUTDOWN_S >= 30
    c = _client(served)
    assert c.get("/v1/events").status_code == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert c.get("/v1/events", headers=auth).status_code == 200
    big = c.post("/v1/apps/orders/failover", content=b" " * (64 * 1024 + 1), headers=auth)
    assert big.status_code == 413


def test_the_served_api_takes_its_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice viewer {TOKEN}\n")
    tokens.chmod(0o600)
    served = _serve(
        monkeypatch,
        "--tokens-file", str(tokens), "--public-reads", "--max-body-bytes", "2048",
        "--allowed-hosts", "api.example, 127.0.0.1", "--max-long-polls", "3",
        "--exposure-ttl-s", "2.5",
    )  # fmt: skip
    c = _client(served)
    host = {"Host": "api.example"}
    assert c.get("/v1/events", headers=host).status_code == 200  # public reads
    assert c.get("/v1/events", headers={"Host": "elsewhere.example"}).status_code == 400
    viewer = {**host, "Authorization": f"Bearer {TOKEN}"}
    refused = c.post("/v1/apps/orders/failover", json={"to": "west"}, headers=viewer)
    assert refused.status_code == 403 and "role viewer" in refused.json()["error"]["message"]
    big = c.post("/v1/apps/orders/failover", content=b" " * 2049, headers=viewer)
    assert big.status_code == 403  # the token first, then the size
    assert c.post("/healthz", content=b" " * 2049, headers=host).status_code == 413


def test_protect_reads_is_kept_as_a_deprecated_no_op(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    served = _serve(monkeypatch, "--protect-reads", env={"DRSVC_API_TOKEN": TOKEN})
    assert "--protect-reads is deprecated and does nothing" in caplog.text
    assert _client(served).get("/v1/apps").status_code == 401


def test_build_auth_merges_the_default_token_and_the_tokens_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("bob operator bob-secret-0123456789\n")
    tokens.chmod(0o600)
    auth = api_cli.build_auth(
        None, tokens, public_reads=False, protect_reads=False, environ={"DRSVC_API_TOKEN": TOKEN}
    )
    assert [(t.name, t.role) for t in auth.tokens] == [
        ("default", Role.OPERATOR),
        ("bob", Role.OPERATOR),
    ]
    with pytest.raises(ConfigError, match="contradict"):
        api_cli.build_auth(None, None, public_reads=True, protect_reads=True, environ={})


def test_allowed_hosts() -> None:
    assert api_cli.allowed_hosts_of(None) is None
    assert api_cli.allowed_hosts_of(" a.example ,b ") == ["a.example", "b"]
    with pytest.raises(ConfigError, match="names no host"):
        api_cli.allowed_hosts_of(" , ")
