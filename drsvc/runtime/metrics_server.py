"""Serving Prometheus metrics over HTTP from a role process (``--metrics-port``)."""

from __future__ import annotations

import logging

from prometheus_client import REGISTRY, start_http_server

from drsvc.settings import Settings

log = logging.getLogger(__name__)


def serve_metrics(port: int | None, host: str | None = None) -> int | None:
    """Serve the process's default registry on ``port`` (0: a free port) at ``host`` (default:
    the ``metrics_host`` setting, loopback unless DRSVC_METRICS_HOST says otherwise); return the
    port actually bound, or None when ``port`` is None (no metrics endpoint)."""
    if port is None:
        return None
    if host is None:
        host = Settings.from_env().metrics_host
    server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    bound = int(server.server_address[1])
    log.info("serving Prometheus metrics on http://%s:%d/metrics", host, bound)
    return bound
