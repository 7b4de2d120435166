"""deploy/Dockerfile: the image installs drsvc from the repository, runs as a non-root user and
starts the drsvc command."""

from __future__ import annotations

import json
import re
import tomllib

from deploy_assets import DEPLOY, REPO, cli

DOCKERFILE = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    found = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


INSTRUCTIONS = _instructions()


def _last(keyword: str) -> str:
    return [rest for key, rest in INSTRUCTIONS if key == keyword][-1]


def test_python_311_slim_base() -> None:
    args = dict(rest.split("=", 1) for key, rest in INSTRUCTIONS if key == "ARG" and "=" in rest)
    assert re.fullmatch(r"python:3\.11-slim(-\w+)?", args["PYTHON_IMAGE"])
    assert all(rest.split()[0] == "${PYTHON_IMAGE}" for key, rest in INSTRUCTIONS if key == "FROM")


def test_entrypoint_is_drsvc_and_the_default_command_exists() -> None:
    assert json.loads(_last("ENTRYPOINT")) == ["drsvc"]
    command = json.loads(_last("CMD"))
    assert command == ["--help"] or command[0] in cli().commands


def test_runs_as_a_non_root_user() -> None:
    user = _last("USER").split(":")[0]
    assert user not in {"root", "0"}


def test_copies_every_package_pyproject_installs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {p.removesuffix("*") for p in patterns}
    copied = {
        rest.split()[0] for key, rest in INSTRUCTIONS if key == "COPY" and "--from" not in rest
    }
    assert packages <= copied
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").splitlines()
    for source in copied:
        assert f"!{source}/" in ignore or f"!{source}" in ignore, source
    assert "RUN /opt/drsvc/bin/pip install ." in DOCKERFILE
