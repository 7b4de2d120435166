"""The ``drsvc`` command: one Typer app with a sub-app per area.

Commands raise :class:`drsvc.errors.DrsvcError` for anything the operator must fix; :func:`main`
turns those into one clear line on stderr and a non-zero exit code instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

import typer

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


#: The command groups (``drsvc dev ...``): name -> module of ``drsvc.cli`` with ``build_app()``.
COMMAND_GROUPS = {
    "dev": "dev",
    "topology": "topology",
    "flow": "flow",
    "migrate": "migrate",
    "acls": "acls",
}

#: The top-level commands: name -> module of ``drsvc.cli`` whose ``register(app)`` adds it (one
#: module may add several). Listed in the order ``drsvc --help`` shows them.
COMMANDS = {
    "replicate": "replicate",
    "demo": "demo",
    "translate": "translate",
    "failover": "failover",
    "failback": "failover",
    "failovers": "failover",
    "recover": "failover",
    "apps": "failover",
    "status": "status",
    "heartbeats": "heartbeats",
    "checkpoints": "checkpoints",
    "run": "run",
    "controller": "controller",
    "api": "api",
    "verify": "verify",
}


def build_app(command: str | None = None) -> typer.Typer:
    """Assemble the command tree (built on call, never at import time).

    Given the built-in command about to run, only the module that defines it is imported. The
    modules import what their commands need at the top, and some need a lot (the API imports
    FastAPI and PySpark, the checkpoint stream faust): a replication worker that loaded all of
    it would carry about 80 MiB it never uses, in every worker process ``drsvc run`` starts.
    """
    app = typer.Typer(
        name="drsvc",
        help="Active/active disaster recovery and failover for Apache Kafka.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    # Always a group: Typer would turn an app of one command into that command itself.
    app.callback()(_no_options)
    if command in COMMAND_GROUPS:
        _add_group(app, command)
    elif command in COMMANDS:
        _register(app, COMMANDS[command])
    else:
        for group in COMMAND_GROUPS:
            _add_group(app, group)
        for module in dict.fromkeys(COMMANDS.values()):
            _register(app, module)
        add_plugins(app)
    return app


def _no_options() -> None:
    pass


def _add_group(app: typer.Typer, name: str) -> None:
    module = importlib.import_module(f"drsvc.cli.{COMMAND_GROUPS[name]}")
    build: Callable[[], typer.Typer] = module.build_app
    app.add_typer(build(), name=name)


def _register(app: typer.Typer, module_name: str) -> None:
    module = importlib.import_module(f"drsvc.cli.{module_name}")
    register: Callable[[typer.Typer], None] = module.register
    register(app)


def command_of(argv: Sequence[str]) -> str | None:
    """The command word of a ``drsvc`` command line (``None`` for ``drsvc --help``)."""
    if argv and not argv[0].startswith("-"):
        return argv[0]
    return None


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
    args = list(sys.argv[1:] if argv is None else argv)
    app = build_app(command_of(args))
    try:
        app(args=args, prog_name="drsvc")
    except DrsvcError as err:
        print(f"drsvc: error: {err}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT if isinstance(err, ConfigError) else EXIT_FAILURE)
    except KeyboardInterrupt:
        print("drsvc: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
