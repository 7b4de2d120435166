"""The coordination interface (:mod:`drsvc.adapters.coordination`) over Consul's HTTP API.

Errors are translated as in :class:`drsvc.adapters.consul_client.ConsulClient`: Consul unreachable,
timed out or answering 5xx is :class:`CoordinatorUnavailableError`; a request it rejects (4xx) is
:class:`ConfigError`. A rolled back transaction is :class:`LockLostError` (the lock's session check
failed) or :class:`ConflictError` naming the key whose index check failed.

Timing of a lock
----------------

:meth:`ConsulCoordinator.try_lock` creates a session with ``Behavior: release``, the requested
lock delay and a TTL rounded *up* to whole seconds (Consul documents TTLs in seconds and enforces
a minimum, ``session_ttl_min``, 10 s unless configured lower). The holder's own view uses the TTL
as requested, which is never longer than the one Consul was given.

- A daemon thread renews the session every TTL/3. :meth:`ConsulLock.held` is true until the
  *start* of the last successful renewal request (or of the session's creation) plus the TTL, on
  the monotonic clock. Consul restarts its timer when it *receives* the renewal, which is after
  the request started, so the holder always gives up first, however long the request was in
  flight. Had we counted from the answer, a renewal that was slow to come back would extend the
  holder's view past Consul's.
- A renewal that Consul answers with "no such session" (it was destroyed or invalidated) marks the
  lock lost at once. A renewal that fails because Consul is unreachable is retried on the next
  tick; if none succeeds before the TTL runs out, :meth:`ConsulLock.held` turns false and the lock
  stays lost.
- Consul does not invalidate a session exactly at its TTL: it waits up to twice the TTL after the
  last renewal it received. An invalidated session's keys are released and then cannot be
  acquired by anyone for the lock delay, so that a holder that was cut off has time to notice.
  A dead holder's lock can therefore be taken over after TTL to 2 x TTL plus the lock delay
  (with the defaults of :mod:`~drsvc.adapters.coordination`: 15 to 25 s). Destroying a session
  triggers the lock delay too; releasing the key first (as :meth:`ConsulLock.release` does) does
  not.

Writes under a lock are one transaction that starts with a ``check-session`` of the lock's key:
a holder paused past its TTL that wakes up and writes is refused by Consul even when its own
clock did not notice.

Blocking queries
----------------

:meth:`ConsulCoordinator.watch` is a blocking query. Consul holds it for up to ``wait`` plus
wait/16 of jitter; py-consul (the pinned version) adds that to its HTTP timeout for requests that
carry an index, so a watch longer than ``timeout_s`` does not time out. When the index Consul
returns goes backwards (a restored snapshot, a rebuilt cluster) the next index is 0, which makes
the next watch return at once with fresh state, as Consul's documentation asks of clients.

Sizes: Consul (1.22, the version the project builds) takes at most 128 operations in a
transaction, a request body of at most ``txn_max_req_len`` (512 KiB by default, values counted
base64-encoded) and values of at most ``kv_max_value_size`` (512 KiB); beyond them it answers 413,
which is :class:`TooLargeError` (a refusal: nothing was written). Failover records stay under
them by storing large records in chunks (:mod:`drsvc.adapters.record_store`).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from consul.callback import CB
from consul.exceptions import ACLPermissionDenied, ClientError, NotFound

from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.coordination import (
    DEFAULT_LOCK_DELAY_S,
    DEFAULT_SESSION_TTL_S,
    Delete,
    Entry,
    Lock,
    Put,
    WriteOp,
)
from drsvc.errors import ConfigError, ConflictError, DrsvcError, LockLostError

__all__ = ["ConsulCoordinator", "ConsulLock"]

log = logging.getLogger(__name__)

_CONSISTENT = "consistent"
#: the HTTP status of a transaction that Consul rolled back
_TXN_ROLLED_BACK = "409"
#: how Consul starts the error of an operation a transaction's token may not do
_PERMISSION_DENIED = "Permission denied"


class _Api(ConsulClient):
    """The raw Consul calls the coordinator makes, each through ConsulClient's translation of
    errors. One per thread of use: the underlying HTTP session is not shared across threads."""

    def entry(self, key: str) -> Entry | None:
        _, item = self._call(
            f"get {key}", lambda: self._consul.kv.get(key, consistency=_CONSISTENT)
        )
        return None if item is None else _entry(item)

    def entries(self, prefix: str) -> list[Entry]:
        _, items = self._call(
            f"list {prefix}",
            lambda: self._consul.kv.get(prefix, recurse=True, consistency=_CONSISTENT),
        )
        return sorted((_entry(item) for item in items or []), key=lambda e: e.key)

    def put(self, key: str, value: str, index: int | None) -> bool:
        return bool(self._call(f"put {key}", lambda: self._consul.kv.put(key, value, cas=index)))

    def txn(self, payload: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """None when applied; the errors when Consul rolled the transaction back."""

        def call() -> list[dict[str, Any]] | None:
            try:
                # Not py-consul's txn.put: it sends no ACL token.
                self._consul.http.put(
                    CB.json(),
                    "/v1/txn",
                    headers=self._consul.prepare_headers(None),
                    data=json.dumps(payload),
                )
            except ClientError as err:
                # py-consul raises ClientError("409 <body>") for a rolled back transaction; the
                # body says which operation failed. Any other 4xx is translated by _call.
                status, _, body = str(err).partition(" ")
                if status != _TXN_ROLLED_BACK:
                    raise
                try:
                    errors = json.loads(body).get("Errors")
                except (ValueError, AttributeError):
                    errors = None
                found = list(errors) if isinstance(errors, list) else [{"What": body}]
                denied = [e for e in found if _PERMISSION_DENIED in str(e.get("What", ""))]
                if denied:
                    # Consul rolls back an operation the token may not do as it rolls back a
                    # conflict; it is a permission problem, not a conflict, and said as one.
                    raise ACLPermissionDenied(str(denied[0].get("What"))) from None
                return found
            return None

        return self._call("transaction", call)

    def create_session(self, key: str, ttl_s: int, lock_delay_s: float) -> str:
        body = {
            "Name": f"drsvc lock {key}",
            "TTL": f"{ttl_s}s",
            "Behavior": "release",
            "LockDelay": f"{round(lock_delay_s * 1000)}ms",
        }
        # py-consul's session.create refuses TTLs under 10 s on the client side, although
        # Consul's minimum is a setting of the agent; so the request is made directly.
        session = self._call(
            f"create a session for {key}",
            lambda: self._consul.http.put(
                CB.json(is_id=True),
                "/v1/session/create",
                params=[],
                headers=self._consul.prepare_headers(None),
                data=json.dumps(body),
            ),
        )
        return str(session)

    def renew_session(self, session: str) -> bool:
        """False when Consul no longer knows the session (destroyed or invalidated)."""

        def call() -> bool:
            try:
                # 404 raises NotFound; an empty answer (no session) would come back as None.
                return self._consul.session.renew(session) is not None
            except NotFound:
                return False

        return self._call(f"renew session {session}", call)

    def destroy_session(self, session: str) -> None:
        self._call(f"destroy session {session}", lambda: self._consul.session.destroy(session))

    def acquire(self, key: str, value: str, session: str) -> bool:
        return bool(
            self._call(f"acquire {key}", lambda: self._consul.kv.put(key, value, acquire=session))
        )

    def release(self, key: str, value: str, session: str) -> bool:
        return bool(
            self._call(f"release {key}", lambda: self._consul.kv.put(key, value, release=session))
        )

    def watch(self, key: str, index: int, wait_s: float) -> tuple[Entry | None, int]:
        wait = f"{max(1, math.ceil(wait_s * 1000))}ms"
        header, item = self._call(
            f"watch {key}",
            lambda: self._consul.kv.get(key, index=index, wait=wait, consistency=_CONSISTENT),
        )
        return (None if item is None else _entry(item)), int(header)


def _entry(item: dict[str, Any]) -> Entry:
    key = str(item["Key"])
    raw = item.get("Value")
    try:
        value = "" if raw is None else bytes(raw).decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"Consul key {key} does not hold UTF-8 text: {err}") from err
    session = item.get("Session")
    return Entry(key, value, int(item["ModifyIndex"]), str(session) if session else None)


def _b64(value: str) -> str:
    return base64.b64encode(value.encode("utf-8")).decode("ascii")


def _txn_op(op: WriteOp) -> dict[str, Any]:
    if op.index is not None and op.index < 0:
        raise ConfigError(f"index of {op.key} must be >= 0 (got {op.index})")
    kv: dict[str, Any] = {"Key": op.key}
    if isinstance(op, Put):
        kv["Value"] = _b64(op.value)
        if op.index is None:
            kv["Verb"] = "set"
        else:
            kv.update(Verb="cas", Index=op.index)
    elif isinstance(op, Delete):
        if op.index is None:
            kv["Verb"] = "delete"
        elif op.index == 0:
            raise ConfigError(f"a conditional delete of {op.key} needs an index > 0")
        else:
            kv.update(Verb="delete-cas", Index=op.index)
    return {"KV": kv}


class ConsulLock:
    """A key held by a Consul session that a daemon thread renews (see the module's docs)."""

    def __init__(
        self,
        api: _Api,
        key: str,
        value: str,
        session: str,
        ttl_s: float,
        started: float,
        on_release: Callable[[ConsulLock], None],
    ) -> None:
        self._api = api
        self._key = key
        self._value = value
        self._session = session
        self._ttl_s = ttl_s
        self._on_release = on_release
        self._guard = threading.Lock()
        self._valid_until = started + ttl_s
        self._lost: str | None = None
        self._released = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"renew lock {key}", daemon=True
        )

    @property
    def key(self) -> str:
        return self._key

    @property
    def session(self) -> str:
        return self._session

    def held(self) -> bool:
        with self._guard:
            return self._lost is None and not self._released and self._now() < self._valid_until

    def remaining_s(self) -> float:
        with self._guard:
            if self._lost is not None or self._released:
                return 0.0
            return max(0.0, self._valid_until - self._now())

    def ensure_held(self) -> None:
        if not self.held():
            raise LockLostError(f"lock {self._key} is no longer held: {self._why_not()}")

    def release(self) -> None:
        with self._guard:
            if self._released:
                return
            self._released = True
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        # Release the key before destroying the session: destroying a session that still holds
        # the key would start the lock delay for whoever comes next. Releasing with a session
        # that no longer holds the key changes nothing, so a lost lock is safe to release.
        for what, call in (
            ("release", lambda: self._api.release(self._key, self._value, self._session)),
            ("destroy the session of", lambda: self._api.destroy_session(self._session)),
        ):
            try:
                call()
            except DrsvcError as err:
                log.warning("could not %s lock %s (best effort): %s", what, self._key, err)
        self._on_release(self)

    # -- renewal ------------------------------------------------------------------------------

    def _start(self) -> None:
        self._thread.start()

    @staticmethod
    def _now() -> float:
        return time.monotonic()

    def _why_not(self) -> str:
        with self._guard:
            if self._released:
                return "it was released"
            if self._lost is not None:
                return self._lost
        return f"its session {self._session} was not renewed within its TTL ({self._ttl_s:g}s)"

    def _mark_lost(self, why: str) -> None:
        with self._guard:
            if self._released or self._lost is not None:
                return
            self._lost = why
        log.warning("lock %s lost: %s", self._key, why)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._ttl_s / 3):
            if not self.held():
                # Too late: the holder may already have stopped acting on the lock.
                self._mark_lost(self._why_not())
                return
            started = self._now()
            try:
                alive = self._api.renew_session(self._session)
            except DrsvcError as err:
                log.warning("renewing lock %s failed (will retry): %s", self._key, err)
                continue
            if self._stop.is_set():
                return
            if not alive:
                self._mark_lost(f"Consul no longer knows its session {self._session}")
                return
            with self._guard:
                self._valid_until = max(self._valid_until, started + self._ttl_s)


class ConsulCoordinator:
    """:class:`drsvc.adapters.coordination.Coordinator` over the Consul agent at ``http_addr``
    (``host:port``, as :class:`ConsulClient` takes it); ``timeout_s`` bounds every request except
    a watch's wait. ``access`` says how to reach Consul (None: resolved from the environment,
    once, for this coordinator and its locks' clients)."""

    def __init__(
        self,
        http_addr: str | None = None,
        timeout_s: float = 5.0,
        access: ConsulAccess | None = None,
    ) -> None:
        self._timeout_s = timeout_s
        self._api = _Api(http_addr, timeout_s, access)
        self._access = self._api.access
        self._http_addr = self._api.http_addr
        #: with its scheme, for the locks' clients (an https:// given here must stay https)
        self._url = self._api.endpoint.url
        self._locks: set[ConsulLock] = set()
        self._locks_guard = threading.Lock()

    def get(self, key: str) -> Entry | None:
        return self._api.entry(key)

    def list(self, prefix: str) -> list[Entry]:
        return self._api.entries(prefix)

    def put(self, key: str, value: str, *, index: int | None = None) -> bool:
        if index is not None and index < 0:
            raise ConfigError(f"index of {key} must be >= 0 (got {index})")
        return self._api.put(key, value, index)

    def write(self, ops: Sequence[WriteOp], *, lock: Lock | None = None) -> None:
        if lock is not None and not lock.held():
            raise LockLostError(f"lock {lock.key} is no longer held; nothing was written")
        if not ops:
            return
        payload = [_txn_op(op) for op in ops]
        if lock is not None:
            check = {"Verb": "check-session", "Key": lock.key, "Session": lock.session}
            payload.insert(0, {"KV": check})
        errors = self._api.txn(payload)
        if errors is None:
            return
        first = 1 if lock is not None else 0
        whats = "; ".join(str(e.get("What", e)) for e in errors)
        if lock is not None and any(e.get("OpIndex") == 0 for e in errors):
            why = f"Consul refused the write: the session no longer holds it ({whats})"
            if isinstance(lock, ConsulLock):
                lock._mark_lost(why)
            raise LockLostError(f"lock {lock.key} is no longer held; {why}")
        for error in errors:
            at = error.get("OpIndex")
            if isinstance(at, int) and 0 <= at - first < len(ops):
                key = ops[at - first].key
                raise ConflictError(
                    key, f"{key} was changed by someone else since it was read ({whats})"
                )
        raise ConfigError(f"Consul at {self._http_addr} rolled back a transaction: {whats}")

    def try_lock(
        self,
        key: str,
        value: str,
        *,
        ttl_s: float = DEFAULT_SESSION_TTL_S,
        lock_delay_s: float = DEFAULT_LOCK_DELAY_S,
    ) -> ConsulLock | None:
        if ttl_s <= 0 or lock_delay_s < 0:
            raise ConfigError(f"lock {key}: TTL must be > 0 and lock delay >= 0")
        # The lock's own client: it is used from the renewal thread, and a renewal that takes
        # longer than a fraction of the TTL is of no use anyway.
        api = _Api(self._url, min(self._timeout_s, max(ttl_s / 2, 0.5)), self._access)
        started = time.monotonic()
        session = api.create_session(key, math.ceil(ttl_s), lock_delay_s)
        try:
            acquired = api.acquire(key, value, session)
        except DrsvcError:
            _destroy_quietly(api, session, key)
            raise
        if not acquired:
            _destroy_quietly(api, session, key)
            return None
        lock = ConsulLock(api, key, value, session, ttl_s, started, self._forget)
        with self._locks_guard:
            self._locks.add(lock)
        lock._start()
        return lock

    def watch(self, key: str, index: int, wait_s: float) -> tuple[Entry | None, int]:
        # Index 0 makes py-consul send no index: Consul answers at once.
        entry, current = self._api.watch(key, max(index, 0), wait_s)
        if current < index:
            return entry, 0
        # Consul's index is at least 1; a 0 would turn every later watch into a busy loop.
        return entry, max(current, 1)

    def close(self) -> None:
        with self._locks_guard:
            locks = list(self._locks)
        for lock in locks:
            lock.release()

    def _forget(self, lock: ConsulLock) -> None:
        with self._locks_guard:
            self._locks.discard(lock)


def _destroy_quietly(api: _Api, session: str, key: str) -> None:
    try:
        api.destroy_session(session)
    except DrsvcError as err:
        log.warning("could not destroy the unused session for %s (it expires by TTL): %s", key, err)
