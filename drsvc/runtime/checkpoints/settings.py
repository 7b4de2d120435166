"""Settings of the checkpoint stream; the defaults suit the 2 s target of docs/checkpoints.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["CheckpointSettings"]


@dataclass(frozen=True)
class CheckpointSettings:
    """How the checkpoint agents of one process run."""

    data_dir: Path
    """Where the faust apps keep their (empty: no tables) data directories."""
    interval_s: float = 1.0
    """How often committed offsets are polled and checkpoints emitted."""
    timeout_s: float = 30.0
    """How long one request to a cluster may take before the cycle gives up (and retries)."""
    app_id_suffix: str = ""
    """Appended to each faust app id (``drsvc-checkpoints.<cluster><suffix>``), so that processes
    running different flows never share a faust consumer group."""
    session_timeout_s: float = 6.0
    """faust consumer group session (the brokers' default minimum): after a crash, a restarted
    process gets the sync-topic partitions, and its timers start, once the dead member's session
    has expired."""
    max_group_consumers: int = 256
    """Committed offsets are read through one idle consumer per group; beyond this many groups the
    least recently used ones are closed and recreated when needed."""
    metadata_max_age_s: float = 5.0
    """How soon a sync topic that appears after the start is picked up by the faust consumer."""
    group_sync_retry_s: float = 5.0
    """How often a group whose offset sync did not go through (refused, failed, or waiting for a
    switch) is offered to the group offset syncer again, also when its checkpoints do not change."""
