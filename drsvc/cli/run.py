"""``drsvc run``: placeholder until its command lands."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    del app
