"""The Toxiproxy server of the links between sites: its process and a small client of its API.

One server per environment brought up with links. Its proxies are written to a config file that
it reads at start, so a restarted server (``drsvc dev up``) has every proxy again, healthy: link
conditions (cut, latency, bandwidth) live only in the running server. Failures to reach its API
are :class:`LocalEnvError` with a hint, translated here.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, cast

from drsvc.components import ToxiproxyInstall
from drsvc.devenv.link_plan import proxy_config
from drsvc.devenv.processes import ProcessHandle, spawn
from drsvc.devenv.state import LinksState
from drsvc.errors import LocalEnvError

Proxy = dict[str, object]


def links_dir(state_dir: Path) -> Path:
    return state_dir / "links"


def log_file(state_dir: Path) -> Path:
    return links_dir(state_dir) / "logs" / "toxiproxy.log"


def prepare(state_dir: Path, links: LinksState) -> Path:
    """Write the proxies the server creates at start; return the file."""
    base = links_dir(state_dir)
    (base / "logs").mkdir(parents=True, exist_ok=True)
    config = base / "proxies.json"
    config.write_text(
        json.dumps([proxy_config(li, links.host) for li in links.listeners], indent=2)
    )
    return config


def start(state_dir: Path, links: LinksState, toxiproxy: ToxiproxyInstall) -> ProcessHandle:
    """Start the server (config prepared); returns without waiting for its API."""
    base = links_dir(state_dir)
    cmd = [
        str(toxiproxy.binary),
        "-host",
        links.host,
        "-port",
        str(links.api_port),
        "-config",
        str(base / "proxies.json"),
    ]
    handle, _ = spawn(cmd, log_file=log_file(state_dir), cwd=base)
    return handle


class ProxyApi(Protocol):
    """What :class:`drsvc.devenv.links.SiteLinks` needs of Toxiproxy (a fake in unit tests)."""

    def proxies(self) -> dict[str, Proxy]: ...

    def set_enabled(self, proxy: str, enabled: bool) -> None: ...

    def put_toxic(self, proxy: str, toxic: Proxy, exists: bool) -> None: ...

    def remove_toxic(self, proxy: str, toxic: str) -> None: ...

    def reset(self) -> None: ...


class ToxiproxyClient:
    """Toxiproxy's HTTP API at ``api_addr`` (``host:port``)."""

    def __init__(self, api_addr: str, timeout_s: float = 5.0) -> None:
        self.api_addr = api_addr
        self.timeout_s = timeout_s

    def proxies(self) -> dict[str, Proxy]:
        """Every proxy by name, with ``enabled`` and its ``toxics``."""
        return cast("dict[str, Proxy]", self._call("GET", "/proxies"))

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        """Enable or disable a proxy; disabling closes its listener and drops its connections."""
        self._call("POST", f"/proxies/{_quote(proxy)}", {"enabled": enabled})

    def put_toxic(self, proxy: str, toxic: Proxy, exists: bool) -> None:
        """Create a toxic, or change the attributes of one that ``exists`` (same name)."""
        if exists:
            path = f"/proxies/{_quote(proxy)}/toxics/{_quote(str(toxic['name']))}"
            self._call("POST", path, {"attributes": toxic["attributes"]})
        else:
            self._call("POST", f"/proxies/{_quote(proxy)}/toxics", toxic)

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        self._call("DELETE", f"/proxies/{_quote(proxy)}/toxics/{_quote(toxic)}")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._call("POST", "/reset")

    def _call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://{self.api_addr}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            detail = err.read().decode(errors="replace").strip()
            raise LocalEnvError(
                f"Toxiproxy at {self.api_addr} refused {method} {path}: {err.code} {detail}"
            ) from err
        except (urllib.error.URLError, OSError) as err:
            raise LocalEnvError(
                f"the links' Toxiproxy at {self.api_addr} does not answer ({err}); "
                "'drsvc dev up' restarts it"
            ) from err
        return json.loads(raw) if raw.strip() else None


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def missing_proxies(client: ToxiproxyClient, names: Sequence[str]) -> list[str]:
    """The proxies of ``names`` the server does not have (empty once it has read its config)."""
    have = client.proxies()
    return [name for name in names if name not in have]
