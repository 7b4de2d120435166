"""Extra broker properties per local cluster: validated, rendered last, kept across restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drsvc.devenv import kafka_node
from drsvc.devenv.components import KafkaInstall
from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.kafka_node import check_broker_overrides, server_properties
from drsvc.devenv.state import BrokerNode, EnvState, KafkaSite, StateStore
from drsvc.errors import ConfigError
from drsvc.settings import Settings

SHORT = {"offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "2000"}


def site(overrides: dict[str, str] | None = None) -> KafkaSite:
    node = BrokerNode(node_id=1, broker_port=9001, controller_port=9101)
    return KafkaSite(
        alias="short", cluster_id="cid", nodes=[node], broker_overrides=overrides or {}
    )


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_overrides_replace_the_defaults_and_add_new_properties() -> None:
    s = site({"log.retention.hours": "1", **SHORT})
    props = parse(server_properties(s, s.nodes[0], Path("/data")))
    assert props["log.retention.hours"] == "1"
    assert props["offsets.retention.minutes"] == "1"
    assert props["offsets.retention.check.interval.ms"] == "2000"
    # Everything else stays as the environment sets it.
    assert props["node.id"] == "1"
    assert props == {**parse(server_properties(site(), s.nodes[0], Path("/data"))), **props}


def test_a_site_without_overrides_renders_as_before() -> None:
    props = parse(server_properties(site(), site().nodes[0], Path("/data")))
    assert "offsets.retention.minutes" not in props
    assert props["log.retention.hours"] == "168"


def test_values_become_kafka_strings() -> None:
    checked = check_broker_overrides("short", {"a.b": 5, "c.d": True, "e.f": False, "g": "x"})
    assert checked == {"a.b": "5", "c.d": "true", "e.f": "false", "g": "x"}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"node.id": "7"}, "node.id is set by the local environment"),
        ({"listeners": "PLAINTEXT://0.0.0.0:1"}, "listeners is set by the local environment"),
        ({"log.dirs": "/tmp/x"}, "log.dirs is set by the local environment"),
        ({"Offsets.Retention": "1"}, "not a broker property name"),
        ({"a=b": "1"}, "not a broker property name"),
        ({"": "1"}, "not a broker property name"),
        ({"a.b": "1\nnode.id=9"}, "one-line string value"),
    ],
)
def test_bad_overrides_are_named(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_broker_overrides("short", overrides)


def test_overrides_survive_the_state_file(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.save(EnvState(sites={"short": site(SHORT)}))
    assert store.load().sites["short"].broker_overrides == SHORT


def test_a_state_file_from_before_overrides_still_loads(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    document = EnvState(sites={"short": site()}).model_dump(mode="json")
    del document["sites"]["short"]["broker_overrides"]
    store.path.write_text(json.dumps(document))
    assert store.load().sites["short"].broker_overrides == {}


def test_a_restart_renders_the_recorded_overrides(tmp_path: Path) -> None:
    """A stopped node is prepared again from the state before it starts: its properties file
    must carry the site's overrides, not only the defaults."""
    store = StateStore(tmp_path)
    store.save(EnvState(sites={"short": site(SHORT)}))
    loaded = store.load().sites["short"]
    node = loaded.nodes[0]
    data = kafka_node.node_dir(tmp_path, loaded, node) / "data"
    data.mkdir(parents=True)
    (data / "meta.properties").write_text("formatted\n")  # a node that ran before
    install = KafkaInstall(version="4.0.0", libs=tmp_path / "libs")
    props_file = kafka_node.prepare(tmp_path, loaded, node, "java", install)
    props = parse(props_file.read_text())
    assert props["offsets.retention.minutes"] == "1"
    assert props["offsets.retention.check.interval.ms"] == "2000"


def test_overrides_for_a_cluster_not_being_started_are_refused(tmp_path: Path) -> None:
    env = LocalEnvironment(Settings(state_dir=tmp_path, cache_dir=tmp_path))
    with pytest.raises(ConfigError, match=r"name cluster\(s\) north that are not being started"):
        env.up(["east"], broker_overrides={"north": SHORT})


def test_other_overrides_for_an_existing_cluster_are_refused(tmp_path: Path) -> None:
    StateStore(tmp_path).save(EnvState(sites={"short": site(SHORT)}))
    env = LocalEnvironment(Settings(state_dir=tmp_path, cache_dir=tmp_path))
    with pytest.raises(ConfigError, match="already exists with broker overrides"):
        env.up(["short"], broker_overrides={"short": {"offsets.retention.minutes": "5"}})
    with pytest.raises(ConfigError, match="already exists with broker overrides none"):
        StateStore(tmp_path).save(EnvState(sites={"short": site()}))
        env.up(["short"], broker_overrides={"short": SHORT})
