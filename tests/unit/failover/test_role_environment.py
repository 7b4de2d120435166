"""Which environment variables each role of ``drsvc run`` gets: names only, from the topology."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from failover.errors import PolicyError
from failover.role_environment import (
    BASE_VARIABLES,
    CONSUL_VARIABLES,
    PROCESS_KINDS,
    RequiredVariable,
    missing_variables,
    role_variables,
)


@dataclass(frozen=True)
class Tls:
    key_password_env: str | None = None


@dataclass(frozen=True)
class Sasl:
    username_env: str | None = None
    password_env: str | None = None


@dataclass(frozen=True)
class Security:
    tls: Tls | None = None
    sasl: Sasl | None = None


@dataclass(frozen=True)
class Cluster:
    security: Security = Security()


@dataclass(frozen=True)
class Flow:
    source: str
    target: str

    @property
    def id(self) -> str:
        return f"{self.source}->{self.target}"


@dataclass(frozen=True)
class TokenRef:
    token_env: str | None = None
    token_file: Path | None = None


@dataclass(frozen=True)
class Consul:
    token_env: str | None = None
    token_file: Path | None = None
    tokens: Mapping[Any, TokenRef] = field(default_factory=dict)


@dataclass(frozen=True)
class Topo:
    clusters: Mapping[str, Cluster]
    flows: tuple[Flow, ...]
    consul: Consul | None = None


def sasl(password_env: str) -> Cluster:
    return Cluster(Security(sasl=Sasl(password_env=password_env)))


THREE = Topo(
    clusters={
        "east": sasl("EAST_PASSWORD"),
        "west": Cluster(Security(tls=Tls("WEST_KEY_PASSWORD"), sasl=Sasl("WEST_USER", "WEST_PW"))),
        "south": sasl("SOUTH_PASSWORD"),
    },
    flows=(Flow("east", "west"), Flow("west", "south")),
    consul=Consul(
        token_env="CONSUL_GENERAL",
        tokens={
            "replicator": TokenRef("REPLICATOR_TOKEN"),
            "executor": TokenRef(token_file=Path("/etc/consul/executor.token")),
        },
    ),
)


def required(kind: str, flow: str | None = None) -> set[str]:
    return {v.name for v in role_variables(THREE, kind, flow=flow).required}


def test_a_replication_worker_gets_the_credentials_of_its_flow_s_clusters_only() -> None:
    assert required("replicate", "east->west") == {
        "EAST_PASSWORD",
        "WEST_KEY_PASSWORD",
        "WEST_USER",
        "WEST_PW",
    }
    assert required("replicate", "west->south") == {
        "WEST_KEY_PASSWORD",
        "WEST_USER",
        "WEST_PW",
        "SOUTH_PASSWORD",
    }


@pytest.mark.parametrize("kind", ["heartbeats", "checkpoints", "controller", "api"])
def test_every_other_role_gets_every_cluster_s_credentials(kind: str) -> None:
    assert required(kind) == {
        "EAST_PASSWORD",
        "WEST_KEY_PASSWORD",
        "WEST_USER",
        "WEST_PW",
        "SOUTH_PASSWORD",
    }


def test_each_role_gets_its_own_consul_token_and_heartbeats_none() -> None:
    def token(kind: str) -> RequiredVariable | None:
        flow = "east->west" if kind == "replicate" else None
        return role_variables(THREE, kind, flow=flow).consul_token

    assert token("replicate") == RequiredVariable(
        "REPLICATOR_TOKEN", "consul.tokens.replicator.token_env"
    )
    # no entry of its own: the general one
    assert token("checkpoints") == RequiredVariable("CONSUL_GENERAL", "consul.token_env")
    # an entry of its own with a file: no variable, not the general one
    assert token("controller") is None
    assert token("api") is None
    heartbeats = role_variables(THREE, "heartbeats")
    assert heartbeats.consul_token is None
    assert not any(heartbeats.wants(name) for name in CONSUL_VARIABLES)
    assert not heartbeats.wants("CONSUL_GENERAL")


def test_a_role_s_consul_token_file_is_its_own_else_the_general_one() -> None:
    def token_file(consul: Consul, kind: str) -> str | None:
        topo = Topo(THREE.clusters, THREE.flows, consul)
        flow = "east->west" if kind == "replicate" else None
        return role_variables(topo, kind, flow=flow).consul_token_file

    assert token_file(THREE.consul, "controller") == "/etc/consul/executor.token"  # type: ignore[arg-type]
    assert token_file(THREE.consul, "replicate") is None  # type: ignore[arg-type]
    general = Consul(
        token_file=Path("/etc/consul/general.token"),
        tokens={"checkpoints": TokenRef("CHECKPOINTS_TOKEN")},
    )
    assert token_file(general, "replicate") == "/etc/consul/general.token"
    assert token_file(general, "api") == "/etc/consul/general.token"
    assert token_file(general, "checkpoints") is None
    assert token_file(general, "heartbeats") is None


def test_a_role_wants_the_base_settings_and_interpolated_variables_and_nothing_else() -> None:
    variables = role_variables(
        THREE,
        "replicate",
        flow="east->west",
        settings=["DRSVC_STATE_DIR"],
        interpolated=["EAST_BOOTSTRAP"],
    )
    for name in [*BASE_VARIABLES, "LC_ALL", "PYTHONPATH", "DRSVC_STATE_DIR", "EAST_BOOTSTRAP"]:
        assert variables.wants(name), name
    assert variables.wants("REPLICATOR_TOKEN")
    assert variables.wants("CONSUL_HTTP_ADDR")
    for name in [
        "SOUTH_PASSWORD",
        "CONSUL_GENERAL",
        "DRSVC_API_TOKEN",
        "DRSVC_FAILPOINT",
        "AWS_SECRET_ACCESS_KEY",
        "SHELL",
    ]:
        assert not variables.wants(name), name


def test_the_api_token_goes_to_the_api_alone() -> None:
    for kind in PROCESS_KINDS:
        flow = "east->west" if kind == "replicate" else None
        wants = role_variables(THREE, kind, flow=flow).wants("DRSVC_API_TOKEN")
        assert wants is (kind == "api"), kind


def test_missing_variables_name_each_unset_one_and_consul_s_own_token_wins() -> None:
    variables = role_variables(THREE, "replicate", flow="east->west")
    present = {"EAST_PASSWORD", "WEST_USER", "WEST_PW"}
    assert {v.name for v in missing_variables(variables, present)} == {
        "WEST_KEY_PASSWORD",
        "REPLICATOR_TOKEN",
    }
    present |= {"WEST_KEY_PASSWORD", "CONSUL_HTTP_TOKEN_FILE"}
    assert missing_variables(variables, present) == ()


def test_two_clusters_sharing_a_variable_name_it_once() -> None:
    topo = Topo({"a": sasl("PW"), "b": sasl("PW")}, (Flow("a", "b"),))
    assert [v.name for v in role_variables(topo, "heartbeats").required] == ["PW"]


def test_an_unknown_kind_or_flow_is_refused() -> None:
    with pytest.raises(PolicyError, match="unknown role kind 'bogus'"):
        role_variables(THREE, "bogus")
    with pytest.raises(PolicyError, match="got 'south->east'"):
        role_variables(THREE, "replicate", flow="south->east")
