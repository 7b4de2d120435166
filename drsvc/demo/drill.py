"""The demo's main job: the whole service on the embedded default, and a disaster-recovery drill.

1. A fresh local environment (its own state directory, purged first): clusters ``east`` and
   ``west``, a Consul server per site and a witness.
2. ``drsvc run`` with every role (replication workers, heartbeats, checkpoints, the controller, the
   API) on ``topologies/active-active.yaml``, with two demo settings written into a copy of it: the
   controller acts after a few seconds instead of a minute, and clients hold a 3 s lease.
3. The application ``orders-service`` (a producer and a consumer group on :mod:`drsvc.client`)
   writes and reads orders the whole time.
4. The drill: east's brokers are stopped; the controller fails the application over to west and
   the consumers resume there; east comes back; its orders that never crossed are quarantined
   (``drsvc recover``); the application fails back through the API (planned, exact).
5. The verdict from the application's own history: every acknowledged order read, except those
   drsvc reported as not replicated; nothing re-read after the planned failback; re-reads after
   the unplanned failover counted; RPO and RTO.

With ``secure`` the same drill runs on a secured environment, every role under its own principal
with only its grants, the API over HTTPS (:mod:`drsvc.demo.estate`).
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_client import ConsulClient
from drsvc.demo.estate import ApiAccess, DemoEstate, plan_runs
from drsvc.demo.service import RunGroup, start_runs
from drsvc.demo.service_view import ApiReader, DemoView
from drsvc.demo.spark_check import run_verify, write_history
from drsvc.demo.verdict import Unreplicated, Verdict, judge
from drsvc.demo.workload import History, OrdersWorkload
from drsvc.devenv import secure as secure_env
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.errors import ConfigError, LocalEnvError
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.ports import allocate_ports
from drsvc.settings import Settings
from drsvc.topology.loader import load_topology
from failover.active import ActiveDocument
from failover.naming import app_active_key

__all__ = ["DemoOptions", "run_demo"]

log = logging.getLogger(__name__)

APP = "orders-service"
GROUP = "orders-consumer"
TOPIC = "orders"
ROLES = "replicate,heartbeats,checkpoints,controller,api"


@dataclass(frozen=True)
class DemoOptions:
    topology: Path
    state_dir: Path
    drill: bool = True
    rate_per_s: float = 100.0
    threshold_s: float = 5.0
    lease_s: float = 3.0
    steady_s: float = 12.0
    spark: bool = True
    #: a secured environment, each role under its own principal (see drsvc.demo.estate)
    secure: bool = False


@dataclass
class DrillResult:
    verdict: Verdict
    rto_s: float | None
    rpo_reported_records: int
    failover_id: str
    failback_id: str
    spark: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.verdict.passed and (self.spark is None or bool(self.spark.get("passed")))


def run_demo(options: DemoOptions, console: Console) -> int:
    """Run the demo; 0 when the drill's verdict passed (or no drill was asked for)."""
    options.state_dir.mkdir(parents=True, exist_ok=True)
    _log_to_file(options.state_dir / "demo.log")
    view = DemoView(console)
    env, info, estate = _environment(options, console, view)
    api, service = _start_service(options, estate)
    reader = ApiReader(api.url, api.token_file.read_text().strip(), api.ca_file)
    workload: OrdersWorkload | None = None
    try:
        _wait(reader.answers, 90, "the API to answer", service)
        reader.start()
        _wait(lambda: _leader(reader) is not None, 60, "a controller leader", service)
        view.step(
            f"drsvc run: every role up{_runs_line(service)}; API and dashboard on "
            f"{reader.url}/dashboard ({_api_note(api)})"
        )
        assert info.consul_http_addr is not None
        _set_lease(
            estate.topologies["executor"],
            info.consul_http_addr,
            options.lease_s,
            estate.consul_access("executor"),
        )
        run_id = secrets.token_hex(4)
        workload = OrdersWorkload(
            APP,
            estate.topologies["application"],
            TOPIC,
            GROUP,
            info.consul_http_addr,
            rate_per_s=options.rate_per_s,
            run_id=run_id,
        ).start()
        status = _status_line(workload, reader)
        view.attach(reader, status)
        _wait(
            lambda: workload is not None and workload.counts()[1] > 0,
            60,
            "the first order read on east",
            service,
        )
        view.step(f"{APP}: orders written and read on east at {options.rate_per_s:.0f}/s")
        if not options.drill:
            view.step("no drill: the service runs until Ctrl-C")
            if api.secured:
                _print_secured(console, api, estate, serving=True)
            _until_interrupted(service)
            return 0
        result = _drill(options, env, estate, reader, workload, view, service, run_id)
        view.close()
        _print_verdict(console, result, options)
        if api.secured:
            _print_secured(console, api, estate, serving=False)
        return 0 if result.passed else 1
    finally:
        view.close()
        if workload is not None:
            workload.close()
        reader.stop()
        service.stop()
        console.print(
            f"The local environment keeps running (state: {options.state_dir}); stop it with: "
            f"drsvc dev down --state-dir {options.state_dir}"
        )


def _environment(
    options: DemoOptions, console: Console, view: DemoView
) -> tuple[LocalEnvironment, EnvironmentInfo, DemoEstate]:
    """A fresh local environment (secured if asked), the demo's topologies, its topic and, on a
    secured one, each role's grants."""
    env = LocalEnvironment(Settings.from_env(state_dir=options.state_dir, consul_layout="per-site"))
    with _spinner(console) as progress:
        task = progress.add_task("starting the local environment", total=None)
        env.down(purge=True)

        def note(message: str) -> None:
            progress.update(task, description=f"local environment: {message}")

        info = env.up(
            ["east", "west"], progress=note, consul_layout="per-site", secure=options.secure
        )
        estate = DemoEstate(env, options.state_dir, APP)
        estate.prepare()
    view.step(
        f"local environment up: east {info.clusters['east']}, west {info.clusters['west']}, "
        f"Consul per site with a witness"
    )
    if estate.secure:
        view.step(
            "secured: SASL_SSL with SCRAM-SHA-512, ACLs allow nothing by default, Consul with "
            "default-deny ACLs over HTTPS"
        )
    estate.write_topologies(*_demo_topology(options, info))
    for alias in ("east", "west"):
        create_topic(admin_client(*estate.admin(alias)), TOPIC, partitions=3)
    if estate.secure:
        bindings = estate.grant()
        view.step(
            f"ACLs: {bindings} bindings on the two clusters, each role's grants as drsvc acls "
            "plan computes them, nothing more"
        )
    return env, info, estate


def _start_service(options: DemoOptions, estate: DemoEstate) -> tuple[ApiAccess, RunGroup]:
    """``drsvc run`` of every role (one per principal on a secured environment), the API on a
    free port."""
    (port,) = allocate_ports("127.0.0.1", 1)
    api, api_env, api_args = estate.api(port)
    specs = plan_runs(
        ROLES,
        estate.topologies,
        options.state_dir,
        secure=estate.secure,
        role_env=estate.role_env,
        api_env=api_env,
        api_args=api_args,
    )
    return api, start_runs(specs)


def _runs_line(service: RunGroup) -> str:
    """Which principal runs which roles, when they run apart."""
    if len(service.specs) < 2:
        return ""
    return " (" + "; ".join(f"{s.label}: {s.roles}" for s in service.specs) + ")"


def _drill(
    options: DemoOptions,
    env: LocalEnvironment,
    estate: DemoEstate,
    reader: ApiReader,
    workload: OrdersWorkload,
    view: DemoView,
    service: RunGroup,
    run_id: str,
) -> DrillResult:
    time.sleep(options.steady_s)
    view.step("DRILL: east's Kafka cluster is lost (its brokers are stopped)", "bold red")
    fault_at = time.time()
    env.stop_site("east", grace_s=1)
    _wait(lambda: _active(reader) == "west", 120, "the controller to fail over to west", service)
    view.step(f"controller: {APP} is active on west after {time.time() - fault_at:.1f}s", "bold")
    _wait(
        lambda: workload.first_read_on("west", fault_at) is not None,
        60,
        "the consumers to read on west",
        service,
    )
    read_at = workload.first_read_on("west", fault_at)
    rto = None if read_at is None else read_at - fault_at
    view.step(f"consumers read on west {rto:.1f}s after the fault (RTO)", "bold green")
    failover_id = reader.get(f"/v1/apps/{APP}?exposure=false")["failover_id"]
    failover = reader.get(f"/v1/failovers/{failover_id}")
    bound = "" if failover["rpo_exact"] else "at least "
    view.step(
        f"failover {failover_id} ({failover['kind']}): {bound}{failover['rpo_records']} "
        "order(s) reported not replicated (RPO; exact once east is back)"
    )
    time.sleep(options.steady_s)
    view.step("east comes back", "bold")
    env.up(["east", "west"])
    _wait(lambda: _reachable(reader, "east"), 90, "east to answer", service)
    view.step("drsvc recover: east's orders that never crossed are quarantined; the flow")
    view.step("east->west, stopped for orders by the failover, copies again past them")
    _recover(options, estate)
    failover = reader.get(f"/v1/failovers/{failover_id}")
    divergence = (failover.get("recovery") or {}).get("divergence", [])
    rpo = sum(d["records"] for d in divergence)
    view.step(f"east is back: {rpo} order(s) had not crossed (RPO, exact)")
    time.sleep(options.threshold_s)  # east must have been up for the controller's healthy_after_s
    view.step("failback through the API: planned, exact", "bold")
    started = _failback(reader, view, service)
    _wait(
        lambda: reader.get(f"/v1/failovers/{started['id']}")["state"] != "running",
        180,
        "the failback to end",
        service,
    )
    failback = reader.get(f"/v1/failovers/{started['id']}")
    if failback["state"] != "completed":
        raise LocalEnvError(f"the failback ended {failback['state']}: see {reader.url}/dashboard")
    view.step(f"failback {failback['id']} completed: {APP} is active on east again", "bold green")
    time.sleep(options.steady_s / 2)
    if not workload.pause_producing():
        view.step("orders stopped; some deliveries still unreported after 30s", "bold red")
    ranges = [
        Unreplicated(failover["from"], d["partition"], d["first_offset"], d["last_offset"])
        for d in divergence
        if d["topic"] == TOPIC
    ]
    failback_at = min(e["at_ms"] for e in failback["events"]) / 1000
    try:
        _wait(
            lambda: _caught_up(workload.snapshot(), ranges, fault_at),
            60,
            "the consumers to read every order",
            service,
        )
        view.step("orders stopped; every acknowledged order read")
    except LocalEnvError as err:
        view.step(f"orders stopped; {err}", "bold red")
    # One snapshot for the verdict and the Spark check: both judge the same history.
    history = workload.snapshot()
    verdict = judge(history.acked, history.read, ranges, fault_at=fault_at, failback_at=failback_at)
    spark = (
        _spark_check(
            options,
            estate,
            reader,
            view,
            service,
            history,
            run_id,
            [failover, failback],
            divergence,
        )
        if options.spark
        else None
    )
    return DrillResult(verdict, rto, rpo, failover_id, failback["id"], spark)


def _spark_check(
    options: DemoOptions,
    estate: DemoEstate,
    reader: ApiReader,
    view: DemoView,
    service: RunGroup,
    history: History,
    run_id: str,
    records: list[dict[str, Any]],
    divergence: list[dict[str, Any]],
) -> dict[str, Any]:
    """Once both flows caught up: the history as Parquet, and the Spark job over it."""
    _wait(lambda: _flows_caught_up(reader), 120, "both flows to catch up", service)
    history_dir = write_history(
        options.state_dir / "history",
        history,
        run_id=run_id,
        topic=TOPIC,
        group=GROUP,
        records=records,
        unreplicated=divergence,
    )
    view.step(
        "Spark reads both clusters' orders and the history (drsvc verify"
        + (", as the verifier over SASL_SSL)" if estate.secure else ")")
    )
    spark = run_verify(
        estate.topologies["verifier"],
        history_dir,
        options.state_dir,
        options.state_dir / "verify.log",
    )
    view.step(
        f"Spark: {'passed' if spark.get('passed') else 'FAILED'}",
        "bold green" if spark.get("passed") else "bold red",
    )
    return spark


def _failback(reader: ApiReader, view: DemoView, service: RunGroup) -> dict[str, Any]:
    """Start the failback; while the group still has a member on east from before the fault
    (east restored the group's state with it; it leaves when its session times out), the
    failback is refused and tried again."""
    deadline = time.monotonic() + 120
    told = False
    while True:
        code, answer = reader.post(f"/v1/apps/{APP}/failback", {})
        if code == 202:
            return dict(answer)
        message = str(answer.get("error", {}).get("message", answer))
        if code != 409 or "live members" not in message or time.monotonic() > deadline:
            raise LocalEnvError(f"the failback was refused: {message}")
        if not told:
            view.step(
                "the group still has a member on east from before the fault: waiting "
                "for its session to time out"
            )
            told = True
        stopped = service.stopped()
        if stopped is not None:
            raise LocalEnvError(stopped)
        time.sleep(2)


def _flows_caught_up(reader: ApiReader) -> bool:
    flows = reader.get("/v1/flows")["flows"]
    return bool(flows) and all(f["error"] is None and f["lag"] == 0 for f in flows)


def _caught_up(history: History, ranges: list[Unreplicated], fault_at: float) -> bool:
    verdict = judge(history.acked, history.read, ranges, fault_at=fault_at, failback_at=None)
    return verdict.unread == 0


def _print_verdict(console: Console, result: DrillResult, options: DemoOptions) -> None:
    v = result.verdict
    table = Table(title="drill verdict", show_header=False)
    table.add_column()
    table.add_column(justify="right")
    table.add_column()
    rows = [
        ("orders acknowledged", v.acknowledged, ""),
        ("orders read", v.read, ""),
        ("unread and not reported (lost or skipped)", v.unread, "must be 0"),
        (
            "RPO: orders drsvc reported not replicated",
            result.rpo_reported_records,
            f"failover {result.failover_id}",
        ),
        (
            "   of which acknowledged to the producer",
            v.rpo_reported,
            "east can write an order and lose its ack",
        ),
        ("   of those, never read from a copy", v.rpo_true, "must equal the acknowledged"),
        (
            "re-read after the unplanned failover",
            v.reread_after_unplanned,
            "since the group's last checkpoint",
        ),
        ("re-read after the planned failback", v.reread_after_planned, "must be 0"),
        (
            "RTO: fault to consumers reading on west",
            "-" if result.rto_s is None else f"{result.rto_s:.1f}s",
            f"threshold {options.threshold_s:.0f}s + lease {options.lease_s:.0f}s + steps",
        ),
    ]
    for label, value, note in rows:
        table.add_row(label, str(value), note)
    console.print(table)
    if result.spark is not None:
        console.print(_spark_table(result.spark))
    word = "[bold green]PASSED[/]" if result.passed else "[bold red]FAILED[/]"
    console.print(f"verdict: {word}")


def _api_note(api: ApiAccess) -> str:
    """Where the API's token is (and on HTTPS, who issued its certificate): files, never
    their contents."""
    if api.ca_file is None:
        return f"token in {api.token_file}"
    return f"HTTPS, certificate by the CA in {api.ca_file}; token in {api.token_file}"


def _print_secured(console: Console, api: ApiAccess, estate: DemoEstate, *, serving: bool) -> None:
    """How the run was secured, and how to open the dashboard (``serving``: the API runs now;
    else it stopped with the drill). Names files, never their contents."""
    files = secure_env.secure_files(estate.env.state_dir)
    who = ", ".join(f"{principal} ({role})" for role, principal in estate.principals().items())
    console.print(
        Text.assemble(
            ("secured run", "bold"),
            ": SASL_SSL with SCRAM-SHA-512 and ACLs that allow nothing by default on both "
            f"clusters; every role under its own principal with only its grants: {who}; Consul "
            "with default-deny ACLs over HTTPS, a token per role; the API over HTTPS with a token.",
        )
    )
    lines = [
        f"dashboard: {api.url}/dashboard"
        + ("" if serving else " while the demo ran (drsvc demo --secure --no-drill keeps it up)"),
        f"  trust the environment's CA, which issued its certificate: {files.ca_file}",
        "  (import it into the browser's authorities, or pass it to curl with --cacert)",
        f"  the API token, to paste into the dashboard, is in {api.token_file}",
        f"  e.g. curl --cacert {files.ca_file} "
        f'-H "Authorization: Bearer $(cat {api.token_file})" {api.url}/v1/apps',
        f"each role's topology: {estate.state_dir}/topology-<role>.yaml (passwords and tokens "
        f"named by file, under {files.root})",
    ]
    for line in lines:
        # the terminal wraps them: a path or command cut by a hard line break cannot be copied
        console.print(Text(line), soft_wrap=True)


def _spark_table(spark: dict[str, Any]) -> Table:
    table = Table(title="Spark check of both clusters (drsvc verify)", show_header=False)
    table.add_column()
    table.add_column(justify="right")
    table.add_column()
    if "error" in spark:
        table.add_row("drsvc verify", "error", str(spark["error"]))
        return table
    notes = {
        "lost": "orders missing where they or their copies must be",
        "duplicates": "extra copies (at least once: counted, allowed)",
        "reordered": "per partition",
        "altered": "key, value, headers, timestamp",
        "loops": "copies back at their origin",
        "skipped_after_failover": "records a move made the group jump",
        "reread_after_failover": "allowed after the unplanned failover only",
    }
    for name, count in spark["checks"].items():
        failed = name in spark.get("failed", [])
        table.add_row(
            name.replace("_", " "),
            str(count),
            ("[bold red]FAILED[/] " if failed else "") + notes.get(name, ""),
        )
    table.add_row(
        "recovery point",
        f"{spark.get('rpo_records')}",
        f"reported {spark.get('rpo_reported_records')}",
    )
    table.add_row("took", f"{spark.get('elapsed_s')}s", "")
    return table


# -- the service ------------------------------------------------------------------------------


def _demo_topology(options: DemoOptions, info: EnvironmentInfo) -> tuple[dict[str, Any], str]:
    """The topology with the local clusters' addresses and the demo's timings, and the comment
    its files start with."""
    try:
        document: dict[str, Any] = yaml.safe_load(options.topology.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"cannot read the topology {options.topology}: {err}") from err
    for alias, cluster in document["clusters"].items():
        if alias not in info.clusters:
            raise ConfigError(f"the demo runs east and west; {options.topology} has {alias!r}")
        document["clusters"][alias] = {**(cluster or {}), "bootstrap_servers": info.clusters[alias]}
    document["controller"] = {
        "unreachable_after_s": options.threshold_s,
        "healthy_after_s": options.threshold_s,
        "cooldown_s": 60,
        "interval_s": 1,
    }
    apps = [a for a in document.get("applications", []) if a["name"] == APP]
    if not apps:
        raise ConfigError(f"the demo runs application {APP}; {options.topology} has none")
    apps[0]["lease_s"] = options.lease_s
    apps[0]["auto_failover"] = True
    header = (
        f"# {options.topology.name} with the demo's timings (a few seconds instead of a minute)\n"
    )
    return document, header


def _recover(options: DemoOptions, estate: DemoEstate) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "drsvc.cli.main",
            "recover",
            "-t",
            str(estate.topologies["executor"]),
            "--app",
            APP,
            "--json",
            "--state-dir",
            str(options.state_dir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        # as the executor: on a secured environment its Consul token (by file) and CA
        env={**os.environ, **estate.role_env("executor")},
    )
    log.info("drsvc recover: %s %s", done.stdout, done.stderr)
    if done.returncode != 0:
        raise LocalEnvError(f"drsvc recover failed: {done.stderr.strip() or done.stdout.strip()}")


def _set_lease(topology: Path, consul: str, lease_s: float, access: ConsulAccess | None) -> None:
    """The application is active on its preferred cluster with the demo's lease from the start
    (before any client reads the key: a key never written means the default 15 s lease)."""
    loaded = load_topology(topology)
    app = loaded.application(APP)
    key = app_active_key(loaded.namespace, APP)
    ConsulClient(consul, access=access).kv_put(
        key, ActiveDocument(app.preferred, lease_ms=int(lease_s * 1000)).encode()
    )


def _until_interrupted(service: RunGroup) -> None:
    try:
        while service.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        return


# -- small helpers ------------------------------------------------------------------------------


def _wait(predicate: Callable[[], bool], timeout_s: float, what: str, service: RunGroup) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stopped = service.stopped()
        if stopped is not None:
            raise LocalEnvError(f"{stopped}, waiting for {what}")
        try:
            if predicate():
                return
        except Exception as err:  # an API or cluster answering an error while things move
            log.debug("waiting for %s: %s", what, err)
        time.sleep(0.5)
    raise LocalEnvError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def _active(reader: ApiReader) -> str | None:
    doc = reader.get(f"/v1/apps/{APP}?exposure=false")
    return doc["active"]  # type: ignore[no-any-return]


def _leader(reader: ApiReader) -> str | None:
    return reader.get("/v1/apps?exposure=false")["controller_leader"]  # type: ignore[no-any-return]


def _reachable(reader: ApiReader, cluster: str) -> bool:
    return any(c["cluster"] == cluster and c["reachable"] for c in reader.get("/v1/clusters"))


def _status_line(workload: OrdersWorkload, reader: ApiReader) -> Callable[[], str]:
    started = time.monotonic()

    def line() -> str:
        acked, read = workload.counts()
        apps = (reader.latest.get("apps") or {}).get("apps", [])
        active = next((a["active"] for a in apps if a["app"] == APP), None)
        return (
            f"drsvc demo  {time.monotonic() - started:5.0f}s   {APP} active on "
            f"{active or 'none (switching)'}   orders acknowledged {acked}, read {read}"
        )

    return line


def _spinner(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _log_to_file(path: Path) -> None:
    """Everything this process logs (librdkafka's lines included) goes to the demo's log."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
