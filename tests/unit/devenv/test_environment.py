from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment, parse_aliases
from drsvc.errors import ConfigError, NotInstalledError
from drsvc.settings import Settings


def test_aliases_are_parsed_in_order() -> None:
    assert parse_aliases(" east, west ,south") == ["east", "west", "south"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one cluster alias"),
        ("east,east", "listed twice"),
        ("east,we st", "invalid cluster alias 'we st'"),
        ("1east", "invalid cluster alias '1east'"),
    ],
)
def test_bad_aliases_are_named(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_aliases(text)


def test_missing_java_is_a_clear_error(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, cache_dir=tmp_path, java="no-such-java-here")
    with pytest.raises(NotInstalledError, match="Java 17 or newer is required"):
        LocalEnvironment(settings).up(["east"])


def test_only_one_or_three_brokers(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="--brokers must be 1 or 3"):
        LocalEnvironment(settings).up(["east"], brokers=2)


def test_unknown_alias_lookup_says_how_to_start_it(tmp_path: Path) -> None:
    env = LocalEnvironment(Settings(state_dir=tmp_path, cache_dir=tmp_path))
    with pytest.raises(ConfigError, match="drsvc dev up --clusters north"):
        env.bootstrap_servers("north")


def test_info_json_has_the_documented_shape() -> None:
    info = EnvironmentInfo(clusters={"west": "h:2", "east": "h:1"}, consul_http_addr="h:3")
    assert info.to_json_dict() == {
        "clusters": {"east": {"bootstrap_servers": "h:1"}, "west": {"bootstrap_servers": "h:2"}},
        "consul": {"http_addr": "h:3", "sites": {}},
    }
    per_site = EnvironmentInfo({}, "h:3", consul_sites={"east": "h:3", "witness": "h:4"})
    assert per_site.to_json_dict()["consul"] == {
        "http_addr": "h:3",
        "sites": {"east": "h:3", "witness": "h:4"},
    }
