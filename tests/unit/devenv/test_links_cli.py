"""``drsvc dev links|cut|heal|delay|limit`` refusals that need no running environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.cli.main import EXIT_BAD_INPUT, EXIT_FAILURE, main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as caught:
        main(args)
    code = caught.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["links"],
        ["cut", "east", "west"],
        ["heal"],
        ["delay", "east", "west", "20"],
        ["limit", "east", "west", "64"],
    ],
)
def test_link_commands_need_an_environment_with_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    code, err = run(["dev", *command, "--state-dir", str(tmp_path)], capsys)
    assert code == EXIT_FAILURE
    assert "was not brought up with links" in err
    assert "drsvc dev up --links" in err


def test_heal_takes_two_sites_or_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["dev", "heal", "east", "--state-dir", str(tmp_path)], capsys)
    assert code == EXIT_BAD_INPUT
    assert "two sites, or none" in err


def test_links_join_two_sites_or_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DRSVC_CONSUL_LAYOUT", raising=False)
    code, err = run(
        ["dev", "up", "--clusters", "east", "--links", "--state-dir", str(tmp_path)], capsys
    )
    assert code == EXIT_BAD_INPUT
    assert "links join two or more sites" in err
    assert not (tmp_path / "state.json").exists()  # nothing was created, nothing started
