"""The ACL sync's loop survives a failed pass, and the flows it covers are named clearly."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.access import acl_sync
from drsvc.topology import load_topology_text

TOPOLOGY = """
name: shop
clusters:
  east: {bootstrap_servers: "localhost:1"}
  west: {bootstrap_servers: "localhost:2"}
flows:
  - {source: east, target: west, sync_acls: true}
  - {source: west, target: east}
"""


def test_every_flow_that_opts_in_or_the_one_asked_for() -> None:
    topology = load_topology_text(TOPOLOGY)
    assert [f.id for f in acl_sync.synced_flows(topology)] == ["east->west"]
    assert [f.id for f in acl_sync.synced_flows(topology, "east->west")] == ["east->west"]
    with pytest.raises(ConfigError, match="flow west->east does not set sync_acls"):
        acl_sync.synced_flows(topology, "west->east")
    with pytest.raises(ConfigError, match="no flow 'south->east'"):
        acl_sync.synced_flows(topology, "south->east")
    none = load_topology_text(TOPOLOGY.replace("sync_acls: true", "sync_acls: false"))
    with pytest.raises(ConfigError, match="no flow sets sync_acls"):
        acl_sync.synced_flows(none)


def test_a_failed_pass_is_logged_and_the_next_one_runs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    topology = load_topology_text(TOPOLOGY)
    stop = threading.Event()
    calls: list[int] = []
    passes: list[tuple[Any, ...]] = []

    def flaky_pass(*_args: Any, **_kwargs: Any) -> tuple[Any, ...]:
        calls.append(1)
        if len(calls) == 1:
            raise KafkaUnavailableError("cluster 'east': all brokers down")
        if len(calls) == 3:
            stop.set()
        return ()

    monkeypatch.setattr(acl_sync, "sync_pass", flaky_pass)
    failed = acl_sync.run_acl_sync(
        topology,
        acl_sync.synced_flows(topology),
        clients=None,  # type: ignore[arg-type]
        interval_s=0.01,
        stop=stop,
        on_pass=passes.append,
    )
    assert (failed, len(calls), len(passes)) == (1, 3, 2)
    assert "ACL sync pass failed" in caplog.text and "all brokers down" in caplog.text
