"""Running one scenario: topology and topics, ``drsvc run``, the workload, the faults (or the
site-loss drill), heal and catch-up, the histories, the Spark check, the verdict and report."""

from __future__ import annotations

import json
import random
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos import rules
from chaos.access import (
    TOPOLOGY_ROLES,
    TopologyRole,
    grant_roles,
    principal_of,
    role_topology,
    split_run_roles,
    workload_grants,
)
from chaos.consul_proxy import ConsulProxies
from chaos.control_plane import CLIENTS_PROXY, EXECUTOR_PROXY, ControlPlane
from chaos.lease_overlap import LeaseSample, overlaps
from chaos.nemesis import ChaosContext, Nemesis, Timeline, build
from chaos.nemesis.base import now_ms
from chaos.nemesis.context import signal_group
from chaos.nemesis.sites import LoseSite
from chaos.report.html import write_report
from chaos.scenarios import Scenario
from chaos.schedule import events
from chaos.service import ROLES, RunPart, Service, retrying, wait
from chaos.switch_times import real_times
from chaos.verification import verify
from chaos.workload import ConsumerSpec, ProducerSpec, Shape, Workload
from chaos.workload.following import FollowingConsumer, FollowingProducer
from chaos.workload.lease_probe import LeaseProbe
from chaos.world import World
from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.record_store import read_records
from drsvc.devenv.ports import allocate_ports
from drsvc.errors import LocalEnvError
from drsvc.kafka.acls import create_acls
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.runtime.access.grants import kafka_grants
from drsvc.runtime.checkpoints.checkpoint_topic import read_checkpoints
from drsvc.runtime.checkpoints.plan import plan_checkpoints
from drsvc.runtime.failover.views import record_document
from drsvc.runtime.status.flow_status import read_status
from drsvc.topology.loader import load_topology
from drsvc.topology.models import Topology
from drsvc.verify import histories
from drsvc.verify.kafka_options import cluster_read_options
from drsvc.verify.switches import switch_row
from failover.active import ActiveDocument
from failover.errors import FormatError
from failover.naming import app_active_key

APP = "app"
#: where drsvc's processes run (and the Consul agent they use)
SERVICE_SITE = "west"
PARTITIONS = 3
LEASE_S = 3.0
SHAPE = Shape(value_size_median=64, value_size_max=1024)


@dataclass
class Outcome:
    """What ``chaos run --json`` prints (``document``) and what the report was made from."""

    document: dict[str, Any]
    reasons: list[str]
    elapsed_s: float
    extra: dict[str, Any] = field(default_factory=dict)


class LagSampler:
    """Every flow's lag (records left to copy, from ``drsvc status``'s reading) every 2 s."""

    def __init__(self, topology: Any, bootstrap: dict[str, str]) -> None:
        self.topology = topology
        self.bootstrap = bootstrap
        self.samples: list[dict[str, Any]] = []
        self.last: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def read(self) -> list[dict[str, Any]]:
        report = read_status(self.topology, self.topology.flows, self.bootstrap, timeout_s=3)
        at = now_ms()
        return [
            {
                "at_ms": at,
                "flow": f.flow,
                "lag": f.lag,
                "unknown": f.unknown_partitions,
                "error": f.error,
            }
            for f in report.flows
        ]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.extend(self.read())
            except Exception as err:  # a cluster gone: a gap in the plot, not a crash
                self.samples.append(
                    {"at_ms": now_ms(), "flow": "*", "lag": None, "error": str(err)}
                )
            self._stop.wait(2.0)

    def readable(self) -> bool:
        rows = self.read()
        return bool(rows) and all(r["error"] is None for r in rows)

    def caught_up(self) -> bool:
        self.last = self.read()
        return bool(self.last) and all(
            r["error"] is None and r["lag"] == 0 and r["unknown"] == 0 for r in self.last
        )

    def describe_last(self) -> str:
        """The last reading ``caught_up`` made, flow by flow (what a timeout reports)."""
        if not self.last:
            return "no flow read yet"
        return "; ".join(
            f"{r['flow']}: " + (f"error {r['error']}" if r["error"] is not None
                                else f"lag {r['lag']}, {r['unknown']} partition(s) unknown")
            for r in self.last
        )  # fmt: skip


def _topology_document(tag: str, scenario: Scenario, bootstrap: dict[str, str]) -> dict[str, Any]:
    topics = {"include": [f"^{tag}-.*"]}
    drill = scenario.drill == "site-loss"
    return {
        "name": tag,
        "namespace": tag,
        "clusters": {a: {"bootstrap_servers": b} for a, b in sorted(bootstrap.items())},
        "flows": [
            {"source": "east", "target": "west", "topics": topics, "delivery": scenario.delivery},
            {"source": "west", "target": "east", "topics": topics, "delivery": scenario.delivery},
        ],
        "applications": [
            {
                "name": APP,
                "groups": [f"{tag}-app"],
                "topics": [f"{tag}-orders"],
                "preferred": "east",
                "auto_failover": True,
                "lease_s": LEASE_S,
                "sync_group_offsets": True,
                "on_unknown_translation": "refuse",
            }
        ],
        # Drills act after 5 s; elsewhere the controller runs (a fault may kill it) but no
        # fault of a replication scenario lasts long enough for it to move anything.
        "controller": {
            "unreachable_after_s": 5 if drill else 90,
            "healthy_after_s": 5,
            "cooldown_s": 60,
            "interval_s": 1,
        },
    }


class ScenarioRun:
    def __init__(self, scenario: Scenario, seed: int, world: World) -> None:
        self.scenario = scenario
        self.seed = seed
        self.world = world
        self.tag = f"{scenario.name}-{seed}-{random.Random().randrange(16**4):04x}"
        self.dir = world.out_dir / scenario.name
        self.history = self.dir / "history"
        self.timeline = Timeline()
        self.problems: list[str] = []
        self.say = world.progress
        self.bootstrap = dict(world.info.clusters)
        self.consul = world.consul(SERVICE_SITE)
        self.topics = (f"{self.tag}-orders", f"{self.tag}-payments")
        self.fault_ms: int | None = None
        self.to_cluster: str | None = None
        #: the drill's failover records (API documents), read at its end whatever happened
        self.failover_records: list[dict[str, Any]] = []
        #: what fresh clients heard during a planned-moves scenario (the lease probe)
        self.lease_samples: list[LeaseSample] = []
        self.api_address: str | None = None
        self.api_token: str | None = None
        #: the workload's counts, for the report
        self.stats: dict[str, Any] = {}
        #: each role's topology (on clusters not secured, the one topology of every role)
        self.topologies: dict[TopologyRole, Path] = {}

    # -- set-up ----------------------------------------------------------------------------

    def prepare(self) -> Path:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.history.mkdir(parents=True)
        for alias in self.bootstrap:
            admin = admin_client(*self.world.admin(alias))
            for topic in self.topics:
                create_topic(admin, topic, partitions=PARTITIONS)
        # drsvc runs at site west: it reaches east through the link between them (when the
        # environment has links), so a partition cuts its workers off from east.
        service_view = self.world.service_bootstrap("west")
        document = _topology_document(self.tag, self.scenario, service_view)
        self.topologies = self._write_topologies(document)
        if self.world.secure:
            self._grant(load_topology(self.topologies["executor"]))
        ConsulClient(self.consul, access=self._consul_access("executor")).kv_put(
            app_active_key(self.tag, APP),
            ActiveDocument("east", lease_ms=int(LEASE_S * 1000)).encode(),
        )
        return self.topologies["executor"]

    def _consul_access(self, role: TopologyRole) -> ConsulAccess | None:
        """How this process reaches Consul as ``role`` (None: by address alone)."""
        return self.world.consul_access(role, SERVICE_SITE)

    def _write_topologies(self, document: dict[str, Any]) -> dict[TopologyRole, Path]:
        """One topology for every role, or on secured clusters one per role, naming the role's
        principal and its Consul access."""
        if not self.world.secure:
            path = self.dir / "topology.yaml"
            path.write_text(yaml.safe_dump(document))
            return dict.fromkeys(TOPOLOGY_ROLES, path)
        paths: dict[TopologyRole, Path] = {}
        for role in TOPOLOGY_ROLES:
            rendered = role_topology(
                document,
                self.world.security(principal_of(role, APP)),
                self.world.consul_block(role, SERVICE_SITE),
            )
            paths[role] = self.dir / f"topology-{role}.yaml"
            paths[role].write_text(yaml.safe_dump(rendered))
        return paths

    def _grant(self, topology: Topology) -> None:
        """Each role's ACLs on each cluster, as ``drsvc acls plan`` prints them, and the
        workload's (it runs as the application's principal)."""
        workload = workload_grants(principal_of("application", APP), f"{self.tag}-")
        for alias in self.bootstrap:
            grants = [g for role in grant_roles() for g in kafka_grants(topology, role, alias)]
            admin = admin_client(*self.world.admin(alias))
            create_acls(admin, [*grants, *workload], cluster=alias)

    def workload(self) -> Workload:
        rate = self.scenario.rate_per_s
        return Workload(
            self.history,
            self.bootstrap,
            [
                ProducerSpec("plain", "east", self.topics, rate=rate),
                ProducerSpec(
                    "txn",
                    "east",
                    self.topics,
                    transactional=True,
                    abort_ratio=0.2,
                    transaction_size=20,
                    rate=rate / 2,
                ),
                ProducerSpec("west", "west", (self.topics[0],), rate=rate / 2),
            ],
            [
                ConsumerSpec(f"{self.tag}-readers", "east", self.topics, member="east"),
                ConsumerSpec(f"{self.tag}-readers", "west", (self.topics[0],), member="west"),
            ],
            shape=SHAPE,
            seed=self.seed,
            settings={
                alias: self.world.client_settings(principal_of("application", APP))
                for alias in self.bootstrap
            },
        )

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> Outcome:
        started = time.monotonic()
        topology_path = self.prepare()
        topology = load_topology(topology_path)
        service = self._service(topology_path)
        context = ChaosContext(
            self.world.env,
            ("east", "west"),
            self.bootstrap,
            service.run_dir,
            self.history,
            links=self.world.links,
            extra={"topics": {"0": self.topics[0], "1": self.topics[1]}},
            other_run_dirs=service.run_dirs[1:],
            admin={alias: self.world.admin(alias) for alias in self.bootstrap},
        )
        sampler = LagSampler(topology, self.bootstrap)
        try:
            wait(service.roles_running, 120, "every role of drsvc run", service)
            wait(sampler.readable, 120, "the flows' status", service)
            self.say(f"{self.scenario.name}: drsvc run up; workload and faults start")
            sampler.start()
            if self.scenario.drill == "site-loss":
                self._drill(context, topology_path, service, sampler)
            elif self.scenario.drill == "planned-moves":
                self._moves(context, topology_path, topology, service, sampler)
            else:
                self._faults(context, service, sampler)
        except Exception as err:
            self.problems.append(f"run: {err}")
            self.say(f"{self.scenario.name}: {err}")
        finally:
            sampler.stop()
            service.stop()
            histories.write_rows(self.history, histories.FAULTS, self.timeline.events)
        return self._check(
            topology, self.failover_records, sampler.samples, time.monotonic() - started
        )

    def _faults(self, context: ChaosContext, service: Service, sampler: LagSampler) -> None:
        workload = self.workload()
        workload.start()
        try:
            self._inject(workload, context, service)
            self._catch_up(service, sampler)
            self._wait_for_consumers(workload)
        finally:
            # Whatever went wrong, producers and readers stop and their histories are written:
            # the check that follows still counts what was written and read.
            stats = workload.stop()
        self.stats = {
            "acknowledged": stats.acknowledged,
            "aborted": stats.aborted,
            "processed": stats.processed,
        }
        errors = [e for e in stats.errors() if "Broker: Not enough" not in e]
        if errors:
            self.say(f"{self.scenario.name}: workload noted {len(errors)} error(s): {errors[:2]}")

    def _inject(self, workload: Workload, context: ChaosContext, service: Service) -> None:
        """The scenario's faults on their schedule while the workload runs; healed, and the
        producers stopped, whatever happens."""
        try:
            workload.wait_for(lambda s: s.acknowledged >= 200, timeout_s=60)
            time.sleep(self.scenario.warmup_s)
            workload.flush()
            self._schedule(context, service)
        finally:
            workload.stop_producers()

    def _schedule(self, context: ChaosContext, service: Service) -> None:
        """The schedule's faults at their times, then ``tail_s``; whatever an error left
        injected is healed."""
        nemeses: list[Nemesis] = []
        try:
            steps = self.scenario.steps
            t0 = time.monotonic()
            nemeses = [build(s.kind, s.params, self.timeline, context) for s in steps]
            for event in events(steps, self.seed, self.scenario.jitter_s):
                delay = t0 + event.at_s - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                service.check()
                nemesis = nemeses[event.index]
                if event.action == "start":
                    self.say(f"{self.scenario.name}: +{event.at_s:.1f}s {steps[event.index].label}")
                    nemesis.start()
                else:
                    nemesis.stop()
            time.sleep(self.scenario.tail_s)
        finally:
            for nemesis in nemeses:  # heal whatever an error left injected
                try:
                    nemesis.stop()
                except Exception as err:
                    self.problems.append(f"heal {nemesis.kind}: {err}")

    def _wait_for_consumers(self, workload: Workload) -> None:
        acked: dict[str, int] = {}
        for p in workload.producers:
            acked[p.spec.cluster] = acked.get(p.spec.cluster, 0) + p.stats.acknowledged
        try:
            workload.wait_for(
                lambda s: all(
                    c.stats.processed >= acked.get(c.spec.cluster, 0) for c in workload.consumers
                ),
                timeout_s=90,
            )
        except TimeoutError as err:
            self.problems.append(f"consumers: {err}")

    def _catch_up_and_read(
        self, service: Service, sampler: LagSampler, consumer: FollowingConsumer
    ) -> None:
        """Replication caught up, then the application's consumer reads until nothing more
        comes (5 s without a new record)."""
        self._catch_up(service, sampler)
        last = consumer.processed
        time.sleep(5)
        while consumer.processed != last:
            last = consumer.processed
            time.sleep(5)

    def _catch_up(self, service: Service, sampler: LagSampler) -> None:
        self.say(f"{self.scenario.name}: healed; waiting for replication to catch up")

        def twice() -> bool:
            if not sampler.caught_up():
                return False
            time.sleep(1.0)
            return sampler.caught_up()

        try:
            wait(twice, 300, "replication to catch up", service)
        except LocalEnvError as err:
            raise LocalEnvError(f"{err} (last reading: {sampler.describe_last()})") from err

    # -- planned moves under control-plane faults ----------------------------------------------

    def _service(self, topology_path: Path) -> Service:
        """``drsvc run`` of the scenario; with the ``api`` role (on a port of its own, behind a
        token of its own) when a move goes through the API or the API is killed."""
        kinds = {s.kind for s in self.scenario.steps}
        needs_api = "kill-api" in kinds or any(
            s.params.get("executor") == "api" for s in self.scenario.steps
        )
        env: dict[str, str] = {}
        if "slow-consul-writes" in kinds:
            # The executor's lock renewals are as slow as its other requests while the fault
            # lasts: a longer session TTL keeps one slow renewal from costing it the lock.
            env["DRSVC_FAILOVER_LOCK_TTL_S"] = "30"
        roles = ROLES
        if needs_api:
            (port,) = allocate_ports("127.0.0.1", 1)
            self.api_address = f"127.0.0.1:{port}"
            self.api_token = secrets.token_hex(16)
            roles = f"{ROLES},api"
            env = {**env, "DRSVC_API_PORT": str(port), "DRSVC_API_TOKEN": self.api_token}
        if not self.world.secure:
            return Service(topology_path, self.dir / "service", self.consul, roles, env)
        # Each principal's roles in a drsvc run of their own, the executor's first: the CLI
        # commands of the drill and the moves run as the executor.
        split = split_run_roles(roles)
        parts = [
            RunPart(
                self.topologies[role],
                self.dir / f"service-{role}",
                held,
                {**env, **self.world.consul_environment(role, SERVICE_SITE)},
            )
            for role, held in split.items()
            if role != "executor"
        ]
        return Service(
            self.topologies["executor"],
            self.dir / "service",
            self.consul,
            split["executor"],
            {**env, **self.world.consul_environment("executor", SERVICE_SITE)},
            parts,
        )

    def _moves(
        self,
        context: ChaosContext,
        topology_path: Path,
        topology: Any,
        service: Service,
        sampler: LagSampler,
    ) -> None:
        """The application's own producer and consumer (on ``drsvc.client``, talking to Consul
        through a proxy a nemesis may cut) follow it while the schedule moves it between the
        clusters under control-plane faults; fresh clients probe the lease all along."""
        proxies = ConsulProxies(
            self.dir / "consul-proxies", self.consul, (EXECUTOR_PROXY, CLIENTS_PROXY)
        ).start()
        plane = ControlPlane(
            self.tag, APP, topology_path, self.consul, proxies, service, self.dir / "moves",
            api_address=self.api_address, api_token=self.api_token,
            consul_access=self._consul_access("executor"),
        )  # fmt: skip
        context.extra["control_plane"] = plane
        clients = proxies.address(CLIENTS_PROXY)
        rate = self.scenario.rate_per_s
        application = self.topologies["application"]
        producer = FollowingProducer(
            APP, application, self.topics[0], "app", self.history, clients, rate, SHAPE,
            self.seed,
        )  # fmt: skip
        consumer = FollowingConsumer(
            APP, application, self.topics[0], f"{self.tag}-app", "m0", self.history, clients
        )
        probe = LeaseProbe(APP, topology, self.consul, self._consul_access("application"))
        paused = self._paused_producer(application, clients)
        if paused is not None:
            context.extra["paused_producer"] = paused
        consumer.start()
        producer.start()
        probe.start()
        try:
            wait(lambda: consumer.last_read_ms.get("east", 0) > 0, 90, "reads on east", service)
            time.sleep(self.scenario.warmup_s)
            producer.history.flush()
            consumer.history.flush()
            self._schedule(context, service)
        finally:
            producer.stop()
            paused_counts = _stop_process(paused) if paused is not None else None
            if paused is not None and not (paused_counts or {}).get("acknowledged"):
                self.problems.append(
                    f"the paused producer wrote nothing ({paused_counts}; see "
                    "paused-producer.log): its pause proved nothing"
                )
            self.lease_samples = probe.stop()
            probe.write(self.history)
            try:
                self._catch_up_and_read(service, sampler, consumer)
            finally:
                consumer.stop()
                self.stats = {
                    "acknowledged": producer.acknowledged,
                    "processed": consumer.processed,
                    "paused_producer": paused_counts,
                    "lease_probe": {"samples": len(self.lease_samples), "errors": probe.errors},
                }
                self.failover_records = [real_times(r, plane.clock_steps) for r in self._records()]
                self._write_failovers(self.failover_records, f"{self.tag}-app")
                proxies.close()

    def _paused_producer(self, topology_path: Path, consul: str) -> subprocess.Popen[bytes] | None:
        """The producer process ``pause-producer`` freezes, if the schedule has that fault: it
        lingers 1 s, so its queue always holds about a second of records (FailoverProducer
        lets a record wait at most half the lease, 1.5 s here, and librdkafka wants the
        linger below that)."""
        if not any(s.kind == "pause-producer" for s in self.scenario.steps):
            return None
        log = (self.dir / "paused-producer.log").open("ab")
        process = subprocess.Popen(
            [
                sys.executable, "-m", "chaos.workload.producer_process", APP, str(topology_path),
                self.topics[0], "paused", str(self.history), consul,
                str(self.scenario.rate_per_s), "1000", str(self.seed),
            ],
            stdout=subprocess.PIPE, stderr=log, start_new_session=True,
        )  # fmt: skip
        log.close()
        return process

    # -- the site-loss drill ---------------------------------------------------------------

    def _records(self) -> list[dict[str, Any]]:
        coordinator = ConsulCoordinator(self.consul, access=self._consul_access("executor"))
        return [record_document(r) for r in read_records(coordinator, self.tag, _unreadable)]

    def _drill(
        self, context: ChaosContext, topology: Path, service: Service, sampler: LagSampler
    ) -> None:
        application = self.topologies["application"]
        producer = FollowingProducer(
            APP,
            application,
            self.topics[0],
            "app",
            self.history,
            self.consul,
            self.scenario.rate_per_s,
            SHAPE,
            self.seed,
        )
        consumer = FollowingConsumer(
            APP, application, self.topics[0], f"{self.tag}-app", "m0", self.history, self.consul
        )
        consumer.start()
        producer.start()
        site = LoseSite(self.timeline, context, "east")
        try:
            self._drill_steps(site, producer, consumer, service, load_topology(topology))
        finally:
            try:
                site.stop()
            except Exception as err:
                self.problems.append(f"heal lose-site: {err}")
            producer.stop()
            try:
                self._catch_up_and_read(service, sampler, consumer)
            finally:
                consumer.stop()
                self.stats = {
                    "acknowledged": producer.acknowledged,
                    "processed": consumer.processed,
                }
                self.failover_records = self._records()
                self._write_failovers(self.failover_records, f"{self.tag}-app")

    def _group_checkpointed(self, topology: Topology) -> bool:
        """Every partition of the drill's topic has a checkpoint of the application's group on
        west (the flow east->west's) with a position there: a checkpoint written before the
        stream followed the flow's offset syncs says "unknown-partition" and places nothing."""
        (stream,) = plan_checkpoints(topology, "east->west").streams
        bootstrap, settings = self.world.admin("west")
        read = read_checkpoints(
            {"bootstrap.servers": bootstrap, **settings},
            stream.checkpoints_topic,
            cluster="west",
            timeout_s=10,
        )
        group = f"{self.tag}-app"
        placed = {
            key.partition
            for key, checkpoint in read.checkpoints.items()
            if key.group == group
            and checkpoint.source_topic == self.topics[0]
            and checkpoint.target_offset is not None  # a translation, exact or not
        }
        return len(placed) >= PARTITIONS

    def _drill_steps(
        self,
        site: LoseSite,
        producer: FollowingProducer,
        consumer: FollowingConsumer,
        service: Service,
        topology: Topology,
    ) -> None:
        name = self.scenario.name
        wait(lambda: consumer.last_read_ms.get("east", 0) > 0, 90, "reads on east", service)
        time.sleep(self.scenario.warmup_s)
        # The drill's premise is disaster recovery that was in place before the site went: the
        # checkpoint stream has placed the group on west. Losing east sooner (the stream follows
        # new offset syncs only seconds after it starts) leaves every unplanned failover
        # refused, rightly, for want of a translation, and tests nothing of the failover.
        wait(
            lambda: self._group_checkpointed(topology),
            60,
            "the group's checkpoints on west",
            service,
        )
        producer.history.flush()
        consumer.history.flush()
        self.fault_ms = now_ms()
        self.say(f"{name}: site east lost")
        site.start()
        wait(
            lambda: any(
                r["kind"] == "unplanned" and r["state"] == "completed" for r in self._records()
            ),
            180,
            "the controller's failover to west",
            service,
        )
        self.to_cluster = "west"
        self.say(f"{name}: failed over to west; waiting for the consumers there")
        fault_ms = self.fault_ms
        wait(lambda: consumer.last_read_ms.get("west", 0) > fault_ms, 90, "reads on west")
        time.sleep(self.scenario.warmup_s)
        site.stop()
        self.say(f"{name}: east is back; drsvc recover, then failback")
        retrying(service, ("recover", "--app", APP), 180, {"unreachable": "", "timed out": ""})
        time.sleep(5)
        retrying(service, ("failback", "--app", APP), 240, {"live members": ""})
        self.say(f"{name}: failed back to east")
        time.sleep(self.scenario.tail_s)

    def _write_failovers(self, records: list[dict[str, Any]], group: str) -> None:
        rows, cutoffs, lost = [], [], []
        switches = [switch_row(r) for r in records]
        for r in sorted(records, key=lambda r: r["events"][0]["at_ms"] if r["events"] else 0):
            if r["state"] != "completed":
                continue
            activate = next(e["at_ms"] for e in r["events"] if e["step"] == "activate")
            rows.append(
                histories.FailoverEvent(
                    r["id"], group, r["from"], r["to"], activate, r["kind"] == "planned"
                )
            )
            cutoffs += [
                histories.Cutoff(r["id"], r["to"], c["topic"], c["partition"], c["offset"])
                for c in r["cutoffs"]
            ]
            divergence = (r.get("recovery") or {}).get("divergence")
            ranges = divergence if divergence is not None else r["unreplicated"]
            lost += [
                histories.Unreplicated(
                    r["id"],
                    r["from"],
                    u["topic"],
                    u["partition"],
                    u["first_offset"],
                    u["last_offset"],
                )
                for u in ranges
            ]
            steps = ", ".join(f"{e['step']} {e['outcome']}" for e in r["events"])
            self.timeline.add(
                _timeline_name(r),
                f"{r['from']}->{r['to']}",
                r["events"][0]["at_ms"],
                r["events"][-1]["at_ms"],
                f"{r['id']} ({r['kind']}): {steps}; reported not replicated: {r['rpo_records']}",
            )
        histories.write_rows(self.history, histories.FAILOVERS, rows)
        histories.write_rows(self.history, histories.CUTOFFS, cutoffs)
        histories.write_rows(self.history, histories.UNREPLICATED, lost)
        histories.write_rows(self.history, histories.SWITCHES, switches)

    # -- the check -------------------------------------------------------------------------

    def _check(
        self,
        topology: Any,
        failovers: list[dict[str, Any]],
        lag: list[dict[str, Any]],
        run_s: float,
    ) -> Outcome:
        self.say(f"{self.scenario.name}: Spark checks both clusters against the histories")
        started = time.monotonic()
        verdict: dict[str, Any] = {}
        partitions: list[dict[str, Any]] = []
        read_s = 0.0
        try:
            # Spark reads as the verifier (on clusters not secured, as anyone).
            verifier = load_topology(self.topologies["verifier"])
            checked = verify(
                self.world.spark,
                topology,
                self.bootstrap,
                self.history,
                self.dir,
                self.scenario.exactly_once,
                cluster_read_options(verifier, self.bootstrap),
            )
            verdict, partitions = checked.verdict, checked.partitions
            read_s = checked.read_s
        except Exception as err:
            self.problems.append(f"verify: {err}")
        verify_s = time.monotonic() - started
        faults = histories.read_rows(self.history, histories.FAULTS)
        consumed = histories.read_rows(self.history, histories.CONSUMED)
        expected = [s.kind for s in self.scenario.steps]
        if self.scenario.drill == "site-loss":
            expected += ["lose-site", "failover", "failback"]
        held_at_once = overlaps(self.lease_samples)
        reasons = rules.judge(
            verdict,
            exactly_once=self.scenario.exactly_once,
            faults=faults,
            expected_faults=expected,
            failovers_expected=self.scenario.failovers_expected,
            failovers_seen=len([r for r in failovers if r["state"] == "completed"]),
            problems=self.problems,
            overlaps=held_at_once,
        )
        rto = rules.rto_seconds(self.fault_ms, self.to_cluster, consumed)
        report_path = self.dir / "report.html"
        relative = _relative(report_path)
        document = rules.scenario_document(
            self.scenario.name, self.seed, reasons, verdict, rto, relative
        )
        details = {
            "scenario": self.scenario.name,
            "description": self.scenario.description,
            "delivery": self.scenario.delivery,
            "faults_covered": list(self.scenario.faults),
            "reasons": reasons,
            "verdict": verdict,
            "workload": self.stats,
            "two_active": {
                "records_and_commits": verdict.get("checks", {}).get("two_active"),
                "lease_overlaps_s": [round(o.seconds, 3) for o in held_at_once],
            },
            "timings_s": {
                "run": round(run_s, 1),
                "verify": round(verify_s, 1),
                "verify_read": round(read_s, 1),
            },
        }
        write_report(report_path, document, details, faults, lag, partitions)
        (self.dir / "result.json").write_text(
            json.dumps({**document, "details": details}, indent=2, default=str)
        )
        return Outcome(document, reasons, run_s + verify_s, details)


def _timeline_name(record: dict[str, Any]) -> str:
    """How a failover shows on the timeline: the drill's automated failover and failback keep
    their names; a planned move elsewhere is a move."""
    if record["kind"] == "unplanned":
        return "failover"
    return "failback" if record["to"] == "east" else "planned-move"


def _stop_process(process: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    """Thaw (in case), stop (SIGTERM) and reap a producer process; its counts."""
    try:
        signal_group(process.pid, signal.SIGCONT)
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=90)
    except Exception:
        process.kill()
        process.wait(10)
        return None
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        counts: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except ValueError:
        return None
    return counts


def _relative(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it (reports name no
    machine's paths)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run_scenario(scenario: Scenario, seed: int, world: World) -> Outcome:
    if scenario.needs_links and world.links is None:
        raise LookupError(f"scenario {scenario.name} needs an environment with links between sites")
    return ScenarioRun(scenario, seed, world).run()


def _unreadable(key: str, err: FormatError) -> None:
    """A record the drill cannot read fails it, naming the key."""
    raise FormatError(f"failover record {key}: {err}") from err
