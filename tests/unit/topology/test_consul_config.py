"""The topology's ``consul`` block: where Consul is and where its tokens are, never a token."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from drsvc.errors import TopologyError
from drsvc.topology import Topology, load_topology_text
from drsvc.topology.consul import ConsulTokenRef, parse_consul_address

BASE = "name: t\nclusters: {east: {}}\n"


def load(consul: str, base_dir: Path | None = None) -> Topology:
    text = BASE + "consul:\n" + textwrap.indent(textwrap.dedent(consul), "  ")
    return load_topology_text(text, "t.yaml", env={}, base_dir=base_dir)


def problems(consul: str) -> str:
    with pytest.raises(TopologyError) as caught:
        load(consul)
    return "\n".join(caught.value.problems)


def test_without_a_block_there_is_nothing_to_default() -> None:
    assert load_topology_text(BASE, env={}).consul is None


def test_the_block_loads_with_paths_relative_to_the_topology_file(tmp_path: Path) -> None:
    consul = load(
        """
        address: https://consul.example:8501
        tls: {ca_file: pki/ca.pem, cert_file: /abs/drsvc.crt, key_file: /abs/drsvc.key}
        token_file: secrets/default.token
        tokens:
          replicator: {token_file: secrets/replicator.token}
          application: {token_env: ORDERS_CONSUL_TOKEN}
        """,
        base_dir=tmp_path,
    ).consul
    assert consul is not None
    assert consul.address == "https://consul.example:8501"
    assert consul.uses_https
    assert consul.tls is not None
    assert consul.tls.ca_file == tmp_path / "pki/ca.pem"
    assert consul.tls.cert_file == Path("/abs/drsvc.crt")
    assert consul.token_file == tmp_path / "secrets/default.token"
    assert consul.tokens["replicator"].token_file == tmp_path / "secrets/replicator.token"
    # a role's own token first, else the general one
    assert consul.token_ref("replicator") == ConsulTokenRef(
        token_file=tmp_path / "secrets/replicator.token"
    )
    assert consul.token_ref("application") == ConsulTokenRef(token_env="ORDERS_CONSUL_TOKEN")
    assert consul.token_ref("executor") == ConsulTokenRef(
        token_file=tmp_path / "secrets/default.token"
    )
    assert consul.token_ref(None) == consul.token_ref("checkpoints")


def test_a_block_without_tokens_names_none() -> None:
    consul = load("address: 127.0.0.1:8500\n").consul
    assert consul is not None
    assert consul.token_ref("executor") is None
    assert not consul.uses_https


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ("token: 3f1c-secret-value\n", "consul"),
        ("tokens: {executor: {token: 3f1c-secret-value}}\n", "consul.tokens.executor"),
        ("tokens: {executor: {token_file: t, secret_id: 3f1c-secret-value}}\n", "consul.tokens"),
    ],
)
def test_an_inline_token_is_refused_and_never_repeated(block: str, field: str) -> None:
    found = problems(block)
    assert field in found
    assert "inline Consul token is refused" in found
    assert "token_file" in found and "token_env" in found
    assert "3f1c-secret-value" not in found


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("token_file: a\ntoken_env: B\n", "at most one of token_file or token_env"),
        ("tokens: {executor: {}}\n", "exactly one of token_file or token_env"),
        ("tokens: {executor: {token_file: a, token_env: B}}\n", "exactly one of token_file"),
        ("tokens: {operator: {token_file: a}}\n", "consul.tokens.operator"),
        ("token_env: 'not a name'\n", "must be the name of an environment variable"),
        ("tls: {ca_file: ca.pem}\n", "a tls block is set but Consul is reached over http"),
        ("scheme: http\ntls: {ca_file: ca.pem}\n", "set scheme: https"),
        ("scheme: https\ntls: {cert_file: c.pem}\n", "cert_file and key_file go together"),
        ("address: https://h:8501\nscheme: http\n", "address says https:// but scheme is http"),
        ("address: unix:///var/run/consul.sock\n", "scheme 'unix' is not supported"),
        ("address: https://h:8501/consul\n", "a path after host:port is not supported"),
        ("address: consul.example\n", "expected host:port"),
        ("address: h:0\n", "expected host:port"),
        ("scheme: ftp\n", "consul.scheme"),
    ],
)
def test_mistakes_are_named(block: str, expected: str) -> None:
    assert expected in problems(block)


def test_tls_with_https_from_the_scheme_or_the_address_is_accepted() -> None:
    for block in (
        "scheme: https\ntls: {ca_file: /ca.pem}\n",
        "address: https://h:8501\ntls: {ca_file: /ca.pem}\n",
    ):
        consul = load(block).consul
        assert consul is not None and consul.uses_https


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("127.0.0.1:8500", (None, "127.0.0.1:8500")),
        ("http://h:8500", ("http", "h:8500")),
        ("https://h:8501", ("https", "h:8501")),
        (" [::1]:8500 ", (None, "[::1]:8500")),
    ],
)
def test_an_address_may_carry_its_scheme(given: str, expected: tuple[str | None, str]) -> None:
    assert parse_consul_address(given) == expected
