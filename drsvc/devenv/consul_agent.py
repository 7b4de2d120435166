"""The local Consul server agent: configuration and process.

It runs as a single-server cluster with a data directory (not ``-dev``), so KV data, sessions and
registered services survive an agent restart. Update checks are off (they would call out to the
internet) and every port but HTTP, server RPC and serf is disabled.
"""

from __future__ import annotations

import json
from pathlib import Path

from drsvc.devenv.components import ConsulInstall
from drsvc.devenv.processes import ProcessHandle, spawn
from drsvc.devenv.state import ConsulAgentState

NODE_NAME = "drsvc-local"


def agent_dir(state_dir: Path) -> Path:
    return state_dir / "consul"


def agent_config(agent: ConsulAgentState, data_dir: Path) -> dict[str, object]:
    """The agent configuration (Consul reads JSON config files as well as HCL)."""
    return {
        "node_name": NODE_NAME,
        "server": True,
        "bootstrap_expect": 1,
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
        # Elect the single server quickly after a restart.
        "performance": {"raft_multiplier": 1},
        # Failover leases in later issues use short session TTLs.
        "session_ttl_min": "1s",
        "leave_on_terminate": False,
        "skip_leave_on_interrupt": True,
    }


def prepare(state_dir: Path, agent: ConsulAgentState) -> Path:
    base = agent_dir(state_dir)
    (base / "data").mkdir(parents=True, exist_ok=True)
    (base / "logs").mkdir(parents=True, exist_ok=True)
    config_file = base / "agent.json"
    config_file.write_text(json.dumps(agent_config(agent, base / "data"), indent=2))
    return config_file


def start(state_dir: Path, agent: ConsulAgentState, consul: ConsulInstall) -> ProcessHandle:
    base = agent_dir(state_dir)
    cmd = [str(consul.binary), "agent", f"-config-file={base / 'agent.json'}"]
    handle, _ = spawn(cmd, log_file=log_file(state_dir), cwd=base)
    return handle


def log_file(state_dir: Path) -> Path:
    return agent_dir(state_dir) / "logs" / "consul.log"
