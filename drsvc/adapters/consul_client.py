"""A thin typed wrapper over py-consul for what drsvc needs of Consul's HTTP API.

Connection failures and timeouts become :class:`CoordinatorUnavailableError` (retryable); requests
Consul rejects become :class:`ConfigError`. Later issues build the coordinator protocol (leader
lock, compare-and-set, watches) on top of this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import consul
import requests
from consul.exceptions import ACLPermissionDenied, BadRequest, ClientError, NotFound

from drsvc.errors import ConfigError, CoordinatorUnavailableError

T = TypeVar("T")


class ConsulClient:
    """Consul's HTTP API at ``http_addr`` (``host:port``)."""

    def __init__(self, http_addr: str, timeout_s: float = 5.0) -> None:
        host, _, port = http_addr.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"invalid Consul HTTP address {http_addr!r}; expected host:port")
        self.http_addr = http_addr
        self._consul = consul.Consul(host=host, port=int(port), connections_timeout=timeout_s)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (requests.ConnectionError, requests.Timeout, consul.Timeout) as err:
            raise CoordinatorUnavailableError(f"Consul at {self.http_addr}: {what}: {err}") from err
        except consul.ConsulException as err:
            # 5xx answers such as "No cluster leader" are transient; 4xx are our mistake.
            if isinstance(err, BadRequest | ClientError | ACLPermissionDenied | NotFound):
                raise ConfigError(f"Consul at {self.http_addr} rejected {what}: {err}") from err
            raise CoordinatorUnavailableError(f"Consul at {self.http_addr}: {what}: {err}") from err

    def leader(self) -> str:
        """The address of the Raft leader, or "" while there is none."""
        return str(self._call("status/leader", self._consul.status.leader) or "")

    def peers(self) -> list[str]:
        """The Raft peers (server addresses) the cluster has now."""
        return [str(p) for p in self._call("status/peers", self._consul.status.peers) or []]

    def register_tcp_service(
        self,
        name: str,
        address: str,
        ports: list[int],
        tags: list[str],
        meta: dict[str, str],
        interval: str = "2s",
    ) -> None:
        """Register (or replace) service ``name`` with one TCP health check per port."""
        checks = [
            consul.Check.tcp(address, port, interval=interval, timeout="1s") for port in ports
        ]
        for check, port in zip(checks, ports, strict=True):
            check["Name"] = f"{name} tcp {address}:{port}"
        self._call(
            f"register service {name}",
            lambda: self._consul.agent.service.register(
                name,
                service_id=name,
                address=address,
                port=ports[0],
                tags=tags,
                meta=meta,
                check=checks[0],
                extra_checks=checks[1:],
                replace_existing_checks=True,
            ),
        )

    def service_health(self, name: str) -> list[dict[str, Any]]:
        """Health entries of service ``name`` (one per instance, with its checks)."""
        _, entries = self._call(f"health of {name}", lambda: self._consul.health.service(name))
        return list(entries)

    def service_passing(self, name: str) -> bool:
        """True when ``name`` is registered and every one of its checks passes."""
        entries = self.service_health(name)
        return bool(entries) and all(
            check["Status"] == "passing" for entry in entries for check in entry["Checks"]
        )

    def kv_put(self, key: str, value: str) -> None:
        if not self._call(f"put {key}", lambda: self._consul.kv.put(key, value)):
            raise CoordinatorUnavailableError(f"Consul at {self.http_addr} did not store {key}")

    def kv_get(self, key: str) -> str | None:
        _, item = self._call(f"get {key}", lambda: self._consul.kv.get(key))
        if item is None or item.get("Value") is None:
            return None
        return bytes(item["Value"]).decode()
