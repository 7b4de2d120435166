"""What the API's handlers call: the same runtime functions as the CLI, one place per question.

Every request gets its own failover executor (and so its own Kafka clients): requests run on
the API's bounded thread pools, and a failover started through the API runs on a thread of its
own for minutes, so nothing is shared between them but Consul and the clusters themselves.
Those failover threads are not daemons: a stopping API waits for them (:meth:`ApiService.
join_failovers`), so a rollout does not cut a failover off between two steps.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.coordination import Coordinator
from drsvc.api.auth import Caller
from drsvc.api.events import EventLog
from drsvc.api.exposure_cache import ExposureCache
from drsvc.api.migrations import MigrationService
from drsvc.api.problems import ApiProblem
from drsvc.errors import ConfigError, DrsvcError, RequestMismatchError
from drsvc.runtime.checkpoints.flow_checkpoints import read_flow_checkpoints
from drsvc.runtime.failover.app_states import controller_leader
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.failover.views import (
    app_document,
    plan_document,
    record_document,
)
from drsvc.runtime.heartbeats.observer import HeartbeatObserver
from drsvc.runtime.heartbeats.report import freshness_report
from drsvc.runtime.status.flow_status import read_status
from drsvc.topology.models import Application, Topology
from failover import naming
from failover.failover_plan import FailoverKind, FailoverRecord, FailoverRequest
from failover.requester import RequestedBy, RequesterKind

__all__ = ["ApiService", "MoveRequest", "requester"]

log = logging.getLogger(__name__)

#: ids drsvc gives failovers (a caller's request ids follow failover.naming.check_request_id)
_FAILOVER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

ExecutorFactory = Callable[[], FailoverExecutor]


@dataclass(frozen=True)
class MoveRequest:
    """A failover or failback asked through the API (already validated in shape)."""

    app: str
    to: str | None
    dry_run: bool
    force: bool
    request_id: str | None
    failback: bool
    #: run only if the plan is still of this kind (the dry run's ``kind``)
    expect_kind: FailoverKind | None = None
    #: run only if the application's active document still has this epoch (the dry run's)
    expect_epoch: int | None = None
    #: who asked (the token's name and role)
    caller: Caller | None = None


def requester(caller: Caller | None) -> RequestedBy:
    """Who asked, as the failover's record keeps it: the token's name and role."""
    if caller is None:
        return RequestedBy(RequesterKind.API)
    return RequestedBy(RequesterKind.API, caller.name, caller.role.value)


class ApiService:
    def __init__(
        self,
        topology: Topology,
        bootstraps: Mapping[str, str],
        executor_factory: ExecutorFactory,
        coordinator: Coordinator,
        consul: ConsulClient,
        *,
        observer: HeartbeatObserver | None = None,
        mover_factory: ExecutorFactory | None = None,
        probe_timeout_s: float = 2.0,
        status_timeout_s: float = 10.0,
        answer_within_s: float = 60.0,
        exposure_ttl_s: float = 10.0,
    ) -> None:
        self.topology = topology
        self._bootstraps = dict(bootstraps)
        self._executor = executor_factory
        # Dry runs and failovers judge "does the active cluster answer?" as the CLI does; reads
        # may use a quicker executor (a gone cluster must not hold every page for long).
        self._mover = mover_factory or executor_factory
        self._store = coordinator
        self._consul = consul
        self._observer = observer
        self._observer_started = time.monotonic()
        self._probes = KafkaFailoverClusters(topology, bootstraps, probe_timeout_s=probe_timeout_s)
        self._status_timeout_s = status_timeout_s
        self._answer_within_s = answer_within_s
        self.events = EventLog()
        self._exposure = ExposureCache(exposure_ttl_s)
        self._running: list[threading.Thread] = []
        self.migrations = MigrationService(
            topology,
            bootstraps,
            consul.http_addr,
            self._start,
        )

    # -- health -------------------------------------------------------------------------------

    def readiness(self) -> dict[str, Any]:
        """Ready when Consul answers and has a leader (every decision needs it)."""
        leader = self._consul.leader()
        if not leader:
            raise ApiProblem(
                503, "unavailable", f"Consul at {self._consul.http_addr} has no leader"
            )
        return {"status": "ready", "consul_leader": leader}

    # -- clusters and flows --------------------------------------------------------------------

    def clusters(self) -> list[dict[str, Any]]:
        """Per cluster: does it answer this API, what Consul's checks say, and how fresh its
        heartbeats are as seen from every cluster."""
        aliases = sorted(self.topology.clusters)
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(aliases)))) as pool:
            reachable = dict(zip(aliases, pool.map(self._probes.reachable, aliases), strict=True))
        report = self._freshness()
        return [
            {
                "cluster": alias,
                "reachable": reachable[alias],
                "consul_health": self._consul_health(alias),
                "heartbeats": [
                    {k: row[k] for k in ("observer", "state", "freshness_s", "last_offset")}
                    for row in report
                    if row["source"] == alias
                ],
            }
            for alias in aliases
        ]

    def flows(self) -> dict[str, Any]:
        """``drsvc status`` per flow, with the freshness of the source's heartbeats copied to
        the target (how far behind replication runs, in time)."""
        report = read_status(
            self.topology, list(self.topology.flows), self._bootstraps, self._status_timeout_s
        ).as_dict()
        freshness = {(r["observer"], r["source"]): r for r in self._freshness()}
        for flow in report["flows"]:  # type: ignore[attr-defined]
            seen = freshness.get((flow["target"], flow["source"]))
            flow["heartbeat_freshness_s"] = None if seen is None else seen["freshness_s"]
            flow["state"] = (
                "unreadable" if flow["error"] else ("caught-up" if flow["lag"] == 0 else "copying")
            )
        return report

    def _freshness(self) -> list[dict[str, Any]]:
        if self._observer is None:
            return []
        watched = time.monotonic() - self._observer_started
        doc = freshness_report(
            self._observer.freshness(),
            self._observer.expected(),
            self._observer.settings.stale_after_s,
            watched,
        )
        rows: list[dict[str, Any]] = doc["freshness"]  # type: ignore[assignment]
        return rows

    def _consul_health(self, alias: str) -> str | None:
        try:
            entries = self._consul.service_health(naming.kafka_service(alias))
        except DrsvcError:
            return None
        if not entries:
            return None
        states = {check["Status"] for entry in entries for check in entry["Checks"]}
        return "passing" if states == {"passing"} else "critical"

    # -- applications ----------------------------------------------------------------------------

    def apps(self, exposure: bool = False) -> dict[str, Any]:
        executor = self._executor()
        names = executor.application_names()
        return {
            "controller_leader": self.controller_leader(),
            "apps": [self._app_document(executor, name, exposure) for name in names],
        }

    def app(self, name: str, exposure: bool = False) -> dict[str, Any]:
        self.application(name)
        return self._app_document(self._executor(), name, exposure)

    def _app_document(
        self, executor: FailoverExecutor, name: str, exposure: bool
    ) -> dict[str, Any]:
        """The application's page, read now; with ``exposure``, the groups' exposure as last
        computed for the same active cluster and epoch (at most the cache's time to live ago),
        with its time and age."""
        current = app_document(executor, name, exposure=False)
        if not exposure:
            return current

        def compute() -> tuple[tuple[Any, Any], dict[str, Any]]:
            document = app_document(executor, name, exposure=True)
            return (document["active"], document["epoch"]), document

        answer = self._exposure.get(name, (current["active"], current["epoch"]), compute)
        # computed now: the whole page is as fresh as the exposure; from the cache: the page
        # read now, with the kept groups (computed for the same active cluster and epoch)
        document = answer.entry.document if answer.computed_now else current
        return {
            **document,
            "groups": answer.entry.document["groups"],
            "exposure_as_of_ms": answer.entry.as_of_ms,
            "exposure_age_s": round(answer.age_s, 3),
        }

    def group(self, app_name: str, group: str) -> dict[str, Any]:
        """The group's checkpoints per partition on every flow out of the application's
        clusters, and what a failover to each would cost it now."""
        app = self.application(app_name)
        if group not in app.groups:
            raise ApiProblem(
                404,
                "not_found",
                f"application {app.name} has no group {group!r} (groups: {', '.join(app.groups)})",
            )
        executor = self._executor()
        active = executor.active(app)
        flows = []
        for flow in read_flow_checkpoints(self.topology, self._bootstraps):
            checkpoints = flow["groups"].get(group, [])
            flows.append(
                {"flow": flow["flow"], "cluster": flow["cluster"], "checkpoints": checkpoints}
            )
        exposure = []
        if active.cluster is not None:
            exposure = [
                executor.exposure(group, active.cluster, other)
                for other in executor.failover_targets(app, active.cluster)
            ]
        return {
            "app": app.name,
            "group": group,
            "active": active.cluster,
            "flows": flows,
            "exposure": exposure,
        }

    def controller_leader(self) -> str | None:
        return controller_leader(self.topology, self._store)

    def application(self, name: str) -> Application:
        names = [a.name for a in self.topology.applications]
        if name not in names:
            known = ", ".join(names) or "none"
            raise ApiProblem(404, "not_found", f"no application {name!r} (applications: {known})")
        return self.topology.application(name)

    # -- failovers -------------------------------------------------------------------------------

    def failovers(self) -> list[dict[str, Any]]:
        return [record_document(r) for r in self._executor().records()]

    def failover(self, failover_id: str) -> dict[str, Any]:
        if not _FAILOVER_ID.match(failover_id):
            raise ApiProblem(404, "not_found", f"no failover {failover_id!r}")
        try:
            executor = self._executor()
            record = executor.record(failover_id)
            return record_document(record, executor.stale_records(record))
        except ConfigError as err:
            raise ApiProblem(404, "not_found", str(err)) from err

    def move(self, request: MoveRequest) -> tuple[int, dict[str, Any]]:
        """A dry run (200 and the plan) or a started failover (202 and its record, as soon as
        the record is stored; the failover runs on)."""
        app = self.application(request.app)
        to = request.to or (app.preferred if request.failback else None)
        if to is None:
            raise ApiProblem(
                422,
                "invalid",
                "invalid request: to: the cluster to move to is required for a failover",
            )
        if to not in self.topology.clusters:
            known = ", ".join(sorted(self.topology.clusters))
            raise ApiProblem(404, "not_found", f"no cluster {to!r} (clusters: {known})")
        executor = self._mover()
        failover_request = FailoverRequest(
            app.name,
            to,
            request.force,
            request.request_id,
            expect_kind=request.expect_kind,
            expect_epoch=request.expect_epoch,
            requested_by=requester(request.caller),
        )
        if request.dry_run:
            # The epoch is read before the plan is made: a switch that lands in between makes
            # the epoch the caller sends back stale (412), so a plan it was never shown cannot
            # run under the epoch it was shown.
            epoch = executor.active(app).epoch
            plan, targets, note = executor.preview(failover_request)
            return 200, {**plan_document(plan, targets, note), "epoch": epoch}
        if request.caller is not None:
            log.info(
                "%s of %s to %s asked by %s (%s)",
                "failback" if request.failback else "failover",
                app.name,
                to,
                request.caller.name,
                request.caller.role.value,
            )
        if request.request_id is None:
            running = executor.running(app)
            if running is not None:
                raise ApiProblem(
                    409,
                    "failover_running",
                    f"failover {running} of application {app.name} is running: wait for it "
                    "to end, or resume it if its executor died",
                )
        record = self._start(executor, failover_request)
        return 202, record_document(record)

    def _start(self, executor: FailoverExecutor, request: FailoverRequest) -> FailoverRecord:
        created: dict[str, FailoverRecord] = {}
        failed: dict[str, BaseException] = {}
        answered = threading.Event()

        def on_created(record: FailoverRecord) -> None:
            if record.plan.app != request.app:
                # Request ids are the application's own: an executor that answers with another
                # application's failover must neither be believed nor carry that one on.
                failed["error"] = RequestMismatchError(
                    f"request id {request.request_id} names failover {record.plan.failover_id} "
                    f"of application {record.plan.app}, not a request of {request.app}"
                )
                answered.set()
                raise failed["error"]
            created["record"] = record
            answered.set()

        def run() -> None:
            try:
                record = executor.start(request, on_created)
                log.info(
                    "failover %s of %s: %s",
                    record.plan.failover_id,
                    request.app,
                    record.state.value,
                )
            except Exception as err:
                if answered.is_set():
                    log.error("failover of %s stopped: %s", request.app, err)
                else:
                    failed["error"] = err
                    answered.set()

        # not a daemon: the interpreter must not end a failover between two of its steps
        thread = threading.Thread(target=run, name=f"failover-{request.app}", daemon=False)
        thread.start()
        self._running = [t for t in self._running if t.is_alive()] + [thread]
        if not answered.wait(self._answer_within_s):
            raise ApiProblem(
                503,
                "unavailable",
                f"the failover of {request.app} did not start within "
                f"{self._answer_within_s:.0f}s; see GET /v1/failovers",
            )
        if "error" in failed:
            raise failed["error"]
        return created["record"]

    def refresh_events(self) -> None:
        """Take the steps recorded since the last refresh into :attr:`events`."""
        self.events.note(self._executor().records())

    def running_threads(self) -> int:
        return sum(t.is_alive() for t in self._running)

    def join_failovers(self, timeout_s: float) -> list[str]:
        """Wait up to ``timeout_s`` in all for the failovers running on this process's threads;
        the names of those still running after it."""
        deadline = time.monotonic() + timeout_s
        for thread in list(self._running):
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in self._running if t.is_alive()]
