from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.cli.main import EXIT_BAD_INPUT, EXIT_FAILURE, main


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
