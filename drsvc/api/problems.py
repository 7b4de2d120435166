"""The one error shape of the API, and the mapping from drsvc's errors to HTTP status codes.

Every error answer is ``{"error": {"status": 409, "code": "failover_running", "message": "..."}}``
(validation errors add ``"details"``: one entry per wrong field). Messages are drsvc's own; no
request header (the token) is ever echoed.

A caller can act on ``code`` without reading the message: ``precondition_failed`` (412) means
"the plan you looked at is not the one that would run now: ask for a dry run again";
``request_mismatch`` (409) means "that request id already named a different request of this
application: use a new id"; ``refused`` (409) means the plan refuses as things stand (the reason
is in the message, for instance a planned failover whose active cluster does not answer).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from drsvc.errors import (
    ConfigError,
    ConflictError,
    DrsvcError,
    FailoverError,
    LockLostError,
    PreconditionFailedError,
    RefusedError,
    RequestMismatchError,
    TemporaryError,
)

__all__ = ["ApiProblem", "install_problem_handlers", "problem_body"]

log = logging.getLogger(__name__)


class ApiProblem(Exception):
    """An answer other than success, raised by a handler: status, a stable code, a message."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def problem_body(status: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message, **extra}}


def problem_of(err: DrsvcError) -> ApiProblem:
    """The HTTP answer to an error the service raised (the subclasses of
    :class:`RefusedError` first: each has its own answer)."""
    if isinstance(err, PreconditionFailedError):
        return ApiProblem(412, "precondition_failed", str(err))
    if isinstance(err, RequestMismatchError):
        return ApiProblem(409, "request_mismatch", str(err))
    if isinstance(err, RefusedError):
        return ApiProblem(409, "refused", str(err))
    if isinstance(err, TemporaryError):
        headers = {"Retry-After": str(max(1, round(err.delay)))}
        return ApiProblem(503, "unavailable", str(err), headers)
    if isinstance(err, ConflictError | LockLostError | FailoverError):
        return ApiProblem(409, "conflict", str(err))
    if isinstance(err, ConfigError):
        return ApiProblem(400, "bad_request", str(err))
    return ApiProblem(500, "internal", str(err))


def _answer(problem: ApiProblem, **extra: Any) -> JSONResponse:
    return JSONResponse(
        problem_body(problem.status, problem.code, problem.message, **extra),
        status_code=problem.status,
        headers=problem.headers,
    )


def install_problem_handlers(app: FastAPI) -> None:
    """Answer every error, ours or the framework's, in the one shape."""

    @app.exception_handler(ApiProblem)
    async def on_problem(_request: Request, exc: ApiProblem) -> JSONResponse:
        return _answer(exc)

    @app.exception_handler(DrsvcError)
    async def on_drsvc_error(request: Request, exc: DrsvcError) -> JSONResponse:
        problem = problem_of(exc)
        if problem.status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc)
        return _answer(problem)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        details = [
            {
                "field": ".".join(str(part) for part in e.get("loc", ())),
                "problem": str(e.get("msg", "invalid")),
            }
            for e in errors
        ]
        if any(e.get("type") == "json_invalid" for e in errors):
            problem = ApiProblem(400, "bad_request", "the request body is not valid JSON")
        else:
            summary = "; ".join(f"{d['field']}: {d['problem']}" for d in details[:5])
            problem = ApiProblem(422, "invalid", f"invalid request: {summary}")
        return _answer(problem, details=details)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        code = codes.get(exc.status_code, "http_error")
        message = str(exc.detail) if exc.detail else code.replace("_", " ")
        headers = dict(exc.headers) if exc.headers else None
        return _answer(ApiProblem(exc.status_code, code, message, headers))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _answer(ApiProblem(500, "internal", "internal error; see the service's log"))
