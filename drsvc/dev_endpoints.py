"""Where clients find the local ``drsvc dev`` environment: its clusters' bootstrap servers and its
Consul agent, read from the state file the environment keeps.

A topology may leave a cluster's bootstrap servers out and a client may be given no Consul
address; both then mean the local environment of the state directory (``DRSVC_STATE_DIR``,
``--state-dir``). Those two answers are all shipped code needs of it, so it reads them here
instead of importing the environment that starts brokers and agents (``drsvc.devenv``), and it
reads only the part of the file that holds them: what else the environment records may change
without this reader noticing.

The file's name, its format number and how it is read are defined here once;
``drsvc.devenv.state`` writes and reads the whole file with them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from drsvc.errors import ConfigError, LocalEnvError
from drsvc.process_handle import ProcessHandle, is_alive

STATE_FORMAT = 1
STATE_FILE = "state.json"
#: the address the local environment's processes listen on, unless its state records another
LOCAL_HOST = "127.0.0.1"

#: how the environment runs Consul: one server, or one per site plus a witness
ConsulLayout = Literal["single", "per-site"]


def consul_url(host: str, port: int, secure: bool) -> str:
    """How clients name an agent: ``host:port``, or ``https://host:port`` when it serves HTTPS
    only (a secured environment's), so the scheme travels with the address."""
    return f"https://{host}:{port}" if secure else f"{host}:{port}"


class StateDocument(BaseModel):
    """What every reading of the state file has: the format it was written in."""

    format: int = STATE_FORMAT


Document = TypeVar("Document", bound=StateDocument)


def read_state(path: Path, model: type[Document]) -> Document:
    """The state file at ``path`` as ``model``: an empty one when the file does not exist (no
    environment was brought up there), :class:`LocalEnvError` when it cannot be used."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return model()
    except (OSError, json.JSONDecodeError) as err:
        raise LocalEnvError(f"cannot read the environment state {path}: {err}") from err
    try:
        state = model.model_validate(raw)
    except ValidationError as err:
        raise LocalEnvError(
            f"{path} was written by an incompatible drsvc; stop what it lists by hand "
            "or remove the state directory"
        ) from err
    if state.format != STATE_FORMAT:
        raise LocalEnvError(f"{path} has state format {state.format}, expected {STATE_FORMAT}")
    return state


def bootstrap_list(host: str, ports: Iterable[int]) -> str:
    """``bootstrap.servers`` for brokers that listen on ``ports`` of ``host``."""
    return ",".join(f"{host}:{port}" for port in ports)


def unknown_cluster(state_dir: Path, alias: str, known: Iterable[str]) -> ConfigError:
    """The error for a cluster the environment in ``state_dir`` does not have: it says how to
    start one."""
    listed = ", ".join(sorted(known)) or "none"
    return ConfigError(
        f"cluster {alias!r} is not part of the local environment in {state_dir} "
        f"(known: {listed}); start it with 'drsvc dev up --clusters {alias}'"
    )


class _Broker(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    broker_port: int


class _Site(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    host: str = LOCAL_HOST
    nodes: tuple[_Broker, ...]


class _Agent(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")
    host: str = LOCAL_HOST
    http_port: int
    process: ProcessHandle | None = None


class _Endpoints(StateDocument):
    """The part of the state file that says where things listen."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    sites: dict[str, _Site] = Field(default_factory=dict)
    consul: _Agent | None = None
    consul_layout: ConsulLayout = "single"
    consul_servers: tuple[_Agent, ...] = ()
    #: a secured environment: its agents serve HTTPS only
    secure: bool = False

    def agents(self) -> tuple[_Agent, ...]:
        if self.consul_layout == "per-site":
            return self.consul_servers
        return () if self.consul is None else (self.consul,)


class LocalEndpoints:
    """The addresses of the local environment in ``state_dir``, read from its state file on
    every call (``drsvc dev up`` and ``down`` change them while a client runs)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir.resolve()

    def bootstrap_servers(self, alias: str) -> str:
        """Every broker of cluster ``alias``, as that cluster's own site reaches them."""
        state = self._read()
        site = state.sites.get(alias)
        if site is None:
            raise unknown_cluster(self.state_dir, alias, state.sites)
        return bootstrap_list(site.host, (node.broker_port for node in site.nodes))

    def consul_http_addr(self) -> str | None:
        """The Consul agent to talk to: the first recorded one that runs (in the per-site layout,
        servers are recorded site by site, the witness last), else the first recorded one; None
        when the environment has none. A secured environment's address starts with
        ``https://``."""
        state = self._read()
        agents = state.agents()
        running = [a for a in agents if a.process is not None and is_alive(a.process)]
        chosen = next(iter(running or agents), None)
        return None if chosen is None else consul_url(chosen.host, chosen.http_port, state.secure)

    def _read(self) -> _Endpoints:
        return read_state(self.state_dir / STATE_FILE, _Endpoints)
