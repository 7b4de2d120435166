"""How drsvc reaches Consul, resolved from a fake environment: Consul's own order, refusals that
name the variable, and a token that no repr, log line or error ever shows."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from drsvc.adapters import consul_access
from drsvc.adapters.consul_access import (
    ConsulAccess,
    TokenSource,
    consul_endpoint,
    resolve_consul_access,
)
from drsvc.errors import ConfigError
from drsvc.topology.consul import ConsulConfig, ConsulTlsConfig, ConsulTokenRef

SECRET = "b9a1e6f0-secret"


@pytest.fixture(autouse=True)
def _fresh_warnings() -> None:
    consul_access._warn_once.cache_clear()


def origin(access: ConsulAccess) -> str | None:
    return None if access.token is None else access.token.origin


# -- the token ----------------------------------------------------------------------------------

#: every source, from the one that wins down
TOKEN_SOURCES = ("token_file", "token", "CONSUL_HTTP_TOKEN_FILE", "CONSUL_HTTP_TOKEN", "topology")


def _with_sources(sources: tuple[str, ...], tmp_path: Path) -> ConsulAccess:
    env = {}
    if "CONSUL_HTTP_TOKEN_FILE" in sources:
        env["CONSUL_HTTP_TOKEN_FILE"] = str(tmp_path / "env.token")
    if "CONSUL_HTTP_TOKEN" in sources:
        env["CONSUL_HTTP_TOKEN"] = "from-env"
    return resolve_consul_access(
        env,
        token_file=tmp_path / "arg.token" if "token_file" in sources else None,
        token="from-arg" if "token" in sources else None,
        topology=ConsulConfig(token_file=tmp_path / "topo.token")
        if "topology" in sources
        else None,
    )


@pytest.mark.parametrize("first", range(len(TOKEN_SOURCES)))
def test_the_token_comes_from_the_first_source_in_consuls_order(first: int, tmp_path: Path) -> None:
    access = _with_sources(TOKEN_SOURCES[first:], tmp_path)
    expected = {
        "token_file": f"token file {tmp_path / 'arg.token'}",
        "token": "the token argument",
        "CONSUL_HTTP_TOKEN_FILE": f"CONSUL_HTTP_TOKEN_FILE ({tmp_path / 'env.token'})",
        "CONSUL_HTTP_TOKEN": "CONSUL_HTTP_TOKEN",
        "topology": f"consul.token_file ({tmp_path / 'topo.token'})",
    }[TOKEN_SOURCES[first]]
    assert origin(access) == expected


def test_values_are_taken_and_files_are_read_when_asked(tmp_path: Path) -> None:
    assert _with_sources(("token", "CONSUL_HTTP_TOKEN"), tmp_path).token is not None
    env_only = resolve_consul_access({"CONSUL_HTTP_TOKEN": "from-env"})
    assert env_only.token is not None and env_only.token.read() == "from-env"
    token_file = tmp_path / "t"
    access = resolve_consul_access({"CONSUL_HTTP_TOKEN_FILE": str(token_file)})
    assert access.token is not None and access.token.file == token_file
    token_file.write_text(f"  {SECRET}\n")  # written after resolving: read now, trimmed
    assert access.token.read() == SECRET
    token_file.write_text("rotated\n")
    assert access.token.read() == "rotated"


def test_no_token_anywhere_means_none_and_an_empty_variable_is_unset() -> None:
    assert resolve_consul_access({}).token is None
    assert not resolve_consul_access({"CONSUL_HTTP_TOKEN": ""}).has_token
    blank_file = {"CONSUL_HTTP_TOKEN_FILE": "", "CONSUL_HTTP_TOKEN": "t"}
    assert origin(resolve_consul_access(blank_file)) == "CONSUL_HTTP_TOKEN"


def test_a_roles_token_in_the_topology_comes_before_its_general_one(tmp_path: Path) -> None:
    topology = ConsulConfig(
        token_file=tmp_path / "general",
        tokens={"executor": ConsulTokenRef(token_env="EXECUTOR_TOKEN")},
    )
    env = {"EXECUTOR_TOKEN": SECRET}
    executor = resolve_consul_access(env, topology=topology, role="executor")
    assert origin(executor) == "EXECUTOR_TOKEN (named by consul.tokens.executor.token_env)"
    assert executor.token is not None and executor.token.read() == SECRET
    other = resolve_consul_access(env, topology=topology, role="replicator")
    assert origin(other) == f"consul.token_file ({tmp_path / 'general'})"
    # the environment's token still wins over any of the topology's
    assert origin(resolve_consul_access({**env, "CONSUL_HTTP_TOKEN": "x"}, topology=topology,
                                        role="executor")) == "CONSUL_HTTP_TOKEN"  # fmt: skip


def test_a_missing_token_variable_or_file_is_named_never_a_value(tmp_path: Path) -> None:
    topology = ConsulConfig(tokens={"application": ConsulTokenRef(token_env="APP_TOKEN")})
    with pytest.raises(ConfigError, match=r"APP_TOKEN \(named by consul\.tokens\.application"):
        resolve_consul_access({}, topology=topology, role="application")
    missing = resolve_consul_access({"CONSUL_HTTP_TOKEN_FILE": str(tmp_path / "nope")})
    assert missing.token is not None
    with pytest.raises(ConfigError, match=r"cannot read CONSUL_HTTP_TOKEN_FILE \(.*nope\)"):
        missing.token.read()
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        TokenSource("token file x", file=tmp_path / "empty").read()
    (tmp_path / "binary").write_bytes(b"\xff" + SECRET.encode())
    with pytest.raises(ConfigError) as undecodable:
        TokenSource("token file b", file=tmp_path / "binary").read()
    assert undecodable.value.__cause__ is None and undecodable.value.__suppress_context__


def test_the_token_is_in_no_repr(tmp_path: Path) -> None:
    access = resolve_consul_access({"CONSUL_HTTP_TOKEN": SECRET})
    assert SECRET not in repr(access) and SECRET not in str(access)
    assert repr(access.token) == "TokenSource(CONSUL_HTTP_TOKEN)"
    explicit = resolve_consul_access({}, token=SECRET)
    assert SECRET not in repr(explicit)


# -- the address and the scheme -----------------------------------------------------------------


def test_the_address_comes_from_the_first_source_drsvcs_variable_first() -> None:
    topology = ConsulConfig(address="topo:8500")
    env = {"DRSVC_CONSUL_HTTP_ADDR": "drsvc:8500", "CONSUL_HTTP_ADDR": "consul:8500"}
    assert resolve_consul_access(env, address="arg:1", topology=topology).address == "arg:1"
    assert resolve_consul_access(env, topology=topology).address == "drsvc:8500"
    del env["DRSVC_CONSUL_HTTP_ADDR"]
    assert resolve_consul_access(env, topology=topology).address == "consul:8500"
    assert resolve_consul_access({}, topology=topology).address == "topo:8500"
    assert resolve_consul_access({}).address is None


@pytest.mark.parametrize(
    ("env", "topology", "scheme"),
    [
        ({}, None, "http"),
        ({"CONSUL_HTTP_ADDR": "https://h:8501"}, None, "https"),
        ({"CONSUL_HTTP_ADDR": "http://h:8500"}, None, "http"),
        ({"CONSUL_HTTP_ADDR": "h:8501", "CONSUL_HTTP_SSL": "true"}, None, "https"),
        ({"CONSUL_HTTP_SSL": "1"}, None, "https"),
        # as in Consul's client, a request for TLS is never undone by an http:// or a false
        ({"CONSUL_HTTP_ADDR": "http://h:8500", "CONSUL_HTTP_SSL": "true"}, None, "https"),
        ({"CONSUL_HTTP_ADDR": "https://h:8501", "CONSUL_HTTP_SSL": "false"}, None, "https"),
        ({"CONSUL_HTTP_SSL": "false"}, ConsulConfig(scheme="https"), "https"),
        ({}, ConsulConfig(address="https://t:8501"), "https"),
        # the scheme goes with the address in use: CONSUL_HTTP_ADDR's does not, when drsvc's wins
        ({"DRSVC_CONSUL_HTTP_ADDR": "d:8500", "CONSUL_HTTP_ADDR": "https://c:8501"}, None, "http"),
    ],
)
def test_https_when_anything_asks_for_it(
    env: dict[str, str], topology: ConsulConfig | None, scheme: str
) -> None:
    assert resolve_consul_access(env, topology=topology).scheme == scheme


def test_consul_http_addr_speaks_for_its_own_agent_only(caplog: pytest.LogCaptureFixture) -> None:
    env = {"CONSUL_HTTP_ADDR": "https://prod:8501"}
    assert resolve_consul_access(env, address="prod:8501").scheme == "https"
    with caplog.at_level(logging.WARNING, logger=consul_access.__name__):
        # e.g. the local environment's agent, chosen by a command: plain, and CONSUL_HTTP_ADDR
        # is said to be passed over rather than seem obeyed
        local = resolve_consul_access(env, address="127.0.0.1:8500")
    assert (local.address, local.scheme) == ("127.0.0.1:8500", "http")
    assert [r.getMessage() for r in caplog.records] == [
        "CONSUL_HTTP_ADDR=https://prod:8501 is not used: this process was given the Consul "
        "address 127.0.0.1:8500; set DRSVC_CONSUL_HTTP_ADDR or --consul to choose the agent"
    ]
    caplog.clear()
    consul_access._warn_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger=consul_access.__name__):
        # drsvc's own variable chose the agent, as documented: nothing to warn about
        resolve_consul_access({**env, "DRSVC_CONSUL_HTTP_ADDR": "d:1"}, address="d:1")
    assert caplog.records == []


def test_the_endpoint_speaks_https_when_the_address_or_the_access_asks() -> None:
    plain = ConsulAccess()
    assert consul_endpoint("h:8500", plain).url == "http://h:8500"
    assert consul_endpoint("https://h:8501", plain).url == "https://h:8501"
    assert consul_endpoint("http://h:8501", ConsulAccess(scheme="https")).url == "https://h:8501"
    endpoint = consul_endpoint("[::1]:8500", plain)
    assert (endpoint.host, endpoint.port, endpoint.address) == ("[::1]", 8500, "[::1]:8500")
    with pytest.raises(ConfigError, match="invalid Consul HTTP address"):
        consul_endpoint("nohostport", plain)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"CONSUL_HTTP_ADDR": "unix:///run/consul.sock"}, "CONSUL_HTTP_ADDR: scheme 'unix'"),
        ({"DRSVC_CONSUL_HTTP_ADDR": "h:x"}, "DRSVC_CONSUL_HTTP_ADDR: expected host:port"),
        ({"CONSUL_HTTP_ADDR": "https://h:1/prefix"}, "CONSUL_HTTP_ADDR: a path after"),
        ({"CONSUL_HTTP_SSL": "yes"}, "CONSUL_HTTP_SSL must be true or false"),
        ({"CONSUL_HTTP_SSL_VERIFY": "nope"}, "CONSUL_HTTP_SSL_VERIFY must be true or false"),
        ({"CONSUL_CLIENT_CERT": "/c.pem"}, "CONSUL_CLIENT_CERT is set but CONSUL_CLIENT_KEY"),
        ({"CONSUL_CLIENT_KEY": "/k.pem"}, "CONSUL_CLIENT_KEY is set but CONSUL_CLIENT_CERT"),
    ],
)
def test_settings_that_are_wrong_are_named(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(")):
        resolve_consul_access(env)


def test_variables_drsvc_cannot_honour_are_refused_by_name_never_by_value() -> None:
    env = {
        "CONSUL_HTTP_AUTH": f"operator:{SECRET}",
        "CONSUL_CAPATH": "/etc/consul/cas",
        "CONSUL_TLS_SERVER_NAME": "server.dc1.consul",
        "CONSUL_NAMESPACE": "team",
        "CONSUL_PARTITION": "p",
    }
    with pytest.raises(ConfigError) as refused:
        resolve_consul_access(env)
    message = str(refused.value)
    for name in env:
        assert name in message
    assert SECRET not in message
    assert "CONSUL_CACERT" in message  # what to do about CONSUL_CAPATH


# -- TLS ----------------------------------------------------------------------------------------


def test_tls_files_come_from_the_environment_over_the_topology() -> None:
    topology = ConsulConfig(
        scheme="https",
        tls=ConsulTlsConfig(
            ca_file=Path("/topo/ca.pem"),
            cert_file=Path("/topo/c.crt"),
            key_file=Path("/topo/c.key"),
        ),
    )
    from_topology = resolve_consul_access({}, topology=topology)
    assert from_topology.verify_setting() == "/topo/ca.pem"
    assert from_topology.cert_setting() == ("/topo/c.crt", "/topo/c.key")
    env = {
        "CONSUL_CACERT": "/env/ca.pem",
        "CONSUL_CLIENT_CERT": "/env/c.crt",
        "CONSUL_CLIENT_KEY": "/env/c.key",
    }
    from_env = resolve_consul_access(env, topology=topology)
    assert from_env.scheme == "https"
    assert from_env.verify_setting() == "/env/ca.pem"
    assert from_env.cert_setting() == ("/env/c.crt", "/env/c.key")
    # the client certificate and key go as a pair: the environment's CA, the topology's pair
    mixed = resolve_consul_access({"CONSUL_CACERT": "/env/ca.pem"}, topology=topology)
    assert mixed.cert_setting() == ("/topo/c.crt", "/topo/c.key")
    assert resolve_consul_access({}).verify_setting() is True
    assert resolve_consul_access({}).cert_setting() is None


def test_turning_verification_off_is_honoured_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger=consul_access.__name__):
        access = resolve_consul_access(
            {"CONSUL_HTTP_SSL": "true", "CONSUL_HTTP_SSL_VERIFY": "false", "CONSUL_CACERT": "/c"}
        )
        resolve_consul_access({"CONSUL_HTTP_SSL": "true", "CONSUL_HTTP_SSL_VERIFY": "false"})
    assert access.verify_setting() is False
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "not checked" in warnings[0]  # once per process


def test_tls_files_over_plain_http_are_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=consul_access.__name__):
        access = resolve_consul_access({"CONSUL_CACERT": "/ca.pem"})
    assert access.scheme == "http"
    assert any("CONSUL_HTTP_SSL=true" in r.getMessage() for r in caplog.records)


def test_a_certificate_without_its_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="go together"):
        ConsulAccess(cert_file=Path("/c.crt"))


def test_a_commands_topology_block_is_the_default_of_clients_built_from_an_address(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients built deep in the runtime from an address alone still use the topology's TLS
    files and the command's role's token; Consul's own variables still win."""
    for name in ("CONSUL_HTTP_TOKEN", "CONSUL_HTTP_TOKEN_FILE", "CONSUL_CACERT"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "executor.token").write_text(SECRET)
    block = ConsulConfig(
        address="https://consul.example:8501",
        tls=ConsulTlsConfig(ca_file=tmp_path / "ca.pem"),
        tokens={"executor": ConsulTokenRef(token_file=tmp_path / "executor.token")},
    )
    assert ConsulAccess.from_env().token is None
    consul_access.use_topology_consul(block, "executor")
    access = ConsulAccess.from_env(address="consul.example:8501")
    assert access.token is not None and access.token.read() == SECRET
    assert access.ca_file == tmp_path / "ca.pem" and access.scheme == "https"
    monkeypatch.setenv("CONSUL_HTTP_TOKEN", "from-the-environment")
    assert origin(ConsulAccess.from_env()) == "CONSUL_HTTP_TOKEN"
