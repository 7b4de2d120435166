"""A thin typed wrapper over py-consul for what drsvc needs of Consul's HTTP API.

Connection failures and timeouts become :class:`CoordinatorUnavailableError` (retryable); requests
Consul rejects become :class:`ConfigError`, but for those it rejects for their size (413: a value
over ``kv_max_value_size``, a transaction over ``txn_max_req_len`` or over 128 operations; or an
answer saying a value exceeds a byte limit), which become :class:`TooLargeError`: nothing of them
was written, and sending them again cannot succeed. Later issues build the coordinator protocol
(leader lock, compare-and-set, watches) on top of this.

How to reach Consul (scheme, TLS files, ACL token) is a :class:`ConsulAccess`; without one, it is
resolved from the environment (:mod:`drsvc.adapters.consul_access`), so a caller that passes only
an address gets what ``CONSUL_HTTP_TOKEN_FILE``, ``CONSUL_CACERT`` and the rest ask for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import consul
import requests
from consul.exceptions import ACLDisabled, ACLPermissionDenied, BadRequest, ClientError, NotFound

from drsvc.adapters.consul_access import ConsulAccess, consul_endpoint
from drsvc.errors import ConfigError, CoordinatorUnavailableError, TooLargeError

T = TypeVar("T")

#: how Consul says a request was refused for its size, whatever the status it came with
_TOO_LARGE = re.compile(
    r"^413\b|too large|exceeds \d+ byte limit|too many operations", re.IGNORECASE
)


class ConsulClient:
    """Consul's HTTP API at ``http_addr`` (``host:port``, optionally after ``http://`` or
    ``https://``; None: the address ``access`` resolved), reached as ``access`` says (None:
    resolved from the environment)."""

    def __init__(
        self,
        http_addr: str | None = None,
        timeout_s: float = 5.0,
        access: ConsulAccess | None = None,
    ) -> None:
        # Resolved for this address: a scheme in CONSUL_HTTP_ADDR belongs to that agent, not to
        # the one the caller chose.
        self.access = access if access is not None else ConsulAccess.from_env(address=http_addr)
        address = http_addr or self.access.address
        if not address:
            raise ConfigError(
                "no Consul address: set DRSVC_CONSUL_HTTP_ADDR or CONSUL_HTTP_ADDR (host:port)"
            )
        endpoint = consul_endpoint(address, self.access)
        self.endpoint = endpoint
        #: ``host:port``, as messages name it
        self.http_addr = endpoint.address
        #: the token sent with every request (None: none)
        self._token = None if self.access.token is None else self.access.token.read()
        # Every setting is passed, so py-consul reads none of CONSUL_HTTP_ADDR, CONSUL_HTTP_SSL
        # or CONSUL_HTTP_SSL_VERIFY behind the access's back.
        self._consul = consul.Consul(
            host=endpoint.host,
            port=endpoint.port,
            scheme=endpoint.scheme,
            verify=self.access.verify_setting(),
            cert=self.access.cert_setting(),
            connections_timeout=timeout_s,
        )
        # py-consul sets its token to CONSUL_HTTP_TOKEN when that is set, whatever it was given,
        # so the resolved token (which may come from a file, or from an argument that must win)
        # is put in place after construction; it is read at every request.
        self._consul.token = self._token

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        try:
            return self._attempt(what, fn)
        except ACLPermissionDenied as err:
            if not self._reread_token():
                raise self._denied(what, err) from err
        # The token file holds another token now (rotated without a restart): one more try.
        try:
            return self._attempt(what, fn)
        except ACLPermissionDenied as err:
            raise self._denied(what, err) from err

    def _attempt(self, what: str, fn: Callable[[], T]) -> T:
        """``fn``, with Consul's errors translated, but a permission denied left to _call."""
        try:
            return fn()
        except (requests.ConnectionError, requests.Timeout, consul.Timeout) as err:
            raise CoordinatorUnavailableError(f"Consul at {self.http_addr}: {what}: {err}") from err
        except ACLPermissionDenied:
            raise
        except consul.ConsulException as err:
            # 5xx answers such as "No cluster leader" are transient; 4xx are our mistake.
            if _TOO_LARGE.search(str(err)):
                raise TooLargeError(
                    f"Consul at {self.http_addr} refused {what} for its size, so nothing of it "
                    f"was written: {err}"
                ) from err
            if isinstance(err, BadRequest | ClientError | ACLDisabled | NotFound):
                raise ConfigError(f"Consul at {self.http_addr} rejected {what}: {err}") from err
            raise CoordinatorUnavailableError(f"Consul at {self.http_addr}: {what}: {err}") from err

    def _reread_token(self) -> bool:
        """Read the token file again; True when it now holds another token (now in use)."""
        source = self.access.token
        if source is None or source.file is None:
            return False
        token = source.read()
        if token == self._token:
            return False
        self._token = self._consul.token = token
        return True

    def _denied(self, what: str, err: ACLPermissionDenied) -> ConfigError:
        # Consul's answer names the token by its accessor id and the permission it lacks; the
        # secret itself is never in it, nor here.
        source = self.access.token
        whose = (
            "no ACL token was given (set CONSUL_HTTP_TOKEN_FILE or the topology's"
            " consul.token_file)"
            if source is None
            else f"the ACL token from {source.origin} lacks the permission or is unknown to Consul"
        )
        return ConfigError(f"Consul at {self.http_addr} denied {what}: {err}; {whose}")

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

    # ---------------------------------------------------------------- ACLs (a management token)

    def acl_self(self) -> dict[str, Any]:
        """The token this client sends, as Consul knows it (its accessor id, its policies);
        a permission error while Consul does not know it (yet)."""
        return dict(self._call("read its own ACL token", self._consul.acl.token.read_self))

    def upsert_acl_policy(
        self, name: str, rules: Mapping[str, object], description: str = ""
    ) -> str:
        """Create policy ``name`` with ``rules`` (a policy document in its JSON form), or
        replace the rules of the one that exists; returns its id."""
        policies = self._call("list ACL policies", self._consul.acl.policy.list)
        found = next((p for p in policies or [] if p.get("Name") == name), None)
        if found is None:
            created = self._call(
                f"create ACL policy {name}",
                lambda: self._consul.acl.policy.create(
                    name, description=description or None, rules=dict(rules)
                ),
            )
            return str(created["ID"])
        policy_id = str(found["ID"])
        self._call(
            f"update ACL policy {name}",
            lambda: self._consul.acl.policy.update(
                policy_id, name, description=description or None, rules=dict(rules)
            ),
        )
        return policy_id

    def upsert_acl_token(
        self, accessor_id: str, secret: str, policies: list[str], description: str = ""
    ) -> None:
        """Create the token ``accessor_id`` with secret ``secret`` holding ``policies`` (by
        name), or give the one that exists those policies. The secret is sent, never logged."""
        tokens = self._call("list ACL tokens", self._consul.acl.token.list)
        exists = any(t.get("AccessorID") == accessor_id for t in tokens or [])
        if exists:
            self._call(
                f"update ACL token {accessor_id}",
                lambda: self._consul.acl.token.update(
                    accessor_id, policies_name=policies, description=description
                ),
            )
            return
        self._call(
            f"create ACL token {accessor_id}",
            lambda: self._consul.acl.token.create(
                accessor_id=accessor_id,
                secret_id=secret,
                policies_name=policies,
                description=description,
            ),
        )
