"""``drsvc failover``, ``drsvc failback``, ``drsvc failovers``, ``drsvc recover`` and ``drsvc
apps``: move an application between clusters, deal with a returned site's records that never
crossed, and see where every application stands (see docs/failover.md)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from drsvc.cli.common import (
    ConsulOption,
    StateDirOption,
    TopologyOption,
    load_with_bootstraps,
    os_user,
    resolve_consul,
)
from drsvc.errors import ConfigError, RefusedError
from drsvc.runtime.failover.app_states import controller_leader
from drsvc.runtime.failover.connect import connect_executor
from drsvc.runtime.failover.core_errors import checked_request_id
from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.failover.views import (
    app_document,
    plan_document,
    record_document,
    recovery_document,
)
from drsvc.settings import Settings
from failover.failover_plan import (
    DEFAULT_CATCH_UP_TIMEOUT_S,
    FailoverKind,
    FailoverPlan,
    FailoverRecord,
    FailoverRequest,
    FailoverState,
    GroupTarget,
)
from failover.requester import RequestedBy, RequesterKind, decode_requester
from failover.stale_epochs import StaleEntry

EXIT_OK = 0
EXIT_NOT_DONE = 1
EXIT_BAD_INPUT = 2

#: how long a failover's "does the active cluster answer?" probe waits (the API's failovers use
#: it too): a planned failover is refused when the active cluster does not answer
FAILOVER_PROBE_TIMEOUT_S = 5.0

AppOption = Annotated[str | None, typer.Option("--app", "-a", help="The application.")]
ToOption = Annotated[str | None, typer.Option("--to", help="The cluster to move it to.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the full plan and change nothing.")
]
ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Unplanned: switch at the latest checkpoints without waiting for replication, "
        "even if the active cluster answers. Without it a failover is planned, and refused "
        "while the active cluster does not answer.",
    ),
]
RequestIdOption = Annotated[
    str | None,
    typer.Option(
        "--request-id",
        help="Your id for this request, per application: the same request twice with one id is "
        "one failover, a different request with it is refused. 1 to 128 letters, digits, '.', "
        "'_', ':' or '-', starting with a letter or digit.",
    ),
]
ExpectKindOption = Annotated[
    FailoverKind | None,
    typer.Option(
        "--expect-kind",
        help="Refuse unless the failover that would run now is of this kind (the dry run's).",
    ),
]
ExpectEpochOption = Annotated[
    int | None,
    typer.Option(
        "--expect-epoch",
        min=0,
        help="Refuse unless the application's epoch is still this one (the dry run's): run the "
        "plan you looked at, not one the situation has changed into since.",
    ),
]
ResumeOption = Annotated[
    str | None,
    typer.Option("--resume", help="Carry on failover ID whose executor stopped (or roll it back)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
CatchUpOption = Annotated[
    float,
    typer.Option(
        "--catch-up-timeout",
        help="Planned: how long to wait for replication and checkpoints before rolling back.",
        min=1,
    ),
]


def register(app: typer.Typer) -> None:
    @app.command(
        help="Move an application to another cluster: planned (refused while its active "
        "cluster does not answer), or unplanned with --force. Exit 0 completed, 1 refused or "
        "rolled back, 2 bad input."
    )
    def failover(
        topology_file: TopologyOption,
        app_name: AppOption = None,
        to: ToOption = None,
        dry_run: DryRunOption = False,
        force: ForceOption = False,
        request_id: RequestIdOption = None,
        expect_kind: ExpectKindOption = None,
        expect_epoch: ExpectEpochOption = None,
        resume: ResumeOption = None,
        as_json: JsonOption = False,
        catch_up_timeout_s: CatchUpOption = DEFAULT_CATCH_UP_TIMEOUT_S,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        asked = _Asked(app_name, to, dry_run, force, request_id, expect_kind, expect_epoch)
        _move(
            topology_file, asked, resume, as_json, catch_up_timeout_s, consul, state_dir,
            failback=False,
        )  # fmt: skip

    @app.command(
        help="Move an application back (to its preferred cluster unless --to says "
        "otherwise): the same machine as failover, the other way round."
    )
    def failback(
        topology_file: TopologyOption,
        app_name: AppOption = None,
        to: ToOption = None,
        dry_run: DryRunOption = False,
        force: ForceOption = False,
        request_id: RequestIdOption = None,
        expect_kind: ExpectKindOption = None,
        expect_epoch: ExpectEpochOption = None,
        resume: ResumeOption = None,
        as_json: JsonOption = False,
        catch_up_timeout_s: CatchUpOption = DEFAULT_CATCH_UP_TIMEOUT_S,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        asked = _Asked(app_name, to, dry_run, force, request_id, expect_kind, expect_epoch)
        _move(
            topology_file, asked, resume, as_json, catch_up_timeout_s, consul, state_dir,
            failback=True,
        )  # fmt: skip

    @app.command(help="List the namespace's failovers, or show one.")
    def failovers(
        topology_file: TopologyOption,
        failover_id: Annotated[str | None, typer.Argument(help="A failover id.")] = None,
        as_json: JsonOption = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        executor = build_executor(topology_file, consul, state_dir, DEFAULT_CATCH_UP_TIMEOUT_S)
        if failover_id is not None:
            record = executor.record(failover_id)
            _print_record(record, as_json, executor.stale_records(record))
            return
        records = executor.records()
        if as_json:
            typer.echo(json.dumps([record_document(r) for r in records], indent=2))
            return
        if not records:
            typer.echo("no failovers")
        for r in records:
            s = record_document(r)
            typer.echo(
                f"{s['id']}  {s['app']}  {s['from']} -> {s['to']}  {s['kind']}  {s['state']}"
                f"  {s['duration_s']}s  by {_requester_text(s['requested_by'])}"
            )

    @app.command(
        help="After an unplanned failover, once the lost cluster is back: deal with its "
        "records that never crossed by the application's on_recovery policy (quarantine: "
        "list them and leave them out; replay: copy them to the active cluster, marked), "
        "then resume the flow from that cluster past them. Exit 0 done, 1 refused."
    )
    def recover(
        topology_file: TopologyOption,
        app_name: AppOption = None,
        dry_run: DryRunOption = False,
        as_json: JsonOption = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        if not app_name:
            raise ConfigError("--app is required")
        executor = build_executor(topology_file, consul, state_dir, DEFAULT_CATCH_UP_TIMEOUT_S)
        try:
            record = executor.recover(app_name, dry_run=dry_run)
        except RefusedError as err:
            if as_json:
                typer.echo(json.dumps({"app": app_name, "state": "refused", "reason": str(err)}))
            print(f"drsvc: refused: {err}", file=sys.stderr)
            raise typer.Exit(EXIT_NOT_DONE) from None
        _print_recovery(record, dry_run, as_json)

    @app.command(
        help="Each application's active cluster, epoch, and what a failover right now "
        "would lose or re-read per group."
    )
    def apps(
        topology_file: TopologyOption,
        as_json: JsonOption = False,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        executor = build_executor(topology_file, consul, state_dir, DEFAULT_CATCH_UP_TIMEOUT_S)
        rows = [app_document(executor, name) for name in executor.application_names()]
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        leader = controller_leader(executor.topology, executor.coordinator)
        typer.echo(f"controller leader: {leader or 'none'}")
        for row in rows:
            typer.echo(
                f"{row['app']}: active {row['active'] or 'none (switching)'} epoch {row['epoch']}"
                + (f", failover {row['running']} running" if row["running"] else "")
            )
            for g in row["groups"]:
                typer.echo(
                    f"  group {g['group']} -> {g['to']}: lag {_n(g['lag'])}, would lose "
                    f"{_n(g['would_lose'])}, would re-read {_n(g['would_reread'])}"
                    + (f" ({g['note']})" if g.get("note") else "")
                )


def build_executor(
    topology_file: Path,
    consul: str | None,
    state_dir: Path | None,
    catch_up_timeout_s: float,
    probe_timeout_s: float = FAILOVER_PROBE_TIMEOUT_S,
    *,
    look_at_lost_cluster: bool = True,
) -> FailoverExecutor:
    """The failover executor the commands (and the controller) run failovers with;
    ``probe_timeout_s`` bounds each "does the active cluster answer?" probe."""
    topology, bootstraps = load_with_bootstraps(topology_file, state_dir, consul_role="executor")
    address = resolve_consul(consul, state_dir)
    if address is None:
        raise ConfigError("no Consul agent known: pass --consul host:port")
    return connect_executor(
        topology,
        bootstraps,
        address,
        Settings.from_env(state_dir=state_dir),
        catch_up_timeout_s=catch_up_timeout_s,
        probe_timeout_s=probe_timeout_s,
        on_event=lambda message: print(message, file=sys.stderr, flush=True),
        look_at_lost_cluster=look_at_lost_cluster,
    )


@dataclass(frozen=True)
class _Asked:
    """What ``drsvc failover`` / ``failback`` was asked to move, as given on the command line."""

    app_name: str | None
    to: str | None
    dry_run: bool
    force: bool
    request_id: str | None
    expect_kind: FailoverKind | None
    expect_epoch: int | None

    def check_request_id(self) -> None:
        """Bad input before anything is asked of Consul: the id becomes part of a key."""
        if self.request_id is None:
            return
        try:
            checked_request_id(self.request_id)
        except ConfigError as err:  # named as the option the user gave
            raise ConfigError(f"--request-id: {err}") from err

    @property
    def any_given(self) -> bool:
        return bool(
            self.app_name
            or self.to
            or self.dry_run
            or self.force
            or self.request_id
            or self.expect_kind
            or self.expect_epoch is not None
        )


def _move(
    topology_file: Path,
    asked: _Asked,
    resume: str | None,
    as_json: bool,
    catch_up_timeout_s: float,
    consul: str | None,
    state_dir: Path | None,
    *,
    failback: bool,
) -> None:
    if resume is not None and asked.any_given:
        raise ConfigError(
            "--resume takes no --app, --to, --dry-run, --force, --request-id, --expect-kind "
            "or --expect-epoch"
        )
    asked.check_request_id()
    executor = build_executor(topology_file, consul, state_dir, catch_up_timeout_s)
    if resume is not None:
        _finish(executor, executor.resume(resume), as_json)
        return
    app_name, to = asked.app_name, asked.to
    if not app_name:
        raise ConfigError("--app is required (or --resume ID)")
    app = executor.application(app_name)
    if to is None:
        if not failback:
            raise ConfigError("--to is required: the cluster to move the application to")
        to = app.preferred
    known = executor.cluster_aliases()
    if to not in known:
        raise ConfigError(f"unknown cluster {to!r}: the topology has {', '.join(known)}")
    request = FailoverRequest(
        app_name,
        to,
        asked.force,
        asked.request_id,
        expect_kind=asked.expect_kind,
        expect_epoch=asked.expect_epoch,
        requested_by=RequestedBy.of(RequesterKind.CLI, os_user()),
    )
    try:
        if asked.dry_run:
            # read before the plan, as the API does: a switch in between makes it stale
            epoch = executor.active(app).epoch
            plan, targets, note = executor.preview(request)
            _print_plan(plan, targets, note, epoch, as_json)
            return
        record = executor.start(request)
    except RefusedError as err:
        _refused(app_name, to, str(err), as_json)
    _finish(executor, record, as_json)


def _finish(executor: FailoverExecutor, record: FailoverRecord, as_json: bool) -> None:
    """The failover as it ended, shown as ``drsvc failovers <id>`` and the API show one."""
    _print_record(record, as_json, executor.stale_records(record))
    raise typer.Exit(EXIT_OK if record.state is FailoverState.COMPLETED else EXIT_NOT_DONE)


def _refused(app: str, to: str, reason: str, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"app": app, "to": to, "state": "refused", "reason": reason}))
    print(f"drsvc: refused: {reason}", file=sys.stderr)
    raise typer.Exit(EXIT_NOT_DONE)


def _print_record(
    record: FailoverRecord,
    as_json: bool,
    stale: Sequence[tuple[str, StaleEntry]] | None = None,
) -> None:
    s = record_document(record, stale)
    if as_json:
        typer.echo(json.dumps(s, indent=2))
        return
    typer.echo(
        f"failover {s['id']}: {s['app']} {s['from']} -> {s['to']} ({s['kind']}): {s['state']}"
        f" after {s['duration_s']}s"
    )
    typer.echo(f"  requested by {_requester_text(s['requested_by'])}")
    for e in s["events"]:
        detail = f": {e['detail']}" if e["detail"] else ""
        typer.echo(f"  {e['at']}  {e['step']:<15} {e['outcome']}{detail}")
    for g in s["groups"]:
        verdict = "exact" if g["exact"] else g["reason"]
        typer.echo(
            f"  group {g['group']} {g['topic']}-{g['partition']} -> {g['target_offset']}"
            f" ({verdict})"
        )
    for u in s["unreplicated"]:
        last = u["last_offset"] if u["last_offset"] is not None else "? (end never seen)"
        typer.echo(
            f"  not replicated: {u['topic']}-{u['partition']} offsets {u['first_offset']}..{last}"
        )
    if s["unreplicated"] or record.plan.kind.value == "unplanned":
        bound = "" if s["rpo_exact"] else " (at least)"
        if s["rpo_measured_by"] == "recovery":
            bound = " (counted by the recovery of the returned site)"
        typer.echo(f"  recovery point: {s['rpo_records']} record(s) not replicated{bound}")
    for x in s.get("stale_records", []):
        shown = ", ".join(str(o) for o in x["offsets"][:10])
        more = ", ..." if x["records"] > 10 else ""
        typer.echo(
            f"  written after the switch under an epoch below {x['below_epoch']}:"
            f" {x['topic']}-{x['partition']} {x['records']} record(s) at {shown}{more}"
            f" (found by flow {x['flow']})"
        )


def _requester_text(fields: dict[str, Any]) -> str:
    """``api:alice (operator)``, ``cli:bob``, ``controller:ctl-1``, or ``unknown``."""
    return decode_requester(fields).describe()


def _print_recovery(record: FailoverRecord, dry_run: bool, as_json: bool) -> None:
    s = recovery_document(record, dry_run)
    if as_json:
        typer.echo(json.dumps(s, indent=2))
        return
    typer.echo(
        f"recovery of failover {s['id']} ({s['app']}): {s['cluster']} is back; "
        f"{s['records']} record(s) never crossed; policy {s['policy']}: {s['state']}"
    )
    for r in s["divergence"]:
        typer.echo(
            f"  diverged: {r['topic']}-{r['partition']} offsets {r['first_offset']}.."
            f"{r['last_offset']} ({r['records']} record(s))"
        )
    if s["policy"] == "replay":
        typer.echo(f"  replay to {s['into']}: {_n(s['replayed'])} record(s) copied")
    if dry_run:
        typer.echo(
            f"dry run: nothing was changed; recovery would leave these out of the flow "
            f"{s['cluster']}->{record.plan.to_cluster} and resume it"
        )


def _print_plan(
    plan: FailoverPlan, targets: list[GroupTarget], note: str, epoch: int, as_json: bool
) -> None:
    doc = {**plan_document(plan, targets, note), "epoch": epoch}
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(
        f"dry run: {plan.kind.value} failover of {plan.app} from {plan.from_cluster} to "
        f"{plan.to_cluster} at epoch {epoch}; nothing was changed"
    )
    for i, step in enumerate(plan.steps, 1):
        bound = f" (at most {step.timeout_s:.0f}s)" if step.timeout_s else ""
        typer.echo(f"  {i}. {step.name.value}{bound}; on failure: {step.on_failure.value}")
    if targets:
        typer.echo("group positions on the new cluster if it ran now:")
    for g in targets:
        verdict = "exact" if g.exact else g.reason
        typer.echo(f"  group {g.group} {g.topic}-{g.partition} -> {g.target_offset} ({verdict})")
    if note:
        typer.echo(f"note: {note}")
    typer.echo(
        f"to run this plan and no other: --expect-kind {plan.kind.value} --expect-epoch {epoch}"
    )


def _n(value: object) -> str:
    return "-" if value is None else str(value)
