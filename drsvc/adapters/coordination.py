"""Coordination: what drsvc needs of its coordination store, as one interface.

The failover executor (and, later, the DR controller) coordinate through Consul's KV store. They
need four things, and nothing else:

- **Reads with a version.** Every entry carries Consul's ``ModifyIndex``; a write can be made
  conditional on it (compare-and-set), so two writers never silently overwrite each other.
- **A lock held through a session.** :meth:`Coordinator.try_lock` acquires a key with a Consul
  session that a background thread renews. The holder must stop acting once
  :meth:`Lock.held` turns false: that is at the start of the last successful renewal plus the
  session TTL, on a monotonic clock, which is never later than Consul's own view (Consul
  invalidates a session only after its TTL has passed since the last renewal, and in practice
  up to twice the TTL).
- **Guarded multi-key writes.** :meth:`Coordinator.write` applies several puts and deletes as one
  Consul transaction that first checks that the lock is still held by the holder's session and
  that every conditional key still has the index the writer read. A process paused past its TTL
  (SIGSTOP, a long GC, a VM migration) that wakes up and writes is refused by Consul itself,
  not just by its own clock.
- **Watches.** :meth:`Coordinator.watch` is a blocking query: it returns when the key's index
  moves past the one given, or when the wait ends.

Takeover time: after a holder dies, another process can take its lock once Consul has
invalidated the session (TTL, up to 2 x TTL) and the lock delay has passed. With the defaults
below (TTL 10 s, lock delay 5 s) that is at most about 25 s.

:class:`drsvc.adapters.consul_coordination.ConsulCoordinator` implements it over py-consul;
unit tests use an in-memory implementation with a fake clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "DEFAULT_LOCK_DELAY_S",
    "DEFAULT_SESSION_TTL_S",
    "Coordinator",
    "Delete",
    "Entry",
    "Lock",
    "Put",
    "WriteOp",
]

#: the TTL of a lock's session; a dead holder's lock is free after at most 2 x TTL + lock delay
DEFAULT_SESSION_TTL_S = 10.0
#: how long Consul keeps a lock whose session was invalidated from being taken again, so that a
#: holder that was cut off has time to notice before anyone else acts
DEFAULT_LOCK_DELAY_S = 5.0


@dataclass(frozen=True)
class Entry:
    """A key's value as read, with the index a conditional write compares against."""

    key: str
    value: str
    #: Consul's ModifyIndex of the key (> 0)
    index: int
    #: the session that holds the key as a lock (None: nobody holds it)
    session: str | None = None


@dataclass(frozen=True)
class Put:
    """Write ``value`` at ``key``.

    ``index`` None writes unconditionally; 0 only if the key does not exist; n > 0 only if the
    key's ModifyIndex is still n.
    """

    key: str
    value: str
    index: int | None = None


@dataclass(frozen=True)
class Delete:
    """Delete ``key``; ``index`` as for :class:`Put` (0 is not allowed)."""

    key: str
    index: int | None = None


WriteOp = Put | Delete


class Lock(Protocol):
    """A held lock. Acting on it is safe only while :meth:`held` is true."""

    @property
    def key(self) -> str: ...

    @property
    def session(self) -> str: ...

    def held(self) -> bool:
        """True until last successful renewal + TTL (monotonic), or until released or lost."""
        ...

    def remaining_s(self) -> float:
        """Seconds left before :meth:`held` turns false without another renewal (0 if not held)."""
        ...

    def ensure_held(self) -> None:
        """Raise :class:`drsvc.errors.LockLostError` unless :meth:`held`."""
        ...

    def release(self) -> None:
        """Release the key and destroy the session (idempotent; never raises for a lost lock)."""
        ...


class Coordinator(Protocol):
    """The coordination store. Every method raises
    :class:`drsvc.errors.CoordinatorUnavailableError` when the store cannot be reached."""

    def get(self, key: str) -> Entry | None:
        """The key's entry (None: no such key). Reads are consistent (from the Raft leader)."""
        ...

    def list(self, prefix: str) -> list[Entry]:
        """Every entry whose key starts with ``prefix``, sorted by key."""
        ...

    def put(self, key: str, value: str, *, index: int | None = None) -> bool:
        """Write one key (``index`` as in :class:`Put`); False when the condition failed."""
        ...

    def write(self, ops: Sequence[WriteOp], *, lock: Lock | None = None) -> None:
        """Apply ``ops`` as one transaction: all or nothing.

        With ``lock``, the transaction first checks that ``lock.key`` is still held by
        ``lock.session`` (and refuses locally first if :meth:`Lock.held` is false). Raises
        :class:`drsvc.errors.LockLostError` when the lock check fails and
        :class:`drsvc.errors.ConflictError` naming the key when an index check fails.
        """
        ...

    def try_lock(
        self,
        key: str,
        value: str,
        *,
        ttl_s: float = DEFAULT_SESSION_TTL_S,
        lock_delay_s: float = DEFAULT_LOCK_DELAY_S,
    ) -> Lock | None:
        """Acquire ``key`` with a new session and write ``value`` (who holds it) there; None when
        someone else holds it or the lock delay of a lost holder has not passed. The session is
        renewed in the background until :meth:`Lock.release`."""
        ...

    def watch(self, key: str, index: int, wait_s: float) -> tuple[Entry | None, int]:
        """Block until ``key``'s index moves past ``index`` or ``wait_s`` passes; return the
        entry and the index to pass next time. ``index`` 0 returns at once."""
        ...

    def close(self) -> None:
        """Release every lock this coordinator still holds and stop renewing."""
        ...
