"""``drsvc run`` refuses bad input before it starts anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.cli.main import EXIT_BAD_INPUT, main

TOPOLOGY = """
name: t
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--roles", "replicate,bogus"], "--roles: unknown role 'bogus'"),
        (["--roles", "replicate,controller"], "has no applications"),
        (["--log-format", "xml"], "--log-format must be one of text, json"),
    ],
)
def test_bad_options_exit_2_without_starting_roles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text(TOPOLOGY)
    state = tmp_path / "state"
    with pytest.raises(SystemExit) as caught:
        main(["run", "--topology", str(topology), "--state-dir", str(state), "--plain", *args])
    assert caught.value.code == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err
    assert not (state / "run" / "roles.json").exists()


def test_a_broken_topology_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topology = tmp_path / "t.yaml"
    topology.write_text("name: t\nclusters: {}\nflows: [{source: a, target: b}]\n")
    with pytest.raises(SystemExit) as caught:
        main(["run", "--topology", str(topology), "--state-dir", str(tmp_path), "--plain"])
    assert caught.value.code == EXIT_BAD_INPUT
    assert f"invalid topology {topology}" in capsys.readouterr().err
