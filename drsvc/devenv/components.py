"""The install manifest reader, which now lives in :mod:`drsvc.components` (the Spark jobs need it
too, and shipped code does not import the dev environment); re-exported for the harnesses that
import it from here."""

from __future__ import annotations

from drsvc.components import (
    INSTALL_HINT,
    MANIFEST_NAME,
    Components,
    ConsulInstall,
    KafkaInstall,
    SparkKafkaInstall,
    ToxiproxyInstall,
    load_components,
)

__all__ = [
    "INSTALL_HINT",
    "MANIFEST_NAME",
    "Components",
    "ConsulInstall",
    "KafkaInstall",
    "SparkKafkaInstall",
    "ToxiproxyInstall",
    "load_components",
]
