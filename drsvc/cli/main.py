"""The ``drsvc`` command: one Typer app with a sub-app per area.

Commands raise :class:`drsvc.errors.DrsvcError` for anything the operator must fix; :func:`main`
turns those into one clear line on stderr and a non-zero exit code instead of a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import entry_points

import typer

from drsvc.cli import (
    api,
    checkpoints,
    controller,
    demo,
    dev,
    failover,
    flow,
    heartbeats,
    migrate,
    replicate,
    run,
    status,
    topology,
    translate,
    verify,
)
from drsvc.errors import ConfigError, DrsvcError

EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

#: Command groups that other packages add to ``drsvc`` through this entry point group: each entry
#: point names a function ``register(app: typer.Typer) -> None``. ``drsvc`` imports none of them
#: itself (``chaos`` sits above ``drsvc``: see ``.importlinter``).
COMMAND_PLUGINS = "drsvc.commands"

#: Plugins drsvc knows of, and where they come from, so that a missing one is explained.
KNOWN_PLUGINS = {
    "chaos": "the chaos scenarios (package 'chaos', installed with drsvc from its repository: "
    "pip install -e .)",
}


def build_app() -> typer.Typer:
    """Assemble the command tree (built on call, never at import time)."""
    app = typer.Typer(
        name="drsvc",
        help="Active/active disaster recovery and failover for Apache Kafka.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.add_typer(dev.build_app(), name="dev")
    app.add_typer(topology.build_app(), name="topology")
    app.add_typer(flow.build_app(), name="flow")
    app.add_typer(migrate.build_app(), name="migrate")
    replicate.register(app)
    demo.register(app)
    translate.register(app)
    failover.register(app)
    status.register(app)
    heartbeats.register(app)
    checkpoints.register(app)
    run.register(app)
    controller.register(app)
    api.register(app)
    verify.register(app)
    add_plugins(app)
    return app


def add_plugins(app: typer.Typer) -> None:
    """Add the command groups registered under :data:`COMMAND_PLUGINS`; a known plugin that is
    missing or cannot be imported still gets its command, which says why it is unavailable."""
    found: set[str] = set()
    for entry in entry_points(group=COMMAND_PLUGINS):
        try:
            register: Callable[[typer.Typer], None] = entry.load()
        except ImportError as err:
            _unavailable(app, entry.name, f"cannot be imported ({err})")
            found.add(entry.name)
            continue
        register(app)
        found.add(entry.name)
    for name, what in KNOWN_PLUGINS.items():
        if name not in found:
            _unavailable(app, name, f"is not installed: {what}")


def _unavailable(app: typer.Typer, name: str, why: str) -> None:
    @app.command(
        name,
        help=f"(unavailable) {KNOWN_PLUGINS.get(name, name)}",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
        add_help_option=False,
    )
    def unavailable() -> None:
        raise DrsvcError(f"the '{name}' commands {why}")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``drsvc`` console script."""
    app = build_app()
    try:
        app(args=argv, prog_name="drsvc")
    except DrsvcError as err:
        print(f"drsvc: error: {err}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT if isinstance(err, ConfigError) else EXIT_FAILURE)
    except KeyboardInterrupt:
        print("drsvc: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
