"""An application's Consul token cannot move an application.

A secured local environment's Consul (HTTPS only, ACLs that deny by default, a token per role,
see ``drsvc.devenv.consul_security``) on its own: the Consul agent is what this is about, so no
broker starts. With the application's token, a process can read where its application is
active, and nothing else of what a failover does: writing the active key (alone or in a
transaction), opening a session, taking the application's lock or the controller's
leadership, or running ``drsvc failover``, which says why it stopped without showing a token.
The executor's token does what the application's cannot (the positive control), a request
without a token is refused, and plain HTTP gets no answer from the API.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from failover_support import run_cli

from drsvc.adapters.consul_access import ConsulAccess, resolve_consul_access
from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.coordination import Put
from drsvc.devenv.environment import LocalEnvironment
from drsvc.errors import ConfigError
from drsvc.runtime.failover.bootstrap import ensure_active_documents
from drsvc.settings import Settings
from drsvc.topology import load_topology_text
from drsvc.topology.consul import ConsulRole
from failover import naming

pytestmark = pytest.mark.timeout(120)

SITES = ("east", "west")
APP = "app"


@dataclass
class SecuredConsul:
    env: LocalEnvironment
    url: str
    namespace: str
    topology_file: Path

    def coordinator(self, role: ConsulRole) -> ConsulCoordinator:
        return ConsulCoordinator(access=self.access(role))

    def access(self, role: ConsulRole) -> ConsulAccess:
        return resolve_consul_access(self.env.consul_environment(role))

    @property
    def active_key(self) -> str:
        return naming.app_active_key(self.namespace, APP)

    def secrets(self) -> list[str]:
        """Every token the environment made (to look for in outputs)."""
        root = self.env.state_dir / "secure" / "consul"
        return [p.read_text().strip() for p in root.rglob("*.token")]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredConsul]:
    state_dir = tmp_path_factory.mktemp("drsvc-secured-consul-state")
    env = LocalEnvironment(Settings.from_env(state_dir=state_dir, consul_layout="single"))
    try:
        info = env.up(list(SITES), consul_only=True, secure=True)
        assert info.consul_http_addr is not None
        namespace = f"secc-{uuid.uuid4().hex[:6]}"
        document = {
            "name": namespace,
            # Nothing listens there: the failover below must stop at Consul, before Kafka.
            "clusters": {alias: {"bootstrap_servers": "127.0.0.1:9"} for alias in SITES},
            "applications": [{"name": APP, "preferred": "east", "groups": ["g"], "topics": ["t"]}],
            "consul": env.topology_consul("application"),
        }
        path = tmp_path_factory.mktemp("secured-consul") / "topology.json"
        path.write_text(json.dumps(document, indent=2))
        found = SecuredConsul(env, info.consul_http_addr, namespace, path)
        topology = load_topology_text(path.read_text())
        assert ensure_active_documents(topology, found.coordinator("executor")) == [APP]
        yield found
    finally:
        env.down()


def test_the_agent_serves_https_only(secured: SecuredConsul) -> None:
    assert secured.url.startswith("https://")
    plain = secured.url.replace("https://", "http://")
    answer = requests.get(f"{plain}/v1/kv/{secured.active_key}", timeout=5)
    # Go's TLS server answers a plain request with a 400 and nothing of what was asked
    assert answer.status_code == 400
    assert "HTTPS" in answer.text and "east" not in answer.text


def test_a_request_without_a_token_is_denied(secured: SecuredConsul) -> None:
    anonymous = ConsulClient(
        secured.url, access=ConsulAccess(scheme="https", ca_file=secured.access("executor").ca_file)
    )
    with pytest.raises(ConfigError, match=r"denied .*no ACL token was given"):
        anonymous.kv_put(secured.active_key, "west")
    assert secured.coordinator("executor").get(secured.active_key) is not None


def test_an_application_token_reads_its_active_key_and_cannot_move_it(
    secured: SecuredConsul,
) -> None:
    app = secured.coordinator("application")
    before = app.get(secured.active_key)
    assert before is not None and json.loads(before.value)["cluster"] == "east"
    moved = before.value.replace('"east"', '"west"')
    with pytest.raises(ConfigError, match="denied"):
        app.put(secured.active_key, moved, index=before.index)
    with pytest.raises(ConfigError, match="denied"):
        app.write([Put(secured.active_key, moved, before.index)])
    for lock_key in (
        naming.app_lock_key(secured.namespace, APP),
        naming.controller_lock_key(secured.namespace),
    ):
        with pytest.raises(ConfigError, match="denied"):
            app.try_lock(lock_key, "mine", ttl_s=10, lock_delay_s=0)
    after = secured.coordinator("executor").get(secured.active_key)
    assert after is not None and (after.value, after.index) == (before.value, before.index)


def test_drsvc_failover_with_an_application_token_fails_and_names_the_permission(
    secured: SecuredConsul,
) -> None:
    executor = secured.coordinator("executor")
    before = executor.get(secured.active_key)
    assert before is not None
    code, doc, err = run_cli(
        "failover", "-t", str(secured.topology_file), "--app", APP, "--to", "west", "--json",
        env=secured.env.consul_environment("application"), timeout_s=60,
    )  # fmt: skip
    assert code != 0, err
    assert "denied" in err and "Permission denied" in err, err
    assert "CONSUL_HTTP_TOKEN_FILE" in err, err
    output = err + json.dumps(doc)
    assert not [s for s in secured.secrets() if s in output]
    after = executor.get(secured.active_key)
    assert after is not None and (after.value, after.index) == (before.value, before.index)
    assert executor.list(naming.failovers_prefix(secured.namespace)) == []


def test_the_executor_token_takes_the_lock_and_writes_the_active_key(
    secured: SecuredConsul,
) -> None:
    """The positive control: what a failover does first, with the executor's token."""
    executor = secured.coordinator("executor")
    lock = executor.try_lock(
        naming.app_lock_key(secured.namespace, APP), "control", ttl_s=10, lock_delay_s=0
    )
    assert lock is not None
    try:
        before = executor.get(secured.active_key)
        assert before is not None
        document = json.loads(before.value)
        document["at_ms"] += 1  # where it is active stays: the other tests read east
        written = json.dumps(document, separators=(",", ":"))
        executor.write([Put(secured.active_key, written, before.index)], lock=lock)
        after = executor.get(secured.active_key)
        assert after is not None and after.value == written
    finally:
        lock.release()
