"""``drsvc acls plan``: kafka-acls.sh lines and the Consul policy of a role, from a real topology
file through the loader (so the loaded models serve as the core's topology)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from drsvc.cli import main

TOPOLOGY = """
name: shop
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, topics: {include: [orders]}}
  - {source: west, target: east, delivery: exactly-once}
applications:
  - name: orders-service
    groups: [orders-consumer]
    topics: [orders]
    preferred: east
"""


@pytest.fixture
def topology(tmp_path: Path) -> Path:
    path = tmp_path / "shop.yaml"
    path.write_text(TOPOLOGY)
    return path


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main.build_app("acls"), ["acls", "plan", *args])
    return result.exit_code, result.output


def test_an_applications_grants_and_policy(topology: Path) -> None:
    code, out = run("--role", "application", "--topology", str(topology), "--cluster", "west")

    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "# Kafka ACLs of application on cluster west (5 grants)"
    assert (
        'kafka-acls.sh --bootstrap-server "$BOOTSTRAP_WEST" --command-config "$ADMIN_CONFIG"'
        " --add --deny-principal User:app-orders-service --deny-host '*' --operation Write"
        " --topic east. --resource-pattern-type prefixed"
    ) in out
    assert (
        "--allow-principal User:app-orders-service --allow-host '*' --operation Read"
        " --topic east.orders --resource-pattern-type literal"
    ) in out
    assert "# Consul policy of application orders-service" in lines
    assert 'key "drsvc/shop/apps/orders-service/active" {' in lines
    assert "east:" not in out and "cluster east" not in out


def test_the_replicator_on_every_cluster(topology: Path) -> None:
    code, out = run("--role", "replicator", "-t", str(topology))

    assert code == 0, out
    assert "# Kafka ACLs of replicator on cluster east" in out
    assert "# Kafka ACLs of replicator on cluster west" in out
    assert (
        "--operation Write --transactional-id drsvc.west-east. --resource-pattern-type prefixed"
    ) in out
    assert "--operation AlterConfigs --topic east.orders --resource-pattern-type literal" in out
    assert 'key "drsvc/shop/flows/east/west/stale-records" {' in out


def test_the_controller_prints_the_executors_grants(topology: Path) -> None:
    code, out = run("--role", "controller", "-t", str(topology), "-c", "east")

    assert code == 0, out
    assert "User:drsvc-executor" in out
    assert 'session_prefix "" {' in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--role", "admin"), "unknown role 'admin'"),
        (("--role", "executor", "--cluster", "south"), "no cluster 'south'"),
        (("--role", "executor", "--app", "orders-service"), "--app goes with --role application"),
        (("--role", "application", "--app", "x"), "unknown application 'x'"),
    ],
)
def test_bad_input_exits_2_naming_it(
    topology: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        main.main(["acls", "plan", "--topology", str(topology), *args])

    assert caught.value.code == main.EXIT_BAD_INPUT
    assert message in capsys.readouterr().err
