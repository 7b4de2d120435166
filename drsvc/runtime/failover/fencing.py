"""Fencing an application's transactional producers on the cluster it leaves.

A lease tells a client when to stop, but a client that is paused (a stopped process, a long
garbage collection, a partition from Consul) cannot act on it: when it wakes it may still send
what it had queued, and commit a transaction, on the old cluster. For a transactional producer
the broker can refuse that on its own: initialising a producer with the same
``transactional.id`` bumps the id's producer epoch and aborts its open transaction, so the old
producer's next send, ``send_offsets_to_transaction`` or ``commit_transaction`` fails with a
fencing error, and nothing it wrote in that transaction becomes visible to a
``read_committed`` reader.

:func:`fence_transactional_ids` does that for each id an application declares
(``transactional_ids`` in the topology), on the old cluster, while it answers. It never raises
for one id: every id ends up either fenced or in the report's failures with the reason, and the
whole run is bounded by one deadline. The failover executor runs it at the end of a planned
failover's wait-lease (once every client that follows the lease has stopped, so it never fences
a producer still entitled to write) and records :meth:`FencingReport.detail` in that step's
event; ``drsvc recover`` runs it on a lost cluster that came back, before it measures what did
not cross.

Plain idempotent producers have no such handle: nothing on a broker tells their requests from
the active cluster's apart, so records they had queued or in flight when they were paused can
still be appended after the switch (see "Fencing" in ``docs/failover.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import describe, retriable

__all__ = [
    "DEFAULT_FENCING_TIMEOUT_S",
    "DEFAULT_PARALLEL",
    "FenceFailure",
    "FencingReport",
    "TransactionalClient",
    "fence_transactional_ids",
]

log = logging.getLogger(__name__)

#: the whole fencing's bound when the caller gives none: long enough for a coordinator to
#: abort an open transaction (it answers CONCURRENT_TRANSACTIONS until the markers are written),
#: short against a lease
DEFAULT_FENCING_TIMEOUT_S = 30.0

#: ids fenced at once: each is a producer with its own connections and threads
DEFAULT_PARALLEL = 8

#: the pause before trying an id again after a retriable error
_RETRY_BACKOFF_S = 0.2

#: the client id every fencing producer carries (visible in the brokers' request logs)
FENCING_CLIENT_ID = "drsvc-fencing"


class TransactionalClient(Protocol):
    """What fencing needs of a transactional producer (confluent-kafka's ``Producer``)."""

    def init_transactions(self, timeout: float) -> None: ...

    def close(self) -> bool: ...


@dataclass(frozen=True)
class FenceFailure:
    transactional_id: str
    reason: str


@dataclass(frozen=True)
class FencingReport:
    """What one fencing run did on one cluster."""

    cluster: str
    #: the ids whose producer epoch was bumped (any open transaction of theirs aborted)
    fenced: tuple[str, ...] = ()
    failed: tuple[FenceFailure, ...] = ()
    took_s: float = 0.0
    #: the ids asked for, in the order given
    asked: tuple[str, ...] = field(default=())

    @property
    def complete(self) -> bool:
        """Every id asked for was fenced."""
        return not self.failed

    def detail(self) -> str:
        """One line for the failover record's step event."""
        if not self.asked:
            return f"no transactional ids to fence on {self.cluster}"
        text = (
            f"fenced {len(self.fenced)} of {len(self.asked)} transactional id(s) on "
            f"{self.cluster} in {self.took_s:.1f}s"
        )
        if self.failed:
            text += "; not fenced: " + ", ".join(
                f"{f.transactional_id} ({f.reason})" for f in self.failed
            )
        return text


def _initialise(client: TransactionalClient, deadline: float, clock: Clock) -> str | None:
    """Initialise transactions until it succeeds (None) or fails for good (the reason)."""
    while True:
        try:
            client.init_transactions(max(deadline - clock.monotonic(), 0.001))
            return None
        except Exception as err:  # every failure is this id's, reported, never raised
            left = deadline - clock.monotonic()
            # a coordinator still loading or moving, a dropped connection: the same producer
            # may try again
            if not retriable(err) or left <= 0:
                return describe(err)
            clock.sleep(min(_RETRY_BACKOFF_S, left))
            if deadline - clock.monotonic() <= 0:
                return describe(err)


def fence_transactional_ids(
    cluster: str,
    clients: KafkaClients | Mapping[str, Any],
    transactional_ids: Sequence[str],
    *,
    timeout_s: float = DEFAULT_FENCING_TIMEOUT_S,
    clock: Clock | None = None,
    parallel: int = DEFAULT_PARALLEL,
) -> FencingReport:
    """Fence every id of ``transactional_ids`` on ``cluster``: initialise a transactional
    producer with each, all within ``timeout_s``. Returns the report; one id's failure (an
    unreachable coordinator, no time left, an authorisation error) is in its ``failed``, never
    raised.

    The producers come from ``clients``, a client factory that knows ``cluster``, or, for a
    caller that holds only the cluster's resolved settings (what
    :meth:`Cluster.client_config <drsvc.topology.models.Cluster.client_config>` gives), from a
    factory built on them. ``clock`` (default: the factory's) bounds the run and paces the
    retries."""
    factory = (
        clients
        if isinstance(clients, KafkaClients)
        else KafkaClients.for_configs({cluster: clients}, clock=clock)
    )
    timer = factory.clock if clock is None else clock
    asked = tuple(dict.fromkeys(transactional_ids))
    started = timer.monotonic()
    deadline = started + timeout_s

    def fence(transactional_id: str) -> FenceFailure | None:
        left = deadline - timer.monotonic()
        if left <= 0:
            return FenceFailure(transactional_id, f"not tried: the {timeout_s:g}s bound ran out")
        overlay = {"transactional.id": transactional_id, "client.id": FENCING_CLIENT_ID}
        try:
            client: TransactionalClient = factory.producer(cluster, overlay)
        except Exception as err:  # a bad configuration: this id's failure, reported
            return FenceFailure(transactional_id, describe(err))
        failure = _initialise(client, deadline, timer)
        if failure is None:
            client.close()
            return None
        # no close() after a failure: it would try to abort what the unfinished initialisation
        # holds and warn; dropping the producer destroys it all the same
        del client
        log.warning("fencing %s on %s failed: %s", transactional_id, cluster, failure)
        return FenceFailure(transactional_id, failure)

    if not asked:
        return FencingReport(cluster, took_s=0.0, asked=asked)
    with ThreadPoolExecutor(
        max_workers=max(1, min(parallel, len(asked))), thread_name_prefix="drsvc-fencing"
    ) as pool:
        outcomes = list(pool.map(fence, asked))
    failed = tuple(o for o in outcomes if o is not None)
    not_fenced = {f.transactional_id for f in failed}
    report = FencingReport(
        cluster,
        fenced=tuple(i for i in asked if i not in not_fenced),
        failed=failed,
        took_s=timer.monotonic() - started,
        asked=asked,
    )
    log.info("%s", report.detail())
    return report
