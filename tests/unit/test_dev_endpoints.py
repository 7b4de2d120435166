"""The reader of the local environment's addresses, on state files written by hand (what the
environment itself writes is read back in ``tests/unit/devenv/test_state.py``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from drsvc.dev_endpoints import STATE_FILE, LocalEndpoints
from drsvc.errors import ConfigError, LocalEnvError


def write(state_dir: Path, document: object) -> LocalEndpoints:
    (state_dir / STATE_FILE).write_text(json.dumps(document))
    return LocalEndpoints(state_dir)


def test_without_an_environment_there_is_no_agent_and_no_cluster(tmp_path: Path) -> None:
    endpoints = LocalEndpoints(tmp_path)
    assert endpoints.consul_http_addr() is None
    with pytest.raises(ConfigError, match=r"\(known: none\); start it with 'drsvc dev up"):
        endpoints.bootstrap_servers("east")


def test_an_unknown_cluster_is_named_with_the_known_ones(tmp_path: Path) -> None:
    site = {"nodes": [{"broker_port": 9001}]}
    endpoints = write(tmp_path, {"format": 1, "sites": {"west": site, "east": site}})
    with pytest.raises(ConfigError, match=re.escape(f"in {tmp_path} (known: east, west)")):
        endpoints.bootstrap_servers("north")


def test_only_the_addresses_are_read(tmp_path: Path) -> None:
    # what else the environment records (or will record) does not concern clients
    site = {"host": "10.0.0.5", "nodes": [{"broker_port": 1, "node_id": 7}], "later": True}
    endpoints = write(
        tmp_path,
        {"format": 1, "sites": {"east": site}, "consul": {"http_port": 8500}, "later": {}},
    )
    assert endpoints.bootstrap_servers("east") == "10.0.0.5:1"
    assert endpoints.consul_http_addr() == "127.0.0.1:8500"


def test_the_single_agent_is_ignored_in_the_per_site_layout(tmp_path: Path) -> None:
    endpoints = write(
        tmp_path,
        {
            "format": 1,
            "consul": {"http_port": 8500},
            "consul_layout": "per-site",
            "consul_servers": [{"site": "east", "http_port": 8510}],
        },
    )
    assert endpoints.consul_http_addr() == "127.0.0.1:8510"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "cannot read the environment state"),
        ('{"format": 2}', "has state format 2, expected 1"),
        ('{"format": 1, "sites": {"east": {"nodes": "none"}}}', "incompatible drsvc"),
    ],
)
def test_a_state_file_it_cannot_use_is_a_clear_error(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    with pytest.raises(LocalEnvError, match=message):
        LocalEndpoints(tmp_path).consul_http_addr()
