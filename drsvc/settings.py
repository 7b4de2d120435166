"""Process settings: one typed, documented model, read from the environment on request.

Nothing is read at import time; commands build a :class:`Settings` with :meth:`Settings.from_env`
and pass it down. Command-line flags override what the environment says.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drsvc.errors import ConfigError

ENV_PREFIX = "DRSVC_"


class Settings(BaseModel):
    """Where drsvc keeps its state and finds what the install step put in place."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state_dir: Path = Field(
        default=Path(".drsvc"),
        description="State and logs of the embedded local environment (DRSVC_STATE_DIR).",
    )
    cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "drsvc",
        description="Where deploy/install.sh put Kafka, Spark's Kafka source and consul "
        "(DRSVC_CACHE_DIR).",
    )
    java: str = Field(
        default="java",
        description="Java 17+ executable that runs the brokers (DRSVC_JAVA).",
    )
    kafka_heap: str = Field(
        default="384m",
        pattern=r"^[0-9]+[kmgKMG]$",
        description="Maximum JVM heap of each local broker (DRSVC_KAFKA_HEAP); several clusters "
        "share one small machine.",
    )
    start_timeout_s: float = Field(
        default=90.0,
        gt=0,
        description="How long `drsvc dev up` waits for brokers and Consul to become ready "
        "(DRSVC_START_TIMEOUT_S).",
    )
    consul_layout: Literal["single", "per-site"] = Field(
        default="single",
        description="How `drsvc dev up` runs Consul in a new environment "
        "(DRSVC_CONSUL_LAYOUT): one server, or one per site plus a witness.",
    )

    metrics_host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="Address the role processes serve --metrics-port on (DRSVC_METRICS_HOST); "
        "0.0.0.0 lets a Prometheus on another machine or pod scrape them.",
    )
    failover_lock_ttl_s: float = Field(
        default=10.0,
        ge=1,
        le=86400,
        description="Session TTL of the failover executor's lock (DRSVC_FAILOVER_LOCK_TTL_S): an "
        "executor that stops renewing loses the lock within 2 x TTL, and another may resume.",
    )
    failover_lock_delay_s: float = Field(
        default=5.0,
        ge=0,
        le=60,
        description="Consul lock delay of that lock (DRSVC_FAILOVER_LOCK_DELAY_S): how long a "
        "lost lock stays untakeable, so that a cut-off executor notices first.",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        """Build settings from ``DRSVC_*`` variables, then apply non-None ``overrides``."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for name in cls.model_fields:
            key = ENV_PREFIX + name.upper()
            if key in env and env[key] != "":
                values[name] = env[key]
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as err:
            problems = "; ".join(
                f"{ENV_PREFIX}{'.'.join(str(p) for p in e['loc']).upper()}: {e['msg']}"
                for e in err.errors()
            )
            raise ConfigError(f"invalid settings: {problems}") from err
