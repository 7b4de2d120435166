"""Recovery of a returned site: ``drsvc recover --app A`` after an unplanned failover.

The decisions are in :mod:`failover.site_recovery`; this module reads the offsets and makes the
changes, under the application's lock (no failover of the application runs meanwhile), in this
order, each recorded in the failover's record so an interrupted recovery is run again to the same
end:

1. the divergence: per partition of the application's topics on the returned cluster, from the
   position past its last copy on the active cluster (what the flow's offset syncs map, or a
   copy found after them that no sync maps yet) to the partition's end now; stored in the
   record (with, for ``replay``, the ends of the application's topics on the active cluster)
   before anything else;
2. ``replay`` only: the divergent records copied to the active cluster, marked (:mod:`.replay`),
   and their count recorded;
3. in one transaction: copying resumed without the divergence, and the recovery marked done.
   With prefix flows the flow from the returned cluster skips below the divergence's end
   (``skip_below``) and copies the application's topics again; with an identity pair
   (active/passive) that flow stays stopped and the way back starts from the cut-off instead
   (:mod:`.flow_switch`).

A failback to the returned cluster is refused until then (see :class:`failover.failover_plan.
Situation`), and it starts the groups there past the divergent records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from drsvc.adapters.coordination import Coordinator, Lock, Put
from drsvc.adapters.record_store import write_record
from drsvc.errors import RefusedError
from drsvc.kafka.clock import Clock
from drsvc.runtime.failover.clusters import FailoverClusters
from drsvc.runtime.failover.fencing import DEFAULT_FENCING_TIMEOUT_S
from drsvc.runtime.failover.flow_switch import FlowSwitch, start_topics
from drsvc.topology.models import Application, Topology
from failover.active import ActiveDocument
from failover.failover_plan import FailoverPlan, FailoverRecord
from failover.site_recovery import (
    PartitionOffset,
    RecoveryPolicy,
    SiteRecovery,
    divergence,
    skip_floors,
)

__all__ = ["RecoveryHost", "SiteRecoverer"]


class RecoveryHost(Protocol):
    """What a recovery needs of the failover executor that runs it: its records, locks and
    events. Declared here, so that the recovery depends on this interface and the executor,
    which builds the recoverer, on the recovery (one direction, no import cycle)."""

    @property
    def topology(self) -> Topology: ...

    def application(self, name: str) -> Application: ...

    def active(self, app: Application) -> ActiveDocument: ...

    def record(self, failover_id: str) -> FailoverRecord: ...

    def records(self) -> list[FailoverRecord]: ...

    def lock(
        self, app: Application, failover_id: str, *, wait: bool, wait_s: float | None = None
    ) -> Lock: ...

    def save(self, record: FailoverRecord, lock: Lock) -> None: ...

    def remote_copies(self, app: Application, plan: FailoverPlan) -> dict[str, str]: ...

    def event(self, message: str) -> None: ...


class SiteRecoverer:
    """Runs the recovery of an application's unplanned failover (see the module docs)."""

    def __init__(
        self,
        executor: RecoveryHost,
        coordinator: Coordinator,
        clusters: FailoverClusters,
        clock: Clock,
        namespace: str,
    ) -> None:
        self._executor = executor
        self._store = coordinator
        self._clusters = clusters
        self._clock = clock
        self._ns = namespace

    def pending(self, app: Application) -> FailoverRecord | None:
        """The application's newest unplanned failover whose recovery has not completed."""
        waiting = [
            r for r in self._executor.records() if r.plan.app == app.name and r.awaits_recovery
        ]
        return waiting[-1] if waiting else None

    def recover(self, app_name: str, *, dry_run: bool = False) -> FailoverRecord:
        """Recover the application's pending failover; with ``dry_run`` only say what it would
        do (the record it returns carries the recovery, nothing is written)."""
        app = self._executor.application(app_name)
        record = self.pending(app)
        if record is None:
            raise RefusedError(
                f"application {app.name} has no unplanned failover waiting for recovery"
            )
        lost = record.plan.from_cluster
        if not self._clusters.reachable(lost):
            raise RefusedError(
                f"{lost} does not answer yet: the records of application {app.name} that did "
                f"not cross in failover {record.plan.failover_id} can be recovered once it is back"
            )
        if dry_run:
            return record if record.recovery else replace(record, recovery=self._found(app, record))
        lock = self._executor.lock(app, record.plan.failover_id, wait=False)
        try:
            return self._run(app, self._executor.record(record.plan.failover_id), lock)
        finally:
            lock.release()

    def _run(self, app: Application, record: FailoverRecord, lock: Lock) -> FailoverRecord:
        failover_id = record.plan.failover_id
        if app.transactional_ids and record.recovery is None:
            # Before the divergence is measured: a transactional producer that outlived its
            # lease on the lost cluster can then append nothing more to it.
            fenced = self._clusters.fence(
                record.plan.from_cluster, app.transactional_ids, DEFAULT_FENCING_TIMEOUT_S
            )
            self._executor.event(f"failover {failover_id}: {fenced.detail()}")
        if record.recovery is None:
            record = replace(record, recovery=self._found(app, record))
            self._executor.save(record, lock)
        recovery = record.recovery
        assert recovery is not None
        self._executor.event(
            f"failover {failover_id}: recovering {recovery.records} record(s) of "
            f"{recovery.cluster} that did not cross ({recovery.policy.value})"
        )
        if recovery.policy is RecoveryPolicy.REPLAY and recovery.replayed is None:
            replayed = 0
            if recovery.divergence:
                assert recovery.into is not None
                replayed = self._clusters.replay(
                    recovery.cluster,
                    recovery.into,
                    recovery.divergence,
                    failover_id,
                    recovery.replay_from,
                )
            record = replace(record, recovery=recovery.replay_done(replayed))
            self._executor.save(record, lock)
            recovery = record.recovery
            assert recovery is not None
            self._executor.event(
                f"failover {failover_id}: replayed {replayed} record(s) to {recovery.into}"
            )
        done = replace(record, recovery=recovery.complete(self._clock.time_ms()))
        ops = self._resume_flow(app, record, recovery)
        write_record(self._store, self._ns, done, lock=lock, ops=ops)
        self._executor.event(
            f"failover {failover_id}: recovery done; flow {recovery.cluster}->"
            f"{record.plan.to_cluster} resumed past the divergence"
        )
        return done

    def _found(self, app: Application, record: FailoverRecord) -> SiteRecovery:
        """The divergence, and where a replay copies it; refused (:class:`RefusedError`) when
        there is nowhere to replay to. A recovery that is run, not a dry run, has fenced the
        application's transactional producers on the returned cluster by then."""
        plan = record.plan
        copies = self._executor.remote_copies(app, plan)
        # What is on the target, not only what the syncs map: the flow's worker may have lost
        # the partitions with the source before writing its last copies' syncs.
        crossed = self._clusters.crossed(plan.from_cluster, plan.to_cluster, copies)
        ends = self._clusters.partition_ends(plan.from_cluster, copies)
        ranges = divergence(crossed, ends)
        policy = RecoveryPolicy(app.on_recovery)
        found = SiteRecovery(policy, plan.from_cluster, self._clock.time_ms(), ranges)
        if policy is not RecoveryPolicy.REPLAY or not ranges:
            return found
        into = self._executor.active(app).cluster
        if into is None or into == plan.from_cluster:
            raise RefusedError(
                f"application {app.name} is not active on another cluster ({into or 'none'}): "
                "there is nowhere to replay its records to"
            )
        starts = self._clusters.partition_ends(into, {r.topic for r in ranges})
        return replace(
            found,
            into=into,
            replay_from=tuple(PartitionOffset(t, p, o) for (t, p), o in sorted(starts.items())),
        )

    def _resume_flow(
        self, app: Application, record: FailoverRecord, recovery: SiteRecovery
    ) -> Sequence[Put]:
        """Copying resumes without the divergence (see :mod:`.flow_switch`): with prefix flows
        the flow from the returned cluster, past the divergence; with an identity pair the way
        back to it instead, from the cut-off, so what it copies lands after the divergence."""
        flows = FlowSwitch(self._executor.topology, self._store, self._ns)
        lost, active_then = recovery.cluster, record.plan.to_cluster
        topics = sorted(app.topics)
        if flows.identity_pair(lost, active_then):
            cutoffs = {(c.topic, c.partition): c.offset for c in record.cutoffs}
            put = flows.edit(
                active_then, lost, lambda control: start_topics(control, topics, cutoffs)
            )
        else:
            floors = skip_floors(recovery)
            put = flows.edit(
                lost, active_then, lambda control: start_topics(control, topics, floors)
            )
        return () if put is None else (put,)
