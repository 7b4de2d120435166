"""How the demo runs ``drsvc run``: one run of every role, or on a secured environment one per
principal, the executor's first, each with its own topology and variables, and the API's
variables and options only where the API runs."""

from __future__ import annotations

from pathlib import Path

from drsvc.demo.drill import ROLES
from drsvc.demo.estate import plan_runs, tokens_line
from drsvc.devenv.access import TOPOLOGY_ROLES, TopologyRole

STATE = Path("/state")
API_ENV = {"DRSVC_API_PORT": "8123"}
API_ARGS = ("--api-tokens-file", "/state/api-tokens")


def _topologies(secure: bool) -> dict[TopologyRole, Path]:
    if not secure:
        return dict.fromkeys(TOPOLOGY_ROLES, STATE / "topology.yaml")
    return {role: STATE / f"topology-{role}.yaml" for role in TOPOLOGY_ROLES}


def _role_env(role: TopologyRole) -> dict[str, str]:
    return {"CONSUL_HTTP_TOKEN_FILE": f"/tokens/{role}.token"}


def test_without_security_one_run_holds_every_role_and_the_api() -> None:
    (spec,) = plan_runs(
        ROLES,
        _topologies(False),
        STATE,
        secure=False,
        role_env=_role_env,
        api_env=API_ENV,
        api_args=API_ARGS,
    )

    assert (spec.topology, spec.state_dir, spec.roles) == (STATE / "topology.yaml", STATE, ROLES)
    assert dict(spec.env) == API_ENV
    assert spec.args == API_ARGS


def test_secured_each_principal_runs_its_roles_with_its_topology_and_token() -> None:
    specs = plan_runs(
        ROLES,
        _topologies(True),
        STATE,
        secure=True,
        role_env=_role_env,
        api_env=API_ENV,
        api_args=API_ARGS,
    )

    assert [(s.label, s.roles, s.state_dir) for s in specs] == [
        ("drsvc-executor", "controller,api", STATE),
        ("drsvc-replicator", "replicate,heartbeats", STATE / "service-replicator"),
        ("drsvc-checkpoints", "checkpoints", STATE / "service-checkpoints"),
    ]
    executor, replicator, checkpoints = specs
    assert executor.topology == STATE / "topology-executor.yaml"
    assert replicator.topology == STATE / "topology-replicator.yaml"
    assert checkpoints.topology == STATE / "topology-checkpoints.yaml"
    # the API's port and options go to the run that serves it, and nowhere else
    assert dict(executor.env) == {**_role_env("executor"), **API_ENV}
    assert executor.args == API_ARGS
    assert dict(replicator.env) == _role_env("replicator")
    assert dict(checkpoints.env) == _role_env("checkpoints")
    assert replicator.args == checkpoints.args == ()


def test_a_line_of_the_api_tokens_file_names_the_token_and_its_role() -> None:
    assert tokens_line("demo", "operator", "s" * 48) == f"demo operator {'s' * 48}\n"
