"""The session's view of its master: local or a cluster's, a standalone master's addresses and
whether one accepts connections, executor sizing, ``--conf`` pairs, and spark-submit's entry
point refusing a topology whose clusters name no bootstrap servers."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from drsvc.errors import ConfigError
from drsvc.verify import submit
from drsvc.verify.spark import (
    DEFAULT_EXECUTOR_MEMORY,
    check_reachable,
    cluster_conf,
    is_local,
    parse_conf,
    standalone_addresses,
)


@pytest.mark.parametrize(
    ("master", "local"),
    [("local", True), ("local[2]", True), ("local[*,3]", True), ("spark://h:7077", False),
     ("yarn", False), ("k8s://https://api:6443", False), ("local-cluster[2,1,1024]", False)],
)  # fmt: skip
def test_local_masters_are_told_from_cluster_ones(master: str, local: bool) -> None:
    assert is_local(master) is local


def test_standalone_addresses_lists_every_master_of_the_url() -> None:
    assert standalone_addresses("spark://a:7077") == [("a", 7077)]
    assert standalone_addresses("spark://a:7077,b.example:7078") == [
        ("a", 7077),
        ("b.example", 7078),
    ]
    assert standalone_addresses("spark://[::1]:7077") == [("::1", 7077)]
    assert standalone_addresses("yarn") == []
    assert standalone_addresses("local[2]") == []


@pytest.mark.parametrize("master", ["spark://", "spark://host", "spark://host:port", "spark://:7"])
def test_a_malformed_standalone_url_is_a_config_error_naming_it(master: str) -> None:
    with pytest.raises(ConfigError, match="expected spark://HOST:PORT"):
        standalone_addresses(master)


def test_a_master_nobody_listens_on_is_a_config_error_naming_its_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"spark://127.0.0.1:{port}"
    with pytest.raises(ConfigError, match=f"Spark master {url} cannot be reached"):
        check_reachable(url, timeout_s=1.0)


def test_a_listening_master_and_other_masters_pass_the_check() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        check_reachable(f"spark://127.0.0.1:{port}", timeout_s=1.0)
    check_reachable("local[1]")
    check_reachable("yarn")


def test_executors_are_sized_on_cluster_masters_only() -> None:
    assert cluster_conf("local[2]") == {}
    assert cluster_conf(None) == {}
    assert cluster_conf("spark://h:7077") == {
        "spark.executor.memory": DEFAULT_EXECUTOR_MEMORY,
        "spark.executor.cores": "1",
    }
    assert cluster_conf("yarn", "2g", 2)["spark.executor.cores"] == "2"


def test_conf_pairs_split_at_the_first_equals_sign() -> None:
    assert parse_conf(["spark.a=1", "spark.b=x=y", " spark.c ="]) == {
        "spark.a": "1",
        "spark.b": "x=y",
        "spark.c": "",
    }
    for bad in ("spark.a", "=1"):
        with pytest.raises(ConfigError, match="expected KEY=VALUE"):
            parse_conf([bad])


def test_submit_needs_every_cluster_bootstrap_in_the_topology(tmp_path: Path) -> None:
    document = {"name": "t", "clusters": {"east": {"bootstrap_servers": "e:9092"}, "west": {}}}
    topology = tmp_path / "t.json"
    topology.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="cluster\\(s\\) west name no bootstrap_servers"):
        submit.bootstrap_of(topology)
    document["clusters"]["west"] = {"bootstrap_servers": "w:9092"}
    topology.write_text(json.dumps(document))
    _, bootstrap = submit.bootstrap_of(topology)
    assert bootstrap == {"east": "e:9092", "west": "w:9092"}


def test_submit_refuses_a_missing_history_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    topology = tmp_path / "t.json"
    topology.write_text(json.dumps({"name": "t", "clusters": {"east": {}}}))
    assert submit.main(["-t", str(topology), "--history", str(tmp_path / "none")]) == 2
    assert "history directory" in capsys.readouterr().err
