"""A secured environment's Consul: the agent's configuration, the secrets' files, the roles'
rules and how a role is told where Consul is and which token is its own."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from drsvc.adapters.consul_access import resolve_consul_access
from drsvc.dev_endpoints import LocalEndpoints
from drsvc.devenv import consul_agent, consul_security
from drsvc.devenv import secure as secure_env
from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.state import ConsulAgentState, EnvState, StateStore
from drsvc.settings import Settings
from drsvc.topology.consul import ConsulConfig

AGENT = ConsulAgentState(http_port=8501, server_port=8300, serf_lan_port=8301, serf_wan_port=8302)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> consul_security.ConsulSecrets:
    state_dir = tmp_path_factory.mktemp("state")
    return consul_security.prepare(secure_env.prepare(state_dir))


def test_a_plain_agent_has_no_acls_tls_or_gossip_key(tmp_path: Path) -> None:
    config = consul_agent.agent_config(AGENT, tmp_path)
    assert not {"acl", "tls", "encrypt"} & set(config)
    assert config["ports"] == {
        "http": 8501,
        "server": 8300,
        "serf_lan": 8301,
        "serf_wan": 8302,
        "dns": -1,
        "grpc": -1,
        "grpc_tls": -1,
        "https": -1,
    }


def test_a_secured_agent_denies_by_default_and_serves_https_only(
    tmp_path: Path, secrets: consul_security.ConsulSecrets
) -> None:
    settings = consul_security.agent_settings(secrets, AGENT.http_port)
    config = consul_agent.agent_config(AGENT, tmp_path, secured=settings)
    ports = config["ports"]
    assert isinstance(ports, dict)
    assert (ports["http"], ports["https"], ports["server"]) == (-1, 8501, 8300)
    acl = config["acl"]
    assert isinstance(acl, dict)
    assert (acl["enabled"], acl["default_policy"], acl["enable_token_persistence"]) == (
        True,
        "deny",
        True,
    )
    assert acl["tokens"] == {
        "initial_management": secrets.read(secrets.management_token_file),
        "agent": secrets.read(secrets.agent_token_file),
    }
    tls = config["tls"]
    assert isinstance(tls, dict)
    assert tls["defaults"]["ca_file"] == str(secrets.ca_file)
    assert tls["defaults"]["verify_outgoing"] is True
    assert tls["internal_rpc"] == {"verify_incoming": True, "verify_server_hostname": True}
    assert config["encrypt"] == secrets.read(secrets.gossip_key_file)


def test_the_configuration_file_is_the_owners_alone(
    tmp_path: Path, secrets: consul_security.ConsulSecrets
) -> None:
    settings = consul_security.agent_settings(secrets, AGENT.http_port)
    path = consul_agent.prepare(tmp_path, AGENT, secured=settings)
    assert _mode(path) == 0o600
    assert json.loads(path.read_text())["acl"]["default_policy"] == "deny"
    assert _mode(consul_agent.prepare(tmp_path / "plain", AGENT)) == 0o600


def test_secrets_are_private_and_kept_across_prepares(
    secrets: consul_security.ConsulSecrets,
) -> None:
    files = [
        secrets.management_token_file,
        secrets.agent_token_file,
        secrets.gossip_key_file,
        *(secrets.token_file(role) for role in consul_security.ROLES),
        secrets.server.key,
    ]
    assert all(_mode(f) == 0o600 for f in files), {f.name: oct(_mode(f)) for f in files}
    assert _mode(secrets.root) == 0o700 and _mode(secrets.root / "tokens") == 0o700
    before = {f: f.read_text() for f in files}
    again = consul_security.prepare(secure_env.SecureFiles(secrets.root.parent))
    assert {f: f.read_text() for f in files} == before
    tokens = {again.read(again.token_file(r)) for r in consul_security.ROLES}
    assert len(tokens) == len(consul_security.ROLES)  # each role its own


def test_only_the_executor_writes_application_keys_or_opens_sessions() -> None:
    for role in ("application", "checkpoints"):
        rules = consul_security.dev_role_rules(role)  # type: ignore[arg-type]
        assert {(r.kind, r.access) for r in rules} == {("key_prefix", "read")}
    executor = consul_security.rules_document(
        consul_security.dev_role_rules("executor", ["east", "west"])
    )
    assert executor["key_prefix"] == {"drsvc/": {"policy": "write"}}
    assert executor["session_prefix"] == {"": {"policy": "write"}}
    assert executor["service"] == {
        "kafka-east": {"policy": "read"},
        "kafka-west": {"policy": "read"},
    }
    replicator = consul_security.rules_document(consul_security.dev_role_rules("replicator"))
    assert "session_prefix" not in replicator


def test_a_role_is_told_the_address_the_ca_and_its_own_token(
    secrets: consul_security.ConsulSecrets,
) -> None:
    url = "https://127.0.0.1:8501"
    block = ConsulConfig.model_validate(
        consul_security.role_topology_block(secrets, "application", url)
    )
    from_topology = resolve_consul_access({}, topology=block, role="application")
    from_variables = resolve_consul_access(
        consul_security.role_environment(secrets, "application", url)
    )
    for access in (from_topology, from_variables):
        assert (access.address, access.scheme, access.ca_file) == (url, "https", secrets.ca_file)
        assert access.token is not None and access.token.file == secrets.token_file("application")


def test_the_environment_names_role_settings_only_when_secured(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, cache_dir=tmp_path)
    store = StateStore(tmp_path)
    store.save(EnvState(consul=AGENT))
    env = LocalEnvironment(settings)
    assert env.topology_consul("executor") is None
    assert env.consul_environment("executor") == {}
    assert LocalEndpoints(tmp_path).consul_http_addr() == "127.0.0.1:8501"
    store.save(EnvState(consul=AGENT, secure=True))
    block = env.topology_consul("executor")
    assert block is not None and block["address"] == "https://127.0.0.1:8501"
    variables = env.consul_environment("executor")
    assert variables["CONSUL_HTTP_ADDR"] == "https://127.0.0.1:8501"
    assert variables["CONSUL_HTTP_TOKEN_FILE"].endswith("executor.token")
    assert LocalEndpoints(tmp_path).consul_http_addr() == "https://127.0.0.1:8501"
    assert env.info().consul_http_addr == "https://127.0.0.1:8501"
