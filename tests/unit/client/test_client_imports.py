"""``drsvc.client`` is a library applications import: it must load, and find the local environment
by default, without Spark, faust, aiokafka, FastAPI or the dev environment (which starts brokers).

A fresh interpreter imports it with those modules blocked: a test in this process could not tell,
since other tests have imported them already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import drsvc
from drsvc.devenv.state import BrokerNode, ConsulAgentState, EnvState, KafkaSite, StateStore

BLOCKED = ("pyspark", "faust", "aiokafka", "fastapi", "drsvc.devenv")

# Run in the child: block the modules, import the client, and use its local-environment defaults
# (a lazy import inside a function would pass an import alone).
CHILD = """
import importlib.abc
import json
import sys

BLOCKED = tuple(sys.argv[1].split(","))


class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in BLOCKED or name.startswith(tuple(b + "." for b in BLOCKED)):
            raise ImportError(f"{name} is blocked")
        return None


sys.meta_path.insert(0, Blocker())
refused = []
for name in BLOCKED:
    try:
        __import__(name)
    except ImportError:
        refused.append(name)

import drsvc.client
from drsvc.client.application import ClientApplication, consul_address
from drsvc.topology.loader import load_topology_text

topology = load_topology_text(
    "name: shop\\nclusters: {east: {}}\\n"
    "applications: [{name: orders, groups: [g], topics: [orders], preferred: east}]\\n"
)
config = ClientApplication.of("orders", topology).client_config("east", {})
print(json.dumps({
    "refused": refused,
    "loaded": sorted(n for n in sys.modules if n.startswith(BLOCKED)),
    "consul": consul_address(None),
    "bootstrap": config["bootstrap.servers"],
}))
"""


def test_the_client_loads_and_finds_the_local_environment_without_heavy_modules(
    tmp_path: Path,
) -> None:
    nodes = [BrokerNode(node_id=1, broker_port=9001, controller_port=9101)]
    StateStore(tmp_path).save(
        EnvState(
            sites={"east": KafkaSite(alias="east", cluster_id="e", nodes=nodes)},
            consul=ConsulAgentState(
                http_port=8501, server_port=1, serf_lan_port=2, serf_wan_port=3
            ),
        )
    )
    # the child imports the same drsvc as this process (a working tree, not an installed copy)
    root = str(Path(drsvc.__file__).resolve().parents[1])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
        "DRSVC_STATE_DIR": str(tmp_path),
    }
    env.pop("DRSVC_CONSUL_HTTP_ADDR", None)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(BLOCKED)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    seen = json.loads(child.stdout)
    # the blocker works, and nothing blocked slipped in
    assert seen["refused"] == list(BLOCKED)
    assert seen["loaded"] == []
    assert seen["consul"] == "127.0.0.1:8501"
    assert seen["bootstrap"] == "127.0.0.1:9001"
