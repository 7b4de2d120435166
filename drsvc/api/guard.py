"""What every request passes before the application sees it, as plain ASGI middleware.

:class:`RequestGuard` checks the bearer token from the headers alone and refuses a body larger
than the limit, both before anything reads the body: FastAPI reads and decodes a request's body
before it solves the route's dependencies, so a token check there comes after the server has
taken in whatever a stranger sent. The guard answers 401, 403 and 413 in the API's one error
shape without ever calling ``receive()``; a body without ``Content-Length`` (chunked) is counted
as it is read and refused with 413 once it passes the limit. The routes' own token checks stay,
as a second line and for the OpenAPI document.

:class:`SecurityHeaders` sets the browser-facing headers on every answer, the guard's and the
error handlers' included.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from drsvc.api.auth import ApiAuth
from drsvc.api.problems import ApiProblem, problem_body

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "READ_METHODS",
    "RequestGuard",
    "SecurityHeaders",
    "bearer_token",
    "needs_token",
]

#: methods that change nothing; every other method needs an operator
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: the page and its script come from this origin only, and nobody may frame it (clickjacking)
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)

_ALWAYS = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def needs_token(path: str) -> bool:
    """The data and the metrics need a token; the probes, the dashboard's page and script and
    the API's documents hold no data and stay open."""
    return path.startswith("/v1/") or path == "/metrics"


def bearer_token(headers: Headers) -> str | None:
    """The token of an ``Authorization: Bearer ...`` header, as FastAPI's ``HTTPBearer``
    reads it; none for any other scheme."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def _refuse_receive() -> Message:
    # The guard's own answers must not read the request: a stranger's body stays unread.
    raise RuntimeError("the request guard answers without reading the request body")


async def _answer(problem: ApiProblem, scope: Scope, send: Send) -> None:
    response = JSONResponse(
        problem_body(problem.status, problem.code, problem.message),
        status_code=problem.status,
        headers=problem.headers,
    )
    await response(scope, _refuse_receive, send)


def _too_large(limit: int) -> ApiProblem:
    return ApiProblem(
        413, "too_large", f"the request body is larger than this API accepts ({limit} bytes)"
    )


class RequestGuard:
    """The token check and the body limit, before the body is read."""

    def __init__(self, app: ASGIApp, auth: ApiAuth, max_body_bytes: int) -> None:
        self._app = app
        self._auth = auth
        self._max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            if needs_token(scope["path"]):
                self._auth.check(
                    bearer_token(headers), mutating=scope["method"] not in READ_METHODS
                )
            self._check_declared_length(headers)
        except ApiProblem as problem:
            await _answer(problem, scope, send)
            return
        await self._limited(scope, receive, send)

    def _check_declared_length(self, headers: Headers) -> None:
        declared = headers.get("content-length")
        if declared is None:
            return
        if not declared.isdigit():
            raise ApiProblem(400, "bad_request", "the Content-Length header is not a number")
        if int(declared) > self._max_body_bytes:
            raise _too_large(self._max_body_bytes)

    async def _limited(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the application, counting the body as it reads it; past the limit the answer is
        413, whatever the application made of the interrupted read."""
        received = 0
        exceeded = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max_body_bytes:
                    exceeded = True
                    raise _too_large(self._max_body_bytes)
            return message

        async def checked_send(message: Message) -> None:
            nonlocal started
            if exceeded:
                # FastAPI turns an error while it reads the body into its own 400; the answer
                # to a body over the limit is 413, so that one is replaced, once.
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await _answer(_too_large(self._max_body_bytes), scope, send)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._app(scope, counting_receive, checked_send)
        except ApiProblem as problem:
            if started or not exceeded:
                raise
            started = True
            await _answer(problem, scope, send)


class SecurityHeaders:
    """``Content-Security-Policy``, ``nosniff``, ``DENY`` framing and no referrer on every
    answer, and ``Cache-Control: no-store`` on the data (``/v1/...``): answers carry
    application state that a shared cache must not keep. ``policies`` gives a path its own
    content security policy (the interactive API documents need one)."""

    def __init__(self, app: ASGIApp, policies: Mapping[str, str] | None = None) -> None:
        self._app = app
        self._policies = dict(policies or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path: str = scope["path"]
        added = {
            **_ALWAYS,
            "content-security-policy": self._policies.get(path, CONTENT_SECURITY_POLICY),
        }
        if path.startswith("/v1/"):
            added["cache-control"] = "no-store"

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                mine = {name.encode("latin-1") for name in added}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in mine]
                message = {
                    **message,
                    "headers": kept
                    + [(k.encode("latin-1"), v.encode("latin-1")) for k, v in added.items()],
                }
            await send(message)

        await self._app(scope, receive, with_headers)
