"""``drsvc flow``: pause, resume and throttle running flows (through Consul, all workers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from drsvc.adapters.consul_client import ConsulClient
from drsvc.cli.common import ConsulOption, StateDirOption, TopologyOption, resolve_consul
from drsvc.errors import ConfigError
from drsvc.runtime.replication.control import (
    FlowControl,
    control_key,
    read_control,
    write_control,
)
from drsvc.topology.loader import load_topology

FlowArgument = Annotated[str, typer.Argument(help="The flow, e.g. east->west.")]
TopicOption = Annotated[
    list[str] | None, typer.Option("--topic", help="Only this topic (repeatable).")
]


def _target(
    topology_file: Path, flow_id: str, consul: str | None, state_dir: Path | None
) -> tuple[ConsulClient, str]:
    topology = load_topology(topology_file)
    flow = next((f for f in topology.flows if f.id == flow_id), None)
    if flow is None:
        known = ", ".join(f.id for f in topology.flows) or "none"
        raise ConfigError(f"topology {topology_file} has no flow {flow_id!r} (flows: {known})")
    address = resolve_consul(consul, state_dir)
    if address is None:
        raise ConfigError("no Consul agent known: pass --consul host:port")
    return ConsulClient(address), control_key(topology.namespace, flow.source, flow.target)


def build_app() -> typer.Typer:
    app = typer.Typer(help="Pause, resume and throttle running flows.", no_args_is_help=True)

    @app.command()
    def pause(
        flow_id: FlowArgument,
        topology_file: TopologyOption,
        topic: TopicOption = None,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Stop copying a flow (or some of its topics); progress is kept."""
        client, key = _target(topology_file, flow_id, consul, state_dir)
        current = read_control(client, key)
        if topic:
            updated = FlowControl(
                current.paused, current.paused_topics | set(topic), current.throttle_bytes_per_s
            )
        else:
            updated = FlowControl(True, current.paused_topics, current.throttle_bytes_per_s)
        write_control(client, key, updated)
        typer.echo(f"{flow_id}: {updated.to_json()}")

    @app.command()
    def resume(
        flow_id: FlowArgument,
        topology_file: TopologyOption,
        topic: TopicOption = None,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Copy again from where the flow (or topic) stopped."""
        client, key = _target(topology_file, flow_id, consul, state_dir)
        current = read_control(client, key)
        if topic:
            updated = FlowControl(
                current.paused, current.paused_topics - set(topic), current.throttle_bytes_per_s
            )
        else:
            updated = FlowControl(False, frozenset(), current.throttle_bytes_per_s)
        write_control(client, key, updated)
        typer.echo(f"{flow_id}: {updated.to_json()}")

    @app.command()
    def throttle(
        flow_id: FlowArgument,
        topology_file: TopologyOption,
        bytes_per_s: Annotated[
            int | None,
            typer.Option("--bytes-per-s", help="Cap in bytes/s; omit to remove the cap.", min=1),
        ] = None,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Cap the rate of a flow (keys and values, per worker)."""
        client, key = _target(topology_file, flow_id, consul, state_dir)
        current = read_control(client, key)
        updated = FlowControl(current.paused, current.paused_topics, bytes_per_s)
        write_control(client, key, updated)
        typer.echo(f"{flow_id}: {updated.to_json()}")

    return app
