"""``drsvc api``: the service it builds asks "does the active cluster answer?" for a failover as
``drsvc failover`` does, and quickly for reads (no Consul, no brokers: the executors are fakes)."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from drsvc.api.service import MoveRequest
from drsvc.cli import api as api_cli
from drsvc.cli import failover as failover_cli
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
