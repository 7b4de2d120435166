"""``<state-dir>/run/roles.json``: which processes ``drsvc run`` supervises, for other commands,
operators and tests.

Written atomically (temporary file, then rename) whenever a role starts, exits or changes state,
so a reader never sees half a file. Shape::

    {"supervisor_pid": 123, "state": "running" | "stopping" | "stopped",
     "topology": "/abs/topology.yaml", "updated_at": 1700000000.0,
     "roles": [{"name": "replicate.east-to-west.1", "kind": "replicate", "flow": "east->west",
                "state": "running", "pid": 456, "metrics_port": 40123, "restarts": 0, ...}]}

``kind`` is one of :data:`~drsvc.runtime.supervisor.roles.ROLE_KINDS` (replicate, heartbeats,
checkpoints, controller, api); ``flow`` is null but for replication workers, ``metrics_port`` null
for the api (it serves its metrics on its own port).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drsvc.runtime.supervisor.status import RoleStatus

ROLES_FILE = "roles.json"


def write_roles_file(
    path: Path,
    roles: Sequence[RoleStatus],
    *,
    state: str,
    topology_file: Path,
    supervisor_pid: int | None = None,
) -> None:
    document = {
        "supervisor_pid": os.getpid() if supervisor_pid is None else supervisor_pid,
        "state": state,
        "topology": str(topology_file),
        "updated_at": round(time.time(), 3),
        "roles": [role.to_json() for role in roles],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(temporary, path)


def read_roles_file(path: Path) -> dict[str, Any]:
    """The document as written (raises :class:`OSError` or :class:`ValueError` if unreadable)."""
    document: dict[str, Any] = json.loads(path.read_text())
    return document
