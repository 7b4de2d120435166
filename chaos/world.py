"""What a suite shares between its scenarios: one local environment and one Spark session."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from chaos.nemesis.context import SiteLinks
from drsvc.devenv.components import load_components
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.settings import Settings
from drsvc.verify.spark import build_session

PAIR = ("east", "west")
Progress = Callable[[str], None]


def links_of(env: LocalEnvironment) -> SiteLinks | None:
    """The environment's links between sites, when this drsvc has them and the environment was
    brought up with them; None otherwise (partition and latency scenarios are then skipped)."""
    links = getattr(env, "links", None)
    if links is None:
        return None
    try:
        found: Any = links()
    except Exception:  # brought up without links
        return None
    return found if found is not None else None


@dataclass
class World:
    """The suite's environment (clusters east and west, Consul per site with a witness) in
    ``state_dir``, its Spark session (started on first use) and where results go."""

    state_dir: Path
    out_dir: Path
    master: str = "local[2]"
    progress: Progress = print
    env: LocalEnvironment = field(init=False)
    info: EnvironmentInfo = field(init=False)
    links: SiteLinks | None = field(init=False, default=None)
    _spark: SparkSession | None = field(init=False, default=None)
    spark_start_s: float = field(init=False, default=0.0)

    def up(self) -> None:
        self.env = LocalEnvironment(
            Settings.from_env(state_dir=self.state_dir, consul_layout="per-site")
        )
        self.info = self.env.up(list(PAIR), progress=self.progress, consul_layout="per-site")
        self.links = links_of(self.env)

    def consul(self, site: str) -> str:
        address = self.info.consul_sites.get(site) or self.info.consul_http_addr
        assert address is not None
        return address

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            started = time.monotonic()
            jars = load_components(Settings.from_env().cache_dir).spark_kafka.jars
            self._spark = build_session(
                self.master,
                jars=jars,
                app_name="drsvc-chaos",
                conf={"spark.ui.showConsoleProgress": "false"},
            )
            self.spark_start_s = time.monotonic() - started
        return self._spark

    def close(self, keep_environment: bool = False) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
        if not keep_environment:
            self.env.down()
