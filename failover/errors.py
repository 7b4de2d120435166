"""Errors of the pure core.

``failover`` cannot import ``drsvc`` (dependencies point one way), so it has its own small
hierarchy, and every error ``failover`` raises on purpose is defined here. Every one is also a
:class:`ValueError`: they all mean "this input breaks a rule", which lets pydantic validators in
the service raise them directly and report them under the field that was wrong, and lets callers
that catch ``ValueError`` keep doing so::

    CoreError                     base of every error raised on purpose by ``failover``
    ├── PolicyError               a replication-policy or topic-naming rule is broken
    ├── PatternError              an include/exclude regular expression does not compile
    ├── SyncConflictError         an offset sync contradicts the offset index
    ├── SwitchError               a change of an application's active cluster breaks its rules
    │   └── FailoverRefused       a failover that must not start (the message says why)
    │       ├── PreconditionFailed  the caller's expectations (kind, epoch) no longer hold
    │       ├── RequestMismatch     a request id already names a different request
    │       └── RecordTooLarge      a failover whose record would not fit the store's ceiling
    └── FormatError               bytes are not a record this build can read (or write)
        ├── SyncFormatError       an offset sync key or value
        ├── IndexSnapshotError    an offset index snapshot
        ├── CheckpointFormatError a checkpoint key or value
        ├── HeartbeatFormatError  a heartbeat record
        ├── ProvenanceFormatError a provenance header
        ├── ActiveFormatError     an application's active-cluster document
        └── RecordFormatError     a failover record

The modules that raise them re-export them (``failover.offset_syncs.SyncFormatError`` ...).
The service wraps them into :mod:`drsvc.errors` where it turns input into effects.
"""

from __future__ import annotations

__all__ = [
    "ActiveFormatError",
    "CheckpointFormatError",
    "CoreError",
    "FailoverRefused",
    "FormatError",
    "HeartbeatFormatError",
    "IndexSnapshotError",
    "PatternError",
    "PolicyError",
    "PreconditionFailed",
    "ProvenanceFormatError",
    "RecordFormatError",
    "RecordTooLarge",
    "RequestMismatch",
    "SwitchError",
    "SyncConflictError",
    "SyncFormatError",
]


class CoreError(ValueError):
    """Base of the errors raised on purpose by the pure core."""


class PolicyError(CoreError):
    """A cluster alias, separator or topic name breaks a naming rule.

    Examples: an alias containing the separator, a remote topic name longer than Kafka allows,
    a topic name with characters outside ``[a-zA-Z0-9._-]``.
    """


class PatternError(CoreError):
    """An include/exclude pattern is not a valid Python regular expression."""

    def __init__(self, pattern: str, reason: str) -> None:
        self.pattern = pattern
        self.reason = reason
        super().__init__(f"invalid regex {pattern!r}: {reason}")


class SyncConflictError(CoreError):
    """A sync contradicts the index (two writers, out-of-order syncs, a reused target topic)."""


class SwitchError(CoreError):
    """A change of an application's active cluster that its rules forbid (straight from one
    cluster to another, an epoch that does not grow, a switch to where it already is)."""


class FailoverRefused(SwitchError):
    """A failover that must not start: unknown cluster, already active there, another failover
    of the application running, no flow to the target..."""


class PreconditionFailed(FailoverRefused):
    """The caller planned against a situation that has changed: the failover it saw (its kind,
    the application's epoch) is not the one that would run now. HTTP answers 412."""


class RequestMismatch(FailoverRefused):
    """A request id that an application's earlier, different request already used (another
    target, or force where there was none). HTTP answers 409."""


class RecordTooLarge(FailoverRefused):
    """A failover record larger than the ceiling of what is stored for one failover, even in
    chunks (:mod:`failover.record_chunks`): the failover must not go on."""


class FormatError(CoreError):
    """Bytes are not a record of a format (or version) this build can read; decoders never
    guess."""


class SyncFormatError(FormatError):
    """Bytes are not a valid offset sync (or key) of a format version this build can read."""


class IndexSnapshotError(FormatError):
    """Bytes are not a snapshot this build can read (foreign, newer version, or damaged)."""


class CheckpointFormatError(FormatError):
    """Bytes are not a checkpoint key or value this build can read, or a checkpoint is invalid."""


class HeartbeatFormatError(FormatError):
    """A heartbeat record that this version cannot read or write."""


class ProvenanceFormatError(FormatError):
    """A provenance header value that this version cannot read."""


class ActiveFormatError(FormatError):
    """An application's active-cluster document this version cannot read."""


class RecordFormatError(FormatError):
    """A failover record (``failovers/<id>``) is not one this build can read."""
