"""``drsvc chaos list|run|suite``: the chaos scenarios as a command group of ``drsvc``.

drsvc's CLI does not import this module: it finds it through the ``drsvc.commands`` entry point
group (``pyproject.toml`` registers ``chaos = "chaos.cli:register"``), so the layers stay
``chaos -> drsvc -> failover``.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from chaos.nemesis.catalogue import FAULT_KINDS
from chaos.scenarios import SCENARIOS, find, suite
from chaos.suite import run_many

DEFAULT_OUT = Path(".drsvc") / "chaos"
DEFAULT_STATE = Path(".drsvc") / "chaos-env"
#: the secured environment lives apart, so neither run refuses the other's
DEFAULT_SECURE_STATE = Path(".drsvc") / "chaos-secured-env"

OutOption = Annotated[
    Path | None,
    typer.Option("--out", help="Where reports and histories go (default .drsvc/chaos/<time>)."),
]
StateOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="The local environment of the run (started fresh, stopped at the end; default "
        f"{DEFAULT_STATE}, with --secure {DEFAULT_SECURE_STATE}).",
        show_default=False,
    ),
]
SecureOption = Annotated[
    bool,
    typer.Option(
        "--secure",
        help="On secured clusters (SASL_SSL, ACLs): every role under its own principal with "
        "only its grants, the workload as the application's, Spark as the verifier.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the workload and the jitter.")]
MasterOption = Annotated[str, typer.Option("--master", help="Spark master.")]
KeepOption = Annotated[
    bool,
    typer.Option(
        "--keep-environment",
        help="Leave the local environment running at the end (it may be one already running).",
    ),
]


def _progress(message: str) -> None:
    print(f"chaos: {message}", file=sys.stderr, flush=True)


def _out(out: Path | None) -> Path:
    return out or DEFAULT_OUT / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _state(state_dir: Path | None, secure: bool) -> Path:
    if state_dir is not None:
        return state_dir
    return DEFAULT_SECURE_STATE if secure else DEFAULT_STATE


def build_app() -> typer.Typer:
    app = typer.Typer(
        help="Chaos scenarios: workload, faults, heal and catch-up, checked by Spark.",
        no_args_is_help=True,
    )

    @app.command("list", help="The scenarios: delivery mode, faults, whether in --short.")
    def list_(as_json: JsonOption = False) -> None:
        rows: list[dict[str, Any]] = [
            {
                "scenario": s.name,
                "delivery": s.delivery,
                "faults": list(s.faults),
                "short": s.short,
                "needs_links": s.needs_links,
                "description": s.description,
            }
            for s in SCENARIOS
        ]
        if as_json:
            typer.echo(json.dumps({"scenarios": rows, "fault_kinds": dict(FAULT_KINDS)}, indent=2))
            return
        for r in rows:
            flags = " [short]" if r["short"] else ""
            flags += " [needs links]" if r["needs_links"] else ""
            typer.echo(f"{r['scenario']:<26} {r['delivery']:<14} {', '.join(r['faults'])}{flags}")

    @app.command(help="Run one scenario; exits 1 when it did not pass.")
    def run(
        name: Annotated[str, typer.Argument(help="The scenario (see chaos list).")],
        seed: SeedOption = 14,
        as_json: JsonOption = False,
        out: OutOption = None,
        state_dir: StateOption = None,
        master: MasterOption = "local[2]",
        keep_environment: KeepOption = False,
        secure: SecureOption = False,
    ) -> None:
        try:
            scenario = find(name)
        except KeyError as err:
            typer.echo(f"drsvc chaos: {err.args[0]}", err=True)
            raise typer.Exit(2) from err
        summary = run_many(
            [scenario],
            seed,
            _state(state_dir, secure),
            _out(out),
            _progress,
            master,
            keep_environment,
            secure,
        )
        if summary["skipped"]:
            typer.echo(f"drsvc chaos: {name} {summary['skipped'][0]['reason']}", err=True)
            raise typer.Exit(2)
        document = {k: v for k, v in summary["scenarios"][0].items() if k in _RUN_KEYS}
        typer.echo(json.dumps(document, indent=None if as_json else 2))
        if not document["passed"]:
            raise typer.Exit(1)

    @app.command("suite", help="Run every scenario (--short: the CI few); exits 1 on a failure.")
    def suite_(
        short: Annotated[bool, typer.Option("--short", help="Only the short scenarios.")] = False,
        seed: SeedOption = 14,
        as_json: JsonOption = False,
        out: OutOption = None,
        state_dir: StateOption = None,
        master: MasterOption = "local[2]",
        keep_environment: KeepOption = False,
        secure: SecureOption = False,
    ) -> None:
        target = _out(out)
        summary = run_many(
            suite(short),
            seed,
            _state(state_dir, secure),
            target,
            _progress,
            master,
            keep_environment,
            secure,
        )
        if as_json:
            typer.echo(json.dumps(summary, indent=2))
        else:
            for r in summary["scenarios"]:
                word = "passed" if r["passed"] else "FAILED"
                typer.echo(
                    f"{r['scenario']:<26} {word:<7} lost {r['checks']['lost']} duplicates "
                    f"{r['checks']['duplicates']} rpo {r['rpo_records']}/"
                    f"{r['rpo_reported_records']} rto {r['rto_seconds']} ({r['elapsed_s']} s)"
                )
            for s in summary["skipped"]:
                typer.echo(f"{s['scenario']:<26} skipped ({s['reason']})")
            typer.echo(f"report: {target / 'index.html'} ({summary['elapsed_s']} s)")
        if not summary["passed"]:
            raise typer.Exit(1)

    return app


_RUN_KEYS = (
    "scenario",
    "seed",
    "passed",
    "checks",
    "rpo_records",
    "rpo_reported_records",
    "rto_seconds",
    "report",
)


def register(app: typer.Typer) -> None:
    """The ``drsvc.commands`` entry point: adds ``drsvc chaos``."""
    app.add_typer(build_app(), name="chaos")
