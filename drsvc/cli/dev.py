"""``drsvc dev``: the embedded local environment (real Kafka clusters and a Consul agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, cast

import typer
from rich.console import Console
from rich.table import Table

from drsvc.devenv.environment import LocalEnvironment, parse_aliases
from drsvc.devenv.smoke import run_smoke
from drsvc.devenv.state import ConsulLayout
from drsvc.errors import ConfigError
from drsvc.settings import Settings

StateDirOption = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        help="State and logs directory (default .drsvc, or DRSVC_STATE_DIR).",
        show_default=False,
    ),
]


def _environment(state_dir: Path | None) -> LocalEnvironment:
    return LocalEnvironment(Settings.from_env(state_dir=state_dir))


def build_app() -> typer.Typer:
    app = typer.Typer(
        help="Run real Kafka clusters and a Consul agent on this machine.",
        no_args_is_help=True,
    )
    err = Console(stderr=True)

    def progress(message: str) -> None:
        err.print(f"[dim]dev:[/dim] {message}", highlight=False)

    @app.command()
    def up(
        clusters: Annotated[
            str, typer.Option("--clusters", help="Comma-separated cluster aliases.")
        ] = "east,west",
        brokers: Annotated[
            int | None,
            typer.Option("--brokers", help="Brokers per new cluster: 1 or 3 (default 1)."),
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help="Print one JSON object with the addresses.")
        ] = False,
        consul_layout: Annotated[
            str | None,
            typer.Option(
                "--consul-layout",
                help="single: one Consul server (default); per-site: one per cluster plus a "
                "witness, so losing a site leaves Consul working. Chosen when the "
                "environment is created (or DRSVC_CONSUL_LAYOUT).",
            ),
        ] = None,
        links: Annotated[
            bool,
            typer.Option(
                "--links",
                help="Join the sites by links that 'drsvc dev cut|heal|delay|limit' act on: "
                "cross-site Kafka traffic goes through a proxy per link. Chosen when the "
                "environment is created.",
            ),
        ] = False,
        secure: Annotated[
            bool,
            typer.Option(
                "--secure",
                help="Secure every cluster: SASL_SSL (SCRAM-SHA-512) and mutual-TLS listeners "
                "only, ACLs that allow nothing by default, a certificate and a password per "
                "principal under the state directory. Chosen when the environment is created.",
            ),
        ] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Start a KRaft cluster per alias and Consul; idempotent."""
        if consul_layout not in (None, "single", "per-site"):
            raise ConfigError(f"--consul-layout must be single or per-site (got {consul_layout!r})")
        env = _environment(state_dir)
        info = env.up(
            parse_aliases(clusters),
            brokers=brokers,
            progress=progress,
            consul_layout=cast("ConsulLayout | None", consul_layout),
            links=True if links else None,
            secure=True if secure else None,
        )
        if as_json:
            typer.echo(json.dumps(info.to_json_dict()))
            return
        for alias, bootstrap in sorted(info.clusters.items()):
            typer.echo(f"{alias}: {bootstrap}")
        typer.echo(f"consul: {info.consul_http_addr}")
        for site, address in sorted(info.consul_sites.items()):
            typer.echo(f"consul {site}: {address}")
        for site, seen in sorted(info.bootstrap_from.items()):
            for alias, bootstrap in sorted(seen.items()):
                if alias != site:
                    typer.echo(f"{alias} from {site} (through the link): {bootstrap}")

    @app.command()
    def down(
        purge: Annotated[
            bool, typer.Option("--purge", help="Also delete the state directory and all data.")
        ] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Stop every process the local environment started."""
        env = _environment(state_dir)
        stopped = env.down(purge=purge, progress=progress)
        typer.echo(f"stopped {stopped} process(es)")

    @app.command()
    def status(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Show what runs; exit 1 when something recorded is not running."""
        env = _environment(state_dir)
        report = env.status()
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "state_dir": str(report.state_dir),
                        "all_running": report.all_running,
                        "processes": [
                            {
                                "site": p.site,
                                "role": p.role,
                                "address": p.address,
                                "pid": p.pid,
                                "running": p.running,
                                "listening": p.listening,
                                "log_file": str(p.log_file),
                            }
                            for p in report.processes
                        ],
                    }
                )
            )
        else:
            table = Table(title=f"drsvc dev environment ({report.state_dir})")
            for column in ("site", "role", "address", "pid", "state", "log"):
                table.add_column(column)
            for p in report.processes:
                state = (
                    "running"
                    if p.running and p.listening
                    else ("starting" if p.running else "stopped")
                )
                table.add_row(p.site, p.role, p.address, str(p.pid or "-"), state, str(p.log_file))
            Console().print(table)
            if not report.processes:
                typer.echo("nothing is set up here; start it with 'drsvc dev up'")
        if not report.all_running:
            raise typer.Exit(1)

    @app.command()
    def smoke(state_dir: StateDirOption = None) -> None:
        """Produce and consume a record on every cluster and round-trip a Consul key."""
        env = _environment(state_dir)
        for result in run_smoke(env.info()):
            typer.echo(
                f"{result.cluster}: record produced and consumed in {result.round_trip_ms:.0f} ms"
            )
        typer.echo("consul: KV write and read ok")

    _add_link_commands(app)
    return app


def _add_link_commands(app: typer.Typer) -> None:
    """``links``, ``cut``, ``heal``, ``delay`` and ``limit``: the links of ``up --links``."""

    @app.command("links")
    def show_links(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Show the links between sites and what they do to traffic now."""
        described = _environment(state_dir).links().describe()
        if as_json:
            typer.echo(json.dumps({"links": described}))
            return
        table = Table(title="links between sites")
        for column in ("link", "state", "latency", "bandwidth", "proxies"):
            table.add_column(column)
        for link in described:
            sites = cast("list[str]", link["sites"])
            state = ("cut (black hole)" if link["blackhole"] else "cut") if link["cut"] else "up"
            if not link["consistent"]:
                state += " (inconsistent: heal it)"
            jitter = f" ±{link['jitter_ms']}" if link["jitter_ms"] else ""
            rate = link["kilobytes_per_s"]
            table.add_row(
                " <-> ".join(sites),
                state,
                f"{link['latency_ms']}{jitter} ms each way",
                "unlimited" if rate is None else f"{rate} KB/s each way",
                str(len(cast("list[object]", link["proxies"]))),
            )
        Console().print(table)

    @app.command()
    def cut(
        site_a: Annotated[str, typer.Argument(help="A site (cluster alias).")],
        site_b: Annotated[str, typer.Argument(help="Another site.")],
        blackhole: Annotated[
            bool,
            typer.Option(
                "--blackhole",
                help="Hold connections and pass no byte (clients only time out) instead of "
                "dropping them and refusing new ones.",
            ),
        ] = False,
        state_dir: StateDirOption = None,
    ) -> None:
        """Cut the link between two sites, both ways, until 'drsvc dev heal'."""
        _environment(state_dir).links().cut(site_a, site_b, blackhole=blackhole)
        typer.echo(f"cut {site_a} <-> {site_b}" + (" (black hole)" if blackhole else ""))

    @app.command()
    def heal(
        site_a: Annotated[
            str | None, typer.Argument(help="A site; without sites every link heals.")
        ] = None,
        site_b: Annotated[str | None, typer.Argument(help="Another site.")] = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Restore a link (or all): connected, no added latency, no bandwidth limit."""
        if (site_a is None) != (site_b is None):
            raise ConfigError("drsvc dev heal takes two sites, or none to heal every link")
        site_links = _environment(state_dir).links()
        if site_a is None or site_b is None:
            site_links.heal_all()
            typer.echo("healed every link")
            return
        site_links.heal(site_a, site_b)
        typer.echo(f"healed {site_a} <-> {site_b}")

    @app.command()
    def delay(
        site_a: Annotated[str, typer.Argument(help="A site (cluster alias).")],
        site_b: Annotated[str, typer.Argument(help="Another site.")],
        latency_ms: Annotated[
            int, typer.Argument(help="Milliseconds added each way (0 removes the delay).")
        ],
        jitter_ms: Annotated[
            int, typer.Option("--jitter", help="Up to this many ms more or less, at random.")
        ] = 0,
        state_dir: StateDirOption = None,
    ) -> None:
        """Delay the link between two sites each way: a round trip takes 2 x LATENCY_MS longer."""
        _environment(state_dir).links().delay(site_a, site_b, latency_ms, jitter_ms)
        typer.echo(f"{site_a} <-> {site_b}: {latency_ms} ms each way (jitter {jitter_ms} ms)")

    @app.command()
    def limit(
        site_a: Annotated[str, typer.Argument(help="A site (cluster alias).")],
        site_b: Annotated[str, typer.Argument(help="Another site.")],
        kilobytes_per_s: Annotated[
            int, typer.Argument(help="Kilobytes per second, each way, per connection.")
        ],
        state_dir: StateDirOption = None,
    ) -> None:
        """Throttle the link between two sites; 'drsvc dev heal' lifts it."""
        _environment(state_dir).links().limit(site_a, site_b, kilobytes_per_s)
        typer.echo(f"{site_a} <-> {site_b}: {kilobytes_per_s} KB/s each way per connection")
