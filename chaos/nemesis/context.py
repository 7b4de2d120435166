"""What nemeses act on: the local environment, the ``drsvc run`` of the scenario, its clusters."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.processes import ProcessHandle, is_alive
from drsvc.errors import LocalEnvError


class SiteLinks(Protocol):
    """The links between sites of an environment brought up with links (``LocalEnvironment.
    links()``): the network nemeses need nothing more."""

    def cut(self, site_a: str, site_b: str) -> None: ...

    def heal(self, site_a: str, site_b: str) -> None: ...

    def delay(self, site_a: str, site_b: str, latency_ms: int, jitter_ms: int = 0) -> None: ...

    def heal_all(self) -> None: ...


@dataclass
class ChaosContext:
    """One scenario's world. ``run_dir``: where its ``drsvc run`` keeps ``roles.json`` (and
    ``other_run_dirs`` those of the others, on secured clusters where each principal's roles run
    apart); ``admin``: per cluster, where and how to administer it (its bootstrap servers and no
    settings when not given)."""

    env: LocalEnvironment
    aliases: tuple[str, ...]
    bootstrap: Mapping[str, str]
    run_dir: Path
    history_dir: Path
    links: SiteLinks | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    other_run_dirs: tuple[Path, ...] = ()
    admin: Mapping[str, tuple[str, Mapping[str, str]]] = field(default_factory=dict)

    # -- drsvc run's roles -------------------------------------------------------------------

    def roles(self) -> list[dict[str, Any]]:
        roles: list[dict[str, Any]] = []
        for run_dir in (self.run_dir, *self.other_run_dirs):
            try:
                document = json.loads((run_dir / "roles.json").read_text())
            except (OSError, ValueError):
                continue
            roles.extend(document.get("roles", []))
        return roles

    def admin_of(self, site: str) -> tuple[str, dict[str, str]]:
        """The bootstrap servers and client settings that administer cluster ``site``."""
        bootstrap, settings = self.admin.get(site, (self.bootstrap[site], {}))
        return bootstrap, dict(settings)

    def role_pid(self, name: str) -> int | None:
        for role in self.roles():
            if role.get("name") == name and role.get("state") == "running":
                pid = role.get("pid")
                return int(pid) if pid is not None else None
        return None

    def wait_role_running(self, name: str, not_pid: int | None, timeout_s: float) -> int:
        """Wait until role ``name`` runs again with a pid other than ``not_pid``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid = self.role_pid(name)
            if pid is not None and pid != not_pid and _alive(pid):
                return pid
            time.sleep(0.2)
        raise LocalEnvError(f"role {name} did not run again within {timeout_s:.0f} s")

    # -- the local environment's processes ---------------------------------------------------

    def broker_handle(self, site: str, node_id: int) -> ProcessHandle:
        state = self.env.store.load()
        kafka = state.sites.get(site)
        if kafka is None:
            raise LocalEnvError(f"no site {site!r} in the local environment")
        for node in kafka.nodes:
            if node.node_id == node_id:
                if node.process is None or not is_alive(node.process):
                    raise LocalEnvError(f"broker {node_id} of {site} does not run")
                return node.process
        raise LocalEnvError(f"site {site!r} has no broker {node_id}")

    def restart_environment(self) -> None:
        """Bring back every process of the environment that is not running (same ports, data)."""
        self.env.up(list(self.aliases))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_group(handle_pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group led by ``handle_pid`` (every managed process and every
    role of ``drsvc run`` leads its own group)."""
    try:
        os.killpg(handle_pid, sig)
    except ProcessLookupError as err:
        raise LocalEnvError(f"process {handle_pid} is gone") from err
