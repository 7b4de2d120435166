"""The ``drsvc`` command: one Typer app with a sub-app per area.

Commands raise :class:`drsvc.errors.DrsvcError` for anything the operator must fix; :func:`main`
turns those into one clear line on stderr and a non-zero exit code instead of a traceback.
"""

from __future__ import annotations

import sys

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
    return app


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
