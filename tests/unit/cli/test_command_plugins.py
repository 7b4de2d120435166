"""drsvc's CLI finds command groups through the ``drsvc.commands`` entry points and explains a
known plugin that is missing, without importing chaos itself."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from drsvc.cli import main


def test_chaos_is_found_through_its_entry_point() -> None:
    result = CliRunner().invoke(main.build_app(), ["chaos", "list"])
    assert result.exit_code == 0, result.output
    assert "worker-kill-eos" in result.output


def test_a_missing_plugin_gets_a_command_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main, "entry_points", lambda group: [])
    app = typer.Typer()

    @app.command()
    def other() -> None: ...

    main.add_plugins(app)
    result = CliRunner().invoke(app, ["chaos", "list"])
    assert result.exit_code != 0
    assert "is not installed" in str(result.exception)
