"""Proxies in front of a Consul agent's HTTP port, one per kind of Consul user, to slow or cut
one user's traffic without touching the others (the executor's writes, the clients' watches).

A Toxiproxy server of its own (the binary the project installs for the links between sites) is
started with one proxy per name, each forwarding to the same agent. A user handed
:meth:`ConsulProxies.address` of its name talks to the real agent through it:

- :meth:`~ConsulProxies.delay`: a ``latency`` toxic on the requests (client to Consul): every
  request arrives ``ms`` later, so a write commits that much after its sender decided on it;
  answers are not delayed.
- :meth:`~ConsulProxies.cut`: the proxy disabled: its open connections are closed and new ones
  refused, as when a client's agent or network is gone; :meth:`~ConsulProxies.heal` brings it
  back.

The server is the scenario's (or the test's) own and stops with it; the environment's links and
their server are never touched.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from drsvc.devenv.components import load_components
from drsvc.devenv.ports import allocate_ports
from drsvc.devenv.processes import ProcessHandle, spawn, stop
from drsvc.devenv.toxiproxy import ToxiproxyClient, missing_proxies
from drsvc.errors import LocalEnvError
from drsvc.settings import Settings
from drsvc.topology.consul import parse_consul_address

HOST = "127.0.0.1"
#: the name of the latency toxic :meth:`ConsulProxies.delay` adds
SLOW = "slow-consul"


class ConsulProxies:
    """A Toxiproxy server in ``directory`` with a proxy named after each of ``names`` in front
    of the Consul agent at ``consul`` (``host:port``, or a URL of it: a proxy carries the bytes,
    TLS included, so its users keep the scheme). Use as a context manager, or call
    :meth:`start` and :meth:`close`."""

    def __init__(self, directory: Path, consul: str, names: Sequence[str]) -> None:
        if not names or len(set(names)) != len(names):
            raise ValueError(f"proxy names must be given, each once: {list(names)}")
        self.directory = directory
        self.consul = parse_consul_address(consul)[1]
        self.names = tuple(names)
        self._ports: dict[str, int] = {}
        self._handle: ProcessHandle | None = None
        self.client: ToxiproxyClient | None = None

    def __enter__(self) -> ConsulProxies:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def start(self, timeout_s: float = 20.0) -> ConsulProxies:
        binary = load_components(Settings.from_env().cache_dir).require_toxiproxy().binary
        api_port, *ports = allocate_ports(HOST, len(self.names) + 1)
        self._ports = dict(zip(self.names, ports, strict=True))
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "consul-proxies.json"
        config.write_text(
            json.dumps(
                [
                    {
                        "name": name,
                        "listen": f"{HOST}:{port}",
                        "upstream": self.consul,
                        "enabled": True,
                    }
                    for name, port in self._ports.items()
                ]
            )
        )
        # Absolute: the proxy runs in its directory, so a relative report directory (the
        # suite's --out) would name a config file that is not there.
        argv = [
            str(binary),
            "-host",
            HOST,
            "-port",
            str(api_port),
            "-config",
            str(config.resolve()),
        ]
        self._handle, _ = spawn(argv, self.directory / "consul-proxies.log", self.directory)
        self.client = ToxiproxyClient(f"{HOST}:{api_port}")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if not missing_proxies(self.client, self.names):
                    return self
            except LocalEnvError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                self.close()
                raise LocalEnvError(f"the Consul proxies did not start within {timeout_s:.0f} s")
            time.sleep(0.1)

    def close(self) -> None:
        if self._handle is not None:
            stop(self._handle, grace_s=5)
            self._handle = None

    def address(self, name: str) -> str:
        """Where user ``name`` reaches Consul (``host:port``)."""
        return f"{HOST}:{self._ports[name]}"

    def delay(self, name: str, ms: int) -> None:
        """Every request of ``name`` reaches Consul ``ms`` later (until :meth:`undelay`)."""
        toxic = {
            "name": SLOW,
            "type": "latency",
            "stream": "upstream",
            "toxicity": 1.0,
            "attributes": {"latency": ms, "jitter": 0},
        }
        self._api().put_toxic(name, toxic, exists=SLOW in self._toxics(name))

    def undelay(self, name: str) -> None:
        if SLOW in self._toxics(name):
            self._api().remove_toxic(name, SLOW)

    def cut(self, name: str) -> None:
        """``name`` loses Consul: connections closed, new ones refused."""
        self._api().set_enabled(name, False)

    def heal(self, name: str) -> None:
        """``name`` reaches Consul again, without delay."""
        self.undelay(name)
        self._api().set_enabled(name, True)

    def _toxics(self, name: str) -> set[str]:
        proxy = self._api().proxies()[name]
        toxics = proxy.get("toxics")
        return (
            {str(t["name"]) for t in toxics if isinstance(t, dict)}
            if isinstance(toxics, list)
            else set()
        )

    def _api(self) -> ToxiproxyClient:
        if self.client is None:
            raise LocalEnvError("the Consul proxies are not running")
        return self.client
