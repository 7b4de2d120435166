"""The port helpers, which now live in :mod:`drsvc.ports` (the supervisor needs them too, and
shipped code does not import the dev environment); re-exported for the harnesses that import them
from here."""

from __future__ import annotations

from drsvc.ports import (
    DEFAULT_EPHEMERAL_RANGE,
    EPHEMERAL_RANGE_FILE,
    LOWEST_PORT,
    allocate_ports,
    candidate_ports,
    ensure_free,
    ephemeral_range,
    port_accepts,
    port_is_free,
)

__all__ = [
    "DEFAULT_EPHEMERAL_RANGE",
    "EPHEMERAL_RANGE_FILE",
    "LOWEST_PORT",
    "allocate_ports",
    "candidate_ports",
    "ensure_free",
    "ephemeral_range",
    "port_accepts",
    "port_is_free",
]
