from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperGroup

from drsvc.cli.main import (
    COMMAND_GROUPS,
    COMMANDS,
    EXIT_BAD_INPUT,
    EXIT_FAILURE,
    KNOWN_PLUGINS,
    build_app,
    command_of,
    main,
)


def test_bad_input_is_one_line_on_stderr_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["dev", "up", "--clusters", "east,east"])
    assert caught.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("drsvc: error: cluster alias 'east' is listed twice")
    assert "Traceback" not in err


def test_missing_install_fails_with_a_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DRSVC_CACHE_DIR", str(tmp_path / "empty-cache"))
    with pytest.raises(SystemExit) as caught:
        main(["dev", "up", "--clusters", "east", "--state-dir", str(tmp_path / "state")])
    assert caught.value.code == EXIT_FAILURE
    assert "make setup" in capsys.readouterr().err


def test_status_of_an_empty_state_dir_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["dev", "status", "--state-dir", str(tmp_path)])
    assert caught.value.code == 1
    assert "nothing is set up here" in capsys.readouterr().out


def test_each_listed_command_builds_alone_and_the_list_is_complete() -> None:
    everything = typer.main.get_command(build_app())
    assert isinstance(everything, TyperGroup)
    built_in = set(everything.commands) - set(KNOWN_PLUGINS)
    assert built_in == set(COMMANDS) | set(COMMAND_GROUPS)
    for name in [*COMMANDS, *COMMAND_GROUPS]:
        alone = typer.main.get_command(build_app(name))
        assert isinstance(alone, TyperGroup)
        assert name in alone.commands


def test_a_replication_worker_does_not_load_the_api_spark_or_faust() -> None:
    # A fresh interpreter: this one has imported everything already.
    probe = (
        "import sys\n"
        "from drsvc.cli.main import build_app\n"
        "build_app('replicate')\n"
        "print(' '.join(m for m in ('fastapi', 'faust', 'pyspark', 'aiohttp', 'numpy') "
        "if m in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=120
    )
    assert loaded.stdout.strip() == ""


def test_command_word() -> None:
    assert command_of(["replicate", "--flow", "a->b"]) == "replicate"
    assert command_of(["--help"]) is None
    assert command_of([]) is None
