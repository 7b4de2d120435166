"""Where an application is active: a versioned document, and the rules for changing it.

The document lives at ``drsvc/<namespace>/apps/<app>/active``
(:func:`failover.naming.app_active_key`) as JSON::

    {"v": 1, "cluster": "west", "epoch": 7, "failover_id": "f-...", "at_ms": 1795556180117,
     "lease_ms": 15000}

``cluster`` is an alias, or null while a switch is under way. Only the failover executor writes
it, and only through :func:`switch`, whose rules make a switch safe for clients that follow it:

* **Old -> none -> new.** A cluster is never replaced by another directly: the executor first
  writes none, waits until every client that saw the old value has lost it (:func:`lease_wait_s`),
  and only then writes the new one. So no moment exists in which one client still uses the old
  cluster while another already uses the new one.
* **The epoch only grows**, by one per write, so a client (or a fenced writer) can tell a newer
  value from an older one whatever order it hears them in.
* **Every write names its failover** (``failover_id``), so the record of that failover explains
  any value, and a resumed failover recognises its own writes.

The lease, and why a switch never leaves two clusters in use
============================================================

A client promises (:func:`lease_deadline_s`, :func:`usable_cluster`): it acts on a value it read
only until ``sent + lease``, where ``sent`` is when it *sent* the request that returned the value
and ``lease`` is the document's ``lease_ms``, both on its own monotonic clock. When the lease
lapses, or the value is none, it stops producing and consuming.

The executor promises: after its write of none is **acknowledged** by Consul (at ``A``, read on
its own monotonic clock just after the acknowledgement arrived), it writes no other cluster before
``A + lease_wait_s(lease)``, where ``lease`` is the none document's lease and::

    lease_wait_s(lease) = lease x (1 + 0.01) + 1 s

(``_CLOCK_RATE_MARGIN`` = 1 %, ``_SCHEDULING_MARGIN_S`` = 1 s). An executor that did not see the
acknowledgement itself (it resumed a failover, in another process or on another host, or its
write timed out and committed later) counts from a moment it knows to be after the commit: the
acknowledgement of a later write or read that found the none value (a retried step recognising
its own write, or the read of the record that says deactivate is done), at worst its own start of
the wait. No wall-clock time (``at_ms``) enters the wait.

Why that is enough. Let ``C`` be the real time the none write commits. A client that acts on the
old cluster read it through a request sent at ``s``; reads are linearizable, so the read took
effect after ``s`` and before ``C``: ``s < C``. The client stops once its clock has counted
``lease`` from ``s``; its clock and the executor's may run at rates that differ by at most 1 %,
and its check may run up to 1 s late. The executor's acknowledgement arrives after the commit
(``A >= C``), and it counts ``lease x 1.01 + 1 s`` from there on its own clock. So every client
of the old value has stopped before the new value is written, however long the write took to
commit, however far apart the two machines' wall clocks are, and whatever steps either wall clock
takes.

Assumptions: Consul reads of the key are linearizable (``consistent``; the blocking watch checks
leadership as it starts); clock *rates* differ by at most 1 % (NTP keeps them within 0.05 %);
a client's lease check runs at most 1 s late. Nothing is assumed about clock *offsets*.

The lease changes with the topology: a none document carries ``max(current lease, configured
lease)`` (what clients of the old value may hold, so what the wait must cover), and a document
that names a cluster carries the configured lease (lowering it is safe: the clients of the old,
longer lease have run out by then).

An absent key means: active on the application's preferred cluster, at epoch 0, under the
application's *configured* lease (``decode_active(None, preferred, lease_ms=configured)``), for
clients and executor alike, so both must read the same topology. drsvc creates every
application's document from the topology when it starts
(:func:`drsvc.runtime.failover.bootstrap.ensure_active_documents`, never overwriting one), so a
key is absent only before the first start. A plain alias (or ``"none"``) written by hand or by an
older version reads as that cluster (or none) at epoch 0 under the default lease, marked
``versioned=False``: the executor's next write takes its epoch above every epoch the application
ever had (``epoch_floor`` of :func:`switch`), so the epoch never goes backwards.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from failover.errors import ActiveFormatError, SwitchError

__all__ = [
    "ACTIVE_FORMAT_VERSION",
    "DEFAULT_LEASE_S",
    "ActiveDocument",
    "decode_active",
    "lease_deadline_s",
    "lease_wait_s",
    "switch",
    "usable_cluster",
]

ACTIVE_FORMAT_VERSION = 1

#: how long a client may go on using a value without hearing from Consul
DEFAULT_LEASE_S = 15.0

#: the largest relative rate difference assumed between two machines' monotonic clocks
_CLOCK_RATE_MARGIN = 0.01
#: and a fixed allowance for scheduling (a client's check runs at most this late)
_SCHEDULING_MARGIN_S = 1.0

_NONE_VALUES = frozenset({"", "none", "null"})
#: what a cluster alias may look like (the topology's rule for names)
_ALIAS = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(frozen=True)
class ActiveDocument:
    """An application's active cluster (None while a switch is under way)."""

    cluster: str | None
    #: grows by one with every write; 0 for the implicit or hand-written value
    epoch: int = 0
    #: the failover that wrote it (None: never written by a failover)
    failover_id: str | None = None
    #: when it was written (wall clock, ms; 0 unknown)
    at_ms: int = 0
    #: how long a client may act on this value without hearing from Consul again
    lease_ms: int = int(DEFAULT_LEASE_S * 1000)
    #: False for a value drsvc did not write as a document (a plain alias or ``none`` typed by
    #: hand, or an absent key): it has no epoch of its own, so clients do not act on it as if it
    #: were a newer value than one they heard
    versioned: bool = True

    def encode(self) -> str:
        return json.dumps(
            {
                "v": ACTIVE_FORMAT_VERSION,
                "cluster": self.cluster,
                "epoch": self.epoch,
                "failover_id": self.failover_id,
                "at_ms": self.at_ms,
                "lease_ms": self.lease_ms,
            },
            separators=(",", ":"),
        )

    @property
    def switching(self) -> bool:
        return self.cluster is None


def decode_active(
    raw: str | None, preferred: str, lease_ms: int = int(DEFAULT_LEASE_S * 1000)
) -> ActiveDocument:
    """The document stored at an application's key (``raw`` None: the key is absent, so the
    application is where it prefers to be, under the application's configured ``lease_ms``).
    Raises :class:`ActiveFormatError` naming what is wrong; it never guesses a cluster."""
    if raw is None:
        return ActiveDocument(preferred, lease_ms=lease_ms, versioned=False)
    text = raw.strip()
    if not text.startswith(("{", '"')) and text != "null":
        return _plain(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ActiveFormatError(f"not valid JSON ({err.msg}): {raw!r}") from err
    if value is None or isinstance(value, str):
        return _plain("" if value is None else value)
    if not isinstance(value, dict):
        raise ActiveFormatError(f"expected a JSON object or a cluster alias, got {raw!r}")
    version = value.get("v", ACTIVE_FORMAT_VERSION)
    if version != ACTIVE_FORMAT_VERSION:
        raise ActiveFormatError(
            f"format version {version!r}; this version reads {ACTIVE_FORMAT_VERSION}: {raw!r}"
        )
    if "cluster" not in value:
        raise ActiveFormatError(f"no 'cluster' field: {raw!r}")
    cluster, epoch = value["cluster"], value.get("epoch", 0)
    failover_id, at_ms = value.get("failover_id"), value.get("at_ms", 0)
    lease_ms = value.get("lease_ms", int(DEFAULT_LEASE_S * 1000))
    if cluster is not None and (not isinstance(cluster, str) or not _ALIAS.fullmatch(cluster)):
        raise ActiveFormatError(f"'cluster' must be an alias or null: {raw!r}")
    if not _is_count(epoch):
        raise ActiveFormatError(f"'epoch' must be a non-negative integer: {raw!r}")
    if failover_id is not None and not isinstance(failover_id, str):
        raise ActiveFormatError(f"'failover_id' must be a string or null: {raw!r}")
    if not _is_count(at_ms):
        raise ActiveFormatError(f"'at_ms' must be a non-negative integer: {raw!r}")
    if not _is_count(lease_ms) or lease_ms == 0:
        raise ActiveFormatError(f"'lease_ms' must be a positive integer: {raw!r}")
    return ActiveDocument(cluster, epoch, failover_id, at_ms, lease_ms)


def switch(
    current: ActiveDocument,
    to: str | None,
    failover_id: str,
    now_ms: int,
    lease_ms: int | None = None,
    epoch_floor: int = 0,
) -> ActiveDocument:
    """The next document when failover ``failover_id`` switches from ``current`` to ``to``
    (None: to none), with ``lease_ms`` (default: the current document's). Its epoch is one more
    than both ``current``'s and ``epoch_floor`` (the highest epoch the application ever had, for
    a ``current`` value that is no document of drsvc's). Raises :class:`SwitchError` when the
    rules forbid it."""
    if not failover_id:
        raise SwitchError("every write of the active cluster must name its failover")
    if to is not None and not _ALIAS.fullmatch(to):
        raise SwitchError(f"the active cluster must be an alias or none, not {to!r}")
    if to is not None and current.cluster is not None:
        raise SwitchError(
            f"cannot switch from {current.cluster!r} straight to {to!r}: switch to none first "
            "and wait out the clients' lease"
        )
    if to is None and current.cluster is None:
        raise SwitchError("the application is already switching (active: none)")
    lease = current.lease_ms if lease_ms is None else lease_ms
    if lease <= 0:
        raise SwitchError(f"the lease must be positive (got {lease} ms)")
    if epoch_floor < 0:
        raise SwitchError(f"an epoch floor is never negative (got {epoch_floor})")
    return ActiveDocument(to, max(current.epoch, epoch_floor) + 1, failover_id, now_ms, lease)


def lease_wait_s(lease_s: float = DEFAULT_LEASE_S) -> float:
    """How long to wait, from the acknowledgement of the none write (monotonic), before writing
    a new cluster: every client that saw the old value has stopped by then, even one whose clock
    runs a little slow (see the module's docs for the argument)."""
    if lease_s <= 0:
        raise SwitchError(f"the lease must be positive (got {lease_s}s)")
    return lease_s * (1 + _CLOCK_RATE_MARGIN) + _SCHEDULING_MARGIN_S


def lease_deadline_s(document: ActiveDocument, heard_at_s: float) -> float:
    """Until when (on the client's monotonic clock) a client may act on ``document``, which it
    read through a request it sent at ``heard_at_s``: the lease runs from the moment the request
    left, never from when the answer arrived, so a slow answer cannot stretch it."""
    return heard_at_s + document.lease_ms / 1000.0


def usable_cluster(
    document: ActiveDocument | None, heard_at_s: float | None, now_s: float
) -> str | None:
    """The cluster a client may produce to and consume from at ``now_s``: the document's, while
    its lease holds; None while a switch is under way, once the lease has lapsed, or before the
    client has heard anything."""
    if document is None or heard_at_s is None or document.cluster is None:
        return None
    if now_s >= lease_deadline_s(document, heard_at_s):
        return None
    return document.cluster


def _plain(alias: str) -> ActiveDocument:
    text = alias.strip()
    if text.lower() in _NONE_VALUES:
        return ActiveDocument(None, versioned=False)
    if not _ALIAS.fullmatch(text):
        raise ActiveFormatError(f"expected a JSON object or a cluster alias, got {alias!r}")
    return ActiveDocument(text, versioned=False)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
