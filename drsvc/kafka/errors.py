"""The one mapping of Kafka client errors into :mod:`drsvc.errors`.

librdkafka reports a failure as a ``KafkaException`` wrapping a ``KafkaError`` (a code, a text,
and the flags ``fatal`` and ``retriable``), a future gives up with ``TimeoutError``, and a
message or a delivery report carries a bare ``KafkaError``. :func:`to_drsvc` turns any of them
into the drsvc error a caller acts on; :func:`translated` does it for a block of code. The named
code sets are for callers that treat some answers specially (skip a partition that is gone, ask
a moving coordinator again) before they map the rest.

The rule, first match wins:

* a fatal error: :class:`~drsvc.errors.FatalClientError`. The client can never be used again,
  so asking it again is pointless; its owner stops and a new one is built.
* a retriable error, an unavailable cluster (:data:`UNAVAILABLE`) or a ``TimeoutError``:
  :class:`~drsvc.errors.KafkaUnavailableError`.
* a credential refused, an operation not authorised, an invalid setting
  (:data:`CONFIG_PROBLEMS`): :class:`~drsvc.errors.ConfigError`. Asking again cannot help until
  someone changes a setting, a secret or an ACL.
* anything else: :class:`~drsvc.errors.KafkaUnavailableError`.

Where the mappings this replaces disagree, this one takes the safer side:

* The admin adapter (topic creation, group offsets), the status reader and the translation
  view call every error that is neither flagged retriable nor one of a few codes a
  ``ConfigError``, so "all brokers down" or a failed name lookup tells an operator to fix a
  setting and stops a retry. Here an unknown error is temporary: the callers' retries are
  bounded, so a permanent error taken for a temporary one costs a few attempts and then
  surfaces with its reason, while the opposite mistake stops a failover or a status run that
  would have worked.
* The topic readers call a fatal error on a record ``KafkaUnavailableError``. Here it is
  ``FatalClientError``: retrying with the same client cannot work. Both are temporary errors;
  a caller that catches only ``KafkaUnavailableError`` must catch ``FatalClientError`` (or
  ``TemporaryError``) too when it moves onto this mapping.
* Fencing retries an initialisation only when librdkafka flags the error retriable. Here
  :func:`retriable` also counts the unavailable codes, which librdkafka does not always flag
  (a local timeout, a broken connection), so a fencing attempt is repeated within its bound
  rather than given up at the first dropped connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from confluent_kafka import KafkaError, KafkaException

from drsvc.errors import ConfigError, DrsvcError, FatalClientError, KafkaUnavailableError

__all__ = [
    "AUTHENTICATION",
    "AUTHORIZATION",
    "CONFIG_PROBLEMS",
    "COORDINATOR_MOVING",
    "GONE",
    "GROUP_HAS_MEMBERS",
    "INVALID_CONFIG",
    "LEADERLESS",
    "UNAVAILABLE",
    "describe",
    "kafka_error",
    "refused_by_acl",
    "refuses_credentials",
    "retriable",
    "to_drsvc",
    "translated",
]

#: the topic or partition does not exist (deleted since it was listed, or not created yet)
GONE = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)

#: a group's coordinator is moving, loading or not elected yet: asking again soon can work
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)

#: the cluster did not answer (in time): unreachable, connection broken, request timed out, or
#: a coordinator moving. librdkafka does not flag all of these retriable.
UNAVAILABLE = (
    frozenset(
        {
            KafkaError._TIMED_OUT,
            KafkaError._TRANSPORT,
            KafkaError._ALL_BROKERS_DOWN,
            KafkaError.REQUEST_TIMED_OUT,
        }
    )
    | COORDINATOR_MOVING
)

#: a partition without a leader yet (a topic created a moment ago); watermark queries then
#: answer ``_NO_OFFSET``, which librdkafka does not flag retriable
LEADERLESS = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._NO_OFFSET,
    }
)

#: a commit without a member id refused because the group has live members. Kafka 4.1 answers
#: UNKNOWN_MEMBER_ID for classic and consumer-protocol groups alike; the others are how a group
#: coordinator refuses a commit from someone who is not a current member.
GROUP_HAS_MEMBERS = frozenset(
    {
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.STALE_MEMBER_EPOCH,
        KafkaError.FENCED_MEMBER_EPOCH,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.NON_EMPTY_GROUP,
    }
)

#: the cluster refused the client's credentials or mechanism
AUTHENTICATION = frozenset(
    {
        KafkaError._AUTHENTICATION,
        KafkaError.SASL_AUTHENTICATION_FAILED,
        KafkaError.UNSUPPORTED_SASL_MECHANISM,
    }
)

#: the client's principal may not do what it asked
AUTHORIZATION = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
    }
)

#: a client setting, or an argument drsvc passed, is invalid (the client says so when it is
#: built, for example a certificate it cannot load)
INVALID_CONFIG = frozenset({KafkaError.INVALID_CONFIG, KafkaError._INVALID_ARG})

#: answers that no retry can change: someone must fix a setting, a secret or an ACL
CONFIG_PROBLEMS = AUTHENTICATION | AUTHORIZATION | INVALID_CONFIG


def refuses_credentials(error: KafkaError) -> bool:
    """Whether a client error event says the cluster refused the client's credentials, or the
    client refused the cluster's certificate. librdkafka reports either only as an event (the
    request that needed the connection fails with a transport error, like an outage does)."""
    if error.code() in AUTHENTICATION:
        return True
    # A certificate nobody trusts: the handshake fails the same way at every try. Other TLS
    # failures (a connection cut mid-handshake by a dying broker) are left to the outage path.
    return error.code() == KafkaError._SSL and "certificate" in error.str().lower()


_HINTS = (
    (AUTHENTICATION, "check the cluster's security settings and secrets in the topology"),
    (AUTHORIZATION, "the client's principal needs an ACL for this"),
)


def refused_by_acl(exc: BaseException) -> bool:
    """Whether ``exc`` (a drsvc error raised ``from`` a Kafka error, or the Kafka error itself)
    is the cluster refusing the principal an operation its ACLs do not grant."""
    for candidate in (exc, exc.__cause__):
        error = kafka_error(candidate) if candidate is not None else None
        if error is not None:
            return error.code() in AUTHORIZATION
    return False


def kafka_error(exc: BaseException | KafkaError) -> KafkaError | None:
    """The ``KafkaError`` that ``exc`` carries (itself, if it is one); None for anything else."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, KafkaException) and exc.args:
        first = exc.args[0]
        if isinstance(first, KafkaError):
            return first
        # KafkaException(KafkaError._TRANSPORT) carries a bare code
        if type(first) is int:
            return KafkaError(first)
    return None


def describe(exc: BaseException | KafkaError) -> str:
    """One line for a log or a report: the error's name and text (``_TIMED_OUT: Local: Timed
    out``), or the exception's type and message."""
    error = kafka_error(exc)
    if error is not None:
        return f"{error.name()}: {error.str()}"
    text = str(exc)
    if not text and isinstance(exc, TimeoutError):
        text = "no answer in time"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def retriable(exc: BaseException | KafkaError) -> bool:
    """Asking again, with the same client, may succeed: librdkafka flags the error retriable, or
    the cluster did not answer (:data:`UNAVAILABLE`, a ``TimeoutError``). Never for a fatal
    error."""
    error = kafka_error(exc)
    if error is None:
        return isinstance(exc, TimeoutError)
    if error.fatal():
        return False
    return error.retriable() or error.code() in UNAVAILABLE


def to_drsvc(exc: BaseException | KafkaError, what: str, cluster: str | None = None) -> DrsvcError:
    """The drsvc error for ``exc``, met while doing ``what`` (``"listing topics"``) on
    ``cluster`` (an alias); the message names both. Raise it ``from exc``."""
    where = f"cluster '{cluster}': " if cluster else ""
    message = f"{where}{what}: {describe(exc)}"
    error = kafka_error(exc)
    if error is not None and error.fatal():
        return FatalClientError(f"{message} (fatal: this client cannot be used again)")
    if retriable(exc):
        return KafkaUnavailableError(message)
    if error is not None and error.code() in CONFIG_PROBLEMS:
        for codes, hint in _HINTS:
            if error.code() in codes:
                return ConfigError(f"{message} ({hint})")
        return ConfigError(message)
    return KafkaUnavailableError(message)


@contextmanager
def translated(what: str, cluster: str | None = None) -> Iterator[None]:
    """Raise the Kafka exceptions and timeouts of the block as drsvc errors (:func:`to_drsvc`),
    ``from`` the original.

    Anything else passes through unchanged: a drsvc error is already mapped, and a
    ``TypeError`` or a ``ValueError`` from the client library is a bug in the calling code,
    which a retry would only hide.
    """
    try:
        yield
    except (KafkaException, TimeoutError) as exc:
        raise to_drsvc(exc, what, cluster) from exc
