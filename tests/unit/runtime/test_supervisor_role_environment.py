"""Each role process gets only its own variables: planned from a loaded topology, checked
before anything starts, and seen by a real child process."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from drsvc.errors import ConfigError
from drsvc.runtime.supervisor.restart_policy import RestartPolicy
from drsvc.runtime.supervisor.role_environment import interpolated_variables, role_environment
from drsvc.runtime.supervisor.roles import RoleSpec, plan_roles
from drsvc.runtime.supervisor.supervisor import Supervisor, SupervisorSettings
from drsvc.topology import load_topology

TOPOLOGY = """
name: aa
clusters:
  east:
    bootstrap_servers: "${EAST_BOOTSTRAP}"
    security:
      protocol: SASL_PLAINTEXT
      sasl: {mechanism: SCRAM-SHA-512, username: drsvc, password_env: EAST_PASSWORD}
  west:
    bootstrap_servers: "127.0.0.1:19093"
    security:
      protocol: SASL_PLAINTEXT
      sasl: {mechanism: SCRAM-SHA-512, username: drsvc, password_env: WEST_PASSWORD}
  south:
    bootstrap_servers: "127.0.0.1:19094"
    security:
      protocol: SASL_PLAINTEXT
      sasl: {mechanism: SCRAM-SHA-512, username: drsvc, password_env: SOUTH_PASSWORD}
flows:
  - {source: east, target: west}
  - {source: west, target: south}
applications:
  - {name: app, groups: [g], topics: [t], preferred: east}
consul:
  tokens:
    replicator: {token_env: REPLICATOR_TOKEN}
    checkpoints: {token_env: CHECKPOINTS_TOKEN}
    executor: {token_env: EXECUTOR_TOKEN}
"""

SECRETS = {
    "EAST_PASSWORD": "east-secret",
    "WEST_PASSWORD": "west-secret",
    "SOUTH_PASSWORD": "south-secret",
    "REPLICATOR_TOKEN": "replicator-token",
    "CHECKPOINTS_TOKEN": "checkpoints-token",
    "EXECUTOR_TOKEN": "executor-token",
    "DRSVC_API_TOKEN": "api-token",
}
ENVIRON = {
    **SECRETS,
    "EAST_BOOTSTRAP": "127.0.0.1:19092",
    "PATH": "/usr/bin",
    "LC_ALL": "C.UTF-8",
    "DRSVC_STATE_DIR": "/state",
    "CONSUL_HTTP_ADDR": "127.0.0.1:8500",
    "AWS_SECRET_ACCESS_KEY": "unrelated",
}


@pytest.fixture
def topology_file(tmp_path: Path) -> Path:
    path = tmp_path / "aa.yaml"
    path.write_text(TOPOLOGY)
    return path


def planned(topology_file: Path) -> dict[str, RoleSpec]:
    topology = load_topology(topology_file, env=ENVIRON)
    kinds = ("replicate", "heartbeats", "checkpoints", "controller", "api")
    specs = plan_roles(
        topology, topology_file, kinds, workers_per_flow=1, state_dir=Path("/s"), log_format="text"
    )
    return {spec.name: spec for spec in specs}


def secrets_of(env: dict[str, str]) -> set[str]:
    return {name for name in SECRETS if name in env}


def test_each_planned_role_gets_only_the_secrets_it_uses(topology_file: Path) -> None:
    envs = {
        name: role_environment(ENVIRON, spec.variables, name)
        for name, spec in planned(topology_file).items()
    }
    clusters = {"EAST_PASSWORD", "WEST_PASSWORD", "SOUTH_PASSWORD"}
    assert secrets_of(envs["replicate.east-to-west.1"]) == {
        "EAST_PASSWORD",
        "WEST_PASSWORD",
        "REPLICATOR_TOKEN",
    }
    assert secrets_of(envs["replicate.west-to-south.1"]) == {
        "WEST_PASSWORD",
        "SOUTH_PASSWORD",
        "REPLICATOR_TOKEN",
    }
    assert secrets_of(envs["heartbeats"]) == clusters
    assert secrets_of(envs["checkpoints"]) == clusters | {"CHECKPOINTS_TOKEN"}
    assert secrets_of(envs["controller"]) == clusters | {"EXECUTOR_TOKEN"}
    assert secrets_of(envs["api"]) == clusters | {"EXECUTOR_TOKEN", "DRSVC_API_TOKEN"}
    for name, env in envs.items():
        assert "AWS_SECRET_ACCESS_KEY" not in env, name
        assert env["PATH"] == "/usr/bin"
        assert env["LC_ALL"] == "C.UTF-8"
        assert env["DRSVC_STATE_DIR"] == "/state"
        # the topology interpolates it: every role loads the whole file
        assert env["EAST_BOOTSTRAP"] == "127.0.0.1:19092"
        assert ("CONSUL_HTTP_ADDR" in env) is (name != "heartbeats")
    # each role's own token, where drsvc's processes read it
    assert envs["replicate.east-to-west.1"]["CONSUL_HTTP_TOKEN"] == "replicator-token"
    assert envs["checkpoints"]["CONSUL_HTTP_TOKEN"] == "checkpoints-token"
    assert envs["controller"]["CONSUL_HTTP_TOKEN"] == "executor-token"
    assert envs["api"]["CONSUL_HTTP_TOKEN"] == "executor-token"
    assert "CONSUL_HTTP_TOKEN" not in envs["heartbeats"]


def test_an_unset_variable_stops_the_run_before_any_role_starts_naming_it(
    topology_file: Path, tmp_path: Path
) -> None:
    specs = list(planned(topology_file).values())
    environ = {k: v for k, v in ENVIRON.items() if k != "SOUTH_PASSWORD"}
    with pytest.raises(ConfigError) as caught:
        Supervisor(specs, tmp_path / "run", topology_file, env=environ)
    message = str(caught.value)
    assert "SOUTH_PASSWORD" in message
    assert "clusters.south.security.sasl.password_env" in message
    assert "replicate.west-to-south.1" in message
    assert not any(value in message for value in SECRETS.values())
    assert not (tmp_path / "run").exists()


def test_consul_s_own_token_variable_stands_in_for_the_topology_s(topology_file: Path) -> None:
    environ = {k: v for k, v in ENVIRON.items() if k not in ("REPLICATOR_TOKEN", "EXECUTOR_TOKEN")}
    environ["CONSUL_HTTP_TOKEN_FILE"] = "/etc/consul/token"
    for name, spec in planned(topology_file).items():
        env = role_environment(environ, spec.variables, name)
        assert ("CONSUL_HTTP_TOKEN_FILE" in env) is (name != "heartbeats")
        # the operator's choice wins: no role's own token is put beside it
        assert env.get("CONSUL_HTTP_TOKEN_FILE", "/etc/consul/token") == "/etc/consul/token"
        assert "CONSUL_HTTP_TOKEN" not in env


def test_a_role_s_token_file_becomes_consul_s_token_file_variable(
    topology_file: Path, tmp_path: Path
) -> None:
    files = {role: tmp_path / f"{role}.token" for role in ("replicator", "checkpoints")}
    text = TOPOLOGY.replace(
        "replicator: {token_env: REPLICATOR_TOKEN}",
        f"replicator: {{token_file: {files['replicator']}}}",
    ).replace(
        "checkpoints: {token_env: CHECKPOINTS_TOKEN}",
        f"checkpoints: {{token_file: {files['checkpoints']}}}",
    )
    topology_file.write_text(text)
    envs = {
        name: role_environment(ENVIRON, spec.variables, name)
        for name, spec in planned(topology_file).items()
    }
    assert envs["replicate.east-to-west.1"]["CONSUL_HTTP_TOKEN_FILE"] == str(files["replicator"])
    assert envs["checkpoints"]["CONSUL_HTTP_TOKEN_FILE"] == str(files["checkpoints"])
    assert envs["api"]["CONSUL_HTTP_TOKEN"] == "executor-token"
    assert "CONSUL_HTTP_TOKEN_FILE" not in envs["api"]
    assert not any(k.startswith("CONSUL_HTTP_TOKEN") for k in envs["heartbeats"])


def test_interpolated_variables_are_found_as_the_loader_reads_them() -> None:
    text = 'a: "${ONE}"\nb: "${TWO:-x}"\nc: "$${NOT_ONE}"\nd: "${3BAD}"\n'
    assert interpolated_variables(text) == {"ONE", "TWO"}


def test_a_real_child_process_sees_its_own_environment_only(tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    script = tmp_path / "dump.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, os, signal, sys, time
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            with open({str(dump)!r}, "w") as out:
                json.dump(dict(os.environ), out)
            while True:
                time.sleep(0.05)
            """
        )
    )
    spec = RoleSpec(name="dumper", kind="dumper", command=(sys.executable, str(script)))
    run_dir = tmp_path / "run"
    supervisor = Supervisor(
        [spec],
        run_dir,
        tmp_path / "t.yaml",
        policy=RestartPolicy(initial_backoff_s=0.2),
        settings=SupervisorSettings(grace_s=5.0, tick_s=0.05, scrape_every_s=0),
        env={**ENVIRON, "PATH": "/usr/bin:/bin"},
        sleep=lambda s: _sleep_until(s, dump, supervisor),
    )
    supervisor.run()
    env = json.loads(dump.read_text())
    assert not secrets_of(env)
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["DRSVC_ROLE"] == "dumper"
    assert env["LC_ALL"] == "C.UTF-8"


def _sleep_until(seconds: float, dump: Path, supervisor: Supervisor) -> None:
    time.sleep(seconds)
    if dump.exists() and dump.stat().st_size > 0:
        supervisor.request_stop("dumped")
