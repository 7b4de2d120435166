"""The request guard answers before anything reads the body (the token, then the size), the
security headers are on every answer, and the host allow-list refuses other hosts. Requests are
driven through the whole application, at the ASGI level where what was read matters."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth, ApiToken, Role
from drsvc.api.events import EventLog
from drsvc.api.guard import CONTENT_SECURITY_POLICY
from drsvc.api.limits import ApiLimits
from drsvc.api.pages import DOCS_POLICY, SWAGGER_UI_PATH
from drsvc.api.reference import openapi_document
from drsvc.api.service import MoveRequest

OPERATOR = "operator-secret-0123456789"
VIEWER = "viewer-secret-0123456789"
MIB = 1024 * 1024


class FakeService:
    def __init__(self) -> None:
        self.events = EventLog()
        self.moves: list[MoveRequest] = []
        self.fail_with: Exception | None = None

    def refresh_events(self) -> None:
        pass

    def apps(self, exposure: bool = False) -> dict[str, Any]:
        if self.fail_with is not None:
            raise self.fail_with
        return {"controller_leader": None, "apps": []}

    def move(self, request: MoveRequest) -> tuple[int, dict[str, Any]]:
        self.moves.append(request)
        return 202, {"id": "f-1"}


def _app(service: FakeService, **limits: Any) -> Any:
    auth = ApiAuth.of(OPERATOR, [ApiToken("alice", Role.VIEWER, VIEWER)])
    return create_app(service, auth, ApiLimits(**limits))  # type: ignore[arg-type]


class Sent:
    def __init__(self, messages: list[dict[str, Any]], pulled: int) -> None:
        start = messages[0]
        self.status: int = start["status"]
        self.headers = {k.decode(): v.decode() for k, v in start["headers"]}
        self.body = b"".join(m.get("body", b"") for m in messages[1:])
        #: how many chunks of the request body the application read
        self.pulled = pulled

    def json(self) -> Any:
        return json.loads(self.body)


def _call(
    app: Any,
    method: str,
    path: str,
    *,
    token: str | None = None,
    chunks: int = 0,
    chunk: bytes = b"",
    declared: str | None = None,
) -> Sent:
    """One request through the ASGI app, its body offered in ``chunks`` pieces of ``chunk``."""
    headers = [(b"content-type", b"application/json")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if declared is not None:
        headers.append((b"content-length", declared.encode()))
    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled < chunks:
            pulled += 1
            return {"type": "http.request", "body": chunk, "more_body": pulled < chunks}
        await asyncio.sleep(3600)  # the client sends nothing more
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 40000),
        "server": ("testserver", 80),
    }
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    return Sent(sent, pulled)


def test_a_huge_body_without_a_token_is_refused_unread() -> None:
    # 150 MiB offered (one 1 MiB piece, 150 times), streamed without Content-Length
    answer = _call(
        _app(FakeService()), "POST", "/v1/apps/orders/failover", chunks=150, chunk=b"x" * MIB
    )
    assert answer.status == 401
    assert answer.json()["error"]["code"] == "unauthorized"
    assert answer.pulled == 0


def test_a_declared_length_over_the_limit_is_refused_unread() -> None:
    service = FakeService()
    answer = _call(
        _app(service),
        "POST",
        "/v1/apps/orders/failover",
        token=OPERATOR,
        chunks=10,
        chunk=b"x" * MIB,
        declared=str(10 * MIB),
    )
    assert answer.status == 413
    error = answer.json()["error"]
    assert (error["code"], "65536 bytes" in error["message"]) == ("too_large", True)
    assert answer.pulled == 0 and service.moves == []


def test_a_chunked_body_is_refused_once_it_passes_the_limit() -> None:
    service = FakeService()
    answer = _call(
        _app(service, max_body_bytes=64 * 1024),
        "POST",
        "/v1/apps/orders/failover",
        token=OPERATOR,
        chunks=100,
        chunk=b" " * (16 * 1024),
    )
    assert answer.status == 413
    assert answer.json()["error"]["code"] == "too_large"
    assert answer.pulled == 5  # 80 KiB read: the first piece past 64 KiB, and no further
    assert service.moves == []


def test_a_body_within_the_limit_goes_through() -> None:
    service = FakeService()
    body = json.dumps({"to": "west"}).encode()
    answer = _call(
        _app(service),
        "POST",
        "/v1/apps/orders/failover",
        token=OPERATOR,
        chunks=1,
        chunk=body,
        declared=str(len(body)),
    )
    assert answer.status == 202, answer.body
    assert [m.to for m in service.moves] == ["west"]


def test_a_content_length_that_is_not_a_number_is_refused() -> None:
    answer = _call(
        _app(FakeService()), "POST", "/v1/apps/orders/failover", token=OPERATOR, declared="12x"
    )
    assert answer.status == 400
    assert answer.pulled == 0


def _post_routes() -> list[str]:
    return [
        path.replace("{app}", "orders").replace("{name}", "to-west")
        for path, operations in openapi_document()["paths"].items()
        if "post" in operations
    ]


@pytest.mark.parametrize("path", _post_routes())
def test_a_viewer_gets_403_on_every_change_before_its_body_is_read(path: str) -> None:
    service = FakeService()
    answer = _call(_app(service), "POST", path, token=VIEWER, chunks=1, chunk=b"{}")
    assert answer.status == 403
    assert "role viewer cannot make changes" in answer.json()["error"]["message"]
    assert answer.pulled == 0 and service.moves == []


def test_there_are_changes_to_guard() -> None:
    assert len(_post_routes()) >= 6  # failover, failback, and the migrations' four


def _client(service: FakeService | None = None, **kwargs: Any) -> TestClient:
    app = create_app(service or FakeService(), ApiAuth.of(OPERATOR), **kwargs)  # type: ignore[arg-type]
    return TestClient(app, raise_server_exceptions=False)


def _assert_security_headers(headers: Any, policy: str = CONTENT_SECURITY_POLICY) -> None:
    assert headers["content-security-policy"] == policy
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"


def test_every_answer_carries_the_security_headers() -> None:
    service = FakeService()
    c = _client(service)
    auth = {"Authorization": f"Bearer {OPERATOR}"}
    for answer in (
        c.get("/dashboard"),
        c.get("/static/dashboard.js"),
        c.get("/healthz"),
        c.get("/openapi.json"),
        c.get("/no-such-page"),
    ):
        _assert_security_headers(answer.headers)
        assert (
            "cache-control" not in answer.headers
            or "no-store" not in answer.headers["cache-control"]
        )
    for answer in (c.get("/v1/apps", headers=auth), c.get("/v1/apps")):
        _assert_security_headers(answer.headers)
        assert answer.headers["cache-control"] == "no-store"
    service.fail_with = RuntimeError("boom")
    crashed = c.get("/v1/apps", headers=auth)
    assert crashed.status_code == 500  # the server's own error answer too
    _assert_security_headers(crashed.headers)


def test_the_dashboard_has_nothing_inline_for_the_policy_to_block() -> None:
    c = _client()
    page = c.get("/dashboard").text
    assert re.findall(r"<script\b(?![^>]*\bsrc=)", page) == []
    assert "<style" not in page and " style=" not in page
    assert re.findall(r"\son[a-z]+=", page) == []
    assert '<script src="/static/dashboard.js">' in page
    assert "/static/dashboard.css" in page
    script = c.get("/static/dashboard.js")
    assert script.status_code == 200 and "pollEvents" in script.text


def test_the_documents_page_loads_swagger_ui_from_this_process_only() -> None:
    c = _client()
    answer = c.get("/docs")
    assert answer.status_code == 200
    policy = answer.headers["content-security-policy"]
    _assert_security_headers(answer.headers, policy)
    assert policy == DOCS_POLICY and policy.startswith(CONTENT_SECURITY_POLICY)
    # scripts and styles from this origin only: nothing inline, no other host
    assert "script-src" not in policy and "style-src" not in policy
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy
    assert re.findall(r"<script>", answer.text) == [] and "<style" not in answer.text
    assert re.findall(r"https?://", answer.text) == []
    sources = re.findall(r'(?:src|href)="([^"]+)"', answer.text)
    assert sources and all(s.startswith(("/static/", SWAGGER_UI_PATH + "/")) for s in sources)
    for source in sources:
        served = c.get(source)
        assert served.status_code == 200, source
        _assert_security_headers(served.headers)
    assert "SwaggerUIBundle" in c.get(f"{SWAGGER_UI_PATH}/swagger-ui-bundle.js").text
    assert "SwaggerUIBundle(" in c.get("/static/docs.js").text
    assert c.get("/redoc").status_code == 404  # it would load fonts from elsewhere


def test_the_host_allow_list() -> None:
    c = _client(allowed_hosts=["api.example", "127.0.0.1"])
    assert c.get("/healthz", headers={"Host": "api.example"}).status_code == 200
    refused = c.get("/healthz", headers={"Host": "rebound.example"})
    assert refused.status_code == 400
    _assert_security_headers(refused.headers)
    assert _client().get("/healthz", headers={"Host": "rebound.example"}).status_code == 200
