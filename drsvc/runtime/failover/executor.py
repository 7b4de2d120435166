"""The failover executor: carries out the pure plan of :mod:`failover.failover_plan`.

One failover of an application runs at a time, under the application's lock (a Consul session,
:mod:`drsvc.adapters.coordination`). Every step's outcome is written to the failover's record
(``failovers/<id>``) in the same Consul transaction as the step's own change of the active
cluster, and that transaction checks that the lock is still held: an executor that lost its lock
(paused, cut off) cannot write anything, and a record never disagrees with the active key. An
executor killed at any point is resumed by another (:meth:`FailoverExecutor.resume`), which reads
the record and asks the plan for the next step; steps are idempotent:

- ``deactivate`` / ``activate`` / ``reactivate`` recognise their own earlier write of the
  active key (it names the failover);
- ``wait-lease`` waits the lease (:func:`failover.active.lease_wait_s`) from the moment the
  write of none was acknowledged, on the executor's monotonic clock; an executor that did not
  see that acknowledgement (a resumer, on this host or another) counts from a moment it knows
  to be later: when it read the record saying deactivate is done. No wall clock is compared;
- ``set-offsets`` stores the positions in the record before it commits any of them, and a
  resumed attempt commits those same positions: no group is ever moved backwards by a retry,
  and an unplanned failover does not pick newer checkpoints half-way through.

Keys (see :mod:`failover.naming`): ``apps/<app>/active`` (the document clients follow),
``apps/<app>/lock`` (the executor's lock; its value names the failover), ``apps/<app>/failover``
(the application's latest failover), ``failovers/<id>`` (records) and
``failover-requests/<app>/<request id>`` (idempotency: the failover it started and a digest of the
request, so the same id with a different request is refused).

Before anything is written, a failover must be the one the caller asked for
(:func:`failover.failover_plan.check_request`: without ``force`` an active cluster that does
not answer is a refusal, never an unplanned failover; the caller's ``expect_kind`` and
``expect_epoch`` must still hold), and a planned one must be able to become exact by waiting: a
partition whose translation no wait can make exact (its position is older than the syncs, the
log was truncated, replication skipped records there, no flow copies it ...) is a refusal naming
it, before the application is deactivated.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial

from drsvc.adapters.coordination import (
    DEFAULT_LOCK_DELAY_S,
    DEFAULT_SESSION_TTL_S,
    Coordinator,
    Lock,
    Put,
    WriteOp,
)
from drsvc.adapters.record_store import read_record, read_records, stored_form, write_record
from drsvc.errors import (
    ConfigError,
    ConflictError,
    CredentialsRefusedError,
    DrsvcError,
    FailoverError,
    KafkaUnavailableError,
    RefusedError,
    RequestMismatchError,
    TemporaryError,
    TooLargeError,
)
from drsvc.kafka.clock import Clock, SystemClock
from drsvc.runtime.failover.clusters import FailoverClusters, Partition
from drsvc.runtime.failover.core_errors import checked_request_id, core_refusals
from drsvc.runtime.failover.flow_switch import (
    FlowSwitch,
    start_topics,
    stop_topics,
    watch_epochs,
)
from drsvc.runtime.failover.recovery import SiteRecoverer
from drsvc.runtime.failover.write_fence import (
    WriteFenceAcls,
    fence_writes,
    lift_fence_for_rollback,
    write_fence_acls_for,
)
from drsvc.runtime.replication.control import FlowControl
from drsvc.topology.models import Application, Topology
from failover import naming
from failover.active import ActiveDocument, decode_active, lease_wait_s, switch
from failover.errors import FormatError, PolicyError, SwitchError
from failover.failover_plan import (
    DEFAULT_CATCH_UP_TIMEOUT_S,
    Cutoff,
    FailoverKind,
    FailoverPlan,
    FailoverRecord,
    FailoverRequest,
    GroupTarget,
    Outcome,
    Situation,
    Step,
    StepName,
    check_request,
    highest_epoch,
    next_step,
    plan_failover,
    record_outcome,
    request_fingerprint,
)
from failover.recovery_point import PartitionReplication, UnreplicatedRange, unreplicated
from failover.site_recovery import past_quarantine
from failover.stale_epochs import StaleEntry, StaleRecords
from failover.unknown_translation import UnknownTranslation, resolve_group
from failover.write_fence import with_write_fence

__all__ = ["FAILPOINT_ENV", "Clock", "FailoverExecutor", "LockTiming", "SystemClock"]

log = logging.getLogger(__name__)

#: Testing aid: ``after-<step>`` kills the executor (SIGKILL) right after it recorded the step's
#: outcome, ``during-<step>`` after the step's effects but before the outcome is recorded.
FAILPOINT_ENV = "DRSVC_FAILPOINT"

#: how often a wait re-checks
_POLL_S = 1.0
#: how long the activate step of an unplanned failover asks the old cluster for its ends
_QUICK_PROBE_S = 0.5
#: attempts of a step whose failure means "retry" before the executor stops and says resume
_RETRIES = 5
#: times a step whose write met a concurrent change of a document it edits is done again at once
_CONFLICT_ATTEMPTS = 5
#: the bound of fencing an application's transactional producers: its lease, within these
_MIN_FENCING_TIMEOUT_S = 5.0
_FENCING_TIMEOUT_S = 30.0
#: how many partitions a refusal or a timeout names before it says how many more there are
_SHOWN = 10


@dataclass(frozen=True)
class LockTiming:
    """The session TTL and lock delay of the application lock (see coordination's docs)."""

    ttl_s: float = DEFAULT_SESSION_TTL_S
    lock_delay_s: float = DEFAULT_LOCK_DELAY_S

    @property
    def takeover_s(self) -> float:
        """The longest a resume waits for a dead executor's lock."""
        return 2 * self.ttl_s + self.lock_delay_s + 2.0


@dataclass(frozen=True)
class _StepResult:
    outcome: Outcome
    detail: str = ""
    #: writes that belong to the step (the active key), in the same transaction as its outcome
    ops: tuple[WriteOp, ...] = ()
    #: record fields the step found (groups, cutoffs, unreplicated)
    found: dict[str, object] = field(default_factory=dict)


def new_failover_id(now_ms: int) -> str:
    """Sortable by time, unique: ``f-20261124T213015Z-1a2b3c4d``."""
    stamp = datetime.fromtimestamp(now_ms / 1000, tz=UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"f-{stamp}-{uuid.uuid4().hex[:8]}"


class FailoverExecutor:
    """Plans, runs and resumes failovers of the topology's applications.

    ``look_at_lost_cluster``: an unplanned activate takes a short look at the old cluster to
    report where its partitions end (the records that did not cross). The controller turns it
    off: it starts a failover only once every vantage point, its own probe included, found the
    cluster gone, and a look at a gone cluster only holds the switch for its timeout. The report
    then gives those ends as unknown; ``drsvc recover`` makes them exact once it is back.
    """

    def __init__(
        self,
        topology: Topology,
        coordinator: Coordinator,
        clusters: FailoverClusters,
        *,
        clock: Clock | None = None,
        lock_timing: LockTiming | None = None,
        catch_up_timeout_s: float = DEFAULT_CATCH_UP_TIMEOUT_S,
        on_event: Callable[[str], None] | None = None,
        look_at_lost_cluster: bool = True,
        write_fence_acls: WriteFenceAcls | None = None,
    ) -> None:
        self._topology = topology
        self._fence_acls = write_fence_acls or write_fence_acls_for(clusters)
        self._look_at_lost_cluster = look_at_lost_cluster
        self._store = coordinator
        self._clusters = clusters
        self._clock: Clock = clock or SystemClock()
        self._timing = lock_timing or LockTiming()
        self._catch_up_timeout_s = catch_up_timeout_s
        self._on_event = on_event or (lambda _message: None)
        self._ns = topology.namespace
        #: per running failover, when (monotonic) this executor knew its write of none to be
        #: committed: the lease wait counts from here (see :meth:`_wait_lease`)
        self._none_since: dict[str, float] = {}

    # -- reading ------------------------------------------------------------------------------

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def coordinator(self) -> Coordinator:
        return self._store

    def application(self, name: str) -> Application:
        try:
            return self._topology.application(name)
        except ConfigError:
            raise
        except (KeyError, ValueError) as err:
            raise ConfigError(str(err)) from err

    def cluster_aliases(self) -> list[str]:
        return sorted(self._topology.aliases)

    def application_names(self) -> list[str]:
        return [a.name for a in self._topology.applications]

    def failover_targets(self, app: Application, active: str) -> list[str]:
        """The clusters a flow joins to ``active`` (where the application could move)."""
        found = {f.target for f in self._topology.flows if f.source == active}
        found |= {f.source for f in self._topology.flows if f.target == active}
        return sorted(found - {active})

    def answers(self, alias: str) -> bool:
        """Whether the cluster answers a metadata request within the probe timeout."""
        return self._clusters.reachable(alias)

    def exposure(self, group: str, from_alias: str, to_alias: str) -> dict[str, object]:
        """What moving ``group`` from ``from_alias`` to ``to_alias`` right now would cost it."""
        row: dict[str, object] = {"group": group, "from": from_alias, "to": to_alias}
        try:
            translation = self._clusters.translate(group, from_alias, to_alias)
        except DrsvcError as err:
            return {**row, "lag": None, "would_lose": None, "would_reread": None, "note": str(err)}
        if translation is None:
            return {**row, "lag": 0, "would_lose": 0, "would_reread": 0, "note": "no commits"}
        parts = translation.partitions

        def total(values: list[int | None]) -> int | None:
            return None if any(v is None for v in values) else sum(v or 0 for v in values)

        return {
            **row,
            "lag": total([p.source_lag for p in parts]),
            "would_lose": total([p.would_lose for p in parts]),
            "would_reread": total([p.would_reread for p in parts]),
            "exact": translation.exact,
            "note": "",
        }

    def preview(self, request: FailoverRequest) -> tuple[FailoverPlan, list[GroupTarget], str]:
        """The plan, and where the groups would start if it ran now (a dry run: only reads).
        Raises :class:`RefusedError` as the failover itself would."""
        plan = self.plan(request)
        app = self.application(request.app)
        if plan.kind is FailoverKind.PLANNED:
            self._refuse_untranslatable(app, plan)
        try:
            return plan, sorted(self._targets(app, plan)), ""
        except RefusedError as err:
            return plan, [], f"set-offsets would fail now: {err}"
        except TemporaryError as err:
            return plan, [], f"group positions unknown: {err}"

    def active(self, app: Application) -> ActiveDocument:
        """The application's active-cluster document now."""
        entry = self._store.get(naming.app_active_key(self._ns, app.name))
        try:
            return decode_active(
                None if entry is None else entry.value, app.preferred, _configured_lease_ms(app)
            )
        except FormatError as err:
            raise FailoverError(
                f"the active-cluster key of application {app.name} is unreadable: {err}"
            ) from err

    def record(self, failover_id: str) -> FailoverRecord:
        try:
            record = read_record(self._store, self._ns, failover_id)
        except FormatError as err:
            raise FailoverError(
                f"the record of failover {failover_id} is unreadable: {err}"
            ) from err
        if record is None:
            raise ConfigError(f"no failover {failover_id!r} in namespace {self._ns}")
        return record

    def stale_records(self, record: FailoverRecord) -> list[tuple[str, StaleEntry]]:
        """Records written on the failover's old cluster after it activated the new one, under
        an older epoch (clients that had not heard of the switch), as each flow out of the old
        cluster found them: (flow id, entry). Empty for a failover that activated nothing."""
        if record.epoch == 0:
            return []
        found: list[tuple[str, StaleEntry]] = []
        for flow in self._topology.flows_from(record.plan.from_cluster):
            key = naming.flow_stale_records_key(self._ns, flow.source, flow.target)
            entry = self._store.get(key)
            if entry is None:
                continue
            try:
                listed = StaleRecords.decode(entry.value)
            except FormatError as err:
                log.warning("%s is unreadable (%s): its stale records are not shown", key, err)
                continue
            flow_id = f"{flow.source}->{flow.target}"
            found.extend((flow_id, e) for e in listed.of(record.plan.app, record.epoch))
        return found

    def records(self) -> list[FailoverRecord]:
        """Every failover of the namespace, oldest first."""
        found = read_records(
            self._store,
            self._ns,
            lambda key, err: log.warning("skipping unreadable failover record %s: %s", key, err),
        )
        return sorted(found, key=lambda r: (r.created_ms, r.plan.failover_id))

    def running(self, app: Application, me: str | None = None) -> str | None:
        """The id of the application's failover that has not ended (None: none), other than
        ``me`` (the caller's own, whose lock it holds)."""
        lock = self._store.get(naming.app_lock_key(self._ns, app.name))
        if lock is not None and lock.session is not None:
            holder = _holder_id(lock.value) or "(unknown)"
            if holder != me and not self._ended(holder):
                return holder
        latest = self._store.get(naming.app_failover_key(self._ns, app.name))
        if latest is None or not latest.value:
            return None
        try:
            return None if self.record(latest.value).finished else latest.value
        except ConfigError:
            return None

    def _ended(self, failover_id: str) -> bool:
        """Whether the failover's record says it ended (its executor may still hold the lock
        for a moment, or have died holding it after the end)."""
        try:
            return self.record(failover_id).finished
        except (ConfigError, FailoverError):
            return False

    def recover(self, app_name: str, *, dry_run: bool = False) -> FailoverRecord:
        """Deal with the records of the application's lost cluster that never crossed, now
        that it is back (see :mod:`drsvc.runtime.failover.recovery`)."""
        recoverer = SiteRecoverer(self, self._store, self._clusters, self._clock, self._ns)
        return recoverer.recover(app_name, dry_run=dry_run)

    # -- planning -----------------------------------------------------------------------------

    def plan(self, request: FailoverRequest) -> FailoverPlan:
        """The plan ``request`` would run now; changes nothing. Raises :class:`RefusedError`
        saying why it must not start."""
        app = self.application(request.app)
        return self._checked_plan(request, self._situation(app, request), "dry-run")

    def _checked_plan(
        self, request: FailoverRequest, situation: Situation, failover_id: str
    ) -> FailoverPlan:
        """The core's plan of ``request`` in ``situation``, and its check that the plan is the
        one the caller asked for; their refusals leave as drsvc's (:mod:`.core_errors`)."""
        with core_refusals():
            plan = plan_failover(request, situation, failover_id, self._catch_up_timeout_s)
            check_request(request, plan, situation.active)
            plan = with_write_fence(plan, self.application(request.app).fence_writes)
        return plan

    def _situation(
        self, app: Application, request: FailoverRequest, me: str | None = None
    ) -> Situation:
        active = self.active(app)
        clusters = frozenset(self._topology.aliases)
        situation = Situation(
            clusters=clusters,
            active=active,
            active_reachable=False,
            running=self.running(app, me),
        )
        if request.to not in clusters or active.cluster is None or active.cluster == request.to:
            return situation  # the plan refuses these; probing would only take time
        joined = any(
            {f.source, f.target} == {active.cluster, request.to} for f in self._topology.flows
        )
        busy = tuple(g for g in app.groups if self._clusters.live_members(request.to, g) > 0)
        unrecovered = next(
            (
                r.plan.failover_id
                for r in self.records()
                if r.plan.app == app.name
                and r.plan.from_cluster == request.to
                and r.awaits_recovery
            ),
            None,
        )
        return replace(
            situation,
            # --force is unplanned whatever a probe says: do not wait for a dead cluster's
            # probe to time out (the controller forces once every vantage point saw it gone).
            active_reachable=not request.force and self._clusters.reachable(active.cluster),
            replicated_to_target=joined,
            busy_groups=busy,
            unrecovered=unrecovered,
        )

    # -- running ------------------------------------------------------------------------------

    def start(
        self,
        request: FailoverRequest,
        on_created: Callable[[FailoverRecord], None] | None = None,
    ) -> FailoverRecord:
        """Plan and run ``request`` to its end. The same request id twice is one failover: the
        second call returns the first one's record (resumed if its executor is gone).

        ``on_created`` is called with the record once it is stored, before the first step (or
        with the earlier record of a repeated request id): a caller that answers at once (the
        API) learns the failover's id without waiting for its end."""
        created = on_created or (lambda _record: None)
        app = self.application(request.app)
        request_key = None
        if request.request_id:
            # Validated here too: an id becomes part of a key (``..`` would reach another
            # application's keys), whoever passes it in.
            request_id = checked_request_id(request.request_id)
            request_key = naming.failover_request_key(self._ns, app.name, request_id)
            earlier = self._store.get(request_key)
            if earlier is not None:
                failover_id = self._same_request(app, request, earlier.value)
                self.event(f"request {request.request_id} is failover {failover_id}")
                record = self.record(failover_id)
                created(record)
                return record if record.finished else self.resume(failover_id)
        now = self._clock.time_ms()
        failover_id = new_failover_id(now)
        lock = self.lock(app, failover_id, wait=False)
        try:
            situation = self._situation(app, request, me=failover_id)
            plan = self._checked_plan(request, situation, failover_id)
            if plan.kind is FailoverKind.PLANNED:
                self._refuse_untranslatable(app, plan)
            record = FailoverRecord(plan, created_ms=now)
            self._refuse_oversized(app, record)
            ops: list[WriteOp] = [Put(naming.app_failover_key(self._ns, app.name), failover_id)]
            if request_key is not None:
                asked = {"failover_id": failover_id, "request": request_fingerprint(request)}
                ops.append(Put(request_key, json.dumps(asked, separators=(",", ":")), 0))
            write_record(self._store, self._ns, record, lock=lock, ops=ops, create=True)
            self.event(
                f"failover {failover_id}: {plan.kind.value} failover of {app.name} from "
                f"{plan.from_cluster} to {plan.to_cluster}"
            )
            created(record)
            return self._run(app, record, lock)
        finally:
            lock.release()

    def _same_request(self, app: Application, request: FailoverRequest, stored: str) -> str:
        """The failover that ``request``'s id started, if it was this same request; raises
        :class:`RequestMismatchError` if the id was used for another request of the
        application."""
        try:
            earlier = json.loads(stored)
        except json.JSONDecodeError:
            earlier = None
        if not isinstance(earlier, dict) or not isinstance(earlier.get("failover_id"), str):
            raise FailoverError(
                f"request id {request.request_id} of application {app.name}: its key holds "
                f"{stored!r}, not a failover this build wrote"
            )
        failover_id: str = earlier["failover_id"]
        if earlier.get("request") != request_fingerprint(request):
            raise RequestMismatchError(
                f"request id {request.request_id} of application {app.name} started failover "
                f"{failover_id}, a different request than this one (to {request.to}, force "
                f"{request.force}); a new request needs a new id"
            )
        return failover_id

    def resume(self, failover_id: str, wait_s: float | None = None) -> FailoverRecord:
        """Carry a failover whose executor stopped on to its end (or roll it back). Waits up to
        ``wait_s`` (default: the longest takeover) for a dead executor's lock."""
        record = self.record(failover_id)
        if record.finished:
            return record
        app = self.application(record.plan.app)
        lock = self.lock(app, failover_id, wait=True, wait_s=wait_s)
        try:
            record = self.record(failover_id)  # it may have moved on before we got the lock
            if record.done(StepName.DEACTIVATE):
                # The record says none was written, so it was committed before this read
                # returned: a lease wait counted from now is never too short, whatever this
                # executor (or the host that deactivated) saw.
                self._none_since.setdefault(failover_id, self._clock.monotonic())
            self.event(f"failover {failover_id}: resumed at {_next_name(record)}")
            return self._run(app, record, lock)
        finally:
            lock.release()

    def lock(
        self, app: Application, failover_id: str, *, wait: bool, wait_s: float | None = None
    ) -> Lock:
        key = naming.app_lock_key(self._ns, app.name)
        holder = json.dumps(
            {"failover_id": failover_id, "host": socket.gethostname(), "pid": os.getpid()}
        )
        deadline = self._clock.monotonic() + (self._timing.takeover_s if wait_s is None else wait_s)
        while True:
            lock = self._store.try_lock(
                key, holder, ttl_s=self._timing.ttl_s, lock_delay_s=self._timing.lock_delay_s
            )
            if lock is not None:
                return lock
            current = self._store.get(key)
            held = current is not None and current.session is not None
            running = _holder_id(current.value) if held and current is not None else None
            if running is not None and running != failover_id and not self._ended(running):
                if not wait or self._clock.monotonic() >= deadline:
                    raise RefusedError(
                        f"failover {running} of application {app.name} is running: wait for "
                        f"it to end, or resume it with --resume {running} if its executor died"
                    )
            elif self._clock.monotonic() >= deadline:
                # A finished failover's executor that died before releasing, or a lock still
                # in its lock delay: both pass within the takeover time, which has gone by.
                raise FailoverError(
                    f"the lock of application {app.name} ({key}) is still held or was just "
                    f"released (lock delay {self._timing.lock_delay_s:.0f}s); try again"
                )
            self._clock.sleep(_POLL_S)

    def _run(self, app: Application, record: FailoverRecord, lock: Lock) -> FailoverRecord:
        retries = 0
        while (step := next_step(record)) is not None:
            lock.ensure_held()
            started = self._clock.monotonic()
            try:
                result = self._execute(app, record, step, lock)
            except (DrsvcError, SwitchError) as err:
                result = _as_failure(err)
            _failpoint(f"during-{step.name.value}")
            record, result = self._record_step(app, record, step, result, lock)
            took = self._clock.monotonic() - started
            self.event(
                f"failover {record.plan.failover_id}: {step.name.value} {result.outcome.value}"
                f" after {took:.1f}s" + (f": {result.detail}" if result.detail else "")
            )
            _failpoint(f"after-{step.name.value}")
            if result.outcome is Outcome.FAILED and next_step(record) == step:
                retries += 1
                if retries >= _RETRIES:
                    raise FailoverError(
                        f"failover {record.plan.failover_id}: {step.name.value} failed "
                        f"{retries} times ({result.detail}); it stays running: resume it with "
                        f"--resume {record.plan.failover_id}"
                    )
                self._clock.sleep(_POLL_S * retries)
            else:
                retries = 0
        self._none_since.pop(record.plan.failover_id, None)
        self.event(f"failover {record.plan.failover_id}: {record.state.value}")
        return record

    def _record_step(
        self, app: Application, record: FailoverRecord, step: Step, result: _StepResult, lock: Lock
    ) -> tuple[FailoverRecord, _StepResult]:
        """Record the step's outcome with its writes; returns the record and the result that
        was recorded. A write refused because a document it changes moved meanwhile (another
        application of the same flow activating at once edits the flow's control document) is
        not this failover's failure: the step is done again at once on what is there now, a few
        times, before the conflict is recorded as the step's failure. A step done again
        re-reads everything it writes, so a real change of the active key under it (another
        failover) comes back as its own failure, not as a conflict."""
        for attempt in range(1, _CONFLICT_ATTEMPTS + 1):
            try:
                return self._record(record, step, result, lock), result
            except TooLargeError as err:
                # What the step found cannot be stored (over the ceiling, or Consul's 413):
                # nothing of it was written; its failure is, and the plan says what follows
                # (before activate: roll back).
                failed = _StepResult(Outcome.FAILED, str(err))
                return self._record(record, step, failed, lock), failed
            except ConflictError as err:
                # (A write of this failover's that timed out cannot be what changed it: that
                # transaction checks this lock's session, which is released before anyone
                # retries; it commits before the release, and the retry's read finds it, or
                # never.)
                failed = _StepResult(Outcome.FAILED, str(err))
                if attempt == _CONFLICT_ATTEMPTS or not result.ops:
                    return self._record(record, step, failed, lock), failed
                try:
                    result = self._execute(app, record, step, lock)
                except (DrsvcError, SwitchError) as again:
                    result = _as_failure(again)
        raise AssertionError("unreachable: the last attempt records its outcome")

    def _record(
        self, record: FailoverRecord, step: Step, result: _StepResult, lock: Lock
    ) -> FailoverRecord:
        updated = record_outcome(
            record, step.name, result.outcome, self._clock.time_ms(), result.detail
        )
        if result.found:
            updated = replace(updated, **result.found)  # type: ignore[arg-type]
        ops = result.ops if result.outcome is Outcome.OK else ()
        write_record(self._store, self._ns, updated, lock=lock, ops=ops)
        if step.name is StepName.DEACTIVATE and result.outcome is Outcome.OK:
            # Acknowledged: none (written now, or earlier by this failover and found by the
            # step's read) is committed. The lease wait counts from here, never from the
            # time stamped while the write was built, which may be long before it committed.
            self._none_since[record.plan.failover_id] = self._clock.monotonic()
        return updated

    def save(self, record: FailoverRecord, lock: Lock) -> None:
        write_record(self._store, self._ns, record, lock=lock)

    def _refuse_oversized(self, app: Application, record: FailoverRecord) -> None:
        """Raise :class:`TooLargeError` when the record would be over the ceiling of what is
        stored for one failover (:mod:`failover.record_chunks`) with the group positions as
        they would be now: before anything is written, not at set-offsets with the
        application on none (where it is checked again, and refused with a roll back). What
        cannot be read now is left out of this estimate."""
        plan = record.plan
        try:
            groups = self._estimated_targets(app, plan)
        except DrsvcError as err:
            log.info("failover %s: group positions not estimated: %s", plan.failover_id, err)
            groups = []
        try:
            self._check_size(app, replace(record, groups=tuple(sorted(groups))))
        except TooLargeError as err:
            raise TooLargeError(
                f"failover of application {app.name} from {plan.from_cluster} to "
                f"{plan.to_cluster} not started, nothing changed: {err}"
            ) from err

    def _check_size(self, app: Application, record: FailoverRecord) -> None:
        """Raise :class:`TooLargeError` unless ``record``, with the cut-offs that activate
        would add now, can be stored (an unreadable end leaves the cut-offs out)."""
        try:
            cutoffs = self._cutoffs(app, record.plan)
        except DrsvcError:
            cutoffs = record.cutoffs
        stored_form(replace(record, cutoffs=cutoffs))

    def _estimated_targets(self, app: Application, plan: FailoverPlan) -> list[GroupTarget]:
        """Every group partition that set-offsets would store now, at its position if known."""
        if plan.kind is not FailoverKind.PLANNED:
            return self._checkpointed_targets(app, plan)
        targets = []
        translations = self._clusters.translate_groups(
            app.groups, plan.from_cluster, plan.to_cluster
        )
        for group, translation in translations.items():
            for p in translation.partitions if translation is not None else ():
                if self._of_app(app, plan, p.source_topic):
                    offset = p.target_offset if p.target_offset is not None else p.source_offset
                    targets.append(
                        GroupTarget(
                            group,
                            p.topic,
                            p.partition,
                            offset,
                            p.exact,
                            p.source_topic,
                            p.source_offset,
                            p.reason,
                        )
                    )
        return targets

    # -- the steps ----------------------------------------------------------------------------

    def _execute(
        self, app: Application, record: FailoverRecord, step: Step, lock: Lock
    ) -> _StepResult:
        match step.name:
            case StepName.DEACTIVATE:
                return self._switch(app, record, None)
            case StepName.WAIT_LEASE:
                return self._wait_lease(app, record, lock)
            case StepName.WAIT_CAUGHT_UP:
                return self._wait_caught_up(app, record, step, lock)
            case StepName.SET_OFFSETS:
                return self._set_offsets(app, record, lock)
            case StepName.FENCE_WRITES:
                return _StepResult(*fence_writes(record.plan, app, self._fence_acls))
            case StepName.ACTIVATE:
                return self._activate(app, record)
            case StepName.REACTIVATE:
                fenced = record.done(StepName.FENCE_WRITES)
                lifted = lift_fence_for_rollback(record.plan, app, self._fence_acls, fenced=fenced)
                if lifted is not None and lifted[0] is Outcome.FAILED:
                    return _StepResult(*lifted)
                switched = self._switch(app, record, record.plan.from_cluster)
                return switched if lifted is None else _with_fence_note(switched, lifted[1])

    def _switch(self, app: Application, record: FailoverRecord, to: str | None) -> _StepResult:
        """Write ``to`` (None: none) as the active cluster, unless this failover already did."""
        plan = record.plan
        key = naming.app_active_key(self._ns, app.name)
        entry = self._store.get(key)
        raw = None if entry is None else entry.value
        current = decode_active(raw, app.preferred, _configured_lease_ms(app))
        if current.failover_id == plan.failover_id and current.cluster == to:
            return _StepResult(
                Outcome.OK,
                f"already written by this failover (epoch {current.epoch})",
                found={"epoch": max(record.epoch, current.epoch)},
            )
        if to is None and current.cluster != plan.from_cluster:
            return _StepResult(
                Outcome.FAILED,
                f"application {app.name} is active on {current.cluster or 'none'} now, not "
                f"{plan.from_cluster} as planned",
            )
        if to is not None and current.cluster is not None:
            if current.cluster == to:
                return _StepResult(Outcome.OK, f"{to} is active already (epoch {current.epoch})")
            return _StepResult(
                Outcome.FAILED,
                f"application {app.name} was switched to {current.cluster} by failover "
                f"{current.failover_id} meanwhile",
            )
        # None covers what clients of the old value may hold; a cluster gets the configured
        # lease (a shorter one is safe: the old, longer leases have run out by then).
        configured = _configured_lease_ms(app)
        lease_ms = max(current.lease_ms, configured) if to is None else configured
        # The records keep every epoch the application had: a value written by hand (or a
        # deleted key) cannot take the epoch back.
        floor = highest_epoch(self.records(), app.name)
        new = switch(current, to, plan.failover_id, self._clock.time_ms(), lease_ms, floor)
        put = Put(key, new.encode(), 0 if entry is None else entry.index)
        return _StepResult(
            Outcome.OK,
            f"active: {to or 'none'} (epoch {new.epoch})",
            (put,),
            found={"epoch": max(record.epoch, new.epoch)},
        )

    def _wait_lease(self, app: Application, record: FailoverRecord, lock: Lock) -> _StepResult:
        """Wait until every client that read the old cluster has stopped: the lease (with the
        margins of :func:`failover.active.lease_wait_s`) from the acknowledgement of none, on
        this executor's monotonic clock. No wall-clock time enters: a wall clock that steps,
        or another host's clock, would shorten the wait by its error."""
        failover_id = record.plan.failover_id
        current = self.active(app)
        if current.cluster is not None or current.failover_id != failover_id:
            return _StepResult(
                Outcome.FAILED,
                f"the active key changed meanwhile: {current.cluster or 'none'} by "
                f"{current.failover_id}",
            )
        acknowledged = self._none_since.get(failover_id)
        # Not seen by this executor: the read above found none committed, so now is later.
        since = self._clock.monotonic() if acknowledged is None else acknowledged
        wait_s = lease_wait_s(current.lease_ms / 1000)
        until = since + wait_s
        while (left := until - self._clock.monotonic()) > 0:
            lock.ensure_held()
            self._clock.sleep(min(_POLL_S, left))
        origin = (
            "the acknowledged write of none"
            if acknowledged is not None
            else "when this executor found none written"
        )
        detail = f"lease of {current.lease_ms / 1000:g}s waited out ({wait_s:.2f}s from {origin})"
        fenced = self._fence(app, record)
        return _StepResult(Outcome.OK, detail if fenced is None else f"{detail}; {fenced}")

    def _fence(self, app: Application, record: FailoverRecord) -> str | None:
        """Fence the application's transactional producers on the cluster it leaves (see
        :mod:`.fencing`): after the lease, so only producers that outlived it (paused, cut off)
        are fenced, never one that was still entitled to write; and only in a planned failover,
        whose old cluster answers (an unplanned one fences when ``drsvc recover`` finds the old
        cluster back). A fencing that fails is reported, never a reason to stop the failover:
        the lease has already stopped every client that follows it."""
        if record.plan.kind is not FailoverKind.PLANNED or not app.transactional_ids:
            return None
        timeout_s = min(_FENCING_TIMEOUT_S, max(_MIN_FENCING_TIMEOUT_S, app.lease_s))
        report = self._clusters.fence(record.plan.from_cluster, app.transactional_ids, timeout_s)
        if not report.complete:
            log.warning("failover %s: %s", record.plan.failover_id, report.detail())
        return report.detail()

    def _wait_caught_up(
        self, app: Application, record: FailoverRecord, step: Step, lock: Lock
    ) -> _StepResult:
        plan = record.plan
        timeout_s = step.timeout_s or self._catch_up_timeout_s
        deadline = self._clock.monotonic() + timeout_s
        while True:
            lock.ensure_held()
            try:
                lags = self._lags(app, plan)
            except TemporaryError as err:  # a cluster hiccup: ask again until the deadline
                lags = [str(err)]
            if not lags:
                return _StepResult(Outcome.OK, "every group translates exactly, nothing lags")
            if self._clock.monotonic() >= deadline:
                return _StepResult(
                    Outcome.FAILED, f"not caught up within {timeout_s:.0f}s: {_shown(lags)}"
                )
            self._clock.sleep(_POLL_S)

    def _lags(self, app: Application, plan: FailoverPlan) -> list[str]:
        """What keeps the groups from moving exactly now: members still on the old cluster
        (they may commit there after their positions were set on the new one, and those commits
        would be lost), partitions not replicated or not translated exactly."""
        lags = []
        for group in app.groups:
            members = self._clusters.group_members(plan.from_cluster, group)
            if members:
                lags.append(
                    f"group {group} has {len(members)} member(s) on {plan.from_cluster}: "
                    + ", ".join(str(m) for m in members)
                )
        # One read of each offset-sync topic for every group: the kept indexes read only the
        # syncs written since the last poll (the application is deactivated meanwhile).
        translations = self._clusters.translate_groups(
            app.groups, plan.from_cluster, plan.to_cluster
        )
        for group, translation in translations.items():
            if translation is None:
                continue
            for p in translation.partitions:
                if not self._of_app(app, plan, p.source_topic):
                    continue
                if not p.exact or (p.not_replicated or 0) > 0:
                    behind = p.not_replicated or p.pending
                    lags.append(
                        f"group {group} {p.source_topic}-{p.partition}: {p.reason}"
                        + (f", {behind} behind" if behind else "")
                    )
            lags.extend(
                f"group {group} {u.topic}: not translated ({u.reason})"
                for u in translation.unrouted
                if self._of_app(app, plan, u.topic)
            )
        return lags

    def _refuse_untranslatable(self, app: Application, plan: FailoverPlan) -> None:
        """Raise :class:`RefusedError` naming every partition of the application's groups
        whose translation no wait can make exact (its position is older than the syncs, the
        source log was truncated past it, replication skipped records there, the syncs
        contradict each other: :meth:`PartitionTranslation.waits_can_fix`), or whose topic no
        flow copies: a planned failover would otherwise deactivate the application, wait the
        whole catch-up timeout for it, and roll back."""
        problems: list[str] = []
        translations = self._clusters.translate_groups(
            app.groups, plan.from_cluster, plan.to_cluster
        )
        for group, translation in translations.items():
            if translation is None:
                continue
            problems.extend(
                f"group {group} {p.source_topic}-{p.partition} at {p.source_offset}: {p.reason}"
                for p in translation.partitions
                if not p.waits_can_fix and self._of_app(app, plan, p.source_topic)
            )
            problems.extend(
                f"group {group} {u.topic}: no route ({u.reason})"
                for u in translation.unrouted
                if self._of_app(app, plan, u.topic)
            )
        if problems:
            raise RefusedError(
                f"a planned failover of application {app.name} from {plan.from_cluster} to "
                f"{plan.to_cluster} cannot become exact by waiting, so it did not start: "
                f"{_shown(problems)}"
            )

    def _of_app(self, app: Application, plan: FailoverPlan, topic: str) -> bool:
        """Is ``topic`` (a name on the old cluster) one of the application's topics, or a copy
        of one? Its groups may also hold offsets of topics it no longer reads: those neither
        hold a failover back nor move."""
        if topic in app.topics:
            return True
        flows = [
            f
            for f in self._topology.flows
            if {f.source, f.target} == {plan.from_cluster, plan.to_cluster}
        ]
        for flow in flows:
            try:
                if self._topology.policy_for(flow).original_topic(topic) in app.topics:
                    return True
            except PolicyError:
                continue
        return False

    def _set_offsets(self, app: Application, record: FailoverRecord, lock: Lock) -> _StepResult:
        plan = record.plan
        if not record.groups:
            try:
                targets = self._targets(app, plan)
            except RefusedError as err:
                return _StepResult(Outcome.FAILED, str(err))
            # Stored before any commit: a resumed attempt commits these same positions. A
            # record that could not hold them with the cut-offs is refused here (roll back).
            record = replace(record, groups=tuple(sorted(targets)))
            self._check_size(app, record)
            self.save(record, lock)
        by_group: dict[str, dict[Partition, int]] = {}
        for t in record.groups:
            by_group.setdefault(t.group, {})[(t.topic, t.partition)] = t.target_offset
        problems = []
        for group, offsets in sorted(by_group.items()):
            lock.ensure_held()
            answers = self._clusters.set_offsets(plan.to_cluster, group, offsets)
            refused = {tp: err for tp, err in answers.items() if err is not None}
            if any(err.group_has_members for err in refused.values()):
                problems.append(f"group {group} has live members on {plan.to_cluster}")
            elif refused:
                first = next(iter(sorted(refused.items())))
                problems.append(
                    f"group {group}: {len(refused)} partition(s) refused, e.g. "
                    f"{first[0][0]}-{first[0][1]}: {first[1].name}"
                )
        if problems:
            return _StepResult(Outcome.FAILED, "; ".join(problems), found={"groups": record.groups})
        inexact = sum(not t.exact for t in record.groups)
        detail = f"{len(record.groups)} partition(s) of {len(by_group)} group(s) set"
        if inexact:
            detail += f", {inexact} not exact"
        return _StepResult(Outcome.OK, detail, found={"groups": record.groups})

    def _targets(self, app: Application, plan: FailoverPlan) -> list[GroupTarget]:
        if plan.kind is FailoverKind.PLANNED:
            targets = self._translated_targets(app, plan)
        else:
            targets = self._checkpointed_targets(app, plan)
        return self._past_recovered(app, plan, targets)

    def _past_recovered(
        self, app: Application, plan: FailoverPlan, targets: list[GroupTarget]
    ) -> list[GroupTarget]:
        """Back on a cluster that was lost and recovered: groups start past its records that
        never crossed (quarantined, or replayed elsewhere), never inside them."""
        recoveries = [
            r.recovery
            for r in self.records()
            if r.plan.app == app.name
            and r.recovery is not None
            and r.recovery.completed
            and r.recovery.cluster == plan.to_cluster
        ]
        if not recoveries:
            return targets
        moved = []
        for target in targets:
            start = past_quarantine(
                target.topic, target.partition, target.target_offset, recoveries
            )
            moved.append(
                target
                if start == target.target_offset
                else replace(target, target_offset=start, reason="past-recovered-divergence")
            )
        return moved

    def _translated_targets(self, app: Application, plan: FailoverPlan) -> list[GroupTarget]:
        targets = []
        translations = self._clusters.translate_groups(
            app.groups, plan.from_cluster, plan.to_cluster
        )
        for group, translation in translations.items():
            if translation is None:
                continue
            unknown = []
            for p in translation.partitions:
                if not self._of_app(app, plan, p.source_topic):
                    continue
                if p.target_offset is None:
                    unknown.append(UnknownTranslation(p.topic, p.partition, p.reason))
                    continue
                targets.append(
                    GroupTarget(
                        group,
                        p.topic,
                        p.partition,
                        p.target_offset,
                        p.exact,
                        p.source_topic,
                        p.source_offset,
                        p.reason,
                    )
                )
            targets.extend(self._resolve(app, group, plan, unknown))
        return targets

    def _checkpointed_targets(self, app: Application, plan: FailoverPlan) -> list[GroupTarget]:
        """Unplanned: the newest checkpoints the flow wrote on the new cluster."""
        targets = []
        checkpoints = self._clusters.checkpoints(plan.from_cluster, plan.to_cluster)
        groups = set(app.groups)
        unknown: dict[str, list[UnknownTranslation]] = {}
        for key, checkpoint in sorted(checkpoints.items()):
            if key.group not in groups or not self._of_app(app, plan, checkpoint.source_topic):
                continue
            if checkpoint.target_offset is None:
                unknown.setdefault(key.group, []).append(
                    UnknownTranslation(key.topic, key.partition, checkpoint.reason)
                )
                continue
            targets.append(
                GroupTarget(
                    key.group,
                    key.topic,
                    key.partition,
                    checkpoint.target_offset,
                    checkpoint.exact,
                    checkpoint.source_topic,
                    checkpoint.source_offset,
                    checkpoint.reason,
                )
            )
        for group, missing in sorted(unknown.items()):
            targets.extend(self._resolve(app, group, plan, missing))
        return targets

    def _resolve(
        self,
        app: Application,
        group: str,
        plan: FailoverPlan,
        unknown: Sequence[UnknownTranslation],
    ) -> list[GroupTarget]:
        """Start positions of untranslatable partitions by the application's policy; raises
        :class:`RefusedError` when the policy refuses."""
        if not unknown:
            return []
        earliest: dict[Partition, int] = {}
        if app.on_unknown_translation == "earliest":
            earliest = self._clusters.earliest(
                plan.to_cluster, [(u.topic, u.partition) for u in unknown]
            )
        resolution = resolve_group(app.on_unknown_translation, group, unknown, earliest)
        if resolution.refused:
            raise RefusedError("; ".join(r.message for r in resolution.refusals))
        return [
            GroupTarget(group, s.topic, s.partition, s.offset, False, "", -1, "earliest")
            for s in resolution.start_at
        ]

    def _activate(self, app: Application, record: FailoverRecord) -> _StepResult:
        plan = record.plan
        result = self._switch(app, record, plan.to_cluster)
        if result.outcome is not Outcome.OK or not result.ops:
            return result
        watch = None
        if plan.kind is FailoverKind.PLANNED:
            cutoffs = self._cutoffs(app, plan)
            found: dict[str, object] = {**result.found, "cutoffs": cutoffs}
            watch = self._epoch_watch(app, plan, int(str(result.found["epoch"])))
        else:
            # Unplanned: the new cluster's ends, what crossed, and the short look at the old
            # cluster are read at once (the application waits for this step).
            with ThreadPoolExecutor(max_workers=2) as pool:
                reading = pool.submit(self._cutoffs, app, plan)
                look = (
                    pool.submit(
                        self._clusters.reachable,
                        plan.from_cluster,
                        timeout_s=_QUICK_PROBE_S,
                        tries=1,
                    )
                    if self._look_at_lost_cluster
                    else None
                )
                unreplicated = self._unreplicated(app, plan, look)
                cutoffs = reading.result()
            found = {**result.found, "cutoffs": cutoffs, "unreplicated": tuple(unreplicated)}
        flow_ops, notes = self._switch_flows(app, plan, cutoffs, watch)
        detail = "; ".join([result.detail, *notes]) if result.detail else "; ".join(notes)
        return replace(result, ops=(*result.ops, *flow_ops), detail=detail, found=found)

    def _epoch_watch(
        self, app: Application, plan: FailoverPlan, epoch: int
    ) -> tuple[int, Mapping[Partition, int]] | None:
        """Where the old cluster's partitions of the application's topics end now (every
        client's lease has run out): records past these ends with an epoch below ``epoch`` are
        stale. None when the old cluster does not say (the watch is evidence, not safety: the
        switch goes on without it)."""
        try:
            ends = self._clusters.partition_ends(plan.from_cluster, sorted(app.topics))
        except DrsvcError as err:  # an ACL refusal too: the watch is evidence, never a stop
            log.warning(
                "failover %s: the ends of %s's topics on %s are unknown (%s): records written "
                "there under an old epoch will not be counted",
                plan.failover_id,
                app.name,
                plan.from_cluster,
                err,
            )
            return None
        return epoch, ends

    def _switch_flows(
        self,
        app: Application,
        plan: FailoverPlan,
        cutoffs: Sequence[Cutoff],
        watch: tuple[int, Mapping[Partition, int]] | None = None,
    ) -> tuple[list[WriteOp], list[str]]:
        """The flows' control changes that go with the switch (see :mod:`.flow_switch`).
        ``watch``: the new epoch and the old cluster's ends of the application's topics, which
        every flow out of the old cluster judges records by from now on."""
        flows = FlowSwitch(self._topology, self._store, self._ns)
        old, new = plan.from_cluster, plan.to_cluster
        topics = sorted(app.topics)
        identity = flows.identity_pair(old, new)
        changes: dict[tuple[str, str], list[Callable[[FlowControl], FlowControl]]] = {}
        notes: list[str] = []
        if plan.kind is FailoverKind.UNPLANNED or identity:
            changes.setdefault((old, new), []).append(lambda c: stop_topics(c, topics))
            notes.append(
                f"flow {old}->{new} stopped for {', '.join(topics)}"
                + (
                    f" until {old}'s records that did not cross are dealt with"
                    if plan.kind is FailoverKind.UNPLANNED
                    else ""
                )
            )
        if plan.kind is FailoverKind.PLANNED and identity:
            floors = {(c.topic, c.partition): c.offset for c in cutoffs}
            changes.setdefault((new, old), []).append(lambda c: start_topics(c, topics, floors))
            notes.append(f"flow {new}->{old} copies {', '.join(topics)} from the cut-off")
        if watch is not None and watch[1]:
            epoch, ends = watch
            for flow in self._topology.flows_from(old):
                changes.setdefault((old, flow.target), []).append(
                    lambda c: watch_epochs(c, app.name, epoch, ends)
                )
            notes.append(f"records on {old} written under an epoch below {epoch} are counted")
        ops: list[WriteOp] = []
        for (source, target), edits in changes.items():
            op = flows.edit(source, target, partial(_apply_all, edits))
            if op is not None:
                ops.append(op)
        return ops, notes

    def remote_copies(self, app: Application, plan: FailoverPlan) -> dict[str, str]:
        """The application's topics on the old cluster that the flow old -> new copies, and
        their copies' names on the new cluster."""
        flow = next(
            (
                f
                for f in self._topology.flows
                if f.source == plan.from_cluster and f.target == plan.to_cluster
            ),
            None,
        )
        if flow is None:
            return {}
        copies = {}
        for topic in sorted(set(app.topics)):
            verdict = self._topology.topic_verdict(flow, topic)
            if verdict.replicate and verdict.target_topic is not None:
                copies[topic] = verdict.target_topic
        return copies

    def _cutoffs(self, app: Application, plan: FailoverPlan) -> tuple[Cutoff, ...]:
        copies = self.remote_copies(app, plan)
        try:
            ends = self._clusters.partition_ends(plan.to_cluster, copies.values())
        except KafkaUnavailableError as err:
            raise KafkaUnavailableError(
                f"reading the cut-offs on {plan.to_cluster}: {err}"
            ) from err
        return tuple(Cutoff(t, p, end) for (t, p), end in sorted(ends.items()))

    def _unreplicated(
        self, app: Application, plan: FailoverPlan, look: Future[bool] | None
    ) -> list[UnreplicatedRange]:
        """What did not cross; ``look``: whether the old cluster answered a short look (a gone
        cluster, the usual unplanned case, would hold the switch for the whole probe timeout;
        None: not looked at). A cluster not looked at or too slow to answer gets ranges whose
        end is unknown; the recovery makes them exact once it is back."""
        copies = self.remote_copies(app, plan)
        replicated = self._clusters.replicated(plan.from_cluster, plan.to_cluster, copies)
        source_ends: dict[Partition, int] = {}
        if look is not None and _answered(look, plan.from_cluster):
            source_ends = self._clusters.partition_ends(plan.from_cluster, copies)
        partitions = set(replicated) | set(source_ends)
        return list(
            unreplicated(
                PartitionReplication(t, p, replicated.get((t, p), 0), source_ends.get((t, p)))
                for t, p in sorted(partitions)
            )
        )

    def event(self, message: str) -> None:
        log.info("%s", message)
        self._on_event(message)


def _answered(look: Future[bool], alias: str) -> bool:
    """The short look's answer; refused credentials count as no answer (the application is
    already waiting for this step, and the ranges' ends are made exact by the recovery)."""
    try:
        return look.result()
    except CredentialsRefusedError as err:
        log.error("the look at %s found nothing: %s", alias, err)
        return False


def _apply_all(
    edits: Sequence[Callable[[FlowControl], FlowControl]], control: FlowControl
) -> FlowControl:
    for edit in edits:
        control = edit(control)
    return control


def _configured_lease_ms(app: Application) -> int:
    """The lease the topology gives the application's clients (also what an absent key
    carries)."""
    return int(app.lease_s * 1000)


def _shown(problems: Sequence[str]) -> str:
    more = len(problems) - _SHOWN
    return "; ".join(problems[:_SHOWN]) + (f"; {more} more" if more > 0 else "")


def _with_fence_note(result: _StepResult, note: str) -> _StepResult:
    return replace(result, detail=f"{result.detail}; {note}" if result.detail else note)


def _as_failure(err: DrsvcError | SwitchError) -> _StepResult:
    """A step's error as its failed outcome (the plan decides whether to retry or roll back);
    an error no retry can cure (bad configuration, a lost lock) is raised instead. A refusal
    met inside a step (drsvc's, or the core's :class:`SwitchError`) is the step's failure."""
    if (
        isinstance(err, DrsvcError)
        and not err.retryable
        and not isinstance(err, ConflictError | RefusedError)
    ):
        raise err
    return _StepResult(Outcome.FAILED, str(err))


def _holder_id(value: str) -> str | None:
    try:
        holder = json.loads(value)
    except json.JSONDecodeError:
        return None
    found = holder.get("failover_id") if isinstance(holder, dict) else None
    return found if isinstance(found, str) else None


def _next_name(record: FailoverRecord) -> str:
    step = next_step(record)
    return "its end" if step is None else step.name.value


def _failpoint(name: str) -> None:
    if os.environ.get(FAILPOINT_ENV) == name:
        log.warning("failpoint %s: killing this process", name)
        os.kill(os.getpid(), signal.SIGKILL)
