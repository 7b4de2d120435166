"""The API's routes, authentication and error shape, over a fake service (no I/O)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth, Caller, Role, load_token
from drsvc.api.events import EventLog
from drsvc.api.problems import ApiProblem
from drsvc.api.reference import openapi_document, reference_markdown
from drsvc.api.service import MoveRequest
from drsvc.errors import ConfigError, CoordinatorUnavailableError, RefusedError
from failover.failover_plan import FailoverKind

TOKEN = "s3cret-token-0123456789"


class FakeService:
    def __init__(self) -> None:
        self.moves: list[MoveRequest] = []
        self.fail_with: Exception | None = None
        self.events = EventLog()
        self.refreshes = 0

    def _maybe_fail(self) -> None:
        if self.fail_with is not None:
            raise self.fail_with

    def readiness(self) -> dict[str, Any]:
        self._maybe_fail()
        return {"status": "ready"}

    def clusters(self) -> list[dict[str, Any]]:
        self._maybe_fail()
        return [{"cluster": "east", "reachable": True}]

    def flows(self) -> dict[str, Any]:
        return {"flows": []}

    def apps(self, exposure: bool = False) -> dict[str, Any]:
        return {"controller_leader": None, "apps": [], "exposure": exposure}

    def app(self, name: str, exposure: bool = False) -> dict[str, Any]:
        if name != "orders":
            raise ApiProblem(404, "not_found", f"no application {name!r}")
        return {"app": name}

    def group(self, app: str, group: str) -> dict[str, Any]:
        return {"app": app, "group": group}

    def failovers(self) -> list[dict[str, Any]]:
        return []

    def failover(self, failover_id: str) -> dict[str, Any]:
        raise ApiProblem(404, "not_found", f"no failover {failover_id!r}")

    def move(self, request: MoveRequest) -> tuple[int, dict[str, Any]]:
        self._maybe_fail()
        self.moves.append(request)
        if request.dry_run:
            return 200, {"dry_run": True}
        return 202, {"id": "f-1", "state": "running"}

    def refresh_events(self) -> None:
        self.refreshes += 1


def client(
    service: FakeService, token: str | None = TOKEN, public_reads: bool = False
) -> TestClient:
    app = create_app(service, ApiAuth.of(token, public_reads=public_reads))  # type: ignore[arg-type]
    return TestClient(app, raise_server_exceptions=False)


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_reads_need_a_token_by_default_and_the_probes_and_pages_do_not() -> None:
    c = client(FakeService())
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/readyz").status_code == 200
    for page in ("/dashboard", "/static/dashboard.js", "/static/dashboard.css", "/openapi.json"):
        assert c.get(page).status_code == 200, page
    for read in ("/v1/apps", "/v1/apps/orders", "/v1/events", "/metrics"):
        refused = c.get(read)
        assert refused.status_code == 401, read
        assert refused.json()["error"]["code"] == "unauthorized"
    assert c.get("/v1/apps/orders", headers=bearer()).json() == {"app": "orders"}
    assert c.get("/metrics", headers=bearer()).status_code == 200


def test_public_reads_open_the_reads_only() -> None:
    service = FakeService()
    c = client(service, public_reads=True)
    assert c.get("/v1/apps").status_code == 200
    assert c.get("/v1/apps/orders").json() == {"app": "orders"}
    assert c.get("/v1/apps", headers=bearer("x" * 20)).status_code == 200  # a bad token: public
    assert c.post("/v1/apps/orders/failover", json={"to": "west"}).status_code == 401
    assert service.moves == []


def test_exposure_is_off_unless_asked_for() -> None:
    c = client(FakeService())
    assert c.get("/v1/apps", headers=bearer()).json()["exposure"] is False
    asked = c.get("/v1/apps", params={"exposure": True}, headers=bearer())
    assert asked.json()["exposure"] is True


def test_a_failover_needs_the_token() -> None:
    service = FakeService()
    c = client(service)
    missing = c.post("/v1/apps/orders/failover", json={"to": "west"})
    assert missing.status_code == 401
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "unauthorized"
    wrong = c.post("/v1/apps/orders/failover", json={"to": "west"}, headers=bearer("x" * 20))
    assert wrong.status_code == 403
    assert service.moves == []
    ok = c.post(
        "/v1/apps/orders/failover", json={"to": "west", "request_id": "r1"}, headers=bearer()
    )
    assert ok.status_code == 202
    assert ok.headers["Location"] == "/v1/failovers/f-1"
    caller = Caller("default", Role.OPERATOR)
    assert service.moves == [
        MoveRequest("orders", "west", False, False, "r1", failback=False, caller=caller)
    ]


def test_without_a_configured_token_changes_are_refused() -> None:
    service = FakeService()
    c = client(service, token=None)
    answer = c.post("/v1/apps/orders/failover", json={"to": "west"}, headers=bearer())
    assert answer.status_code == 403
    assert "no API token is configured" in answer.json()["error"]["message"]
    assert service.moves == []
    read = c.get("/v1/apps", headers=bearer())
    assert read.status_code == 403
    assert "reads through the API are disabled" in read.json()["error"]["message"]
    assert c.get("/healthz").status_code == 200  # probes of the orchestrator stay open


def test_a_dry_run_answers_200_without_location() -> None:
    c = client(FakeService())
    answer = c.post("/v1/apps/orders/failback", json={"dry_run": True}, headers=bearer())
    assert answer.status_code == 200 and "Location" not in answer.headers
    assert c.post("/v1/apps/orders/failback", headers=bearer()).status_code == 202


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"to": "west", "colour": "blue"}, 422),
        ({"to": 5}, 422),
        ({"to": "west", "dry_run": "perhaps"}, 422),
        ({"to": "w" * 65}, 422),
    ],
)
def test_bad_bodies_get_422_naming_the_field(body: dict[str, Any], status: int) -> None:
    answer = client(FakeService()).post("/v1/apps/orders/failover", json=body, headers=bearer())
    assert answer.status_code == status
    error = answer.json()["error"]
    assert error["code"] == "invalid" and error["details"], error


def test_malformed_json_gets_400() -> None:
    answer = client(FakeService()).post(
        "/v1/apps/orders/failover",
        content=b"{not json",
        headers={**bearer(), "Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "bad_request"


def test_errors_have_one_shape_and_the_right_codes() -> None:
    service = FakeService()
    c = client(service)
    unknown = c.get("/v1/apps/nope", headers=bearer())
    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": {"status": 404, "code": "not_found", "message": "no application 'nope'"}
    }
    assert c.get("/v1/no-such-route", headers=bearer()).json()["error"]["code"] == "not_found"
    assert c.get("/no-such-page").json()["error"]["code"] == "not_found"
    assert c.delete("/v1/apps", headers=bearer()).json()["error"]["status"] == 405
    service.fail_with = CoordinatorUnavailableError("Consul at 127.0.0.1:1: refused", delay=3)
    down = c.get("/readyz")
    assert down.status_code == 503 and down.headers["Retry-After"] == "3"
    assert down.json()["error"]["code"] == "unavailable"
    service.fail_with = RefusedError("application orders is already active on west")
    refused = c.post("/v1/apps/orders/failover", json={"to": "west"}, headers=bearer())
    assert refused.status_code == 409
    assert "already active on west" in refused.json()["error"]["message"]
    service.fail_with = RuntimeError("boom")
    crashed = c.get("/v1/clusters", headers=bearer())
    assert crashed.status_code == 500
    assert "boom" not in crashed.text  # internals stay in the log


def test_the_token_never_appears_in_answers(caplog: pytest.LogCaptureFixture) -> None:
    c = client(FakeService())
    for headers in (bearer(), bearer(TOKEN + "x"), {"Authorization": TOKEN}):
        answer = c.post("/v1/apps/orders/failover", json={"to": "west"}, headers=headers)
        assert TOKEN not in answer.text
    assert TOKEN not in caplog.text
    assert TOKEN not in repr(ApiAuth.of(TOKEN))


def test_metrics_count_requests_by_route() -> None:
    c = client(FakeService())
    c.get("/v1/apps/orders", headers=bearer())
    c.get("/v1/apps/orders")
    text = c.get("/metrics", headers=bearer()).text
    assert 'drsvc_api_requests_total{method="GET",route="/v1/apps/{app}",status="200"}' in text
    # refused before any route ran: counted all the same
    assert 'drsvc_api_requests_total{method="GET",route="unmatched",status="401"}' in text


def test_invented_methods_are_counted_as_one_other_series() -> None:
    c = client(FakeService())
    for n in range(200):
        c.request(f"BREW{n}", "/v1/apps", headers=bearer())
    text = c.get("/metrics", headers=bearer()).text
    assert "BREW" not in text
    other = [
        line
        for line in text.splitlines()
        if line.startswith("drsvc_api_requests_total{") and 'method="other"' in line
    ]
    assert len(other) == 1, other
    assert float(other[0].rsplit(" ", 1)[1]) >= 200


def test_openapi_document_lists_every_route() -> None:
    paths = client(FakeService()).get("/openapi.json").json()["paths"]
    for path in (
        "/healthz",
        "/readyz",
        "/v1/clusters",
        "/v1/flows",
        "/v1/apps",
        "/v1/apps/{app}",
        "/v1/apps/{app}/groups/{group}",
        "/v1/apps/{app}/failover",
        "/v1/apps/{app}/failback",
        "/v1/failovers",
        "/v1/failovers/{failover_id}",
        "/v1/events",
        "/metrics",
    ):
        assert path in paths, path


def test_token_file(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    os.chmod(path, 0o600)
    assert load_token(path, {}) == TOKEN
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_token(path, {})
    with pytest.raises(ConfigError, match="cannot read"):
        load_token(tmp_path / "missing", {})
    assert load_token(None, {"DRSVC_API_TOKEN": " abc "}) == "abc"
    assert load_token(None, {}) is None


def test_auth_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="too short"):
        ApiAuth.of("short")


def test_the_committed_api_reference_is_up_to_date() -> None:
    committed = Path(__file__).resolve().parents[3] / "docs" / "api-reference.md"
    assert committed.read_text() == reference_markdown(openapi_document()), (
        "docs/api-reference.md is out of date: python -m drsvc.api.reference > "
        "docs/api-reference.md"
    )


def test_the_preconditions_of_a_dry_run_reach_the_service() -> None:
    service = FakeService()
    c = client(service)
    body = {"to": "west", "expect_kind": "planned", "expect_epoch": 7}
    assert c.post("/v1/apps/orders/failover", json=body, headers=bearer()).status_code == 202
    assert c.post("/v1/apps/orders/failback", json=body, headers=bearer()).status_code == 202
    first, second = service.moves
    planned = FailoverKind.PLANNED
    assert (first.expect_kind, first.expect_epoch, first.failback) == (planned, 7, False)
    assert (second.expect_kind, second.expect_epoch, second.failback) == (planned, 7, True)
    plain = c.post("/v1/apps/orders/failover", json={"to": "west"}, headers=bearer())
    assert plain.status_code == 202
    assert (service.moves[-1].expect_kind, service.moves[-1].expect_epoch) == (None, None)


@pytest.mark.parametrize(
    "body",
    [
        {"to": "west", "expect_kind": "sideways"},
        {"to": "west", "expect_epoch": -1},
        {"to": "west", "expect_epoch": "four"},
        {"to": "west", "expect_epoch": 2**63},
    ],
)
def test_bad_preconditions_get_422(body: dict[str, Any]) -> None:
    service = FakeService()
    answer = client(service).post("/v1/apps/orders/failover", json=body, headers=bearer())
    assert answer.status_code == 422, answer.text
    field = next(iter(set(body) - {"to"}))
    assert [d["field"] for d in answer.json()["error"]["details"]] == [f"body.{field}"]
    assert service.moves == []


@pytest.mark.parametrize(
    "request_id", ["../apps/payments/failover", "a/b", ".", "..", ".hidden", "-r", "", "r" * 129]
)
def test_request_ids_follow_the_one_rule(request_id: str) -> None:
    service = FakeService()
    answer = client(service).post(
        "/v1/apps/orders/failover", json={"to": "west", "request_id": request_id}, headers=bearer()
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert [d["field"] for d in error["details"]] == ["body.request_id"]
    assert service.moves == []  # refused before the service was asked


def test_a_bad_request_id_is_refused_naming_the_rule() -> None:
    answer = client(FakeService()).post(
        "/v1/apps/orders/failover", json={"to": "west", "request_id": "../x"}, headers=bearer()
    )
    assert "starting with a letter or digit" in answer.json()["error"]["message"]


@pytest.mark.parametrize("request_id", ["r1", "req-2026.11:27_a", "9" * 128])
def test_good_request_ids_pass(request_id: str) -> None:
    service = FakeService()
    answer = client(service).post(
        "/v1/apps/orders/failover", json={"to": "west", "request_id": request_id}, headers=bearer()
    )
    assert answer.status_code == 202, answer.text
    assert service.moves[-1].request_id == request_id


def test_openapi_document_describes_the_preconditions() -> None:
    doc = client(FakeService()).get("/openapi.json").json()
    fields = doc["components"]["schemas"]["MoveBody"]["properties"]
    assert "412" in fields["expect_kind"]["description"]
    assert "epoch" in fields["expect_epoch"]["description"]
    kinds = [k for option in fields["expect_kind"]["anyOf"] for k in option.get("enum", [])]
    assert sorted(kinds) == ["planned", "unplanned"]
    assert fields["request_id"]["pattern"].startswith("^[A-Za-z0-9]")
    for route in ("/v1/apps/{app}/failover", "/v1/apps/{app}/failback"):
        answers = doc["paths"][route]["post"]["responses"]
        assert "expect_epoch" in answers["412"]["description"], route
    assert "412" not in doc["paths"]["/v1/apps"]["get"]["responses"]
