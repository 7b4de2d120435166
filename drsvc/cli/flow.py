"""``drsvc flow``: pause, resume and throttle running flows (through Consul, all workers)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from drsvc.adapters.consul_access import use_topology_consul
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.cli.common import ConsulOption, StateDirOption, TopologyOption, resolve_consul
from drsvc.errors import ConfigError, ConflictError
from drsvc.runtime.failover.app_states import held_for_recovery
from drsvc.runtime.replication.control import (
    FlowControl,
)
from drsvc.topology.loader import load_topology
from failover import naming

FlowArgument = Annotated[str, typer.Argument(help="The flow, e.g. east->west.")]
TopicOption = Annotated[
    list[str] | None, typer.Option("--topic", help="Only this topic (repeatable).")
]


#: how often an edit is tried again when another writer changed the document in between
_EDIT_ATTEMPTS = 5


def _target(
    topology_file: Path, flow_id: str, consul: str | None, state_dir: Path | None
) -> tuple[ConsulCoordinator, str]:
    topology = load_topology(topology_file)
    use_topology_consul(topology.consul, "executor")
    flow = next((f for f in topology.flows if f.id == flow_id), None)
    if flow is None:
        known = ", ".join(f.id for f in topology.flows) or "none"
        raise ConfigError(f"topology {topology_file} has no flow {flow_id!r} (flows: {known})")
    address = resolve_consul(consul, state_dir, topology)
    if address is None:
        raise ConfigError("no Consul agent known: pass --consul host:port")
    key = naming.flow_control_key(topology.namespace, flow.source, flow.target)
    return ConsulCoordinator(address), key


def _held(
    topology_file: Path, flow_id: str, consul: str | None, state_dir: Path | None
) -> dict[str, str]:
    topology = load_topology(topology_file)
    use_topology_consul(topology.consul, "executor")
    source, _, target = flow_id.partition("->")
    address = resolve_consul(consul, state_dir, topology)
    if address is None:
        raise ConfigError("no Consul agent known: pass --consul host:port")
    return held_for_recovery(topology, ConsulCoordinator(address), source, target)


def _update(
    topology_file: Path,
    flow_id: str,
    consul: str | None,
    state_dir: Path | None,
    change: Callable[[FlowControl], FlowControl],
) -> None:
    """Read the flow's control document, apply ``change``, write it back only if nobody wrote
    it in between, show the result.

    A failover or a recovery changes the same document (the topics it stops and starts, the
    floors, the epoch watch) in a transaction of its own: an unconditional write of what was
    read a moment before would undo that change. So the write compares the index read, and
    on a conflict the edit is made again on the new document.
    """
    store, key = _target(topology_file, flow_id, consul, state_dir)
    for _attempt in range(_EDIT_ATTEMPTS):
        entry = store.get(key)
        current = FlowControl() if entry is None else FlowControl.from_json(entry.value, key)
        updated = change(current)
        if store.put(key, updated.to_json(), index=0 if entry is None else entry.index):
            typer.echo(f"{flow_id}: {updated.to_json()}")
            return
    raise ConflictError(
        key,
        f"{flow_id}: the control document {key} changed {_EDIT_ATTEMPTS} times while it was"
        " being edited; nothing was written, try again",
    )


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

        def change(c: FlowControl) -> FlowControl:
            if topic:
                return replace(c, paused_topics=c.paused_topics | set(topic))
            return replace(c, paused=True)

        _update(topology_file, flow_id, consul, state_dir, change)

    @app.command()
    def resume(
        flow_id: FlowArgument,
        topology_file: TopologyOption,
        topic: TopicOption = None,
        consul: ConsulOption = None,
        state_dir: StateDirOption = None,
    ) -> None:
        """Copy again from where the flow (or topic) stopped. Topics an unplanned failover
        stopped until its records that did not cross are dealt with stay stopped (see
        drsvc recover)."""
        held = _held(topology_file, flow_id, consul, state_dir)
        asked = [t for t in topic or [] if t in held]
        if asked:
            raise ConfigError(
                f"topic {asked[0]} of flow {flow_id} is held by failover {held[asked[0]]} "
                "until the records that did not cross before it are dealt with: run drsvc "
                "recover for its application (resuming now would copy them without a decision)"
            )

        def change(c: FlowControl) -> FlowControl:
            if topic:
                return replace(c, paused_topics=c.paused_topics - set(topic))
            return replace(c, paused=False, paused_topics=c.paused_topics & set(held))

        _update(topology_file, flow_id, consul, state_dir, change)
        if held and not topic:
            typer.echo(
                f"still stopped until drsvc recover: {', '.join(sorted(held))} "
                f"(failover {', '.join(sorted(set(held.values())))})"
            )

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
        _update(
            topology_file,
            flow_id,
            consul,
            state_dir,
            lambda c: replace(c, throttle_bytes_per_s=bytes_per_s),
        )

    return app
