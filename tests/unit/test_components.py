from __future__ import annotations

import json
from pathlib import Path

import pytest

from drsvc.components import load_components
from drsvc.errors import NotInstalledError


def write_manifest(cache: Path, complete: bool = True, consul: bool = True) -> None:
    libs = cache / "kafka" / "libs"
    libs.mkdir(parents=True)
    if complete:
        (libs / ".complete").touch()
    binary = cache / "consul" / "consul"
    binary.parent.mkdir(parents=True)
    if consul:
        binary.touch()
    manifest = {
        "format": 1,
        "kafka": {"version": "4.1.1", "libs": str(libs)},
        "spark_kafka": {"version": "4.0.0", "jars": []},
        "consul": {"version": "v1.22.3", "go": "go1.26", "binary": str(binary)},
    }
    (cache / "installed.json").write_text(json.dumps(manifest))


def test_a_complete_install_is_found(tmp_path: Path) -> None:
    write_manifest(tmp_path)
    components = load_components(tmp_path)
    assert components.kafka.version == "4.1.1"
    assert components.kafka.classpath.endswith("libs/*")


def test_nothing_installed_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(NotInstalledError, match="make setup"):
        load_components(tmp_path)


@pytest.mark.parametrize(
    ("complete", "consul", "missing"), [(False, True, "Kafka 4.1.1 jars"), (True, False, "consul")]
)
def test_a_partial_install_names_what_is_missing(
    tmp_path: Path, complete: bool, consul: bool, missing: str
) -> None:
    write_manifest(tmp_path, complete=complete, consul=consul)
    with pytest.raises(NotInstalledError, match=missing):
        load_components(tmp_path)
