"""Serving Prometheus metrics and liveness over HTTP from a role process (``--metrics-port``).

``/metrics`` is the process's default registry; ``/healthz`` answers 200 while every loop that
ticks :func:`~drsvc.runtime.liveness.loop_liveness` has ticked recently, else 503 (what a
Kubernetes liveness probe or a systemd watchdog script should ask, rather than ``/metrics``,
which a hung role still serves from its own thread). Neither answer holds anything secret.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from drsvc.runtime.liveness import LoopLiveness, loop_liveness
from drsvc.settings import Settings

log = logging.getLogger(__name__)

HEALTH_PATH = "/healthz"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _QuietHandler(WSGIRequestHandler):
    """No line on stderr per request (a scrape every few seconds would fill the role's log)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def role_app(liveness: LoopLiveness, metrics: WsgiApp | None = None) -> WsgiApp:
    """The WSGI app of a role's port: ``/healthz`` from ``liveness``, the rest from
    ``metrics`` (default: the process's registry)."""
    served = metrics if metrics is not None else make_wsgi_app(REGISTRY)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != HEALTH_PATH:
            return served(environ, start_response)
        verdict = liveness.verdict()
        status = "200 OK" if verdict.healthy else "503 Service Unavailable"
        body = f"{'ok' if verdict.healthy else 'unhealthy'}\n{verdict.detail}\n".encode()
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body]

    return app


def serve_metrics(port: int | None, host: str | None = None) -> int | None:
    """Serve ``/metrics`` and ``/healthz`` on ``port`` (0: a free port) at ``host`` (default:
    the ``metrics_host`` setting, loopback unless DRSVC_METRICS_HOST says otherwise); return the
    port actually bound, or None when ``port`` is None (no metrics endpoint)."""
    if port is None:
        return None
    if host is None:
        host = Settings.from_env().metrics_host
    # the address family of the host (an IPv6 address needs AF_INET6), as prometheus_client does
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("RoleServer", (ThreadingWSGIServer,), {"address_family": family})
    server: WSGIServer = make_server(
        host, port, role_app(loop_liveness()), server_class, handler_class=_QuietHandler
    )
    threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True).start()
    bound = int(server.server_address[1])
    log.info("serving Prometheus metrics on http://%s:%d/metrics (liveness: /healthz)", host, bound)
    return bound
