"""The one error hierarchy of drsvc.

Every failure that reaches an operator is a :class:`DrsvcError`. Third-party exceptions
(librdkafka, Consul's HTTP API, subprocesses) are translated at the adapter edge and raised
``from`` the original, so callers never have to know which library sat underneath::

    DrsvcError                      message for a human; .retryable says whether to try again
    ├── PermanentError              retrying the same call cannot succeed
    │   ├── ConfigError             a setting or argument is wrong
    │   │   ├── CredentialsRefusedError  a cluster refused the credentials (never an outage)
    │   │   └── TopologyError       a topology file is wrong (names the file and the field)
    │   ├── NotInstalledError       a component the project installs is missing
    │   ├── LocalEnvError           the embedded local environment cannot do what was asked
    │   │   ├── PortInUseError      a port the environment needs is taken
    │   │   └── ProcessStartError   a process died or never became ready (points at its log)
    │   ├── LockLostError           a coordination lock is no longer held: its holder must stop
    │   ├── ConflictError           a conditional write found a key changed by someone else
    │   ├── FailoverError           a failover could not go on (says why)
    │   └── RefusedError            a request that must not be carried out as things stand
    │       ├── PreconditionFailedError
    │       │                       the caller's expectations (kind, epoch) no longer hold
    │       ├── RequestMismatchError
    │       │                       a request id already names a different request
    │       └── TooLargeError       a write too large for the coordination store (Consul's
    │                               413, or a failover record over its ceiling)
    └── TemporaryError              the same call may succeed later (.delay hints when)
        ├── KafkaUnavailableError   brokers unreachable or timed out
        ├── FatalClientError        a Kafka client can never be used again: the process stops
        │                           so that its supervisor starts it afresh
        ├── CoordinatorUnavailableError
        │                           Consul unreachable or timed out
        └── NoActiveClusterError    an application has no usable active cluster now (a switch
                                    is under way, or its client's lease lapsed): wait, then retry

``failover/`` has its own pure errors (see ``failover.errors``): it cannot import drsvc. The
runtime maps them where it calls the core (a refusal of the core's failover plan becomes a
:class:`RefusedError` of the same message, raised ``from`` it), so the interfaces (commands, the
API, the controller) catch drsvc's errors only.
"""

from __future__ import annotations

from pathlib import Path


class DrsvcError(Exception):
    """Base of every error drsvc raises on purpose."""

    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class PermanentError(DrsvcError):
    """Retrying the same operation cannot succeed without a change by someone."""

    retryable = False


class TemporaryError(DrsvcError):
    """The same operation may succeed later; ``delay`` is a hint in seconds."""

    retryable = True

    def __init__(self, message: str, delay: float = 1.0) -> None:
        super().__init__(message)
        self.delay = delay


class ConfigError(PermanentError):
    """A setting, an argument or a file given to drsvc is wrong."""


class CredentialsRefusedError(ConfigError):
    """A cluster refused drsvc's credentials or did not trust its certificate: a secret or a
    security setting must be fixed. Never evidence that the cluster is down (a probe that meets
    it says nothing about the cluster's health)."""


class TopologyError(ConfigError):
    """A topology file is malformed; the message names the file and the field."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid topology {source}:\n{lines}")


class NotInstalledError(PermanentError):
    """A component that the project's install step provides is missing."""


class LocalEnvError(PermanentError):
    """The embedded local environment (``drsvc dev``) cannot do what was asked."""


class PortInUseError(LocalEnvError):
    """A port that the local environment needs is taken by another process."""

    def __init__(self, what: str, port: int) -> None:
        self.what = what
        self.port = port
        super().__init__(
            f"port {port} for {what} is already in use by another process; stop that process, "
            "or run 'drsvc dev down' and remove the state directory to pick new ports"
        )


class ProcessStartError(LocalEnvError):
    """A managed process exited early or never became ready."""

    def __init__(self, what: str, reason: str, log_file: Path | None) -> None:
        self.what = what
        self.log_file = log_file
        where = f"; see its log: {log_file}" if log_file is not None else ""
        super().__init__(f"{what} failed to start: {reason}{where}")


class KafkaUnavailableError(TemporaryError):
    """Kafka brokers could not be reached or did not answer in time."""


class FatalClientError(TemporaryError):
    """A Kafka client reported a fatal error (librdkafka: it cannot be used any more).

    The process that owns it stops after settling what it safely can; a restart creates new
    clients. Nothing is retried with the broken one.
    """


class CoordinatorUnavailableError(TemporaryError):
    """The coordination store (Consul) could not be reached or did not answer in time."""


class NoActiveClusterError(TemporaryError):
    """An application's client may not produce or consume now: its active cluster is being
    switched (the key says none), or the client has not heard from Consul within its lease."""


class LockLostError(PermanentError):
    """A coordination lock is no longer held (its session expired, was destroyed or taken over).

    The holder must stop acting on what the lock guarded; another process may resume it.
    """


class ConflictError(PermanentError):
    """A conditional write failed: ``key`` changed since it was read."""

    def __init__(self, key: str, message: str | None = None) -> None:
        self.key = key
        super().__init__(message or f"{key} was changed by someone else since it was read")


class FailoverError(PermanentError):
    """A failover or failback could not go on: a record or key it needs is unreadable, the
    application's lock stays held, a step failed too often. A failover that must not start is a
    :class:`RefusedError` instead."""


class RefusedError(PermanentError):
    """A request that must not be carried out as things stand; the message says why.

    A failover the plan refuses (already active there, the active cluster does not answer,
    another failover runs, a translation no wait makes exact ...), a migration step whose checks
    fail, a MirrorMaker 2 takeover that cannot be placed. Most come before the request changed
    anything; where one can come later, its raiser says what was done. The API answers 409
    ``refused``; the commands exit 1 with ``refused:`` and the reason.
    """


class PreconditionFailedError(RefusedError):
    """The caller planned against a situation that has changed: the failover it saw (its kind,
    the application's epoch) is not the one that would run now. The API answers 412, so that
    the caller knows to ask for a dry run again."""


class RequestMismatchError(RefusedError):
    """A request id that an earlier, different request of the application already used
    (another target, or force where there was none). The API answers 409 ``request_mismatch``:
    a new request needs a new id."""


class TooLargeError(RefusedError):
    """A write the coordination store refuses for its size, so nothing of it was written:
    Consul answered 413 (a value over ``kv_max_value_size``, a transaction over
    ``txn_max_req_len`` or over its operations' limit), or a failover record is over the
    ceiling of what is stored for one failover. A failover met by it before it changed
    anything does not start; one met by it later rolls back."""
