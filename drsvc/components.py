"""The installed real components, as recorded by ``deploy/install.sh`` in ``installed.json``.

The install step owns the versions; this module only reads its manifest so the Python side never
guesses paths. A missing or stale manifest is a :class:`NotInstalledError` that says how to fix it.
The local environment starts brokers and agents from it, and the Spark jobs (``drsvc verify``,
migration verification) find Spark's Kafka source in it, so it lives outside ``drsvc.devenv``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from drsvc.errors import NotInstalledError

MANIFEST_NAME = "installed.json"
INSTALL_HINT = "run 'make setup' (deploy/install.sh) first"


class KafkaInstall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    version: str
    libs: Path

    @property
    def classpath(self) -> str:
        """The JVM class path holding the broker, tools and connect-mirror jars."""
        return str(self.libs / "*")


class SparkKafkaInstall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    version: str
    jars: tuple[Path, ...]


class ConsulInstall(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    version: str
    go: str
    binary: Path


class ToxiproxyInstall(BaseModel):
    """The Toxiproxy server behind the links between sites (``drsvc dev up --links``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    version: str
    go: str
    binary: Path


class Components(BaseModel):
    """Paths and versions of everything the install step provides."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    format: int
    kafka: KafkaInstall
    spark_kafka: SparkKafkaInstall
    consul: ConsulInstall
    #: absent from manifests written before the links existed; only ``--links`` needs it
    toxiproxy: ToxiproxyInstall | None = None

    def require_toxiproxy(self) -> ToxiproxyInstall:
        """The Toxiproxy server, or :class:`NotInstalledError` saying how to get it."""
        if self.toxiproxy is None or not self.toxiproxy.binary.exists():
            where = "" if self.toxiproxy is None else f" at {self.toxiproxy.binary}"
            raise NotInstalledError(
                f"the toxiproxy server that links sites is missing{where}: {INSTALL_HINT}"
            )
        return self.toxiproxy


def load_components(cache_dir: Path) -> Components:
    """Read the install manifest from ``cache_dir`` and check that what it names exists."""
    path = cache_dir / MANIFEST_NAME
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError as err:
        raise NotInstalledError(f"nothing is installed in {cache_dir}: {INSTALL_HINT}") from err
    except (OSError, json.JSONDecodeError) as err:
        raise NotInstalledError(f"cannot read {path} ({err}): {INSTALL_HINT}") from err
    try:
        components = Components.model_validate(raw)
    except ValidationError as err:
        raise NotInstalledError(
            f"{path} is not a manifest this drsvc understands: {INSTALL_HINT}"
        ) from err
    if not (components.kafka.libs / ".complete").exists():
        raise NotInstalledError(
            f"Kafka {components.kafka.version} jars are missing from {components.kafka.libs}: "
            f"{INSTALL_HINT}"
        )
    if not components.consul.binary.exists():
        raise NotInstalledError(
            f"the consul agent is missing at {components.consul.binary}: {INSTALL_HINT}"
        )
    return components
