"""``drsvc_api_requests_total``: requests answered, by method, route and status.

Counted outermost, so refused requests (a wrong host, a missing token, a body too large) count
too. Label values are bounded: a route's template (``/v1/apps/{app}``, not the path), ``unmatched``
when no route ran, and the method only when it is one of HTTP's usual ones. The server accepts any
method token, and each new value would be a new time series kept for the life of the process.
"""

from __future__ import annotations

from functools import cache

from prometheus_client import REGISTRY, Counter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["KNOWN_METHODS", "RequestMetrics", "method_label"]

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})


@cache
def _requests_total() -> Counter:
    # one counter per process, made on first use (a second registration would fail)
    return Counter(
        "drsvc_api_requests",
        "API requests answered, by method, route and status code.",
        ["method", "route", "status"],
        registry=REGISTRY,
    )


def method_label(method: str) -> str:
    return method if method in KNOWN_METHODS else "other"


class RequestMetrics:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._requests_total = _requests_total()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 500  # an exception that escapes becomes the server's 500

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, noting_status)
        finally:
            # the router writes the route it chose into this same scope
            route = getattr(scope.get("route"), "path", "unmatched")
            self._requests_total.labels(method_label(scope["method"]), route, str(status)).inc()
