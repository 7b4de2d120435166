"""The local Consul server agent: configuration and process.

In the ``single`` layout one server is the whole Consul cluster; in ``per-site`` each site has a
server and a third "witness" server joins them, one quorum of three, so losing a site leaves two.
Servers keep a data directory (not ``-dev``), so KV data, sessions and registered services
survive an agent restart. Update checks are off (they would call out to the
internet) and every port but HTTP, server RPC and serf is disabled.

A secured environment's agents (:mod:`drsvc.devenv.consul_security`) serve HTTPS on the HTTP
port's number instead (plain HTTP off), with ACLs denying by default, TLS between servers and
encrypted gossip. Their configuration then holds the management token, so the file is written
for its owner alone (it always is: one rule is simpler than two).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from drsvc.components import ConsulInstall
from drsvc.devenv.processes import ProcessHandle, spawn
from drsvc.devenv.state import ConsulAgentState

NODE_NAME = "drsvc-local"


def agent_dir(state_dir: Path, agent: ConsulAgentState) -> Path:
    base = state_dir / "consul"
    return base if agent.site is None else base / agent.site


def node_name(agent: ConsulAgentState) -> str:
    return NODE_NAME if agent.site is None else f"drsvc-{agent.site}"


def agent_config(
    agent: ConsulAgentState,
    data_dir: Path,
    peers: Sequence[ConsulAgentState] = (),
    secured: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The agent configuration (Consul reads JSON config files as well as HCL). With ``peers``
    (the other servers of the per-site layout) the servers form one quorum: each expects all of
    them before the first election and keeps retrying to join the others, so a restarted server
    finds its way back. ``secured``: the settings a secured agent adds
    (:func:`drsvc.devenv.consul_security.agent_settings`); its ``ports`` replace these."""
    config: dict[str, object] = {
        "node_name": node_name(agent),
        "server": True,
        "bootstrap_expect": 1 + len(peers),
        "data_dir": str(data_dir),
        "bind_addr": agent.host,
        "advertise_addr": agent.host,
        "client_addr": agent.host,
        "ports": {
            "http": agent.http_port,
            "server": agent.server_port,
            "serf_lan": agent.serf_lan_port,
            "serf_wan": agent.serf_wan_port,
            "dns": -1,
            "grpc": -1,
            "grpc_tls": -1,
            "https": -1,
        },
        "disable_update_check": True,
        "ui_config": {"enabled": False},
        "log_level": "INFO",
        # Elect a leader quickly after a restart or the loss of one.
        "performance": {"raft_multiplier": 1},
        # Failover leases use short session TTLs.
        "session_ttl_min": "1s",
        "leave_on_terminate": False,
        "skip_leave_on_interrupt": True,
    }
    if peers:
        config["retry_join"] = [f"{p.host}:{p.serf_lan_port}" for p in peers]
        config["retry_interval"] = "1s"
    if secured is not None:
        extra = dict(secured)
        ports = extra.pop("ports", {})
        assert isinstance(ports, Mapping) and isinstance(config["ports"], dict)
        config["ports"].update(ports)
        config.update(extra)
    return config


def prepare(
    state_dir: Path,
    agent: ConsulAgentState,
    peers: Sequence[ConsulAgentState] = (),
    secured: Mapping[str, object] | None = None,
) -> Path:
    base = agent_dir(state_dir, agent)
    (base / "data").mkdir(parents=True, exist_ok=True)
    (base / "logs").mkdir(parents=True, exist_ok=True)
    config_file = base / "agent.json"
    text = json.dumps(agent_config(agent, base / "data", peers, secured), indent=2)
    # Created 0600 before anything is written: a secured agent's file holds its tokens.
    fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return config_file


def start(state_dir: Path, agent: ConsulAgentState, consul: ConsulInstall) -> ProcessHandle:
    base = agent_dir(state_dir, agent)
    cmd = [str(consul.binary), "agent", f"-config-file={base / 'agent.json'}"]
    handle, _ = spawn(cmd, log_file=log_file(state_dir, agent), cwd=base)
    return handle


def log_file(state_dir: Path, agent: ConsulAgentState) -> Path:
    return agent_dir(state_dir, agent) / "logs" / "consul.log"
