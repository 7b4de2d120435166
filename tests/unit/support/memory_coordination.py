"""An in-memory :class:`drsvc.adapters.coordination.Coordinator` on a fake clock (tests only).

It follows Consul's semantics where drsvc relies on them: one ModifyIndex counter for the whole
store (a transaction's writes share one index), compare-and-set, sessions that release their
keys when invalidated and then keep them from being acquired for the lock delay, a
``check-session`` in guarded writes, and watches that return when a key's index moves.

Holders and time. A lock's holder renews its session continuously while it is *alive*, so an
alive holder keeps its lock however far the clock moves, and notices at once when its session is
invalidated. Tests simulate the rest:

- :meth:`MemoryCoordinator.pause_holder` stops the renewals (a dead process, or one paused by
  SIGSTOP or a long GC). The session is invalidated ``ttl_factor`` x TTL after the last renewal
  (Consul: between 1 and 2 TTLs; choose with ``ttl_factor``), and its key is free after the lock
  delay. The paused holder's own :meth:`MemoryLock.held` goes by its clock: last renewal + TTL.
- :meth:`MemoryCoordinator.resume_holder` lets it renew again (if its session survived) or
  notice that it was lost.
- :meth:`MemoryCoordinator.expire` invalidates a session now, as Consul does when a session is
  destroyed or its TTL ran out. An alive holder notices at once; a paused one does not, and a
  write it makes is refused by the session check (:class:`LockLostError`) rather than by its
  clock.

Sizes: set :attr:`MemoryCoordinator.max_value_bytes` and a write with a larger value is refused
as Consul refuses it (413: :class:`TooLargeError`, nothing written).

Outages: set :attr:`MemoryCoordinator.unavailable` or call :meth:`MemoryCoordinator.fail_next`;
store calls then raise :class:`CoordinatorUnavailableError`. Outages do not touch sessions (use
:meth:`MemoryCoordinator.pause_holder` for a holder that cannot renew).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from drsvc.adapters.coordination import (
    DEFAULT_LOCK_DELAY_S,
    DEFAULT_SESSION_TTL_S,
    Delete,
    Entry,
    Lock,
    Put,
    WriteOp,
)
from drsvc.errors import (
    ConfigError,
    ConflictError,
    CoordinatorUnavailableError,
    LockLostError,
    TooLargeError,
)

__all__ = ["Clock", "FakeClock", "MemoryCoordinator", "MemoryLock"]

log = logging.getLogger(__name__)


class Clock(Protocol):
    def monotonic(self) -> float: ...


class FakeClock:
    """Time that moves only when told to; ``sleep`` advances it."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start

    def monotonic(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"time does not go backwards ({seconds})")
        self._now += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))


@dataclass
class _Session:
    id: str
    ttl_s: float
    lock_delay_s: float
    #: the last renewal; while the holder is alive it renews all the time
    renewed_at: float
    paused: bool = False
    valid: bool = True


class MemoryLock:
    """A lock of :class:`MemoryCoordinator` (see the module's docs for its holder's life)."""

    def __init__(self, store: MemoryCoordinator, key: str, session: _Session) -> None:
        self._store = store
        self._key = key
        self._session = session
        self._released = False

    @property
    def key(self) -> str:
        return self._key

    @property
    def session(self) -> str:
        return self._session.id

    def held(self) -> bool:
        return self.remaining_s() > 0

    def remaining_s(self) -> float:
        if self._released:
            return 0.0
        session = self._session
        if not session.paused:
            # Alive: just renewed, or it noticed that Consul dropped its session.
            self._store._reap()
            return session.ttl_s if session.valid else 0.0
        return max(0.0, session.renewed_at + session.ttl_s - self._store._clock.monotonic())

    def ensure_held(self) -> None:
        if not self.held():
            raise LockLostError(f"lock {self._key} is no longer held (session {self.session})")

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._store._release(self)


class MemoryCoordinator:
    """The store. ``ttl_factor``: how many TTLs after its last renewal a session of a paused
    holder is invalidated (Consul: 1 to 2)."""

    def __init__(self, clock: Clock, *, ttl_factor: float = 1.0) -> None:
        self._clock = clock
        self._ttl_factor = ttl_factor
        self._entries: dict[str, Entry] = {}
        #: the index of each key's last change, deletions included (what a watch compares)
        self._changed: dict[str, int] = {}
        # As in Consul, the store's index is never 0, and every write moves it past what a watch
        # of a missing key returned.
        self._index = 1
        self._sessions: dict[str, _Session] = {}
        #: key -> until when the lock delay of an invalidated holder keeps it from being acquired
        self._delayed: dict[str, float] = {}
        self._locks: list[MemoryLock] = []
        self._session_ids = itertools.count(1)
        self._failures = 0
        #: while True every store call raises CoordinatorUnavailableError
        self.unavailable = False
        #: Consul's kv_max_value_size (None: no limit); a larger value is refused as with 413
        self.max_value_bytes: int | None = None
        #: every transaction applied (or refused for its size), in order
        self.writes: list[tuple[WriteOp, ...]] = []

    # -- what tests control -------------------------------------------------------------------

    def fail_next(self, n: int = 1) -> None:
        """The next ``n`` store calls raise :class:`CoordinatorUnavailableError`."""
        self._failures += n

    def pause_holder(self, session: str) -> None:
        """The holder of ``session`` stops renewing (paused or dead)."""
        s = self._session(session)
        self._reap()
        if s.valid and not s.paused:
            s.paused = True
            s.renewed_at = self._clock.monotonic()

    def resume_holder(self, session: str) -> None:
        """The holder of ``session`` runs again: it renews if its session is still valid."""
        s = self._session(session)
        self._reap()
        s.paused = False
        if s.valid:
            s.renewed_at = self._clock.monotonic()

    def expire(self, session: str) -> None:
        """Consul invalidates ``session`` now (destroyed, or its TTL ran out)."""
        s = self._session(session)
        self._reap()
        if s.valid:
            self._invalidate(s, self._clock.monotonic())

    @property
    def index(self) -> int:
        """The store's current index."""
        return self._index

    # -- the Coordinator interface ------------------------------------------------------------

    def get(self, key: str) -> Entry | None:
        self._reach(f"get {key}")
        return self._entries.get(key)

    def list(self, prefix: str) -> list[Entry]:
        self._reach(f"list {prefix}")
        return [e for k, e in sorted(self._entries.items()) if k.startswith(prefix)]

    def put(self, key: str, value: str, *, index: int | None = None) -> bool:
        self._reach(f"put {key}")
        op = Put(key, value, index)
        _check_op(op)
        self._check_size([op])
        if not self._condition_holds(op):
            return False
        self._apply([op])
        return True

    def write(self, ops: Sequence[WriteOp], *, lock: Lock | None = None) -> None:
        if lock is not None and not lock.held():
            raise LockLostError(f"lock {lock.key} is no longer held; nothing was written")
        for op in ops:
            _check_op(op)
        if not ops:
            return
        self._reach("transaction")
        self._check_size(ops)
        if lock is not None:
            entry = self._entries.get(lock.key)
            if entry is None or entry.session != lock.session:
                raise LockLostError(
                    f"lock {lock.key} is no longer held; the store refused the write (the key's "
                    f"session is {entry.session if entry else None}, not {lock.session})"
                )
        # Conditions are checked against the state as earlier operations of the same
        # transaction left it, as Consul applies a transaction's operations in order.
        saved = (dict(self._entries), dict(self._changed))
        self._index += 1
        try:
            for op in ops:
                if not self._condition_holds(op):
                    raise ConflictError(op.key)
                self._apply_one(op, self._index)
        except ConflictError:
            self._entries, self._changed = saved
            self._index -= 1
            raise

    def try_lock(
        self,
        key: str,
        value: str,
        *,
        ttl_s: float = DEFAULT_SESSION_TTL_S,
        lock_delay_s: float = DEFAULT_LOCK_DELAY_S,
    ) -> MemoryLock | None:
        self._reach(f"acquire {key}")
        if ttl_s <= 0 or lock_delay_s < 0:
            raise ConfigError(f"lock {key}: TTL must be > 0 and lock delay >= 0")
        now = self._clock.monotonic()
        if now < self._delayed.get(key, float("-inf")):
            return None
        current = self._entries.get(key)
        if current is not None and current.session is not None:
            return None
        session = _Session(f"session-{next(self._session_ids)}", ttl_s, lock_delay_s, now)
        self._sessions[session.id] = session
        self._index += 1
        self._entries[key] = Entry(key, value, self._index, session.id)
        self._changed[key] = self._index
        lock = MemoryLock(self, key, session)
        self._locks.append(lock)
        return lock

    def watch(self, key: str, index: int, wait_s: float) -> tuple[Entry | None, int]:
        self._reach(f"watch {key}")
        if index > 0 and self._changed.get(key, 0) <= index:
            _advance(self._clock, wait_s)
            self._reap()
        entry = self._entries.get(key)
        return entry, entry.index if entry is not None else self._index

    def close(self) -> None:
        for lock in list(self._locks):
            lock.release()

    # -- internals ----------------------------------------------------------------------------

    def _reach(self, what: str) -> None:
        if self.unavailable or self._failures > 0:
            self._failures = max(0, self._failures - 1)
            raise CoordinatorUnavailableError(f"in-memory coordinator unavailable: {what}")
        self._reap()

    def _check_size(self, ops: Sequence[WriteOp]) -> None:
        self.writes.append(tuple(ops))
        limit = self.max_value_bytes
        for op in ops:
            size = len(op.value.encode("utf-8")) if isinstance(op, Put) else 0
            if limit is not None and size > limit:
                raise TooLargeError(
                    f"in-memory coordinator refused the write for its size: 413 Value for key "
                    f"{op.key!r} is too large ({size} > {limit} bytes)"
                )

    def _session(self, session: str) -> _Session:
        try:
            return self._sessions[session]
        except KeyError:
            raise ConfigError(f"no session {session}") from None

    def _reap(self) -> None:
        """Invalidate the sessions of paused holders whose time ran out, when it ran out."""
        now = self._clock.monotonic()
        for s in self._sessions.values():
            if s.valid and s.paused:
                deadline = s.renewed_at + s.ttl_s * self._ttl_factor
                if now >= deadline:
                    self._invalidate(s, deadline)

    def _invalidate(self, session: _Session, at: float) -> None:
        """Release every key ``session`` holds (behavior release) and start their lock delay."""
        session.valid = False
        held = [e for e in self._entries.values() if e.session == session.id]
        if held:
            self._index += 1
        for entry in held:
            self._entries[entry.key] = replace(entry, session=None, index=self._index)
            self._changed[entry.key] = self._index
            self._delayed[entry.key] = at + session.lock_delay_s

    def _release(self, lock: MemoryLock) -> None:
        self._locks.remove(lock)
        session = self._sessions[lock.session]
        try:
            self._reach(f"release {lock.key}")
        except CoordinatorUnavailableError as err:
            # As over Consul: best effort. Nobody renews any more, so the session expires.
            log.warning("could not release lock %s: %s", lock.key, err)
            session.paused, session.renewed_at = True, self._clock.monotonic()
            return
        entry = self._entries.get(lock.key)
        if entry is not None and entry.session == session.id:
            self._index += 1
            self._entries[lock.key] = replace(entry, session=None, index=self._index)
            self._changed[lock.key] = self._index
        # Destroyed after the release: no key left to delay.
        session.valid = False

    def _condition_holds(self, op: WriteOp) -> bool:
        current = self._entries.get(op.key)
        if op.index is None:
            return True
        if op.index == 0:
            return current is None
        return current is not None and current.index == op.index

    def _apply(self, ops: Sequence[WriteOp]) -> None:
        self._index += 1
        for op in ops:
            self._apply_one(op, self._index)

    def _apply_one(self, op: WriteOp, index: int) -> None:
        if isinstance(op, Put):
            current = self._entries.get(op.key)
            # A plain write keeps the lock's session, as in Consul.
            session = current.session if current is not None else None
            self._entries[op.key] = Entry(op.key, op.value, index, session)
        else:
            self._entries.pop(op.key, None)
        self._changed[op.key] = index


def _check_op(op: WriteOp) -> None:
    if op.key.startswith("/"):
        raise ConfigError(f"keys do not start with '/': {op.key}")
    if op.index is not None and op.index < 0:
        raise ConfigError(f"index of {op.key} must be >= 0 (got {op.index})")
    if isinstance(op, Delete) and op.index == 0:
        raise ConfigError(f"a conditional delete of {op.key} needs an index > 0")


def _advance(clock: Clock, seconds: float) -> None:
    """Let ``seconds`` pass on a clock that can be moved (a watch that waited in vain)."""
    # advance rather than sleep: tests hook sleep to act "while the caller sleeps"
    sleep = getattr(clock, "advance", None) or getattr(clock, "sleep", None)
    if sleep is not None and seconds > 0:
        sleep(seconds)
