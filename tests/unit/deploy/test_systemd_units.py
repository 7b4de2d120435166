"""deploy/systemd: each unit's ExecStart is a drsvc command line the CLI accepts; the
environment example leaves role metrics on loopback unless the operator opts in."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from deploy_assets import DEPLOY, parse_command_line

from drsvc.settings import Settings

UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
#: An instance for each templated unit, as `systemctl start unit@<instance>` would get it
#: (%i: as written, escaped; %I: unescaped).
INSTANCES = {
    "drsvc-replicate@": ("east-\\x3ewest", "east->west"),
    "drsvc-checkpoints@": ("east-\\x3ewest", "east->west"),
    "drsvc-controller@": ("west-1", "west-1"),
}
ROLES = {"replicate", "checkpoints", "controller", "heartbeats", "api"}


def _service(path: Path) -> dict[str, list[str]]:
    """The [Service] section: key -> values (systemd allows a key several times)."""
    section = None
    values: dict[str, list[str]] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        if section == "Service":
            values.setdefault(key, []).append(value)
    return values


def _command_line(path: Path) -> list[str]:
    """ExecStart with specifiers and ${VAR}s of the unit's own Environment= filled in."""
    service = _service(path)
    (exec_start,) = service["ExecStart"]
    stem = path.stem.split("@")[0] + "@" if "@" in path.stem else path.stem
    escaped, unescaped = INSTANCES.get(stem, ("", ""))
    if "@" in path.stem:
        assert escaped, f"no test instance for {path.name}"
    line = exec_start.replace("%i", escaped).replace("%I", unescaped)
    line = line.replace("%d", "/run/credentials/unit").replace("%%", "%")
    assert not re.search(r"%[a-zA-Z]", line), f"unhandled specifier in {line!r}"
    environment = dict(
        assignment.split("=", 1)
        for value in service.get("Environment", [])
        for assignment in shlex.split(value)
    )

    def variable(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in environment, f"{path.name}: ${{{name}}} has no Environment= default"
        return environment[name]

    return shlex.split(re.sub(r"\$\{(\w+)\}", variable, line))


def test_there_is_a_unit_per_role() -> None:
    roles = {path.stem.removeprefix("drsvc-").split("@")[0] for path in UNITS}
    assert roles == ROLES


@pytest.mark.parametrize("path", UNITS, ids=lambda path: path.name)
def test_exec_start_is_a_command_the_cli_accepts(path: Path) -> None:
    program, *args = _command_line(path)
    assert Path(program).name == "drsvc" and Path(program).is_absolute()
    command, params = parse_command_line(args)
    assert command == path.stem.removeprefix("drsvc-").split("@")[0]
    assert params["log_format"] == "json"
    if command == "api":
        assert params["tokens_file"] is not None  # from the unit's credential
        return
    assert params["metrics_port"] is not None


@pytest.mark.parametrize("path", UNITS, ids=lambda path: path.name)
def test_unit_runs_unprivileged_and_restarts(path: Path) -> None:
    service = _service(path)
    assert service["User"] != ["root"] and service["User"]
    assert service["Restart"] == ["always"]
    assert service["EnvironmentFile"]


def test_flow_units_take_the_unescaped_flow() -> None:
    for name in ("drsvc-replicate@.service", "drsvc-checkpoints@.service"):
        _, *args = _command_line(DEPLOY / "systemd" / name)
        _, params = parse_command_line(args)
        assert params["flow_id"] == "east->west"


def test_the_api_reads_its_tokens_from_a_credential() -> None:
    service = _service(DEPLOY / "systemd" / "drsvc-api.service")
    (credential,) = service["LoadCredential"]
    name = credential.split(":", 1)[0]
    assert f"--tokens-file %d/{name}" in service["ExecStart"][0]


def test_the_api_listens_on_loopback_unless_told_otherwise() -> None:
    path = DEPLOY / "systemd" / "drsvc-api.service"
    _, *args = _command_line(path)
    _, params = parse_command_line(args)
    assert params["host"] == "127.0.0.1"
    assert params["public_reads"] is False
    # the host comes from a variable a drop-in (or drsvc.env) may set, not from the command line
    assert "--host ${API_HOST}" in _service(path)["ExecStart"][0]


ENV_EXAMPLE = DEPLOY / "systemd" / "drsvc.env.example"


def _env_example() -> tuple[dict[str, str], dict[str, str]]:
    """DRSVC_* assignments of the example: (set, commented out as optional)."""
    active: dict[str, str] = {}
    optional: dict[str, str] = {}
    for raw in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        target = active
        if line.startswith("#"):
            line, target = line.lstrip("#").strip(), optional
        match = re.fullmatch(r"(DRSVC_\w+)=(\S*)", line)
        if match:
            target[match.group(1)] = match.group(2)
    return active, optional


def test_role_metrics_stay_on_loopback_unless_the_operator_opts_in() -> None:
    """DRSVC_METRICS_HOST (the real setting's variable) is offered commented out, with a value the
    settings accept; the units do not set it themselves."""
    assert "metrics_host" in Settings.model_fields
    active, optional = _env_example()
    assert "DRSVC_METRICS_HOST" not in active
    assert Settings.from_env(optional).metrics_host == optional["DRSVC_METRICS_HOST"] == "0.0.0.0"
    assert Settings.from_env(active).metrics_host == "127.0.0.1"
    for path in UNITS:
        for value in _service(path).get("Environment", []):
            assert "DRSVC_METRICS_HOST" not in value, path.name
